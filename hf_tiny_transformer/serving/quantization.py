"""Dynamic int8 quantization of a model in PyTorch, with torchao (the [quantize] extra): every nn.Linear gets int8
weights, and its input is quantized to int8 as it comes; embeddings and LayerNorms stay as they are.

    model = quantize_int8(AutoModelForSeq2SeqLM.from_pretrained("runs/demo/hub"))   # in place; returns the model

torchao's `quantize_(model, Int8DynamicActivationInt8WeightConfig())` is the successor of the deprecated
`torch.ao.quantization.quantize_dynamic(model, {nn.Linear})`. Its speed and its cost in BLEU on the demo model are
in benchmarks/README.md (`benchmarks/quantization.py`); CTranslate2's int8 (serving.ctranslate2) is the faster way
to serve.
"""

from torch import nn


def torchao():
    """The torchao module, or an ImportError that says how to install it."""
    try:
        import torchao
    except ImportError as error:
        raise ImportError(
            "int8 quantization in PyTorch needs torchao: pip install 'hf-tiny-transformer[quantize]'."
        ) from error
    return torchao


def quantize_int8(model: nn.Module) -> nn.Module:
    """Quantize every nn.Linear of `model` in place (int8 weights, dynamically quantized int8 activations)."""
    torchao()
    from torchao.quantization import Int8DynamicActivationInt8WeightConfig, quantize_

    quantize_(model, Int8DynamicActivationInt8WeightConfig())
    return model


def int8_linear_layers(model: nn.Module) -> int:
    """How many nn.Linear layers of `model` hold int8 weights."""
    return sum(isinstance(module, nn.Linear) and "Int8" in type(module.weight).__name__ for module in model.modules())


__all__ = ["quantize_int8", "int8_linear_layers"]
