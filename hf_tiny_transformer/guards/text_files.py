"""The text files a command is given: one line per sentence, line-aligned pairs, a JSON object of flags.

Lines end at "\\n" only (or "\\r\\n"), as `wc -l` counts them. Text is UTF-8 (a byte-order mark at its start is
not text). Every problem (missing, a folder, unreadable, not UTF-8, UTF-16 or UTF-32, empty, not aligned, not JSON)
is a `UsageError` in one line naming the file and the fix.
"""

import json
import os
from pathlib import Path

from ..errors import UsageError

CONVERT = "convert it with iconv -f ITS-ENCODING -t UTF-8 (UTF-16, SHIFT_JIS ...)"


def check_not_wide(text: str, what: str):
    """A UsageError naming `what` where a quarter of the first characters of `text` are NUL: UTF-16 or UTF-32 text
    read as UTF-8 (ASCII in them is valid UTF-8 with NULs between), which would be translated as other words. A stray
    NUL is an invisible character, which translating removes."""
    if (start := text[:1024]).count("\0") > len(start) / 4:
        raise UsageError(f"{what} is not UTF-8 text (NULs between its letters, as in UTF-16 or UTF-32); convert it "
                         "with iconv -f UTF-16 -t UTF-8")  # fmt: skip


def decoded(data: bytes, what: str) -> str:
    """The UTF-8 text the bytes `data` hold, without a byte-order mark; a UsageError naming `what` and the line
    otherwise."""
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as error:
        line = data[: error.start].count(b"\n") + 1
        raise UsageError(f"{what} is not UTF-8 text (line {line}); {CONVERT}") from None
    check_not_wide(text, what)
    return text


def text_lines(text: str) -> list[str]:
    """The lines of a text, split at "\\n" only, a "\\r" before it dropped; a final line end starts no empty line."""
    lines = text.split("\n")
    if lines[-1] == "":
        lines.pop()
    return [line.removesuffix("\r") for line in lines]


def read_lines(path: str | os.PathLike, what: str = "file", holding: str = "one sentence per line") -> list[str]:
    """The lines of a text file (`what` names it in errors, e.g. "--source_file"; `holding`, what it should hold)."""
    path = Path(path)
    if not path.exists():
        raise UsageError(f"{what} {path} does not exist; check the path")
    if not path.is_file():
        raise UsageError(f"{what} {path} is not a file; pass a text file with {holding}")
    try:
        data = path.read_bytes()  # no newline translation: a lone "\r" ends no line
    except OSError as error:
        raise UsageError(f"{what} {path} cannot be read: {error.strerror}") from None
    lines = text_lines(decoded(data, f"{what} {path}"))
    if not any(line.strip() for line in lines):
        raise UsageError(f"{what} {path} is empty; pass a file with {holding}")
    return lines


def read_aligned(source_file, target_file, flags: tuple[str, str]) -> tuple[list[str], list[str]]:
    """Two files of the same number of lines, line n of one the translation of line n of the other."""
    sources, targets = read_lines(source_file, flags[0]), read_lines(target_file, flags[1])
    if len(sources) != len(targets):
        raise UsageError(
            f"{flags[0]} {source_file} has {len(sources)} lines but {flags[1]} {target_file} has {len(targets)}; "
            "pass line-aligned files"
        )
    return sources, targets


def read_json_object(path: str | os.PathLike, what: str = "file") -> dict:
    """A JSON file holding one object."""
    text = "\n".join(read_lines(path, what, holding='a JSON object of flags ({"flag": value, ...})'))
    try:
        value = json.loads(text)
    except json.JSONDecodeError as error:
        raise UsageError(f"{what} {path} is not valid JSON (line {error.lineno}: {error.msg})") from None
    if not isinstance(value, dict):
        raise UsageError(f'{what} {path} must hold a JSON object ({{"flag": value, ...}}), not {type(value).__name__}')
    return value


__all__ = ["CONVERT", "check_not_wide", "decoded", "text_lines", "read_lines", "read_aligned", "read_json_object"]
