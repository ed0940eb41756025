"""The text files a command is given: one line per sentence, line-aligned pairs, a JSON object of flags.

Lines end at "\\n" only (or "\\r\\n"), as `wc -l` counts them. Text is UTF-8 (a byte-order mark at its start is
not text). Every problem (missing, a folder, unreadable, not UTF-8, UTF-16 or UTF-32, empty, not aligned, not JSON)
is a `UsageError` in one line naming the file and the fix.
"""

import codecs
import json
import os
from pathlib import Path

from ..errors import UsageError

WIDE_MARKS = {  # UTF-32LE's first: it starts with UTF-16LE's
    codecs.BOM_UTF32_LE: "UTF-32LE",
    codecs.BOM_UTF32_BE: "UTF-32BE",
    codecs.BOM_UTF16_LE: "UTF-16LE",
    codecs.BOM_UTF16_BE: "UTF-16BE",
}
SNIFFED = 1024  # the bytes of a text's start that tell UTF-16 or UTF-32 without a byte-order mark


def wide_encoding(start: bytes) -> str | None:
    """The UTF-16 or UTF-32 encoding (with its byte order) of a text beginning with the bytes `start`: its byte-order
    mark's, or that of ASCII without one (in every 2 or 4 bytes one is not NUL, always on one side); None for none."""
    if mark := next((name for mark, name in WIDE_MARKS.items() if start.startswith(mark)), None):
        return mark
    start = start[:SNIFFED]
    for width in (4, 2):
        units = [start[i : i + width] for i in range(0, len(start) - width + 1, width)]
        little = sum(1 for unit in units if unit[0] and not any(unit[1:]))
        big = sum(1 for unit in units if unit[-1] and not any(unit[:-1]))
        if units and max(little, big) > len(units) / 2:
            return f"UTF-{8 * width}{'LE' if little > big else 'BE'}"
    return None


def check_not_wide(start: bytes, what: str):
    """A UsageError naming `what` and the `iconv` that converts it where `start` begins UTF-16 or UTF-32 text, which
    reads as valid UTF-8 with NULs between the letters and would be translated as other words."""
    if wide := wide_encoding(start):
        raise UsageError(f"{what} is {wide} text, not UTF-8; convert it with iconv -f {wide} -t UTF-8")


def decoded(data: bytes, what: str) -> str:
    """The UTF-8 text the bytes `data` hold, without a byte-order mark at the start; a UsageError naming `what` (and
    the line) otherwise."""
    check_not_wide(data, what)
    body = data.removeprefix(codecs.BOM_UTF8)
    try:
        return body.decode("utf-8")
    except UnicodeDecodeError as error:
        line = body[: error.start].count(b"\n") + 1
        raise UsageError(f"{what} is not UTF-8 text (line {line}); convert it with iconv -f ITS-ENCODING -t UTF-8 "
                         "(e.g. SHIFT_JIS)") from None  # fmt: skip


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


__all__ = ["SNIFFED", "check_not_wide", "decoded", "text_lines", "read_lines", "read_aligned", "read_json_object"]
