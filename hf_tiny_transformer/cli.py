"""What every command (scripts/, the demo page) shares: one-line errors, the output guard, the model folder loader.

Every command turns a bad argument, file or folder into a `UsageError` before any long work starts; `run` writes it
as one line (`train.py: --num_beams must be at least 1, got 0`) and exits with 2, never with a traceback.
"""

import argparse
import contextlib
import logging
import os
import re
import sys
import tempfile
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import Literal

from huggingface_hub.errors import HFValidationError
from huggingface_hub.utils import validate_repo_id

CHECKPOINT = re.compile(r"checkpoint-\d+")
StrPath = str | os.PathLike


class UsageError(ValueError):
    """A problem with the arguments or the files a command was given, found before its long work starts."""


class OneLineErrors:
    """Mixed into an argparse parser: a parse error becomes a UsageError (one line) instead of usage + message."""

    def error(self, message: str):
        raise UsageError(f"{message} (see --help)")


class ArgumentParser(OneLineErrors, argparse.ArgumentParser):
    """argparse.ArgumentParser whose errors are one line."""


def run(main: Callable[[list[str] | None], int | None], argv: list[str] | None = None) -> int:
    """Call `main(argv)`; a UsageError is written as one line on stderr, with exit code 2. The libraries' own
    progress bars (loading weights, downloads) show only when stderr is a terminal: in a file or CI their carriage
    returns would make the log unreadable."""
    prog = Path(sys.argv[0]).name
    if not sys.stderr.isatty():
        import datasets
        from transformers.utils import logging as transformers_logging

        transformers_logging.disable_progress_bar()
        datasets.disable_progress_bars()
    try:
        return main(argv) or 0
    except UsageError as error:
        with command_output(sys.stderr) as output:
            output.error(f"{prog}: {first_line(error)}")
        return 2
    except BrokenPipeError:  # the reader stopped reading (`| head`): nothing more to write
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0


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
    """The first non-empty line of an exception's message (with the next one when it ends with a colon, as
    `Validation error for field 'd_model':` does), or its type's name."""
    lines = [line.strip() for line in str(error).splitlines() if line.strip()]
    if len(lines) > 1 and lines[0].endswith(":"):
        return f"{lines[0]} {lines[1]}"
    return lines[0] if lines else type(error).__name__


def at_least(name: str, value: float | None, lowest: float):
    """Raise a UsageError when `value` (a flag's value, None when not given) is below `lowest`."""
    if value is not None and value < lowest:
        raise UsageError(f"{name} must be at least {lowest}, got {value}")


# ---------------------------------------------------------------------------------------------------------------
# The output guard: every command that writes checks its destination before any work
# ---------------------------------------------------------------------------------------------------------------


def _nearest_existing(path: Path) -> Path:
    """`path` if it exists, else its nearest existing parent."""
    return next(candidate for candidate in (path, *path.absolute().parents) if candidate.exists())


def _holds_model(folder: Path) -> bool:
    """Whether a folder holds a saved model (config.json, weights), Trainer checkpoints, or a training run's `hub`."""
    return (
        (folder / "config.json").exists()
        or (folder / "hub" / "config.json").exists()
        or any(folder.glob("model*.safetensors*"))
        or any(entry.is_dir() and CHECKPOINT.fullmatch(entry.name) for entry in folder.iterdir())
    )


def _can_create_file(folder: Path) -> bool:
    """Whether a file can be created in `folder`: os.access, then a real try (ACLs, read-only mounts)."""
    if not os.access(folder, os.W_OK | os.X_OK):
        return False
    try:
        with tempfile.NamedTemporaryFile(dir=folder, prefix=".write-check-"):
            return True
    except OSError:
        return False


def _place_problem(path: Path, kind: str) -> str | None:
    """What is wrong with where the output would go: the wrong kind, a missing folder, a parent that is a file."""
    existing = _nearest_existing(path)
    if existing != path and not existing.is_dir():
        return f": {existing} is a file, not a folder; pass a path inside a folder"
    if kind == "file" and path.is_dir():
        return f" is a folder; pass a file name, e.g. {path / 'output.txt'}"
    if kind == "folder" and path.exists() and not path.is_dir():
        return " is a file; pass a folder name"
    if kind == "file" and not path.parent.is_dir():
        return f": the folder {path.parent} does not exist; create it first (mkdir -p {path.parent})"
    return None


def _input_problem(path: Path, kind: str, inputs: Iterable[StrPath | None]) -> str | None:
    """Whether the output is an input, holds one, or lies inside an input folder (None and absent inputs skipped)."""
    target = path.resolve()
    for given in (Path(name) for name in inputs if name is not None and Path(name).exists()):
        source = given.resolve()
        if source == target or (path.exists() and path.samefile(given)):
            return f" is also an input ({given}) and would be overwritten; choose another {kind}"
        if target in source.parents:
            return f" holds the input {given}, which the save would replace; choose a {kind} outside it"
        if source in target.parents:
            return f" lies inside the input folder {given}, which is being read; choose a {kind} outside it"
    return None


def _overwrite_problem(path: Path, kind: str, overwrite_fix: str) -> str | None:
    """Whether the output folder already holds a model or checkpoints (an output file is simply replaced)."""
    if kind == "folder" and path.is_dir() and _holds_model(path):
        return f" already holds a model or checkpoints; {overwrite_fix}"
    return None


def _write_problem(path: Path, kind: str) -> str | None:
    """Whether the output cannot be written: its nearest existing folder, or the existing output, is read-only."""
    folder = _nearest_existing(path.absolute().parent)
    if not _can_create_file(folder):
        return f": cannot write in {folder} (permission denied); choose another place or chmod u+w it"
    if path.exists() and not os.access(path, os.W_OK):
        return f" is read-only; choose another {kind} or chmod u+w it"
    return None


def check_output(
    path: StrPath,
    *,
    kind: Literal["file", "folder"],
    flag: str,
    inputs: Iterable[StrPath | None] = (),
    overwrite: bool = False,
    overwrite_fix: str = "pass --overwrite to replace it, or choose another name",
) -> Path:
    """Check a command's output path before any work: a UsageError with one line naming `flag`, the problem and the
    fix (`--output_dir runs/x already holds a model or checkpoints; pass --overwrite to replace it, ...`) when the
    path is the wrong kind or in the wrong place, is, holds or lies inside one of `inputs`, already holds a model
    and `overwrite` is False, or cannot be written."""
    path = Path(path)
    problem = (
        _place_problem(path, kind)
        or _input_problem(path, kind, inputs)
        or (None if overwrite else _overwrite_problem(path, kind, overwrite_fix))
        or _write_problem(path, kind)
    )
    if problem:
        raise UsageError(f"{flag} {path}{problem}")
    return path


# ---------------------------------------------------------------------------------------------------------------
# Reading a model folder: one way for every command
# ---------------------------------------------------------------------------------------------------------------


def load_model_folder(name: str, flag: str = "--model", trust_remote_code: bool = False, **model_kwargs):
    """The model and tokenizer saved in folder (or Hub repository) `name`: a UsageError in one line naming the
    folder, the file and the fix for anything that stops them loading (a missing or damaged file, a config value
    of the wrong type, code the user did not allow), and for weights that miss or add tensors (the library would
    initialize missing ones at random and only warn)."""
    from transformers import AutoConfig, AutoModelForSeq2SeqLM, AutoTokenizer

    check_model_source(name, flag)
    with quiet_transformers():
        config = load_part(AutoConfig, name, flag, "config.json", trust_remote_code)
        tokenizer = load_part(AutoTokenizer, name, flag, "tokenizer.json", trust_remote_code)
        model, info = load_part(
            AutoModelForSeq2SeqLM, name, flag, "model.safetensors", trust_remote_code,
            config=config, output_loading_info=True, ignore_mismatched_sizes=True, **model_kwargs,
        )  # fmt: skip
    wrong = {kind: sorted(map(describe_key, info[f"{kind}_keys"])) for kind in ("missing", "unexpected", "mismatched")}
    listed = "; ".join(
        f"{kind}: {', '.join(keys[:3])}{' ...' if len(keys) > 3 else ''}" for kind, keys in wrong.items() if keys
    )
    if listed:
        raise UsageError(f"{flag} {name}: model.safetensors does not fit config.json ({listed}); save the model again")
    return model, tokenizer


def describe_key(key) -> str:
    """A tensor's name, or for a tensor of the wrong shape (name, saved shape, expected shape) a readable line."""
    if isinstance(key, tuple):
        name, saved, expected = key
        return f"{name} {tuple(saved)} saved, {tuple(expected)} expected"
    return key


def check_model_source(name: str, flag: str):
    """A local path that does not exist is an error at once (not a Hub lookup with retries): a name that is not a
    Hub id, or one inside an existing local folder (`runs/en-ja` with `runs/` here)."""
    in_a_local_folder = Path(name).parent != Path(".") and Path(name).parent.is_dir()
    if not Path(name).exists() and (in_a_local_folder or not is_hub_id(name)):
        raise UsageError(f"{flag} {name} does not exist; pass a folder saved with save_pretrained, or a Hub id")
    if Path(name).is_file():
        raise UsageError(f"{flag} {name} is a file; pass the model folder that holds it")
    if Path(name).is_dir() and not (Path(name) / "config.json").is_file():
        raise UsageError(f"{flag} {name} has no config.json; pass a folder saved with save_pretrained")


def load_part(auto_class, name: str, flag: str, file: str, trust_remote_code: bool, **kwargs):
    """`auto_class.from_pretrained(name, ...)`, any error turned into a UsageError that names `file`."""
    try:
        return auto_class.from_pretrained(name, trust_remote_code=trust_remote_code, **kwargs)
    except Exception as error:  # the libraries raise many kinds; each is one line for the user
        if "trust_remote_code" in str(error):
            raise UsageError(
                f"{flag} {name} holds Python code of its own (config.json's auto_map); read it, then pass "
                "--trust_remote_code to run it"
            ) from None
        raise UsageError(
            f"{flag} {name}: {file} cannot be loaded ({first_line(error)}); save the model again or copy the folder anew"
        ) from None


@contextlib.contextmanager
def quiet_transformers():
    """transformers' warnings (its load report) silenced while a block runs: a command reports problems itself."""
    from transformers.utils import logging as transformers_logging

    level = transformers_logging.get_verbosity()
    transformers_logging.set_verbosity_error()
    try:
        yield
    finally:
        transformers_logging.set_verbosity(level)


def is_hub_id(name: str) -> bool:
    """Whether `name` has the form of a Hub repository id (`name` or `owner/name`)."""
    try:
        validate_repo_id(name)
    except HFValidationError:
        return False
    return True


# ---------------------------------------------------------------------------------------------------------------
# Flags that several commands share
# ---------------------------------------------------------------------------------------------------------------


def engine_arguments(parser: argparse.ArgumentParser):
    """--engine, --device, --compute_type and --trust_remote_code, for the commands that load a model to translate."""
    from .hardware import best_device

    parser.add_argument(
        "--engine",
        choices=["transformers", "ctranslate2"],
        default="transformers",
        help="ctranslate2: --model is a folder written by scripts/export_ctranslate2.py",
    )
    parser.add_argument("--device", default=best_device(), help="cpu, cuda, cuda:1, mps (default: the best there is)")
    parser.add_argument(
        "--compute_type",
        default="auto",
        help="with --engine ctranslate2: int8, float32, bfloat16, ... (default auto: the fastest this machine runs "
        "within 0.5 BLEU of float32, int8 on x86 CPUs)",
    )
    trust_remote_code_argument(parser)


def trust_remote_code_argument(parser: argparse.ArgumentParser):
    """--trust_remote_code, off by default as in transformers' own example scripts."""
    parser.add_argument(
        "--trust_remote_code",
        action="store_true",
        help="run the Python files of a model folder or Hub repository that is not this package's own "
        "(this package's folders load without it when it is installed)",
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


__all__ = [
    "UsageError",
    "ArgumentParser",
    "OneLineErrors",
    "run",
    "command_output",
    "first_line",
    "at_least",
    "check_output",
    "load_model_folder",
    "engine_arguments",
    "trust_remote_code_argument",
    "check_device",
]
