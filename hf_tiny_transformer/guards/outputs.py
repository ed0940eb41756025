"""The output guard: every command that writes checks its destination before any work, against all its inputs, and
says in one line what is wrong and the fix (`--output_dir runs/x already holds a model or checkpoints; pass ...`).

    check_output(args.output_dir, flag="--output_dir", kind="folder", inputs=inputs_of(args, but=["output_dir"]),
                 writes=EXPORT_WRITES, replaces=True, overwrite=args.overwrite)

A writer names what it writes at a folder's top (`writes`, name patterns). One that replaces the whole folder
(`replaces`) refuses a folder holding anything else, --overwrite or not, since replacing it would delete that; one
that adds to a folder (train.py) leaves the rest alone. Nothing is written through a symbolic link, and a read-only
entry where the command writes is found before its work, not after.
"""

import os
import re
from collections.abc import Iterable
from fnmatch import fnmatch
from pathlib import Path

from ..errors import UsageError

CHECKPOINT = re.compile(r"checkpoint-\d+")
# The outputs the running command has checked, `--flag path` each (the runner empties it at the start): what a full
# disk is reported against.
CHECKED: list[str] = []


def inputs_of(*arguments, but: Iterable[str] = ()) -> list[Path]:
    """What a command reads: the existing paths that its parsed arguments (namespaces, dataclasses) name, those of
    the attributes `but` (its outputs) aside."""
    names = [value for namespace in arguments for name, value in vars(namespace).items() if name not in set(but)]
    while any(isinstance(name, list | tuple) for name in names):  # flags that take several values, or repeat
        names = [item for name in names for item in (name if isinstance(name, list | tuple) else [name])]
    return [Path(name) for name in names if isinstance(name, str | os.PathLike) and name and os.path.exists(name)]


def _holds_model(folder: Path) -> bool:
    """A saved model (config.json, weights), Trainer checkpoints, or a training run's `hub`."""
    entries = list(folder.iterdir())
    return (folder / "hub" / "config.json").exists() or any(
        entry.name == "config.json" or fnmatch(entry.name, "model*.safetensors*") or CHECKPOINT.fullmatch(entry.name)
        for entry in entries
    )


def _place_problem(path: Path, kind: str) -> str | None:
    """A link, the wrong kind, a missing folder, a file above it, no permission."""
    existing = next(parent for parent in (path.parent, *path.absolute().parents) if os.path.lexists(parent))
    if path.is_symlink():
        return f" is a symbolic link (to {os.readlink(path)}); pass the path it points to"
    if not existing.is_dir():
        return f": {existing} is a file, not a folder; pass a path inside a folder"
    if kind == "file" and path.is_dir():
        return f" is a folder; pass a file name, e.g. {path / 'output.txt'}"
    if kind == "folder" and path.exists() and not path.is_dir():
        return " is a file; pass a folder name"
    if kind == "file" and existing != path.parent:
        return f": the folder {path.parent} does not exist; create it first (mkdir -p {path.parent})"
    if not os.access(existing, os.W_OK | os.X_OK):
        return f": cannot write in {existing} (permission denied); choose another place or chmod u+w it"
    return (
        f" is read-only; choose another {kind} or chmod u+w it"
        if path.exists() and not os.access(path, os.W_OK)
        else None
    )


def _input_problem(path: Path, kind: str, inputs: Iterable[Path], written: list[Path], replaces: bool) -> str | None:
    """The output is an input, would replace one (a folder it replaces or an entry it writes holds it), or lies
    inside an input folder that is being read."""
    target = path.resolve()
    for given in inputs:
        source = given.resolve()
        if source == target or (path.exists() and path.samefile(given)):
            return f" is also an input ({given}) and would be overwritten; choose another {kind}"
        replaced = replaces or any(entry.resolve() in (source, *source.parents) for entry in written)
        if target in source.parents and replaced:
            return f" holds the input {given}, which the save would replace; choose a {kind} outside it"
        if source in target.parents:
            return f" lies inside the input folder {given}, which is being read; choose a {kind} outside it"
    return None


def _folder_problem(path: Path, written: list[Path], replaces: bool, overwrite: bool, overwrite_fix: str) -> str | None:
    """In an existing folder: what the writer does not write (where it replaces the folder), a model or an earlier
    output without --overwrite, a link or a read-only entry where it writes."""
    entries = sorted(path.iterdir()) if path.is_dir() else []
    if replaces and (foreign := [entry.name for entry in entries if entry not in written]):
        shown = ", ".join(foreign[:4]) + (" ..." if len(foreign) > 4 else "")
        return (f" holds what this command does not write ({shown}), which replacing the folder would delete; move it "
                "elsewhere, or choose another folder")  # fmt: skip
    if entries and not overwrite and (_holds_model(path) or replaces):
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
    path: str | os.PathLike,
    *,
    flag: str,
    kind: str,
    inputs: Iterable[str | os.PathLike] = (),
    writes: Iterable[str] = (),
    replaces: bool = False,
    overwrite: bool = False,
    overwrite_fix: str = "pass --overwrite to replace it, or choose another name",
) -> Path:
    """Check a command's output (`kind` "file" or "folder") before any work, as the module says; a UsageError with
    one line naming `flag`, the problem and the fix. Under the runner, it is what a full disk is reported against."""
    path = Path(path)
    folder = kind == "folder" and path.is_dir() and not path.is_symlink()
    written = (
        [entry for entry in sorted(path.iterdir()) if any(fnmatch(entry.name, name) for name in writes)]
        if folder
        else []
    )
    problem = (
        _place_problem(path, kind)
        or _input_problem(path, kind, [Path(given) for given in inputs], written, replaces)
        or (_folder_problem(path, written, replaces, overwrite, overwrite_fix) if folder else None)
    )
    if problem:
        raise UsageError(f"{flag} {path}{problem}")
    CHECKED.append(f"{flag} {path}")
    return path


__all__ = ["check_output", "inputs_of", "CHECKED"]
