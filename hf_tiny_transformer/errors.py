"""The error contract of the package: a problem with what a user passed is a `UsageError`, one line that names the
problem and the fix (`--num_beams must be at least 1, got 0`), found before any long work.

The library raises it naming the value it was given (`runs/x does not exist; pass a folder saved with
save_pretrained`); a command adds the flag the user typed (`with about("--model"): ...`), and its runner writes the
line and exits with 2 (`hf_tiny_transformer.commands`). Argument parsers whose errors are UsageErrors too:
`ArgumentParser`, or `OneLineErrors` mixed into another parser (transformers' HfArgumentParser).
"""

import argparse
import contextlib
from collections.abc import Iterator


class UsageError(ValueError):
    """A problem with the arguments or the files a command was given, found before its long work starts."""


class WorkFailed(RuntimeError):
    """A command's work failed midway for a reason that is not the user's input (the model raised while it
    translated): one line too, and exit status 1."""


class OneLineErrors:
    """Mixed into an argparse parser: a parse error becomes a UsageError (one line) instead of usage + message."""

    def error(self, message: str):
        raise UsageError(f"{message} (see --help)")


class ArgumentParser(OneLineErrors, argparse.ArgumentParser):
    """argparse.ArgumentParser whose errors are one line, and whose flags are spelled as transformers' parser spells
    them: `--output_dir`, with `--output-dir` accepted too."""

    def add_argument(self, *names, **kwargs):
        dashed = [name.replace("_", "-") for name in names if name.startswith("--") and "_" in name]
        return super().add_argument(*names, *dashed, **kwargs)


def first_line(error: BaseException) -> str:
    """The first non-empty line of an exception's message (with the next one when it ends with a colon, as
    `Validation error for field 'd_model':` does), or its type's name."""
    lines = [line.strip() for line in str(error).splitlines() if line.strip()]
    if len(lines) > 1 and lines[0].endswith(":"):
        return f"{lines[0]} {lines[1]}"
    return lines[0] if lines else type(error).__name__


def is_rust_panic(error: BaseException) -> bool:
    """Whether `error` is a panic of a library's Rust code (tokenizers, safetensors): pyo3's PanicException, a
    BaseException like KeyboardInterrupt, so that `except Exception` lets it through."""
    return type(error).__module__ == "pyo3_runtime" and type(error).__name__ == "PanicException"


def at_least(name: str, value: float | None, lowest: float):
    """Raise a UsageError when `value` (None when not given) is below `lowest`."""
    if value is not None and value < lowest:
        raise UsageError(f"{name} must be at least {lowest}, got {value}")


@contextlib.contextmanager
def about(flag: str) -> Iterator[None]:
    """UsageErrors raised in the block start with `flag`, the flag whose value they name: `--model runs/x ...`."""
    try:
        yield
    except UsageError as error:
        raise UsageError(f"{flag} {error}") from None


__all__ = [
    "UsageError",
    "WorkFailed",
    "OneLineErrors",
    "ArgumentParser",
    "first_line",
    "is_rust_panic",
    "at_least",
    "about",
]
