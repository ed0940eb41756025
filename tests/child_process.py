"""The child side of conftest.run_in_child: a command or script run as a shell runs it.

Children are forked from multiprocessing's fork server, a fresh interpreter that imports this module (torch,
transformers, this package and train.py's libraries, once) and then only forks: a child forked from a pytest
worker would inherit whatever locks the worker's other threads held at that moment (a server a test started, a
streaming translation), and could wait on one of them for ever.
"""

import faulthandler
import logging
import os
import runpy
import sys
import threading
from pathlib import Path

import torch
import transformers  # noqa: F401  imported once here, not in each child
from transformers import Seq2SeqTrainer  # noqa: F401  train.py's heaviest import

import hf_tiny_transformer.commands
from hf_tiny_transformer import hardware
from hf_tiny_transformer.trainer import trainer  # noqa: F401

PIPE_SIZE = 65536  # what a pipe holds before a writer waits for its reader


def standard_input(data: bytes, as_file: bool, folder: Path):
    """Descriptor 0 holding `data`: a pipe, as `printf ... | command` gives it, or a file, as `< file` does; then
    sys.stdin opened on it as Python opens it at start."""
    if as_file:
        path = folder / "stdin"
        path.write_bytes(data)
        descriptor = os.open(path, os.O_RDONLY)
    else:
        descriptor, writing = os.pipe()
        if len(data) <= PIPE_SIZE:
            os.write(writing, data)
            os.close(writing)
        else:  # more than the pipe holds: written as the command reads
            threading.Thread(target=write_and_close, args=(writing, data), daemon=True).start()
    os.dup2(descriptor, 0)
    os.close(descriptor)
    sys.stdin = open(0, encoding="utf-8", errors="strict", newline="\n", closefd=False)


def write_and_close(descriptor: int, data: bytes):
    """Write `data` into a pipe and close it; a reader that stopped reading early ends the writing."""
    try:
        with open(descriptor, "wb") as pipe:
            pipe.write(data)
    except BrokenPipeError:
        pass


def redirect_output(out: int, err: int):
    """Point standard output and error (the descriptors, Python's streams, the logging handlers the libraries made
    with the old stderr) at the files `out` and `err` are open on."""
    os.dup2(out, 1)
    os.dup2(err, 2)
    sys.stdout, sys.stderr = open(1, "w", closefd=False), open(2, "w", closefd=False)
    logging.root.handlers.clear()  # the command configures its own
    for logger in map(logging.getLogger, list(logging.root.manager.loggerDict)):
        for handler in logger.handlers:  # a library's own (transformers'), made with the old stderr
            if type(handler) is logging.StreamHandler:
                handler.setStream(sys.stderr)


def run(spec: dict):
    """Run spec["kind"] ("script": spec["path"] as `python path args`; "command": `tiny-transformer args`) with
    spec["args"] in spec["cwd"], its output in the files spec["out"] and spec["err"] (or the terminal spec["terminal"]),
    standard input spec["stdin"] (a pipe, or a file with spec["stdin_file"]), the environment spec["environ"], and
    exit with its exit status. spec["setup"] (module, function, args) is called first: what a test patches.
    spec["cpuinfo"] fakes the machine; a run still going near spec["timeout"] prints where each thread is, and
    ends."""
    code = 1
    try:
        os.environ.clear()
        os.environ.update(spec["environ"])
        standard_input(spec["stdin"], spec["stdin_file"], Path(spec["folder"]))
        if spec["terminal"]:
            terminal = os.open(spec["terminal"], os.O_RDWR | os.O_NOCTTY)
            redirect_output(terminal, terminal)
        else:
            redirect_output(os.open(spec["out"], os.O_WRONLY), os.open(spec["err"], os.O_WRONLY))
        faulthandler.dump_traceback_later(max(spec["timeout"] - 2, 1), exit=True)
        torch.set_num_threads(1)  # a worker's share of the CPUs
        if spec["cpuinfo"] is not None:
            hardware.CPUINFO = spec["cpuinfo"]
        if spec["setup"] is not None:
            module, function, args = spec["setup"]
            getattr(__import__(module), function)(*args)
        os.chdir(spec["cwd"])
        if spec["kind"] == "script":
            sys.argv = [spec["path"], *spec["args"]]
            runpy.run_path(spec["path"], run_name="__main__")
        else:
            sys.argv = ["tiny-transformer", *spec["args"]]
            sys.exit(hf_tiny_transformer.commands.main(spec["args"]))
        code = 0
    except SystemExit as exit_:
        code = exit_.code if isinstance(exit_.code, int) else (0 if exit_.code is None else 1)
    except BaseException:
        import traceback

        traceback.print_exc()
    finally:
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)
