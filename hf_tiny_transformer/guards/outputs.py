"""The output guard: every command that writes checks its destination before any work, against all its inputs, and
says in one line what is wrong and the fix (`--output_dir runs/x already holds a model or checkpoints; pass ...`).

    check_output(args.output_dir, flag="--output_dir", kind="folder", inputs=inputs_of(args),
                 writes=EXPORT_FILES, replaces=True, overwrite=args.overwrite)

A writer names what it writes at a folder's top (`writes`, name patterns). One that replaces the whole folder
(`replaces`: the exports, the browser page, a corpus) refuses a folder holding anything else, --overwrite or not,
since replacing it would delete that; one that adds to a folder (train.py) leaves the rest alone. An output that is
a symbolic link, or a link or a read-only entry among what the command would write, is refused: nothing is written
through a link, and nothing fails after the long work.
"""

import contextlib
import contextvars
import os
import re
from collections.abc import Iterable, Iterator
from fnmatch import fnmatch
from pathlib import Path
from typing import Literal

from ..errors import UsageError

StrPath = str | os.PathLike
CHECKPOINT = re.compile(r"checkpoint-\d+")
# The outputs the running command has checked, `--flag path` each: what a full disk is reported against.
_recorded: contextvars.ContextVar[list[str] | None] = contextvars.ContextVar("recorded_outputs", default=None)


@contextlib.contextmanager
def recorded_outputs() -> Iterator[list[str]]:
    """The outputs check_output passes while the block runs, as `--flag path`, in the list it yields."""
    token = _recorded.set([])
    try:
        yield _recorded.get()
    finally:
        _recorded.reset(token)


def inputs_of(*arguments, but: Iterable[str] = ()) -> list[Path]:
    """The existing files and folders that the values of parsed arguments (namespaces or dataclasses) name, those of
    the attributes `but` (the outputs themselves) aside: what a command reads."""
    names = [value for namespace in arguments for name, value in vars(namespace).items() if name not in set(but)]
    while any(isinstance(name, list | tuple) for name in names):  # flags that take several values, or repeat
        names = [item for name in names for item in (name if isinstance(name, list | tuple) else [name])]
    return [Path(name) for name in names if isinstance(name, str | os.PathLike) and name and os.path.exists(name)]


def _holds_model(folder: Path) -> bool:
    """Whether a folder holds a saved model (config.json, weights), Trainer checkpoints, or a training run's `hub`."""
    return (
        (folder / "config.json").exists()
        or (folder / "hub" / "config.json").exists()
        or any(folder.glob("model*.safetensors*"))
        or any(entry.is_dir() and CHECKPOINT.fullmatch(entry.name) for entry in folder.iterdir())
    )


def _place_problem(path: Path, kind: str) -> str | None:
    existing = next(parent for parent in (path, *path.absolute().parents) if os.path.lexists(parent))
    if path.is_symlink():
        return f" is a symbolic link (to {os.readlink(path)}); pass the path it points to"
    if existing != path and not existing.is_dir():
        return f": {existing} is a file, not a folder; pass a path inside a folder"
    if kind == "file" and path.is_dir():
        return f" is a folder; pass a file name, e.g. {path / 'output.txt'}"
    if kind == "folder" and path.exists() and not path.is_dir():
        return " is a file; pass a folder name"
    if kind == "file" and not path.parent.is_dir():
        return f": the folder {path.parent} does not exist; create it first (mkdir -p {path.parent})"
    if not os.access(existing if existing != path else path.parent, os.W_OK | os.X_OK):
        return f": cannot write in {existing if existing != path else path.parent} (permission denied); choose another place or chmod u+w it"
    if path.exists() and not os.access(path, os.W_OK):
        return f" is read-only; choose another {kind} or chmod u+w it"
    return None


def _input_problem(path: Path, kind: str, inputs: Iterable[Path], written: list[Path], replaces: bool) -> str | None:
    """The output is an input, would replace one (a folder it replaces or an entry it writes holds it), or lies
    inside an input folder that is being read."""
    target = path.resolve()
    for given in inputs:
        source = given.resolve()
        if source == target or (path.exists() and path.samefile(given)):
            return f" is also an input ({given}) and would be overwritten; choose another {kind}"
        if target in source.parents and (
            replaces or any(entry.resolve() in (source, *source.parents) for entry in written)
        ):
            return f" holds the input {given}, which the save would replace; choose a {kind} outside it"
        if source in target.parents:
            return f" lies inside the input folder {given}, which is being read; choose a {kind} outside it"
    return None


def _folder_problem(path: Path, written: list[Path], replaces: bool, overwrite: bool, overwrite_fix: str) -> str | None:
    """What is in the way in an existing output folder: something the writer does not write (where it replaces the
    folder), a model or checkpoints without --overwrite, a link or a read-only entry where it writes."""
    if not path.is_dir():
        return None
    entries = sorted(path.iterdir())
    if replaces and (foreign := [entry.name for entry in entries if entry not in written]):
        shown = ", ".join(foreign[:4]) + (" ..." if len(foreign) > 4 else "")
        return (
            f" holds what this command does not write ({shown}), which replacing the folder would delete; move it "
            "elsewhere, or choose another folder"
        )
    if not overwrite and (_holds_model(path) or (replaces and entries)):
        return (
            f" already holds {'a model or checkpoints' if _holds_model(path) else 'an earlier output'}; {overwrite_fix}"
        )
    for entry in written:
        if entry.is_symlink():
            return f" holds {entry.name}, a symbolic link (to {os.readlink(entry)}), where it writes; remove the link"
        if not os.access(entry, os.W_OK):
            return f" holds {entry.name}, which is read-only; chmod -R u+w it, or choose another folder"
    return None


def check_output(
    path: StrPath,
    *,
    flag: str,
    kind: Literal["file", "folder"],
    inputs: Iterable[StrPath] = (),
    writes: Iterable[str] = (),
    replaces: bool = False,
    overwrite: bool = False,
    overwrite_fix: str = "pass --overwrite to replace it, or choose another name",
) -> Path:
    """Check a command's output before any work (see the module); a UsageError with one line naming `flag`, the
    problem and the fix. Under the runner, a path that passes is what a full disk is reported against."""
    path = Path(path)
    written = (
        [entry for entry in sorted(path.iterdir()) if any(fnmatch(entry.name, name) for name in writes)]
        if (kind == "folder" and path.is_dir() and not path.is_symlink())
        else []
    )
    problem = (
        _place_problem(path, kind)
        or _input_problem(path, kind, [Path(given) for given in inputs], written, replaces)
        or (_folder_problem(path, written, replaces, overwrite, overwrite_fix) if kind == "folder" else None)
    )
    if problem:
        raise UsageError(f"{flag} {path}{problem}")
    if (outputs := _recorded.get()) is not None:
        outputs.append(f"{flag} {path}")
    return path


__all__ = ["check_output", "inputs_of", "recorded_outputs"]
