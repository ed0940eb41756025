"""transformers' own implementation of the architecture, `MarianMTModel`, at the shape of a TinyTransformerConfig.

    from hf_tiny_transformer.marian import marian_of_the_same_shape
    marian = marian_of_the_same_shape(config)   # every size, token id and option set as in `config`

The benchmarks train and time it side by side with this package's model (benchmarks/).
"""

from transformers import MarianConfig, MarianMTModel

# Fields that mean the same in MarianConfig and TinyTransformerConfig.
MARIAN_FIELDS = (
    "vocab_size d_model encoder_layers decoder_layers encoder_attention_heads decoder_attention_heads "
    "encoder_ffn_dim decoder_ffn_dim dropout attention_dropout activation_dropout activation_function "
    "max_position_embeddings scale_embedding tie_word_embeddings init_std pad_token_id bos_token_id eos_token_id "
    "decoder_start_token_id"
).split()


def marian_config(config) -> MarianConfig:
    """A MarianConfig with every size, id and option of `config` (a TinyTransformerConfig)."""
    values = {name: getattr(config, name) for name in MARIAN_FIELDS}
    return MarianConfig(**values, share_encoder_decoder_embeddings=True, forced_eos_token_id=None)


def marian_of_the_same_shape(config) -> MarianMTModel:
    """A randomly initialized MarianMTModel of the shape of `config` (a TinyTransformerConfig)."""
    return MarianMTModel(marian_config(config))


__all__ = ["MARIAN_FIELDS", "marian_config", "marian_of_the_same_shape"]
