"""The package's config and models in transformers' Auto classes, so that `AutoConfig`, `AutoModel` and
`AutoModelForSeq2SeqLM` load this package's folders with its own classes, without running the folders' code.

    register_auto_classes()   # safe to repeat; the package's names do it when first used (hf_tiny_transformer.X)

(What a save writes for the Hub, the code files and config.json's `auto_map`, the classes name themselves:
their `_auto_class`.)
"""

import functools


@functools.cache
def register_auto_classes() -> None:
    """Register the config and the two models with the Auto classes."""
    from transformers import AutoConfig, AutoModel, AutoModelForSeq2SeqLM

    from .configuration_tiny_transformer import TinyTransformerConfig
    from .modeling_tiny_transformer import TinyTransformerForConditionalGeneration, TinyTransformerModel

    AutoConfig.register(TinyTransformerConfig.model_type, TinyTransformerConfig, exist_ok=True)
    AutoModel.register(TinyTransformerConfig, TinyTransformerModel, exist_ok=True)
    AutoModelForSeq2SeqLM.register(TinyTransformerConfig, TinyTransformerForConditionalGeneration, exist_ok=True)


__all__ = ["register_auto_classes"]
