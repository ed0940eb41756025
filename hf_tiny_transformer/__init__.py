"""The encoder-decoder Transformer of "Attention Is All You Need" as a Hugging Face transformers model.

Importing the package registers the config and models with the Auto classes (safe to repeat).
"""

from transformers import AutoConfig, AutoModel, AutoModelForSeq2SeqLM

from .configuration_tiny_transformer import TinyTransformerConfig
from .modeling_tiny_transformer import (
    TinyTransformerForConditionalGeneration,
    TinyTransformerModel,
    TinyTransformerPreTrainedModel,
)
from .presets import load_preset, preset_names

AutoConfig.register(TinyTransformerConfig.model_type, TinyTransformerConfig, exist_ok=True)
AutoModel.register(TinyTransformerConfig, TinyTransformerModel, exist_ok=True)
AutoModelForSeq2SeqLM.register(TinyTransformerConfig, TinyTransformerForConditionalGeneration, exist_ok=True)
# For the Hub: save_pretrained copies the code files into the folder and writes `auto_map` into config.json.
TinyTransformerConfig.register_for_auto_class()
TinyTransformerModel.register_for_auto_class("AutoModel")
TinyTransformerForConditionalGeneration.register_for_auto_class("AutoModelForSeq2SeqLM")

__all__ = [
    "TinyTransformerConfig",
    "TinyTransformerPreTrainedModel",
    "TinyTransformerModel",
    "TinyTransformerForConditionalGeneration",
    "load_preset",
    "preset_names",
]
