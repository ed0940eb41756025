"""The text files a command is given: one line per sentence, line-aligned pairs, a JSON object of flags.

Lines end at "\\n" only (or "\\r\\n"), as `wc -l` counts them. Text is UTF-8, or what a byte-order mark at its start
says (UTF-8, UTF-16 or UTF-32; the mark is not text). Every problem (missing, a folder, unreadable, not in its
encoding, UTF-16 or UTF-32 without a mark, empty, not aligned, not JSON) is a `UsageError` in one line naming the file
and the fix.
"""

import codecs
import json
import os
from pathlib import Path
from typing import NamedTuple

from ..errors import UsageError


class Encoding(NamedTuple):
    mark: bytes  # the byte-order mark the text starts with (b"" for none)
    codec: str  # what reads the text after it
    name: str  # for people


BYTE_ORDER_MARKS = [  # UTF-32 LE's mark first: it starts with UTF-16 LE's
    Encoding(codecs.BOM_UTF32_LE, "utf-32-le", "UTF-32"),
    Encoding(codecs.BOM_UTF32_BE, "utf-32-be", "UTF-32"),
    Encoding(codecs.BOM_UTF8, "utf-8", "UTF-8"),
    Encoding(codecs.BOM_UTF16_LE, "utf-16-le", "UTF-16"),
    Encoding(codecs.BOM_UTF16_BE, "utf-16-be", "UTF-16"),
]
UTF8 = Encoding(b"", "utf-8", "UTF-8")
BYTES_LOOKED_AT = 1024  # what tells a wide encoding without a mark


def encoding_of(start: bytes, what: str) -> Encoding:
    """The encoding of a text beginning with `start`: its mark's, else UTF-8; a UsageError naming `what` where it
    looks like ASCII in UTF-16 or UTF-32 without a mark (one byte in every 2 or 4 is not NUL, always on one side)."""
    if mark := next((encoding for encoding in BYTE_ORDER_MARKS if start.startswith(encoding.mark)), None):
        return mark
    start = start[:BYTES_LOOKED_AT]
    for width in (4, 2):
        units = [start[i : i + width] for i in range(0, len(start) - width + 1, width)]
        little = sum(1 for unit in units if unit[0] and not any(unit[1:]))
        big = sum(1 for unit in units if unit[-1] and not any(unit[:-1]))
        if units and max(little, big) > len(units) / 2:
            wide = f"UTF-{8 * width}{'LE' if little > big else 'BE'}"
            raise UsageError(
                f"{what} looks like {wide} text without a byte-order mark; convert it to UTF-8, e.g. with "
                f"iconv -f {wide} -t UTF-8"
            )
    return UTF8


def decoded(data: bytes, what: str) -> str:
    """The text the bytes `data` hold (see `encoding_of`); a UsageError naming `what` and the line otherwise."""
    encoding = encoding_of(data, what)
    body = data[len(encoding.mark) :]
    try:
        return body.decode(encoding.codec)
    except UnicodeDecodeError as error:
        line = body[: error.start].decode(encoding.codec).count("\n") + 1
        raise UsageError(
            f"{what} is not {encoding.name} text (line {line}); convert it, e.g. with iconv -t utf-8"
        ) from None


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


__all__ = [
    "Encoding",
    "UTF8",
    "BYTES_LOOKED_AT",
    "encoding_of",
    "decoded",
    "text_lines",
    "read_lines",
    "read_aligned",
    "read_json_object",
]
