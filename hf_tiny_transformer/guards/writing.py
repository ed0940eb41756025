"""All-or-nothing writes: a save that fails, is killed or is interrupted leaves what was there before.

    with staged_folder("runs/en-ja/hub") as staging:    # the folder is replaced only if the block succeeds
        model.save_pretrained(staging)
    write_atomically("runs/en-ja/metrics.json", text)   # written beside, then renamed over (os.replace)

A folder is saved whole beside the old one (`.{name}.saving-{pid}-{token}`); then the old one is renamed aside
(`.{name}.replaced-{pid}-{token}`), the new one into its place, and the old one removed. A kill between the two
renames leaves the old folder aside, and the next save there puts it back first; the temporary names of killed
processes are removed. Ctrl-C during those steps is held back until they are done, then raised with what is in place.
A save replaces the whole folder: of the old one, only the entries its writer names in `keep` (a Hub clone's `.git`)
come along, as hard links. New files and folders get the usual permissions (safetensors writes 0o600). Nothing is
fsynced: this guards against failed and killed processes, not power loss.
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

StrPath = str | os.PathLike
TEMPORARY = re.compile(r"\.(.+)\.(saving|replaced)-(\d+)-[0-9a-f]+")

# Set by the commands' Ctrl-C handler (guards/runner.py): a KeyboardInterrupt can be caught by a library that goes on,
# yet a save finished after the press must not take the old one's place.
interrupted = threading.Event()


def stop_if_interrupted():
    """KeyboardInterrupt where Ctrl-C was pressed while a command ran, whatever became of its own exception."""
    if interrupted.is_set():
        raise KeyboardInterrupt


def _temporary(path: Path, kind: str) -> Path:
    """`.{name}.{kind}-{pid}-{token}` beside `path`: recognizable, and naming the process that owns it."""
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
    """After killed saves to `path`: an old folder left aside goes back where nothing is; staged ones are removed.
    Those of live processes are left alone."""
    leftovers = []
    for entry in path.parent.iterdir():
        match = TEMPORARY.fullmatch(entry.name)
        if match and match[1] == path.name and not _alive(int(match[3])):
            leftovers.append((match[2], entry))
    for kind, entry in sorted(leftovers, key=lambda leftover: leftover[0] != "replaced"):  # put back first
        if kind == "replaced" and not os.path.lexists(path):
            os.rename(entry, path)
        else:
            _remove(entry)


def _usual_mode(mode: int) -> int:
    """`mode` less this process's umask: what `open()` (0o666) or `mkdir()` (0o777) gives a new file or folder."""
    umask = os.umask(0)
    os.umask(umask)
    return mode & ~umask


@contextlib.contextmanager
def replaced_file(path: StrPath) -> Iterator[Path]:
    """A new empty file beside `path` to write to, renamed over it (one atomic step) when the block ends without an
    error, removed otherwise. A symbolic link at `path` keeps pointing at the data: its target is replaced."""
    path = Path(os.path.realpath(path))
    _remove_leftovers(path)
    temporary = _temporary(path, "saving")
    os.close(os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o666))
    try:
        yield temporary
        os.chmod(temporary, _usual_mode(0o666))
        stop_if_interrupted()
        os.replace(temporary, path)
    finally:
        temporary.unlink(missing_ok=True)


def write_atomically(path: StrPath, data: str | bytes):
    """Write text (as UTF-8) or bytes so that `path` holds its old content or all of `data`; a device or a pipe
    (/dev/null, /dev/stdout, a FIFO) is written into, never replaced by a file."""
    content = data.encode("utf-8") if isinstance(data, str) else data
    if os.path.exists(path) and not os.path.isfile(path):
        Path(path).write_bytes(content)
        return
    with replaced_file(path) as temporary:
        temporary.write_bytes(content)


def _keep(old: Path, new: Path, names: Iterable[str]):
    """Hard links in `new` of the entries `names` of `old` that the save did not write (copies across filesystems)."""
    for name in names:
        entry, target = old / name, new / name
        if not os.path.lexists(entry) or os.path.lexists(target):
            continue
        if entry.is_dir() and not entry.is_symlink():
            shutil.copytree(entry, target, symlinks=True, copy_function=_link)
        else:
            _link(entry, target)


def _link(source: StrPath, target: StrPath):
    try:
        os.link(source, target, follow_symlinks=False)
    except OSError:
        shutil.copy2(source, target, follow_symlinks=False)


@contextlib.contextmanager
def _ctrl_c_held_back(done: str) -> Iterator[None]:
    """Ctrl-C during the block is remembered, not raised; raised after it (saying `done`), so that steps that must
    finish together do. Only the main thread receives signals; elsewhere the block just runs."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    pressed = []
    before = signal.signal(signal.SIGINT, lambda *_: (pressed.append(True), interrupted.set()))
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, before)
    if pressed:
        raise KeyboardInterrupt(done)


def _put_in_place(staged: Path, folder: Path):
    """Make the complete folder `staged` the one at `folder`; the old one goes aside, then is removed."""
    with _ctrl_c_held_back(f"{folder} was saved whole"):
        if not os.path.lexists(folder):
            os.rename(staged, folder)
            return
        aside = _temporary(folder, "replaced")
        os.rename(folder, aside)
        try:
            os.rename(staged, folder)  # killed just before: the next save puts `aside` back
        except BaseException:
            os.rename(aside, folder)
            raise
        _remove(aside)


@contextlib.contextmanager
def staged_folder(folder: StrPath, keep: Iterable[str] = ()) -> Iterator[Path]:
    """A new empty folder beside `folder` to save into. When the block ends without an error it takes the old
    folder's place, with hard links of the old folder's entries named in `keep` that the save did not write; on an
    error or interrupt (a Ctrl-C whose KeyboardInterrupt was lost on the way too) it is removed and `folder` stays as
    it was. A symbolic link at `folder` keeps pointing at the data. Missing parent folders are created."""
    folder = Path(os.path.realpath(folder))
    if os.path.lexists(folder) and not folder.is_dir():
        raise NotADirectoryError(f"{folder} is a file; cannot save a folder there")
    folder.parent.mkdir(parents=True, exist_ok=True)
    _remove_leftovers(folder)
    staging = _temporary(folder, "saving")
    staging.mkdir()
    try:
        yield staging
        for root, folders, files in os.walk(staging):  # before the kept entries come in: only what this save wrote
            for name in folders:
                os.chmod(os.path.join(root, name), _usual_mode(0o777))
            for name in files:
                os.chmod(os.path.join(root, name), _usual_mode(0o666))
        if folder.is_dir():
            _keep(folder, staging, keep)
        stop_if_interrupted()
        _put_in_place(staging, folder)
    finally:
        if os.path.lexists(staging):
            _remove(staging)


__all__ = ["interrupted", "replaced_file", "staged_folder", "stop_if_interrupted", "write_atomically"]
