"""What every command shares (the `tiny-transformer` subcommands and the training scripts): the runner that turns
a UsageError into one line and exit status 2, Ctrl-C into one line and 130, and a full disk into one line naming
the output and 1; the output guard every command that writes runs before any work; and the flags several commands
take.
"""

import argparse
import contextlib
import contextvars
import errno
import logging
import os
import re
import signal
import statistics
import sys
import tempfile
import threading
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import Literal

from ..errors import UsageError, about, first_line, is_rust_panic

CHECKPOINT = re.compile(r"checkpoint-\d+")
StrPath = str | os.PathLike
FULL_DISK = {errno.ENOSPC: "no space is left on its disk", errno.EDQUOT: "your disk quota there is used up"}
# The outputs the running command has checked (check_output), `--flag path` each: what a full disk is reported
# against, since a write's error names no file.
_checked_outputs: contextvars.ContextVar[list[str] | None] = contextvars.ContextVar("checked_outputs", default=None)


def run(main: Callable[[list[str] | None], int | None], argv: list[str] | None = None, prog: str | None = None) -> int:
    """Call `main(argv)` and return its exit status. A UsageError is written as one line on stderr (`prog: the
    problem; the fix`), exit status 2; Ctrl-C anywhere in it, the imports it makes included, as `prog: interrupted`,
    130; a full disk or quota while writing as one line naming the output, 1; a Rust library's panic (a tokenizer's
    regex that fails on the text) as one line after the panic's own, 1. The libraries' own progress bars
    (loading weights, downloads) show only when stderr is a terminal: in a file or CI their carriage returns would
    make the log unreadable."""
    prog = prog or Path(sys.argv[0]).name
    this_run = _checked_outputs.set([])
    try:
        _interrupt_as_an_exception()
        if not sys.stderr.isatty():
            _hide_progress_bars()
        return main(argv) or 0
    except UsageError as error:
        return _failed(prog, first_line(error), 2)
    except KeyboardInterrupt:
        return _failed(prog, "interrupted", 130)
    except BrokenPipeError:  # the reader stopped reading (`| head`): nothing more to write
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0
    except OSError as error:
        if error.errno not in FULL_DISK:
            raise
        return _failed(prog, _full_disk_problem(error), 1)
    except BaseException as error:
        if not is_rust_panic(error):
            raise
        return _failed(prog, _panic_problem(error), 1)
    finally:
        _checked_outputs.reset(this_run)


def _interrupt_as_an_exception():
    """Ctrl-C raises KeyboardInterrupt (Python's default), so that saves in progress clean up and the runner reports
    it: a training script ends on it without a word while its libraries import (see its first lines). Where it is
    ignored (a background job of a script) it stays ignored; only the main thread may set a handler."""
    if threading.current_thread() is threading.main_thread() and signal.getsignal(signal.SIGINT) != signal.SIG_IGN:
        signal.signal(signal.SIGINT, signal.default_int_handler)


def _hide_progress_bars():
    """The libraries' progress bars off (a run whose stderr is a file or a pipe)."""
    import datasets
    from transformers.utils import logging as transformers_logging

    transformers_logging.disable_progress_bar()
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


def _full_disk_problem(error: OSError) -> str:
    """A full disk or quota, said of the outputs the command checked, else of the file the error names, else of the
    command's output (standard output, redirected to a file)."""
    if place := ", ".join(_checked_outputs.get() or []) or error.filename:
        return f"{place}: {FULL_DISK[error.errno]}; free space there or choose another place"
    return f"writing its output: {FULL_DISK[error.errno]}; free space there or write the output elsewhere"


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
        with tempfile.TemporaryFile(dir=folder, prefix=".write-check-"):  # no name where O_TMPFILE works: no leftover
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
    and `overwrite` is False, or cannot be written. Under run(), a path that passes is what a full disk is reported
    against."""
    path = Path(path)
    problem = (
        _place_problem(path, kind)
        or _input_problem(path, kind, inputs)
        or (None if overwrite else _overwrite_problem(path, kind, overwrite_fix))
        or _write_problem(path, kind)
    )
    if problem:
        raise UsageError(f"{flag} {path}{problem}")
    if (outputs := _checked_outputs.get()) is not None:
        outputs.append(f"{flag} {path}")
    return path


def check_report(path: StrPath, *, flag: str = "--output") -> Path:
    """A benchmark's report file checked before the work, as check_output checks a file, except that the folders
    above it are made first where they can be (a report goes under runs/, which a fresh clone lacks); where they
    cannot (a file on the way, no permission), check_output names the problem."""
    path = Path(path)
    with contextlib.suppress(OSError):
        path.parent.mkdir(parents=True, exist_ok=True)
    return check_output(path, kind="file", flag=flag)


# ---------------------------------------------------------------------------------------------------------------
# Flags that several commands share
# ---------------------------------------------------------------------------------------------------------------


def engine_arguments(parser: argparse.ArgumentParser):
    """--engine, --device, --compute_type and --trust_remote_code, for the commands that load a model to translate."""
    from ..hardware import best_device
    from ..serving.engines import ENGINES

    parser.add_argument(
        "--engine",
        choices=list(ENGINES),
        default="transformers",
        help="ctranslate2, onnx: --model is a folder written by `tiny-transformer export-ctranslate2` or `export-onnx`",
    )
    parser.add_argument("--device", default=best_device(), help="cpu, cuda, cuda:1, mps (default: the best there is)")
    parser.add_argument(
        "--compute_type",
        default="auto",
        help="with --engine ctranslate2: int8, float32, bfloat16, ... (default auto: the fastest this machine runs "
        "within 0.5 BLEU of float32, int8 on x86 CPUs); with --engine onnx: float32 or int8 (auto: int8 where the "
        "export has it)",
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


def decoding_arguments(parser: argparse.ArgumentParser, batch_size_help: str):
    """--num_beams, --length_penalty, --max_new_tokens and --batch_size, for the commands that translate."""
    parser.add_argument("--num_beams", type=int, help="beam size; default: the model's generation config")
    parser.add_argument(
        "--length_penalty", type=float, help="beam search's length penalty; default: the generation config"
    )
    parser.add_argument(
        "--max_new_tokens", type=int, help="longest translation of a piece; default: twice the source, plus 10"
    )
    parser.add_argument("--batch_size", type=int, default=32, help=batch_size_help)


def decoding_settings(args) -> dict:
    """decoding_arguments' values, checked, as the keywords of a translator's translate()."""
    from ..text_tiny_transformer import generation_settings

    try:
        return generation_settings(
            num_beams=args.num_beams,
            length_penalty=args.length_penalty,
            max_new_tokens=args.max_new_tokens,
            batch_size=args.batch_size,
        )
    except ValueError as error:
        raise UsageError(f"--{first_line(error)}") from None


def scoring_arguments(parser: argparse.ArgumentParser, split_help: str):
    """The text a script translates and scores: a corpus folder's split, or a source file and its references."""
    parser.add_argument("--corpus_dir", help=f"a small_parallel_enja-style folder, as natural text: {split_help}")
    parser.add_argument("--source_file", help="instead: one source sentence (or paragraph) per line")
    parser.add_argument("--reference_file", help="and one reference translation per line")
    parser.add_argument("--source_lang", default="en")
    parser.add_argument("--target_lang", default="ja")


def sources_and_references(args, split: str) -> tuple[list[str], list[str]]:
    """The sources and references that scoring_arguments' flags name (`split` of --corpus_dir), checked."""
    from ..data.files import read_aligned

    if args.corpus_dir:
        return corpus_split(args.corpus_dir, split, args.source_lang, args.target_lang)
    if not (args.source_file and args.reference_file):
        raise UsageError("pass --corpus_dir, or --source_file and --reference_file")
    return read_aligned(args.source_file, args.reference_file, ("--source_file", "--reference_file"))


def pair_arguments(parser: argparse.ArgumentParser, split_help: str, pair_help: str):
    """The benchmarks' paired comparisons (paired_bleu.py, paired_loss.py): the test set (scoring_arguments' flags
    and --split) and --pair BASELINE SYSTEM, repeated."""
    scoring_arguments(parser, split_help)
    parser.add_argument("--split", default="test", choices=["train", "dev", "test"], help="with --corpus_dir")
    parser.add_argument(
        "--pair", nargs=2, action="append", required=True, metavar=("BASELINE", "SYSTEM"), help=pair_help
    )


def paired_summary(differences: list[float], unit: str, decimals: int) -> tuple[dict, str]:
    """The pairs' count, their mean difference and (from two pairs) its standard error, and the line that says
    them in `unit`: 'mean difference over 7 pair(s): +0.44 BLEU ± 0.25 (standard error)'."""
    summary = {"pairs": len(differences), "mean_difference": statistics.fmean(differences)}
    if len(differences) > 1:
        summary["standard_error"] = statistics.stdev(differences) / len(differences) ** 0.5
    spread = f" ± {summary['standard_error']:.{decimals}f} (standard error)" if "standard_error" in summary else ""
    mean = f"{summary['mean_difference']:+.{decimals}f}"
    return summary, f"mean difference over {len(differences)} pair(s): {mean} {unit}{spread}"


def corpus_split(corpus_dir: str, split: str, source_lang: str, target_lang: str) -> tuple[list[str], list[str]]:
    """`split`'s sources and references from a small_parallel_enja-style folder; a UsageError names --corpus_dir."""
    from ..data.corpus import read_parallel

    try:
        return read_parallel(corpus_dir, split, source_lang, target_lang)
    except (OSError, ValueError) as error:  # a missing file, not UTF-8, unequal sides, a language it lacks
        raise UsageError(f"--corpus_dir {corpus_dir}: {first_line(error)}") from None


def check_saved_tokenizer(folder: str | None):
    """A UsageError where --tokenizer names a folder without tokenizer.json (None: none given, nothing to check)."""
    if folder and not (Path(folder) / "tokenizer.json").is_file():
        raise UsageError(f"--tokenizer {folder} holds no tokenizer.json; pass a saved tokenizer's folder")


def export_arguments(parser: argparse.ArgumentParser, argv, quantizations: Iterable[str], quantization_help: str):
    """The flags of the export commands (--model, --output_dir, --quantization, --overwrite, --trust_remote_code),
    parsed, with the output folder checked before any work: an export already there is replaced only with
    --overwrite."""
    parser.add_argument("--model", required=True, help="a saved model folder of this package, e.g. runs/demo/hub")
    parser.add_argument("--output_dir", required=True, help="the folder for the export")
    parser.add_argument("--quantization", choices=list(quantizations), default="float32", help=quantization_help)
    parser.add_argument("--overwrite", action="store_true", help="replace an export already in --output_dir")
    trust_remote_code_argument(parser)
    args = parser.parse_args(argv)
    check_output_folder(args)
    return args


def check_output_folder(args) -> None:
    """--output_dir checked against --model and --overwrite before any work: a folder that holds anything is
    replaced only with --overwrite."""
    check_output(args.output_dir, kind="folder", flag="--output_dir", inputs=(args.model,), overwrite=args.overwrite)
    output_dir = Path(args.output_dir)
    if not args.overwrite and output_dir.is_dir() and any(output_dir.iterdir()):
        raise UsageError(
            f"--output_dir {output_dir} is not empty; pass --overwrite to replace it, or choose a new folder"
        )


def export_model(args, load_exporter: Callable[[], Callable]) -> int:
    """Load --model and write its export with the exporter `load_exporter()` returns (an ImportError, a missing
    extra, is one line), then say where it went."""
    from ..loading import load_model_folder

    try:
        export = load_exporter()
    except ImportError as error:
        raise UsageError(first_line(error)) from None
    with about("--model"):
        model, tokenizer = load_model_folder(args.model, args.trust_remote_code)
    try:
        folder = export(model, tokenizer, args.output_dir, quantization=args.quantization)
    except ValueError as error:
        raise UsageError(first_line(error)) from None
    print(f"exported {args.model} to {folder} ({args.quantization} weights)")
    return 0


@contextlib.contextmanager
def decoding_limits() -> Iterator[None]:
    """A translator's DoesNotFit (beams that would not fit in memory) as a UsageError naming the flag."""
    from ..serving.translator import DoesNotFit

    try:
        yield
    except DoesNotFit as error:
        raise UsageError(f"--{error}") from None


def load_translator_from(args, flag: str = "--model"):
    """The translator that --engine, --model, --device, --compute_type and --trust_remote_code describe; every
    problem is one line naming its flag."""
    from ..hardware import check_device
    from ..serving.engines import load_translator

    with about("--device"):
        check_device(args.device)
    if args.engine == "transformers" and args.compute_type != "auto":
        raise UsageError(
            f"--compute_type {args.compute_type} applies to the exports (--engine ctranslate2 or onnx); the "
            "transformers engine computes in the model's dtype (leave --compute_type out, or translate with an export)"
        )
    folder = getattr(args, flag.lstrip("-"))
    with about(flag if args.engine == "transformers" else f"--engine {args.engine} {flag}"):
        translator = load_translator(
            folder, args.engine, args.device, args.trust_remote_code, compute_type=args.compute_type
        )
        if getattr(args, "num_beams", ()) is None:  # the model's own beams will be used
            check_own_beams_fit(folder, translator)
    return translator


def check_own_beams_fit(folder: str, translator):
    """The beams of the model's generation_config.json, checked to fit one sentence in memory before any work, in
    a line that names that file (the check at translation would name --num_beams, which the user did not pass)."""
    from ..serving.translator import DoesNotFit

    try:
        translator.check_fits(None, 1)
    except DoesNotFit as error:
        raise UsageError(f"{folder}: generation_config.json's {error}; fix it there, or pass --num_beams") from None


__all__ = [
    "run",
    "command_output",
    "check_output",
    "engine_arguments",
    "trust_remote_code_argument",
    "decoding_arguments",
    "decoding_settings",
    "scoring_arguments",
    "sources_and_references",
    "pair_arguments",
    "paired_summary",
    "corpus_split",
    "check_saved_tokenizer",
    "export_arguments",
    "export_model",
    "load_translator_from",
    "decoding_limits",
]
