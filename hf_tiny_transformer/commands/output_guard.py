"""The output guard: every command that writes checks its destination before any work, and says in one line what
is wrong with it and the fix (`--output_dir runs/x already holds a model or checkpoints; pass --overwrite ...`).

    check_output(args.output_dir, kind="folder", flag="--output_dir", inputs=(args.model,), overwrite=args.overwrite)
"""

import contextlib
import contextvars
import os
import re
import tempfile
from collections.abc import Collection, Iterable, Iterator
from fnmatch import fnmatch
from pathlib import Path
from typing import Literal

from ..errors import UsageError

CHECKPOINT = re.compile(r"checkpoint-\d+")
# What the package's folder writers write at a folder's top level (a model or Hub folder, the ONNX and CTranslate2
# exports, the browser page, the corpus): a folder of only these may be replaced by any of them.
PACKAGE_OUTPUTS = (
    "config.json", "generation_config.json", "model*.safetensors*", "*_tiny_transformer.py", "tokenizer.json",
    "tokenizer_config.json", "special_tokens_map.json", "README.md", "hf_tiny_transformer.json", "onnx", "model.bin",
    "shared_vocabulary.json", "index.html", "translate.js", "text.js", "vendor", "model", "*.en", "*.ja",
)  # fmt: skip
StrPath = str | os.PathLike
# The outputs the running command has checked, `--flag path` each: what a full disk is reported against, since a
# write's error names no file.
_recorded: contextvars.ContextVar[list[str] | None] = contextvars.ContextVar("recorded_outputs", default=None)


@contextlib.contextmanager
def recorded_outputs() -> Iterator[list[str]]:
    """The outputs check_output passes while the block runs, as `--flag path`, in the list it yields."""
    token = _recorded.set([])
    try:
        yield _recorded.get()
    finally:
        _recorded.reset(token)


def _nearest_existing(path: Path) -> Path:
    """`path` if it exists, else its nearest existing parent."""
    return next(candidate for candidate in (path, *path.absolute().parents) if candidate.exists())


def _holds_model(folder: Path) -> bool:
    """Whether a folder holds a saved model (config.json, weights), Trainer checkpoints, or a training run's `hub`."""
    return (
        (folder / "config.json").exists()
        or (folder / "hub" / "config.json").exists()
        or any(folder.glob("model*.safetensors*"))
        or any(entry.is_dir() and CHECKPOINT.fullmatch(entry.name) for entry in folder.iterdir())
    )


def _can_create_file(folder: Path) -> bool:
    """Whether a file can be created in `folder`: os.access, then a real try (ACLs, read-only mounts)."""
    if not os.access(folder, os.W_OK | os.X_OK):
        return False
    try:
        with tempfile.TemporaryFile(dir=folder, prefix=".write-check-"):  # no name where O_TMPFILE works: no leftover
            return True
    except OSError:
        return False


def _place_problem(path: Path, kind: str) -> str | None:
    """What is wrong with where the output would go: the wrong kind, a missing folder, a parent that is a file."""
    existing = _nearest_existing(path)
    if existing != path and not existing.is_dir():
        return f": {existing} is a file, not a folder; pass a path inside a folder"
    if kind == "file" and path.is_dir():
        return f" is a folder; pass a file name, e.g. {path / 'output.txt'}"
    if kind == "folder" and path.exists() and not path.is_dir():
        return " is a file; pass a folder name"
    if kind == "file" and not path.parent.is_dir():
        return f": the folder {path.parent} does not exist; create it first (mkdir -p {path.parent})"
    return None


def _input_problem(path: Path, kind: str, inputs: Iterable[StrPath | None]) -> str | None:
    """Whether the output is an input, holds one, or lies inside an input folder (None and absent inputs skipped)."""
    target = path.resolve()
    for given in (Path(name) for name in inputs if name is not None and Path(name).exists()):
        source = given.resolve()
        if source == target or (path.exists() and path.samefile(given)):
            return f" is also an input ({given}) and would be overwritten; choose another {kind}"
        if target in source.parents:
            return f" holds the input {given}, which the save would replace; choose a {kind} outside it"
        if source in target.parents:
            return f" lies inside the input folder {given}, which is being read; choose a {kind} outside it"
    return None


def _overwrite_problem(path: Path, kind: str, overwrite_fix: str) -> str | None:
    """Whether the output folder already holds a model or checkpoints (an output file is simply replaced)."""
    if kind == "folder" and path.is_dir() and _holds_model(path):
        return f" already holds a model or checkpoints; {overwrite_fix}"
    return None


def _foreign_problem(path: Path, replaces: Collection[str]) -> str | None:
    """Whether a folder that --overwrite would replace holds what the writer does not write (a user's notes, a `.git`,
    a training run's checkpoints): entries whose names match none of the patterns in `replaces`."""
    if not path.is_dir():
        return None
    foreign = sorted(entry.name for entry in path.iterdir() if not any(fnmatch(entry.name, name) for name in replaces))
    if not foreign:
        return None
    shown = ", ".join(foreign[:4]) + (" ..." if len(foreign) > 4 else "")
    return (
        f" holds what this command does not write ({shown}), which replacing the folder would delete; move it "
        "elsewhere, or choose another folder"
    )


def _write_problem(path: Path, kind: str) -> str | None:
    """Whether the output cannot be written: its nearest existing folder, or the existing output, is read-only."""
    folder = _nearest_existing(path.absolute().parent)
    if not _can_create_file(folder):
        return f": cannot write in {folder} (permission denied); choose another place or chmod u+w it"
    if path.exists() and not os.access(path, os.W_OK):
        return f" is read-only; choose another {kind} or chmod u+w it"
    return None


def check_output(
    path: StrPath,
    *,
    kind: Literal["file", "folder"],
    flag: str,
    inputs: Iterable[StrPath | None] = (),
    overwrite: bool = False,
    overwrite_fix: str = "pass --overwrite to replace it, or choose another name",
    replaces: Collection[str] | None = None,
) -> Path:
    """Check a command's output path before any work: a UsageError with one line naming `flag`, the problem and the
    fix (`--output_dir runs/x already holds a model or checkpoints; pass --overwrite to replace it, ...`) when the
    path is the wrong kind or in the wrong place, is, holds or lies inside one of `inputs`, already holds a model
    and `overwrite` is False, or cannot be written. A folder the command replaces whole (`replaces`: the name
    patterns of what the package's folder writers write, e.g. PACKAGE_OUTPUTS) must hold nothing else. Under run(), a
    path that passes is what a full disk is reported against."""
    path = Path(path)
    problem = (
        _place_problem(path, kind)
        or _input_problem(path, kind, inputs)
        or (None if overwrite else _overwrite_problem(path, kind, overwrite_fix))
        or (_foreign_problem(path, replaces) if replaces is not None else None)
        or _write_problem(path, kind)
    )
    if problem:
        raise UsageError(f"{flag} {path}{problem}")
    if (outputs := _recorded.get()) is not None:
        outputs.append(f"{flag} {path}")
    return path


__all__ = ["check_output", "recorded_outputs", "PACKAGE_OUTPUTS"]
