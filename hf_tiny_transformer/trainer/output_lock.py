"""A training run's hold on its output folder: while one run writes there, a second run into it is refused.

    with hold_output_dir("runs/en-ja"):    # a UsageError naming the process that holds the folder
        ...                                # check the folder, train, save

The lock is the file `{output_dir}/.train.lock`, locked with flock (the kernel lets go of it when the process ends,
however it ends) and holding the process id of its holder, for the message. It lies inside the folder, so that every
path to the folder (a link, a relative path) finds the same lock, and it exists only while a run holds it: the
folder's check, a later run and the Hub upload (of `hub`, and only a model's files) never see it. A lock whose holder
was killed is taken over, with a warning. A run that made the folder for its lock and leaves nothing in it removes
it again: a refused run leaves nothing behind.
"""

import contextlib
import fcntl
import logging
import os
from collections.abc import Iterator
from pathlib import Path

from ..errors import UsageError

logger = logging.getLogger(__name__)

LOCK_FILE = ".train.lock"


@contextlib.contextmanager
def hold_output_dir(folder: str | os.PathLike, *, hold: bool = True, flag: str = "--output_dir") -> Iterator[None]:
    """Hold `folder` while the block runs (nothing with `hold` False: under torchrun only the process that saves
    holds it). A UsageError names the process that holds it already. Where the folder or its lock file cannot be
    made (a file in the way, no permission), the block runs without a lock: the output check says what is wrong."""
    folder = Path(folder)
    made = make_folders(folder) if hold else None
    descriptor = lock(folder, flag) if made is not None else None
    try:
        yield
    finally:
        if descriptor is not None:
            (folder / LOCK_FILE).unlink(missing_ok=True)  # before letting go: a waiting run then sees a new file
            os.close(descriptor)
        for made_folder in reversed(made or []):  # the innermost first; a folder the run wrote in stays
            with contextlib.suppress(OSError):
                made_folder.rmdir()


def make_folders(folder: Path) -> list[Path] | None:
    """Make `folder` and its missing parents: those made, outermost first; None where they cannot be made."""
    missing = [path for path in (folder, *folder.absolute().parents) if not os.path.lexists(path)]
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError:
        return None
    return missing[::-1]


def lock(folder: Path, flag: str) -> int | None:
    """The descriptor of `folder`'s lock file, locked and holding this process's id; None where it cannot be
    made or locked (a read-only folder, a file system without locks)."""
    path = folder / LOCK_FILE
    while True:
        try:
            descriptor = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
        except OSError:
            return None
        try:
            fcntl.flock(descriptor, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = os.read(descriptor, 32).decode(errors="replace").strip()
            os.close(descriptor)
            raise UsageError(
                f"{flag} {folder} is in use by {f'process {holder}' if holder else 'another process'} (a training "
                f"run writing there); wait until it ends, or choose another {flag}"
            ) from None
        except OSError:
            os.close(descriptor)
            return None
        if is_the_file_at(descriptor, path):
            break
        os.close(descriptor)  # its holder removed it as it let go: lock the file there now
    earlier = os.read(descriptor, 32).decode(errors="replace").strip()
    if earlier:
        logger.warning(
            "%s %s: taking over the lock of process %s, which ended without letting go of it (killed?)",
            flag,
            folder,
            earlier,
        )
    os.ftruncate(descriptor, 0)
    os.pwrite(descriptor, f"{os.getpid()}\n".encode(), 0)
    return descriptor


def is_the_file_at(descriptor: int, path: Path) -> bool:
    """Whether the open file is still the one at `path` (not removed or replaced since it was opened)."""
    try:
        there = os.stat(path)
    except FileNotFoundError:
        return False
    here = os.fstat(descriptor)
    return (here.st_dev, here.st_ino) == (there.st_dev, there.st_ino)


__all__ = ["hold_output_dir", "LOCK_FILE"]
