"""The engines a saved model translates with, behind one translator interface (serving.translator.Translator).

from hf_tiny_transformer.serving.engines import load_translator
translator = load_translator("runs/en-ja/hub")                                   # transformers
translator = load_translator("runs/en-ja/ct2-int8", engine="ctranslate2")        # an export_ctranslate2 folder
"""

import importlib.util
from pathlib import Path

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


# The models that ship with the project: its clone's models/ (what `make` installs the package from, editable).
SHIPPED = Path(__file__).resolve().parents[2] / "models"


DIRECTIONS = ("en-ja", "ja-en")


def direction_of(text: str) -> str:
    """The shipped direction for `text`: ja -> en for a text in Japanese script, else en -> ja."""
    from ..text_tiny_transformer import guess_language

    return "ja-en" if guess_language(text) == "ja" else "en-ja"


def shipped_model(direction: str, engine: str | None = None) -> tuple[str, str]:
    """(folder, engine) of the shipped model of `direction` (one of DIRECTIONS): its CTranslate2 int8 export where
    ctranslate2 is installed (or `engine` asks for it), else the model folder. A UsageError where the project's
    models are not there (an installed package without its clone)."""
    if engine is None:
        engine = "ctranslate2" if importlib.util.find_spec("ctranslate2") else "transformers"
    folder = SHIPPED / (f"{direction}-ctranslate2" if engine == "ctranslate2" else direction)
    if engine == "onnx" or not folder.is_dir():
        raise UsageError(
            f"no shipped model for {direction} with the {engine} engine here ({folder}); pass --model (a folder saved "
            "with save_pretrained, or an export), or translate from a clone of the project, which has them in models/"
        )
    return str(folder), engine


__all__ = ["ENGINES", "SHIPPED", "DIRECTIONS", "load_translator", "shipped_model", "direction_of"]
