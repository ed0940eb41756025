"""The flags several commands share, checked, and what they name: the translator (--engine, --model, --device,
--compute_type, the decoding settings), the text to score (--corpus_dir or files), and the export commands' flags.
"""

import argparse
import contextlib
from collections.abc import Callable, Iterable, Iterator

from ..errors import UsageError, about, first_line
from ..guards.outputs import check_output, inputs_of


def engine_arguments(parser: argparse.ArgumentParser):
    """--engine, --device, --compute_type and --trust_remote_code, for the commands that load a model to translate."""
    from ..serving.files import ENGINES

    parser.add_argument(
        "--engine",
        choices=list(ENGINES),
        help="ctranslate2, onnx: --model is a folder written by `tiny-transformer export-ctranslate2` or `export-onnx` "
        "(default: transformers)",
    )
    parser.add_argument("--device", help="cpu, cuda, cuda:1, mps (default: the best there is)")
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
    from ..guards.text_files import read_aligned

    if args.corpus_dir:
        return corpus_split(args.corpus_dir, split, args.source_lang, args.target_lang)
    if not (args.source_file and args.reference_file):
        raise UsageError("pass --corpus_dir, or --source_file and --reference_file")
    return read_aligned(args.source_file, args.reference_file, ("--source_file", "--reference_file"))


def corpus_split(corpus_dir: str, split: str, source_lang: str, target_lang: str) -> tuple[list[str], list[str]]:
    """`split`'s sources and references from a small_parallel_enja-style folder; a UsageError names --corpus_dir."""
    from ..data.corpus import read_parallel

    try:
        return read_parallel(corpus_dir, split, source_lang, target_lang)
    except (OSError, ValueError) as error:  # a missing file, not UTF-8, unequal sides, a language it lacks
        raise UsageError(f"--corpus_dir {corpus_dir}: {first_line(error)}") from None


def export_arguments(parser: argparse.ArgumentParser, argv, quantizations: Iterable[str], quantization_help: str):
    """The flags of the export commands (--model, --output_dir, --quantization, --overwrite, --trust_remote_code),
    parsed, with the output folder checked before any work: an export already there is replaced only with
    --overwrite, and a folder holding anything but an export not at all."""
    from ..serving.files import EXPORT_WRITES

    parser.add_argument("--model", required=True, help="a saved model folder of this package, e.g. runs/demo/hub")
    parser.add_argument("--output_dir", required=True, help="the folder for the export")
    parser.add_argument("--quantization", choices=list(quantizations), default="float32", help=quantization_help)
    parser.add_argument("--overwrite", action="store_true", help="replace an export already in --output_dir")
    trust_remote_code_argument(parser)
    args = parser.parse_args(argv)
    check_output_folder(args, EXPORT_WRITES)
    return args


def check_output_folder(args, writes: Iterable[str]) -> None:
    """--output_dir, a folder the command replaces whole, checked against its inputs and --overwrite before any
    work (guards.outputs)."""
    inputs = inputs_of(args, but=["output_dir"])
    check_output(
        args.output_dir,
        flag="--output_dir",
        kind="folder",
        inputs=inputs,
        writes=writes,
        replaces=True,
        overwrite=args.overwrite,
    )


def export_model(args, load_exporter: Callable[[], Callable]) -> int:
    """Load --model and write its export with the exporter `load_exporter()` returns (an ImportError, a missing
    extra, is one line), then say where it went."""
    from ..guards.loading import load_model_folder

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
    from ..hardware import best_device, check_device
    from ..serving.engines import load_translator

    args.engine = args.engine or "transformers"
    args.device = args.device or best_device(args.engine)
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
    "engine_arguments",
    "trust_remote_code_argument",
    "decoding_arguments",
    "decoding_settings",
    "scoring_arguments",
    "sources_and_references",
    "corpus_split",
    "export_arguments",
    "check_output_folder",
    "export_model",
    "decoding_limits",
    "load_translator_from",
]
