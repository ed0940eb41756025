"""What the command-line scripts in training/ share: one-line errors, checked input files, safe output files.

Every script turns a bad argument or file into a `UsageError` before any long work starts; `run` writes it as
one line (`train.py: --num_beams must be at least 1, got 0`) and exits with 2, never with a traceback. Outputs
are written to a temporary file beside their destination and renamed over it when complete, so that a crash
never leaves a half-written file where a good one was.
"""

import argparse
import contextlib
import json
import logging
import os
import sys
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path

from huggingface_hub.errors import HFValidationError
from huggingface_hub.utils import validate_repo_id


class UsageError(ValueError):
    """A problem with the arguments or the files a script was given, found before its long work starts."""


class OneLineErrors:
    """Mixed into an argparse parser: a parse error becomes a UsageError (one line) instead of usage + message."""

    def error(self, message: str):
        raise UsageError(f"{message} (see --help)")


class ArgumentParser(OneLineErrors, argparse.ArgumentParser):
    """argparse.ArgumentParser whose errors are one line."""


def run(main: Callable[[list[str] | None], int | None], argv: list[str] | None = None) -> int:
    """Call `main(argv)`; a UsageError is printed as one line on stderr, with exit code 2. The libraries' own
    progress bars (loading weights, downloads) show only when stderr is a terminal: in a file or CI their carriage
    returns would make the log unreadable."""
    prog = Path(sys.argv[0]).name
    if not sys.stderr.isatty():
        from transformers.utils import logging as transformers_logging

        transformers_logging.disable_progress_bar()
    try:
        return main(argv) or 0
    except UsageError as error:
        with command_output(sys.stderr) as output:
            output.error(f"{prog}: {first_line(error)}")
        return 2


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


def first_line(error: BaseException) -> str:
    """The first non-empty line of an exception's message, or its type's name."""
    lines = [line.strip() for line in str(error).splitlines() if line.strip()]
    return lines[0] if lines else type(error).__name__


def at_least(name: str, value: float | None, lowest: float):
    """Raise a UsageError when `value` (a flag's value, None when not given) is below `lowest`."""
    if value is not None and value < lowest:
        raise UsageError(f"{name} must be at least {lowest}, got {value}")


def read_lines(path: str | os.PathLike, what: str = "file") -> list[str]:
    """The lines of a UTF-8 text file; a UsageError when it is missing, a folder, unreadable, not UTF-8 or empty."""
    path = Path(path)
    if not path.exists():
        raise UsageError(f"{what} {path} does not exist; check the path")
    if not path.is_file():
        raise UsageError(f"{what} {path} is not a file; pass a text file with one sentence per line")
    try:
        text = path.read_text(encoding="utf-8")
    except UnicodeDecodeError as error:
        line = path.read_bytes()[: error.start].count(b"\n") + 1
        raise UsageError(f"{what} {path} is not UTF-8 text (line {line}); convert it, e.g. with iconv -t utf-8") from None
    except OSError as error:
        raise UsageError(f"{what} {path} cannot be read: {error.strerror}") from None
    lines = text.splitlines()
    if not any(line.strip() for line in lines):
        raise UsageError(f"{what} {path} is empty; pass a file with one sentence per line")
    return lines


def read_json_object(path: str | os.PathLike, what: str = "file") -> dict:
    """A JSON file holding one object; a UsageError otherwise."""
    text = "\n".join(read_lines(path, what))
    try:
        value = json.loads(text)
    except json.JSONDecodeError as error:
        raise UsageError(f"{what} {path} is not valid JSON (line {error.lineno}: {error.msg})") from None
    if not isinstance(value, dict):
        raise UsageError(f"{what} {path} must hold a JSON object ({{\"flag\": value, ...}}), not {type(value).__name__}")
    return value


def check_output_file(path: str | os.PathLike, flag: str, inputs: tuple[str | os.PathLike | None, ...] = ()) -> Path:
    """A UsageError when an output file's path is a folder, its folder does not exist, or it is one of the inputs."""
    path = Path(path)
    if path.is_dir():
        raise UsageError(f"{flag} {path} is a folder; pass a file name, e.g. {path / 'output.txt'}")
    if not path.parent.is_dir():
        raise UsageError(f"{flag} {path}: the folder {path.parent} does not exist; create it first")
    for given in inputs:
        if given is not None and Path(given).exists() and path.exists() and path.samefile(given):
            raise UsageError(f"{flag} {path} is also an input file and would be overwritten; choose another name")
    return path


def check_output_folder(path: str | os.PathLike, flag: str) -> Path:
    """A UsageError when an output folder's path, or the nearest of its parents that exists, is a file."""
    path = Path(path)
    existing = next(folder for folder in (path, *path.absolute().parents) if folder.exists())
    if not existing.is_dir():
        raise UsageError(f"{flag} {path}: {existing} is a file, not a folder; pass a folder name")
    return path


@contextlib.contextmanager
def replaced_atomically(path: str | os.PathLike) -> Iterator[Path]:
    """A temporary path beside `path` to write to; when the block ends without error it is renamed over `path`
    (one atomic step), otherwise removed: `path` is either its old complete self or the new complete file."""
    path = Path(path)
    handle, temporary = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".partial", dir=path.parent)
    os.close(handle)
    try:
        yield Path(temporary)
        os.replace(temporary, path)
    finally:
        if os.path.exists(temporary):
            os.unlink(temporary)


def write_text_atomically(path: str | os.PathLike, text: str):
    """Write a UTF-8 text file so that a crash never leaves it half-written."""
    with replaced_atomically(path) as temporary:
        temporary.write_text(text, encoding="utf-8")


def load_pretrained(auto_class, name: str, flag: str, trust_remote_code: bool, **kwargs):
    """`auto_class.from_pretrained(name)` (AutoConfig, AutoTokenizer, AutoModelForSeq2SeqLM), with a UsageError
    naming the flag and the fix when the folder is missing, incomplete, or holds code the user did not allow."""
    if not Path(name).exists() and (in_a_local_folder(name) or not is_hub_id(name)):
        raise UsageError(f"{flag} {name} does not exist; pass a folder saved with save_pretrained or a Hub id")
    try:
        return auto_class.from_pretrained(name, trust_remote_code=trust_remote_code, **kwargs)
    except (OSError, ValueError, KeyError) as error:
        if "trust_remote_code" in str(error):
            raise UsageError(
                f"{flag} {name} holds Python code of its own (config.json's auto_map); read it, then pass "
                "--trust_remote_code to run it"
            ) from None
        raise UsageError(f"{flag} {name} cannot be loaded: {first_line(error)}") from None


def in_a_local_folder(name: str) -> bool:
    """Whether `name` names something inside an existing local folder (`runs/en-ja` with `runs/` here): a path,
    not a Hub id, even where it has the form of one."""
    return Path(name).parent != Path(".") and Path(name).parent.is_dir()


def is_hub_id(name: str) -> bool:
    """Whether `name` has the form of a Hub repository id (`name` or `owner/name`)."""
    try:
        validate_repo_id(name)
    except HFValidationError:
        return False
    return True


def check_generation_length(max_positions: int, max_new_tokens: int, flag: str):
    """A UsageError when a model cannot generate `max_new_tokens` tokens: the decoder is fed the start token and
    all but the last new token, each at a row of its positional table of `max_positions` rows."""
    if max_new_tokens > max_positions:
        raise UsageError(
            f"{flag} asks for {max_new_tokens} new tokens but the model generates at most {max_positions} "
            f"(its max_position_embeddings); lower {flag}"
        )


def check_device(device: str) -> str:
    """A UsageError for a device name torch does not know, or a GPU this machine does not have."""
    import torch

    try:
        kind = torch.device(device).type
    except (RuntimeError, ValueError):
        raise UsageError(f"--device {device!r} is not a device; pass cpu, cuda, cuda:1 or mps") from None
    available = {"cuda": torch.cuda.is_available(), "mps": torch.backends.mps.is_available()}.get(kind, kind == "cpu")
    if not available:
        raise UsageError(f"--device {device}: this machine has no {kind} device; pass --device cpu")
    return device


def load_translator(name: str, engine: str, trust_remote_code: bool, device: str = "cpu", flag: str = "--model"):
    """A translator of texts for the folder `name`: a saved model with transformers (`engine` "transformers"), or
    an export_ctranslate2 folder with CTranslate2; a UsageError in one line when it cannot be loaded."""
    check_device(device)
    if engine == "ctranslate2":
        try:
            from .serving import CTranslate2Translator

            return CTranslate2Translator(name, device=device)
        except (ImportError, ValueError, OSError, RuntimeError) as error:
            raise UsageError(f"--engine ctranslate2 {flag} {name}: {first_line(error)}") from None
    from transformers import AutoModelForSeq2SeqLM, AutoTokenizer

    from .evaluation import TransformersTranslator

    tokenizer = load_pretrained(AutoTokenizer, name, flag, trust_remote_code)
    model = load_pretrained(AutoModelForSeq2SeqLM, name, flag, trust_remote_code)
    return TransformersTranslator(model.to(device), tokenizer)


def engine_arguments(parser: argparse.ArgumentParser):
    """--engine and --device, for the scripts that translate."""
    parser.add_argument(
        "--engine",
        choices=["transformers", "ctranslate2"],
        default="transformers",
        help="ctranslate2: --model is a folder written by training/export_ctranslate2.py",
    )
    parser.add_argument("--device", default="cpu", help="cpu, cuda, cuda:1, mps")


def trust_remote_code_argument(parser: argparse.ArgumentParser):
    """--trust_remote_code, off by default as in transformers' own example scripts."""
    parser.add_argument(
        "--trust_remote_code",
        action="store_true",
        help="run the Python files of a model folder or Hub repository that is not this package's own "
        "(this package's folders load without it when it is installed)",
    )


__all__ = [
    "UsageError",
    "ArgumentParser",
    "OneLineErrors",
    "run",
    "first_line",
    "at_least",
    "read_lines",
    "read_json_object",
    "check_output_file",
    "check_output_folder",
    "replaced_atomically",
    "write_text_atomically",
    "trust_remote_code_argument",
    "load_pretrained",
    "check_generation_length",
    "check_device",
    "load_translator",
    "engine_arguments",
]
