"""All-or-nothing writes of files and folders: a save that fails or is killed leaves what was there before.

    with staged_folder("runs/en-ja/hub") as staging:    # the folder is replaced only if the block succeeds
        model.save_pretrained(staging)
    write_atomically("runs/en-ja/metrics.json", text)   # written beside, then renamed over

A folder is saved complete beside the old one (`.{name}.saving-{pid}-{token}`) and takes the old one's place in one
atomic step (Linux renameat2 RENAME_EXCHANGE): the path always holds the old folder or the new one. A save replaces
the whole folder, so that nothing of an earlier model stays beside the new one's files: of the old folder, only the
entries its writer names (`keep`, e.g. a Hub clone's `.git`) come along, as hard links, where the save did not write
them. Where the exchange is missing or refused (macOS, old glibc, some filesystems) the old folder is renamed aside
(`.{name}.replaced-{pid}-{token}`) and the new one in; a kill between the two leaves no folder at the path, and
the next save there puts the old one back first. Each save removes the temporary names that killed processes left.
New files and folders get the usual permissions (0o666 / 0o777 less the umask). This guards against failed or
killed processes, not power loss (nothing is fsynced). The tools that write folders use it (train.py's hub folder,
checkpoint averaging, the CTranslate2 and ONNX exports, the browser page, the Hub and Space folders); a plain
`model.save_pretrained` writes as the library's own models do, file by file, and a saved model carries none of this.
"""

import contextlib
import ctypes
import errno
import functools
import os
import re
import secrets
import shutil
import stat
import sys
import threading
from collections.abc import Iterable, Iterator
from pathlib import Path

StrPath = str | os.PathLike
AT_FDCWD, RENAME_EXCHANGE = -100, 2  # linux/fcntl.h, linux/fs.h

# Set by the commands' Ctrl-C handler (commands/runner.py). A KeyboardInterrupt can be caught by a library that goes
# on, or land in a callback where Python prints it and goes on; a save finished after the press must still not take
# the old one's place.
interrupted = threading.Event()


def stop_if_interrupted():
    """KeyboardInterrupt where Ctrl-C was pressed while a command ran, whatever became of its own exception."""
    if interrupted.is_set():
        raise KeyboardInterrupt


def _temporary_name(path: Path, kind: str = "saving") -> Path:
    """`.{name}.{kind}-{pid}-{token}` beside `path`: recognizable, and naming the process that owns it."""
    return path.with_name(f".{path.name}.{kind}-{os.getpid()}-{secrets.token_hex(4)}")


def _process_alive(pid: int) -> bool:
    """Whether process `pid` exists."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # another user's
        pass
    return True


def _remove(path: Path):
    """Remove a file, a link or a folder tree."""
    if path.is_dir() and not path.is_symlink():
        shutil.rmtree(path)
    else:
        path.unlink(missing_ok=True)


TEMPORARY = re.compile(r"(saving|replaced)-(\d+)-[0-9a-f]+")


def _leftover(entry: str, name: str) -> tuple[str, list[int]] | None:
    """(kind, the process ids it names) when `entry` is a temporary name of a save to `name`: `.name.saving-PID-x`,
    `.name.replaced-PID-x`, or a staging folder of one (`..name.saving-PID-x.saving-PID2-y`, which saves that
    nested a staged save in another left before version 0.2); None otherwise."""
    stripped = entry.lstrip(".")
    if not stripped.startswith(f"{name}."):
        return None
    parts = [TEMPORARY.fullmatch(part) for part in stripped[len(name) + 1 :].split(".")]
    if not all(parts) or len(entry) - len(stripped) != len(parts):
        return None
    return (parts[0][1] if len(parts) == 1 else "saving"), [int(part[2]) for part in parts]


def _remove_leftovers(path: Path):
    """Clean up after killed saves to `path`: an old folder a fallback save left aside goes back to `path` when
    nothing is there; staging files and folders are removed. Those of live processes are left alone."""
    found = [(_leftover(entry.name, path.name), entry) for entry in path.parent.iterdir()]
    leftovers = [
        (match[0], entry) for match, entry in found if match and not any(_process_alive(pid) for pid in match[1])
    ]
    for kind, entry in sorted(leftovers, key=lambda leftover: leftover[0] != "replaced"):  # put back first
        if kind == "replaced" and not os.path.lexists(path):
            os.rename(entry, path)
        else:
            _remove(entry)


def _target(path: StrPath) -> Path:
    """The path a save replaces: symbolic links are followed, so that a link keeps pointing at the saved data."""
    return Path(os.path.realpath(path))


@contextlib.contextmanager
def replaced_file(path: StrPath) -> Iterator[Path]:
    """A new empty file beside `path` to write to; renamed over `path` (one atomic step) when the block ends
    without an error, removed otherwise. It has the permissions `open(path, "w")` gives a new file."""
    path = _target(path)
    _remove_leftovers(path)
    temporary = _temporary_name(path)
    os.close(os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666))
    try:
        yield temporary
        os.chmod(temporary, _usual_mode(0o666))  # a writer may have replaced it (safetensors writes files 0o600)
        stop_if_interrupted()
        os.replace(temporary, path)
    finally:
        temporary.unlink(missing_ok=True)


def _usual_mode(mode: int) -> int:
    """`mode` less this process's umask: what `open()` (0o666) or `mkdir()` (0o777) gives a new file or folder."""
    umask = os.umask(0)
    os.umask(umask)
    return mode & ~umask


def _give_usual_modes(folder: Path):
    """The files and folders a save wrote under `folder` get the usual permissions (safetensors writes 0o600)."""
    for root, folders, files in os.walk(folder):
        for name in folders:
            os.chmod(os.path.join(root, name), _usual_mode(0o777))
        for name in files:
            os.chmod(os.path.join(root, name), _usual_mode(0o666))


def write_atomically(path: StrPath, data: str | bytes):
    """Write text (as UTF-8) or bytes to `path` so that it holds either its old content or all of `data`; a device
    or a pipe (/dev/null, /dev/stdout, a FIFO) is written into, never replaced by a file."""
    content = data.encode("utf-8") if isinstance(data, str) else data
    if _is_special_file(path):
        with open(path, "wb") as stream:
            stream.write(content)
        return
    with replaced_file(path) as temporary:
        temporary.write_bytes(content)


def _is_special_file(path: StrPath) -> bool:
    try:
        mode = os.stat(path).st_mode
    except OSError:  # missing: a new file
        return False
    return stat.S_ISCHR(mode) or stat.S_ISFIFO(mode) or stat.S_ISSOCK(mode)


def _link(source: StrPath, target: StrPath):
    """A hard link of file `source` at `target`; a copy where a link is refused (another filesystem)."""
    try:
        os.link(source, target, follow_symlinks=False)
    except OSError:
        shutil.copy2(source, target, follow_symlinks=False)


def _keep(old: Path, new: Path, names: Iterable[str]):
    """Hard links in `new` of the entries `names` of `old` (files, or folders whole) that the save did not write."""
    for name in names:
        entry, target = old / name, new / name
        if not os.path.lexists(entry) or os.path.lexists(target):
            continue
        if entry.is_dir() and not entry.is_symlink():
            shutil.copytree(entry, target, symlinks=True, copy_function=_link)
        else:
            _link(entry, target)


@functools.cache
def _renameat2():
    """libc's renameat2 (Linux, glibc >= 2.28), or None where there is none."""
    try:
        function = ctypes.CDLL(None, use_errno=True).renameat2
    except (AttributeError, OSError, TypeError):
        return None
    function.argtypes = [ctypes.c_int, ctypes.c_char_p, ctypes.c_int, ctypes.c_char_p, ctypes.c_uint]
    function.restype = ctypes.c_int
    return function


def _exchange(first: Path, second: Path) -> bool:
    """Swap two paths in one atomic step; False where the system or the filesystem cannot."""
    renameat2 = _renameat2() if sys.platform.startswith("linux") else None
    if renameat2 is None:
        return False
    if renameat2(AT_FDCWD, os.fsencode(first), AT_FDCWD, os.fsencode(second), RENAME_EXCHANGE) == 0:
        return True
    code = ctypes.get_errno()
    if code in (errno.EINVAL, errno.ENOSYS, errno.EOPNOTSUPP):
        return False
    raise OSError(code, os.strerror(code), str(second))


def _put_in_place(staged: Path, folder: Path):
    """Make the complete folder `staged` the one at `folder`. With an exchange, `staged` then holds the old
    folder; without one, the old folder goes aside for a moment (restored if the second rename fails)."""
    if not os.path.lexists(folder):
        os.rename(staged, folder)
    elif not _exchange(staged, folder):
        aside = _temporary_name(folder, "replaced")
        os.rename(folder, aside)
        try:
            os.rename(staged, folder)  # a kill just before: the next save puts `aside` back
        except BaseException:
            os.rename(aside, folder)
            raise
        _remove(aside)


@contextlib.contextmanager
def staged_folder(folder: StrPath, keep: Iterable[str] = ()) -> Iterator[Path]:
    """A new empty folder beside `folder` to save into. When the block ends without an error, it takes the old
    folder's place in one atomic step, with hard links of the old folder's entries named in `keep` (names at its
    top) that the save did not write; nothing else of the old folder stays. On any error or interrupt (also a Ctrl-C
    whose KeyboardInterrupt was lost on the way: `interrupted`) it is removed and `folder` stays as it was. Missing
    parent folders are created."""
    folder = _target(folder)
    if os.path.lexists(folder) and not folder.is_dir():
        raise NotADirectoryError(f"{folder} is a file; cannot save a folder there")
    folder.parent.mkdir(parents=True, exist_ok=True)
    _remove_leftovers(folder)
    staging = _temporary_name(folder)
    staging.mkdir()
    try:
        yield staging
        _give_usual_modes(staging)  # before the kept entries are linked in: only what this save wrote
        if folder.is_dir():
            _keep(folder, staging, keep)
        stop_if_interrupted()
        _put_in_place(staging, folder)
    finally:
        if os.path.lexists(staging):  # the unfinished new folder, or after an exchange the old one
            _remove(staging)


__all__ = ["interrupted", "replaced_file", "staged_folder", "stop_if_interrupted", "write_atomically"]
