"""The engines a saved model translates with, behind one translator interface (serving.translator.Translator).

from hf_tiny_transformer.serving.engines import load_translator
translator = load_translator("runs/en-ja/hub")                                   # transformers
translator = load_translator("runs/en-ja/ct2-int8", engine="ctranslate2")        # an export_ctranslate2 folder
"""

from ..errors import UsageError, first_line
from ..guards.loading import load_model_folder
from ..hardware import check_device
from .files import ENGINES
from .translator import TransformersTranslator, Translator


def load_translator(
    folder: str,
    engine: str = "transformers",
    device: str = "cpu",
    trust_remote_code: bool = False,
    compute_type: str = "auto",
) -> Translator:
    """A translator for `folder` with `engine` (one of ENGINES; the exports compute in `compute_type`); a
    UsageError in one line, naming the folder, when it cannot be loaded, or the engine or the device is not there."""
    if engine not in ENGINES:
        raise UsageError(f"{folder}: engine {engine!r} is not one of {', '.join(ENGINES)}")
    check_device(device)
    if engine != "transformers":
        if engine == "ctranslate2":
            from .ctranslate2 import CTranslate2Translator as EngineTranslator
        else:
            from .onnx import OnnxTranslator as EngineTranslator
        try:
            return EngineTranslator(folder, device=device, compute_type=compute_type)
        except (ImportError, ValueError, OSError, RuntimeError) as error:
            raise UsageError(f"{folder}: {first_line(error)}") from None
    model, tokenizer = load_model_folder(folder, trust_remote_code)
    return TransformersTranslator(model.to(device), tokenizer)


__all__ = ["ENGINES", "load_translator"]
