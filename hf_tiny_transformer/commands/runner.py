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

from ..errors import UsageError, first_line, is_rust_panic
from ..saving import interrupted, stop_if_interrupted
from .output_guard import recorded_outputs

FULL_DISK = {errno.ENOSPC: "no space is left on its disk", errno.EDQUOT: "your disk quota there is used up"}
TORCH_WRITE_FAILED = "PytorchStreamWriter failed writing file"  # torch.save's error where the disk is full


def run(main: Callable[[list[str] | None], int | None], argv: list[str] | None = None, prog: str | None = None) -> int:
    """Call `main(argv)` and return its exit status. A UsageError is written as one line on stderr (`prog: the
    problem; the fix`), exit status 2; Ctrl-C anywhere in it, the imports it makes included, as `prog: interrupted`,
    130; a full disk or quota while writing as one line naming the output, 1; a Rust library's panic (a tokenizer's
    regex that fails on the text) as one line after the panic's own, 1. The libraries' own progress bars
    (loading weights, downloads) show only when stderr is a terminal: in a file or CI their carriage returns would
    make the log unreadable."""
    prog = prog or Path(sys.argv[0]).name
    with recorded_outputs() as outputs:
        return _run(main, argv, prog, outputs)


def _run(main, argv, prog: str, outputs: list[str]) -> int:
    try:
        with _ctrl_c_remembered():
            if not sys.stderr.isatty():
                _hide_progress_bars()
            status = main(argv) or 0
            stop_if_interrupted()  # pressed, and its KeyboardInterrupt lost on the way
            return status
    except UsageError as error:
        return _failed(prog, first_line(error), 2)
    except KeyboardInterrupt:
        return _failed(prog, "interrupted", 130)
    except BrokenPipeError:  # the reader stopped reading (`| head`): nothing more to write
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0
    except BaseException as error:
        if full := _full_disk(error):
            return _failed(prog, _full_disk_problem(full, getattr(error, "filename", None), outputs), 1)
        if not is_rust_panic(error):
            raise
        return _failed(prog, _panic_problem(error), 1)


def interrupted_while_importing() -> None:
    """Ctrl-C before run() starts, while a script imports its libraries: the runner's one line and exit status 130,
    without a traceback (run() gives Ctrl-C back to Python's KeyboardInterrupt). Where Ctrl-C is ignored (a
    background job of a shell script) it stays ignored."""
    if signal.getsignal(signal.SIGINT) is signal.default_int_handler:
        prog = Path(sys.argv[0]).name

        def stop(signal_number, frame):
            sys.stderr.write(f"{prog}: interrupted\n")
            sys.stderr.flush()
            # not sys.exit: its exception can land in a callback of the import machinery, where Python only prints
            # it and goes on; nothing is written yet, so there is nothing to clean up
            os._exit(130)

        signal.signal(signal.SIGINT, stop)


@contextlib.contextmanager
def _ctrl_c_remembered() -> Iterator[None]:
    """Ctrl-C raises KeyboardInterrupt (Python's default), so that saves in progress clean up and the runner reports
    it, and is remembered (`saving.interrupted`): a library may catch the exception and go on, and Python only prints
    one raised in a callback, yet no save takes its place after the press and the command ends with 130. Afterwards
    the handler before it is back and the press forgotten. Where Ctrl-C is ignored (a background job of a script) it
    stays ignored; only the main thread may set a handler."""
    if threading.current_thread() is not threading.main_thread() or signal.getsignal(signal.SIGINT) == signal.SIG_IGN:
        yield
        return
    before = signal.signal(signal.SIGINT, _remember_and_interrupt)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, before)
        interrupted.clear()  # a library's save after run() is no longer the command's


def _remember_and_interrupt(signal_number, frame):
    interrupted.set()
    signal.default_int_handler(signal_number, frame)


def _hide_progress_bars():
    """The libraries' progress bars off (a run whose stderr is a file or a pipe): by their environment variables for
    the libraries not imported yet, which a command imports only when it needs them, by their functions for the
    others. A user's own setting of the variables stays."""
    os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")  # huggingface_hub's and transformers' bars
    os.environ.setdefault("HF_DATASETS_DISABLE_PROGRESS_BARS", "1")
    if "transformers" in sys.modules:
        from transformers.utils import logging as transformers_logging

        transformers_logging.disable_progress_bar()
    if "datasets" in sys.modules:
        import datasets

        datasets.disable_progress_bars()


def _failed(prog: str, problem: str, status: int) -> int:
    """Write `prog: problem` as the one line on stderr; return the exit status."""
    with command_output(sys.stderr) as output:
        output.error(f"{prog}: {problem}")
    return status


def _panic_problem(error: BaseException) -> str:
    """A Rust library's panic, whose own message is on stderr above: a regex that fails on the text (Onig, the
    tokenizers' regex engine) is the one a model's files make, in its tokenizer."""
    if "Onig" in str(error):
        return (
            f"the model's tokenizer fails on this text ({first_line(error)}); fix the regex of tokenizer.json's "
            "normalizer or pre-tokenizer"
        )
    return f"a Rust library failed ({first_line(error)})"


def _full_disk(error: BaseException) -> str | None:
    """What a full disk or quota is said to be, where `error` is one: an OSError of its errno, or a library's own
    error whose message is the system's (safetensors) or a failed write without a reason (torch's checkpoint
    writer, whose one cause in practice is a full disk)."""
    if isinstance(error, OSError) and error.errno in FULL_DISK:
        return FULL_DISK[error.errno]
    message = str(error)
    if said := next((said for code, said in FULL_DISK.items() if os.strerror(code) in message), None):
        return said
    return "a file could not be written (the disk may be full)" if TORCH_WRITE_FAILED in message else None


def _full_disk_problem(full: str, filename: str | None, outputs: list[str]) -> str:
    """A full disk or quota, said of the outputs the command checked, else of the file the error names, else of the
    command's output (standard output, redirected to a file)."""
    if place := ", ".join(outputs) or filename:
        return f"{place}: {full}; free space there or choose another place"
    return f"writing its output: {full}; free space there or write the output elsewhere"


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


__all__ = ["run", "command_output", "interrupted_while_importing"]
