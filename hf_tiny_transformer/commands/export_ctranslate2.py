"""Export a saved model to CTranslate2, the fast inference engine (float32, int8, bfloat16 weights).

    tiny-transformer export-ctranslate2 --model runs/en-ja/hub --output_dir runs/en-ja/ct2-int8 --quantization int8
    tiny-transformer translate --engine ctranslate2 --model runs/en-ja/ct2-int8 "I like green tea."

The folder gets the engine's model files, the model's tokenizer and generation config (beam size and length
penalty), written all or nothing; an existing export there is replaced only with --overwrite. Needs the [serve]
extra (ctranslate2).
"""

from pathlib import Path

from ..errors import ArgumentParser, UsageError, about, first_line
from ..loading import load_model_folder
from .shared import check_output, trust_remote_code_argument

QUANTIZATIONS = ("float32", "int8", "int8_float32", "bfloat16")


def parse_args(argv=None):
    parser = ArgumentParser(prog="tiny-transformer export-ctranslate2", description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", required=True, help="a saved model folder of this package, e.g. runs/en-ja/hub")
    parser.add_argument("--output_dir", required=True, help="the folder for the export")
    parser.add_argument("--quantization", choices=QUANTIZATIONS, default="float32", help="the stored weights' type")
    parser.add_argument("--overwrite", action="store_true", help="replace an export already in --output_dir")
    trust_remote_code_argument(parser)
    args = parser.parse_args(argv)
    check_output(args.output_dir, kind="folder", flag="--output_dir", inputs=(args.model,), overwrite=args.overwrite)
    output_dir = Path(args.output_dir)
    if not args.overwrite and output_dir.is_dir() and any(output_dir.iterdir()):
        raise UsageError(
            f"--output_dir {output_dir} is not empty; pass --overwrite to replace it, or choose a new folder"
        )
    return args


def main(argv=None) -> int:
    args = parse_args(argv)
    try:
        from ..serving.ctranslate2 import ctranslate2, export_ctranslate2

        ctranslate2()
    except ImportError as error:
        raise UsageError(first_line(error)) from None
    with about("--model"):
        model, tokenizer = load_model_folder(args.model, args.trust_remote_code)
    try:
        folder = export_ctranslate2(model, tokenizer, args.output_dir, quantization=args.quantization)
    except ValueError as error:
        raise UsageError(first_line(error)) from None
    print(f"exported {args.model} to {folder} ({args.quantization} weights)")
    return 0
