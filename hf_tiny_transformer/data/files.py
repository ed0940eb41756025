"""Text files a command reads: one line per sentence, line-aligned pairs, a JSON object of flags.

Lines end at "\n" only (or "\r\n"), as `wc -l` counts them: a lone carriage return or form feed inside a line stays
in it. A UTF-8 byte-order mark at the start is not text. Every problem (missing, a folder, unreadable, not UTF-8,
empty, not aligned, not JSON) is a `UsageError` in one line that names the file and the fix.
"""

import json
import os
from pathlib import Path

from ..errors import UsageError

BYTE_ORDER_MARK = "\ufeff"


def text_lines(text: str) -> list[str]:
    """The lines of a text: split at "\n" only, a "\r" before it dropped, a leading byte-order mark dropped; a final
    line end ends the last line (it starts no empty one)."""
    lines = text.removeprefix(BYTE_ORDER_MARK).split("\n")
    if lines[-1] == "":
        lines.pop()
    return [line.removesuffix("\r") for line in lines]


def read_lines(path: str | os.PathLike, what: str = "file", holding: str = "one sentence per line") -> list[str]:
    """The lines of a UTF-8 text file (`what` names it in errors, e.g. "--source_file"; `holding`, what it should
    hold, in the fix they give)."""
    path = Path(path)
    if not path.exists():
        raise UsageError(f"{what} {path} does not exist; check the path")
    if not path.is_file():
        raise UsageError(f"{what} {path} is not a file; pass a text file with {holding}")
    try:
        text = path.read_bytes().decode("utf-8")  # no newline translation: a lone "\r" ends no line
    except UnicodeDecodeError as error:
        line = path.read_bytes()[: error.start].count(b"\n") + 1
        raise UsageError(
            f"{what} {path} is not UTF-8 text (line {line}); convert it, e.g. with iconv -t utf-8"
        ) from None
    except OSError as error:
        raise UsageError(f"{what} {path} cannot be read: {error.strerror}") from None
    lines = text_lines(text)
    if not any(line.strip() for line in lines):
        raise UsageError(f"{what} {path} is empty; pass a file with {holding}")
    return lines


def read_aligned(
    source_file: str | os.PathLike, target_file: str | os.PathLike, flags: tuple[str, str]
) -> tuple[list[str], list[str]]:
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


__all__ = ["text_lines", "read_lines", "read_aligned", "read_json_object"]
