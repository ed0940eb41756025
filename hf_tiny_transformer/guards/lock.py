"""A training run's hold on its output folder: while one run writes there, a second run into it is refused.

    with hold_output_dir("runs/en-ja"):    # a UsageError naming the process that holds the folder
        ...

The lock is `{output_dir}/.train.lock`, taken with `filelock` (an flock the kernel lets go of however the process
ends, on a file opened without following a link), holding its holder's process id for the message. It is removed when
the run ends, with the folders made for it where they stay empty: a refused run leaves nothing behind.
"""

import contextlib
import logging
import os
from collections.abc import Iterator
from pathlib import Path

from filelock import FileLock, Timeout

from ..errors import UsageError, first_line

logger = logging.getLogger(__name__)


@contextlib.contextmanager
def hold_output_dir(folder: str | os.PathLike, *, hold: bool = True, flag: str = "--output_dir") -> Iterator[None]:
    """Hold `folder` (made if missing) while the block runs; nothing with `hold` False (under torchrun only the
    process that saves holds it) or where the folder cannot be made (the output check says why)."""
    folder = Path(folder)
    made = [path for path in (folder, *folder.absolute().parents) if not os.path.lexists(path)]
    with contextlib.suppress(OSError):
        if hold:
            folder.mkdir(parents=True, exist_ok=True)
    if not (hold and folder.is_dir()):
        yield
        return
    path, where = folder / ".train.lock", f"{flag} {folder}"
    lock = FileLock(path, timeout=0, on_acquired=lambda descriptor: _claim(descriptor, where))
    try:
        lock.acquire()
    except Timeout:
        holder = "" if path.is_symlink() else path.read_text(errors="replace").strip()
        raise UsageError(f"{where} is in use by {f'process {holder}' if holder else 'another process'} (a training "
                         f"run writing there); wait until it ends, or choose another {flag}") from None  # fmt: skip
    except OSError as error:  # a symbolic link in the way (the lock never follows one)
        raise UsageError(f"{where}: .train.lock cannot be made ({first_line(error)}); remove it") from None
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
    if earlier := os.pread(descriptor, 32, 0).decode(errors="replace").strip():
        logger.warning("%s: taking over the lock of process %s, which ended without letting go of it", where, earlier)
    os.ftruncate(descriptor, 0)
    os.pwrite(descriptor, f"{os.getpid()}\n".encode(), 0)


__all__ = ["hold_output_dir"]
