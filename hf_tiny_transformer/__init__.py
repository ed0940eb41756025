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
from .corpus import detokenize_english, read_parallel, unsegment_japanese
from .hub import model_card, save_for_hub
from .marian import from_marian, to_marian
from .pipeline_tiny_transformer import TranslationPipeline
from .presets import load_preset, preset_names
from .tokenization_tiny_transformer import train_tokenizer

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
    "TranslationPipeline",
    "train_tokenizer",
    "load_preset",
    "preset_names",
    "model_card",
    "save_for_hub",
    "read_parallel",
    "unsegment_japanese",
    "detokenize_english",
    "to_marian",
    "from_marian",
]
