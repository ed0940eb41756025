"""The runner of every command (the `tiny-transformer` subcommands, the scripts of training/ and benchmarks/): a
UsageError becomes one line and exit status 2, Ctrl-C one line and 130, a full disk one line naming the output and 1.

    sys.exit(run(main))
"""

import contextlib
import errno
import logging
import os
import signal
import sys
import threading
from collections.abc import Callable, Iterator
from pathlib import Path

from ..errors import UsageError, WorkFailed, first_line, is_rust_panic
from .outputs import CHECKED
from .writing import interrupted, stop_if_interrupted

FULL_DISK = {errno.ENOSPC: "no space is left on its disk", errno.EDQUOT: "your disk quota there is used up"}
TORCH_WRITE_FAILED = "PytorchStreamWriter failed writing file"  # torch.save's error where the disk is full


def run(main: Callable[[list[str] | None], int | None], argv: list[str] | None = None, prog: str | None = None) -> int:
    """Call `main(argv)` and return its exit status: a UsageError is one line on stderr (`prog: the problem; the
    fix`) and 2; Ctrl-C anywhere in it `prog: interrupted` and 130; a full disk or quota one line naming the output
    and 1; a Rust library's panic (a tokenizer's regex on this text) one line after the panic's own, and 1. The
    libraries' progress bars show only where stderr is a terminal (in a file their carriage returns are noise)."""
    prog = prog or Path(sys.argv[0]).name
    CHECKED.clear()
    try:
        with _ctrl_c_remembered():
            if not sys.stderr.isatty():
                _hide_progress_bars()
            status = main(argv) or 0
            stop_if_interrupted()  # pressed, and its KeyboardInterrupt lost on the way
            return status
    except UsageError as error:
        return _failed(prog, first_line(error), 2)
    except WorkFailed as error:
        return _failed(prog, first_line(error), 1)
    except KeyboardInterrupt as error:  # its message, where it has one, says what is in place
        return _failed(prog, f"interrupted ({error})" if str(error) else "interrupted", 130)
    except BrokenPipeError:  # the reader stopped reading (`| head`): nothing more to write
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0
    except BaseException as error:
        if full := _full_disk(error):
            place = ", ".join(CHECKED) or getattr(error, "filename", None)
            fix = (
                "free space there or choose another place"
                if place
                else "free space there or write the output elsewhere"
            )
            return _failed(prog, f"{place or 'writing its output'}: {full}; {fix}", 1)
        if not is_rust_panic(error):
            raise
        problem = "the model's tokenizer fails on this text" if "Onig" in str(error) else "a Rust library failed"
        fix = "; fix the regex of tokenizer.json's normalizer or pre-tokenizer" if "Onig" in str(error) else ""
        return _failed(prog, f"{problem} ({first_line(error)}){fix}", 1)


@contextlib.contextmanager
def _ctrl_c_remembered() -> Iterator[None]:
    """Ctrl-C raises KeyboardInterrupt, so that saves in progress clean up, and is remembered (`interrupted`): a
    library may catch the exception and go on, yet no save takes its place after the press. Afterwards the handler
    before it is back and the press forgotten. Where Ctrl-C is ignored it stays ignored."""
    if threading.current_thread() is not threading.main_thread() or signal.getsignal(signal.SIGINT) == signal.SIG_IGN:
        yield
        return

    def remember_and_interrupt(signal_number, frame):
        interrupted.set()
        signal.default_int_handler(signal_number, frame)

    before = signal.signal(signal.SIGINT, remember_and_interrupt)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, before)
        interrupted.clear()


def _hide_progress_bars():
    """The libraries' progress bars off: by their environment variables for those not imported yet, by their
    functions for the others. A user's own setting of the variables stays."""
    os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")  # huggingface_hub's and transformers' bars
    os.environ.setdefault("HF_DATASETS_DISABLE_PROGRESS_BARS", "1")
    if "transformers" in sys.modules:
        sys.modules["transformers"].utils.logging.disable_progress_bar()
    if "datasets" in sys.modules:
        sys.modules["datasets"].disable_progress_bars()


def _failed(prog: str, problem: str, status: int) -> int:
    with command_output(sys.stderr) as output:
        output.error(f"{prog}: {problem}")
    return status


def _full_disk(error: BaseException) -> str | None:
    """What a full disk or quota is said to be, where `error` is one: an OSError of its errno, a library's error
    quoting the system's message (safetensors), or torch's failed checkpoint write (whose one cause is a full disk)."""
    if isinstance(error, OSError) and error.errno in FULL_DISK:
        return FULL_DISK[error.errno]
    message = str(error)
    if said := next((said for code, said in FULL_DISK.items() if os.strerror(code) in message), None):
        return said
    return "a file could not be written (the disk may be full)" if TORCH_WRITE_FAILED in message else None


@contextlib.contextmanager
def command_output(stream) -> Iterator[logging.Logger]:
    """A logger whose records are written to `stream` as bare lines while the block runs: a command's own output
    (its results on stdout, its one-line error on stderr), apart from the libraries' logging and its formats."""
    logger = logging.getLogger(f"{__name__}.output")
    handler = logging.StreamHandler(stream)
    handler.setFormatter(logging.Formatter("%(message)s"))
    logger.setLevel(logging.INFO)
    logger.propagate = False
    logger.addHandler(handler)
    try:
        yield logger
    finally:
        logger.removeHandler(handler)


__all__ = ["run", "command_output"]
