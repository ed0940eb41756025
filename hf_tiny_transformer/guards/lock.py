"""A training run's hold on its output folder: while one run writes there, a second run into it is refused.

    with hold_output_dir("runs/en-ja"):    # a UsageError naming the process that holds the folder
        ...                                # train, save

The lock is `{output_dir}/.train.lock`, taken with `filelock` (an flock that the kernel lets go of however the
process ends; the file is opened without following a symbolic link) and holding its holder's process id for the
message. It lies inside the folder, so that every path to the folder finds the same lock, and is removed when the run
ends, with the folders the run made for it where they stay empty (a refused run leaves nothing behind). A lock whose
holder was killed is taken over, with a warning.
"""

import contextlib
import logging
import os
from collections.abc import Iterator
from pathlib import Path

from filelock import FileLock, Timeout

from ..errors import UsageError, first_line

logger = logging.getLogger(__name__)

LOCK_FILE = ".train.lock"


@contextlib.contextmanager
def hold_output_dir(folder: str | os.PathLike, *, hold: bool = True, flag: str = "--output_dir") -> Iterator[None]:
    """Hold `folder` (made if missing) while the block runs; nothing with `hold` False (under torchrun only the
    process that saves holds it) or where the folder cannot be made (the output check says why)."""
    if not hold:
        yield
        return
    folder = Path(folder)
    made = [path for path in (folder, *folder.absolute().parents) if not os.path.lexists(path)]
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError:  # a file in the way, no permission: the output check that follows says what is wrong
        yield
        return
    path = folder / LOCK_FILE
    lock = FileLock(path, timeout=0, on_acquired=lambda descriptor: _claim(descriptor, f"{flag} {folder}"))
    try:
        lock.acquire()
    except Timeout:
        holder = path.read_text(errors="replace").strip() if not path.is_symlink() else ""
        raise UsageError(
            f"{flag} {folder} is in use by {f'process {holder}' if holder else 'another process'} (a training run "
            f"writing there); wait until it ends, or choose another {flag}"
        ) from None
    except OSError as error:  # a symbolic link in the way (the lock never follows one), a read-only folder
        raise UsageError(f"{flag} {folder}: {LOCK_FILE} cannot be made ({first_line(error)}); remove it") from None
    try:
        yield
    finally:
        path.unlink(missing_ok=True)  # while still held: a run that opens it now finds it held or gone
        lock.release()
        for made_folder in made:  # the innermost first; one the run wrote in stays
            with contextlib.suppress(OSError):
                made_folder.rmdir()


def _claim(descriptor: int, where: str):
    """Write this process's id into the lock just taken, warning about an earlier holder that never let go."""
    earlier = os.pread(descriptor, 32, 0).decode(errors="replace").strip()
    if earlier:
        logger.warning("%s: taking over the lock of process %s, which ended without letting go of it", where, earlier)
    os.ftruncate(descriptor, 0)
    os.pwrite(descriptor, f"{os.getpid()}\n".encode(), 0)


__all__ = ["hold_output_dir", "LOCK_FILE"]
