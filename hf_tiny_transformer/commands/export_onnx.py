"""Export a saved model to ONNX, for onnxruntime (`--engine onnx`) and the browser page (transformers.js).

    tiny-transformer export-onnx --model runs/demo/hub --output_dir runs/demo/onnx --quantization int8
    tiny-transformer translate --engine onnx --model runs/demo/onnx "I like green tea."

The folder gets onnx/encoder_model.onnx and onnx/decoder_model_merged.onnx (with `_quantized` int8 variants with
--quantization int8), the model's tokenizer and generation config and a config.json transformers.js reads, written
all or nothing (hf_tiny_transformer.serving.onnx); an existing export there is replaced only with --overwrite.
Needs the [onnx] extra (onnx, onnxscript, onnxruntime).
"""

from pathlib import Path

from ..errors import ArgumentParser, UsageError, about, first_line
from ..loading import load_model_folder
from .shared import check_output, trust_remote_code_argument


def parse_args(argv=None):
    parser = ArgumentParser(prog="tiny-transformer export-onnx", description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", required=True, help="a saved model folder of this package, e.g. runs/demo/hub")
    parser.add_argument("--output_dir", required=True, help="the folder for the export")
    parser.add_argument(
        "--quantization", choices=["float32", "int8"], default="float32", help="int8: add the _quantized graphs"
    )
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
        from ..serving.onnx import export_onnx, onnx_packages

        onnx_packages()
    except ImportError as error:
        raise UsageError(first_line(error)) from None
    with about("--model"):
        model, tokenizer = load_model_folder(args.model, args.trust_remote_code)
    try:
        folder = export_onnx(model, tokenizer, args.output_dir, quantization=args.quantization)
    except ValueError as error:
        raise UsageError(first_line(error)) from None
    print(f"exported {args.model} to {folder} ({args.quantization})")
    return 0
