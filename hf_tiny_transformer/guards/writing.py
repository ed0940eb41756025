"""All-or-nothing writes: a save that fails, is killed or is interrupted leaves what was there before.

    with staged_folder("runs/en-ja/hub") as staging:    # the folder is replaced only if the block succeeds
        model.save_pretrained(staging)
    write_atomically("runs/en-ja/metrics.json", text)   # written beside, then renamed over (os.replace)

A folder is saved whole beside the old one (`.{name}.saving-{pid}-{token}`); then the old one goes aside
(`.{name}.replaced-{pid}-{token}`), the new one into its place, and the old one is removed. A kill between the two
renames leaves the old folder aside, and the next save puts it back first; the temporary names of dead processes are
removed. Ctrl-C during those steps is held back until they are done. Of the old folder, only the entries named in
`keep` (a Hub clone's `.git`) come along. Nothing is fsynced: this guards against killed processes, not power loss.
"""

import contextlib
import os
import re
import secrets
import shutil
import signal
import threading
from collections.abc import Iterable, Iterator
from pathlib import Path

TEMPORARY = re.compile(r"\.(.+)\.(saving|replaced)-(\d+)-[0-9a-f]+")
# Set by the runner's Ctrl-C handler: a library may catch the KeyboardInterrupt and go on, yet a save finished after
# the press must not take the old one's place.
interrupted = threading.Event()


def stop_if_interrupted():
    """KeyboardInterrupt where Ctrl-C was pressed while a command ran, whatever became of its own exception."""
    if interrupted.is_set():
        raise KeyboardInterrupt


def _temporary(path: Path, kind: str) -> Path:
    return path.with_name(f".{path.name}.{kind}-{os.getpid()}-{secrets.token_hex(4)}")


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # another user's
        pass
    return True


def _remove(path: Path):
    """Remove a file, a link or a folder tree (links inside are removed, never followed)."""
    if path.is_dir() and not path.is_symlink():
        shutil.rmtree(path)
    else:
        path.unlink(missing_ok=True)


def _remove_leftovers(path: Path):
    """After killed saves to `path`: an old folder left aside goes back where nothing is; staged ones go."""
    found = [(TEMPORARY.fullmatch(entry.name), entry) for entry in path.parent.iterdir()]
    leftovers = [
        (match[2], entry) for match, entry in found if match and match[1] == path.name and not _alive(int(match[3]))
    ]
    for kind, entry in sorted(leftovers, key=lambda leftover: leftover[0] != "replaced"):  # put back first
        if kind == "replaced" and not os.path.lexists(path):
            os.rename(entry, path)
        else:
            _remove(entry)


@contextlib.contextmanager
def replaced_file(path: str | os.PathLike) -> Iterator[Path]:
    """A new empty file beside `path` to write to, renamed over it when the block ends without an error, removed
    otherwise. A symbolic link at `path` keeps pointing at the data: its target is replaced."""
    path = Path(os.path.realpath(path))
    _remove_leftovers(path)
    temporary = _temporary(path, "saving")
    os.close(os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o666))
    try:
        yield temporary
        stop_if_interrupted()
        os.replace(temporary, path)
    finally:
        temporary.unlink(missing_ok=True)


def write_atomically(path: str | os.PathLike, data: str | bytes):
    """Write text (as UTF-8) or bytes so that `path` holds its old content or all of `data`; a device or a pipe
    (/dev/null, a FIFO) is written into, never replaced by a file."""
    content = data.encode("utf-8") if isinstance(data, str) else data
    if os.path.exists(path) and not os.path.isfile(path):
        Path(path).write_bytes(content)
        return
    with replaced_file(path) as temporary:
        temporary.write_bytes(content)


def _keep(old: Path, new: Path, names: Iterable[str]):
    """Hard links in `new` of the entries `names` of `old` that the save did not write (copies where links fail)."""

    def link(source, target):
        try:
            os.link(source, target, follow_symlinks=False)
        except OSError:
            shutil.copy2(source, target, follow_symlinks=False)

    for name in names:
        if os.path.lexists(old / name) and not os.path.lexists(new / name):
            if (old / name).is_dir() and not (old / name).is_symlink():
                shutil.copytree(old / name, new / name, symlinks=True, copy_function=link)
            else:
                link(old / name, new / name)


def _put_in_place(staged: Path, folder: Path):
    """Make the complete folder `staged` the one at `folder`, the old one aside then removed; a Ctrl-C meanwhile is
    raised once it is done, saying so (only the main thread receives signals)."""
    pressed = []
    main = threading.current_thread() is threading.main_thread()
    before = signal.signal(signal.SIGINT, lambda *_: (pressed.append(1), interrupted.set())) if main else None
    try:
        aside = _temporary(folder, "replaced") if os.path.lexists(folder) else None
        if aside:
            os.rename(folder, aside)
        try:
            os.rename(staged, folder)  # killed just before: the next save puts `aside` back
        except BaseException:
            if aside:
                os.rename(aside, folder)
            raise
        if aside:
            _remove(aside)
    finally:
        if main:
            signal.signal(signal.SIGINT, before)
    if pressed:
        raise KeyboardInterrupt(f"{folder} was saved whole")


@contextlib.contextmanager
def staged_folder(folder: str | os.PathLike, keep: Iterable[str] = ()) -> Iterator[Path]:
    """A new empty folder beside `folder` to save into; when the block ends without an error it takes the old
    folder's place (see the module). On an error or interrupt (a Ctrl-C whose KeyboardInterrupt was lost on the way
    too) it is removed and `folder` stays as it was. A symbolic link at `folder` keeps pointing at the data."""
    folder = Path(os.path.realpath(folder))
    if os.path.lexists(folder) and not folder.is_dir():
        raise NotADirectoryError(f"{folder} is a file; cannot save a folder there")
    folder.parent.mkdir(parents=True, exist_ok=True)
    _remove_leftovers(folder)
    staging = _temporary(folder, "saving")
    staging.mkdir()
    try:
        yield staging
        if folder.is_dir():
            _keep(folder, staging, keep)
        stop_if_interrupted()
        _put_in_place(staging, folder)
    finally:
        if os.path.lexists(staging):
            _remove(staging)


__all__ = ["interrupted", "replaced_file", "staged_folder", "stop_if_interrupted", "write_atomically"]
