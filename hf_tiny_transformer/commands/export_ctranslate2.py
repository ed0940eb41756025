"""Export a saved model to CTranslate2, the fast inference engine (float32, int8, bfloat16 weights).

    tiny-transformer export-ctranslate2 --model runs/en-ja/hub --output_dir runs/en-ja/ct2-int8 --quantization int8
    tiny-transformer translate --engine ctranslate2 --model runs/en-ja/ct2-int8 "I like green tea."

The folder gets the engine's model files, the model's tokenizer and generation config (beam size and length
penalty) and hf_tiny_transformer.json (which says it is a CTranslate2 export), written all or nothing; an existing
export there is replaced only with --overwrite. Needs the [serve] extra (ctranslate2).
"""

from ..errors import ArgumentParser
from .flags import export_arguments, export_model

QUANTIZATIONS = ("float32", "int8", "int8_float32", "bfloat16")


def parse_args(argv=None):
    parser = ArgumentParser(prog="tiny-transformer export-ctranslate2", description=__doc__.split("\n\n")[0])
    return export_arguments(parser, argv, QUANTIZATIONS, "the stored weights' type")


def exporter():
    """CTranslate2's exporter, once the engine is known to be installed."""
    from ..serving.ctranslate2 import ctranslate2, export_ctranslate2

    ctranslate2()
    return export_ctranslate2


def main(argv=None) -> int:
    return export_model(parse_args(argv), exporter)
