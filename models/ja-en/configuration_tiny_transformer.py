"""Configuration of the encoder-decoder Transformer of "Attention Is All You Need" (Vaswani et al., 2017)."""

from dataclasses import field
from typing import TYPE_CHECKING

from huggingface_hub.dataclasses import strict, validated_field
from transformers import PretrainedConfig

if TYPE_CHECKING:
    # The translation pipeline, which config.json names in `custom_pipelines` (pipeline("translation", ...) finds
    # the task only there: transformers 5 has none of its own). save_pretrained copies the files this module imports
    # by reading its source, so this line puts the pipeline's file (and the text handling it imports) beside the
    # configuration, as loading the pipeline needs, without loading transformers' pipeline machinery with the model.
    from .pipeline_tiny_transformer import TranslationPipeline  # noqa: F401

ACTIVATIONS = ("relu", "gelu", "gelu_new", "silu", "swish")


def positive(value: int):
    if value <= 0:
        raise ValueError(f"must be a positive integer, got {value}.")


def probability(value: float):
    if not 0.0 <= value < 1.0:
        raise ValueError(f"must be in [0, 1), got {value}.")


def known_activation(value: str):
    if value not in ACTIVATIONS:
        raise ValueError(f"must be one of {', '.join(ACTIVATIONS)}, got {value!r}.")


def base_model_in_auto_map() -> dict:
    """The config's `auto_map` before a save adds the saved classes' own entries: AutoModel loads the base model
    from any saved folder as remote code (the library writes only the saved class's entry)."""
    return {"AutoModel": "modeling_tiny_transformer.TinyTransformerModel"}


def translation_pipeline() -> dict:
    """The config's `custom_pipelines`: the task "translation", implemented by `TranslationPipeline`."""
    implementation = "pipeline_tiny_transformer.TranslationPipeline"
    return {"translation": {"impl": implementation, "pt": ["AutoModelForSeq2SeqLM"], "type": "text"}}


@strict
class TinyTransformerConfig(PretrainedConfig):
    r"""
    The defaults are the paper's base model (Table 3, row "base"): d_model 512, 6 + 6 layers, 8 heads,
    feed-forward 2048, dropout 0.1, embeddings scaled by sqrt(d_model) and shared with the pre-softmax
    projection. Every value is checked when the config is made and whenever a field is set; the checks across
    fields (heads dividing d_model, token ids inside the vocabulary) when it is made and when it is saved.

    Args:
        vocab_size: size of the one vocabulary shared by source and target.
        d_model: width of every sub-layer output and of the embeddings (the paper's d_model).
        encoder_layers / decoder_layers: number of layers in each stack (the paper's N).
        encoder_attention_heads / decoder_attention_heads: number of heads (the paper's h);
            each head has d_k = d_v = d_model / h.
        encoder_ffn_dim / decoder_ffn_dim: inner width of the position-wise feed-forward network (d_ff).
        dropout: dropout on the embeddings and on every sub-layer output (the paper's P_drop).
        attention_dropout: dropout on the attention weights (not in the paper; 0 by default).
        activation_dropout: dropout after the feed-forward activation (not in the paper; 0 by default).
        activation_function: activation of the feed-forward network (the paper uses "relu").
        max_position_embeddings: number of positions in the sinusoidal table, i.e. the longest sequence.
        scale_embedding: multiply the token embeddings by sqrt(d_model) (paper section 3.4).
        tie_word_embeddings: share one matrix between encoder input, decoder input and pre-softmax
            projection (paper section 3.4).
        layer_norm_eps: epsilon of every LayerNorm.
        normalize_before: False is the paper's post-LN, LayerNorm(x + Sublayer(x)); True is pre-LN,
            x + Sublayer(LayerNorm(x)), with a final LayerNorm on each stack.
        init_std: standard deviation of the normal initialization of linear layers and embeddings.
        custom_pipelines: the pipeline tasks of this model, read by `transformers.pipeline`: "translation",
            implemented by `TranslationPipeline` (pipeline_tiny_transformer.py, saved with the model).
        auto_map: the Auto classes' entries for remote code; `save_pretrained` adds those of the saved classes to
            the base model's (AutoModel).

    Example:
        >>> from hf_tiny_transformer import TinyTransformerConfig, TinyTransformerForConditionalGeneration
        >>> config = TinyTransformerConfig(vocab_size=8000, d_model=256, encoder_layers=3, decoder_layers=3)
        >>> model = TinyTransformerForConditionalGeneration(config)
    """

    model_type = "tiny_transformer"
    _auto_class = "AutoConfig"  # save_pretrained copies this file (and what it imports) and names it in auto_map
    keys_to_ignore_at_inference = ["cache"]
    attribute_map = {
        "hidden_size": "d_model",
        "num_attention_heads": "encoder_attention_heads",
        "num_hidden_layers": "encoder_layers",
    }

    vocab_size: int = validated_field(positive, default=37000)
    d_model: int = validated_field(positive, default=512)
    encoder_layers: int = validated_field(positive, default=6)
    decoder_layers: int = validated_field(positive, default=6)
    encoder_attention_heads: int = validated_field(positive, default=8)
    decoder_attention_heads: int = validated_field(positive, default=8)
    encoder_ffn_dim: int = validated_field(positive, default=2048)
    decoder_ffn_dim: int = validated_field(positive, default=2048)
    dropout: float | int = validated_field(probability, default=0.1)
    attention_dropout: float | int = validated_field(probability, default=0.0)
    activation_dropout: float | int = validated_field(probability, default=0.0)
    activation_function: str = validated_field(known_activation, default="relu")
    max_position_embeddings: int = validated_field(positive, default=512)
    scale_embedding: bool = True
    tie_word_embeddings: bool = True
    layer_norm_eps: float = 1e-5
    normalize_before: bool = False
    init_std: float = 0.02
    use_cache: bool = True
    is_encoder_decoder: bool = True
    pad_token_id: int | None = 0
    bos_token_id: int | None = 1
    eos_token_id: int | list[int] | None = 2
    decoder_start_token_id: int | None = 1
    custom_pipelines: dict = field(default_factory=translation_pipeline)
    auto_map: dict = field(default_factory=base_model_in_auto_map)

    def __post_init__(self, **kwargs):
        kwargs.pop("label_smoothing", None)  # a training setting that config.json held up to version 0.1: ignored
        super().__post_init__(**kwargs)

    def validate_heads_divide_d_model(self):
        """d_model must split evenly into the heads: each head gets d_k = d_model / h dimensions."""
        for name in ("encoder_attention_heads", "decoder_attention_heads"):
            if self.d_model % getattr(self, name):
                raise ValueError(
                    f"d_model ({self.d_model}) must be divisible by {name} ({getattr(self, name)}); choose a "
                    f"head count that divides {self.d_model}."
                )

    def validate_special_token_ids(self):
        """The special token ids index the vocabulary (the library only warns)."""
        for name in ("pad_token_id", "bos_token_id", "eos_token_id", "decoder_start_token_id"):
            value = getattr(self, name)
            for token_id in value if isinstance(value, list) else [value]:
                if token_id is not None and not 0 <= token_id < self.vocab_size:
                    raise ValueError(f"{name} ({token_id}) must be in [0, vocab_size={self.vocab_size}).")


__all__ = ["TinyTransformerConfig"]
