"""Export a saved model to ONNX, for onnxruntime (`--engine onnx`) and the browser page (transformers.js).

    tiny-transformer export-onnx --model runs/demo/hub --output_dir runs/demo/onnx --quantization int8
    tiny-transformer translate --engine onnx --model runs/demo/onnx "I like green tea."

The folder gets onnx/encoder_model.onnx and onnx/decoder_model_merged.onnx (with `_quantized` int8 variants with
--quantization int8), the model's tokenizer and generation config, a config.json transformers.js reads and
hf_tiny_transformer.json (which says it is an ONNX export), written all or nothing (hf_tiny_transformer.serving.onnx);
an existing export there is replaced only with --overwrite. Needs the [onnx] extra (onnx, onnxscript, onnxruntime).
"""

from ..errors import ArgumentParser
from .flags import export_arguments, export_model


def parse_args(argv=None):
    parser = ArgumentParser(prog="tiny-transformer export-onnx", description=__doc__.split("\n\n")[0])
    return export_arguments(parser, argv, ("float32", "int8"), "int8: the _quantized graphs beside float32's")


def exporter():
    """The ONNX exporter, once onnx, onnxscript and onnxruntime are known to be installed."""
    from ..serving.onnx import export_onnx, onnx_packages

    onnx_packages()
    return export_onnx


def main(argv=None) -> int:
    return export_model(parse_args(argv), exporter)
