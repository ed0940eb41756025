"""Configuration of the encoder-decoder Transformer of "Attention Is All You Need" (Vaswani et al., 2017)."""

from dataclasses import field

from huggingface_hub.dataclasses import strict
from transformers import PretrainedConfig

ACTIVATIONS = ("relu", "gelu", "gelu_new", "silu", "swish")
# `pipeline("translation", ...)` finds the task here: transformers 5.x has no translation task of its own.
TRANSLATION_PIPELINE = {
    "translation": {
        "impl": "pipeline_tiny_transformer.TranslationPipeline",
        "pt": ["AutoModelForSeq2SeqLM"],
        "type": "text",
    }
}


def class_names(classes) -> list[str]:
    """A pipeline task's model classes as names: "X", ["X"], ("X",) or (the class X,) -> ["X"]."""
    return [classes] if isinstance(classes, str) else [getattr(c, "__name__", c) for c in classes]


@strict
class TinyTransformerConfig(PretrainedConfig):
    r"""
    The defaults are the paper's base model (Table 3, row "base"): d_model 512, 6 + 6 layers, 8 heads,
    feed-forward 2048, dropout 0.1, embeddings scaled by sqrt(d_model) and shared with the pre-softmax
    projection.

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
        label_smoothing: the loss's label smoothing epsilon (paper section 5.4: 0.1); 0 gives plain cross-entropy.
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

    Example:
        >>> from hf_tiny_transformer import TinyTransformerConfig, TinyTransformerForConditionalGeneration
        >>> config = TinyTransformerConfig(vocab_size=8000, d_model=256, encoder_layers=3, decoder_layers=3)
        >>> model = TinyTransformerForConditionalGeneration(config)
    """

    model_type = "tiny_transformer"
    keys_to_ignore_at_inference = ["cache"]
    attribute_map = {
        "hidden_size": "d_model",
        "num_attention_heads": "encoder_attention_heads",
        "num_hidden_layers": "encoder_layers",
    }

    vocab_size: int = 37000
    d_model: int = 512
    encoder_layers: int = 6
    decoder_layers: int = 6
    encoder_attention_heads: int = 8
    decoder_attention_heads: int = 8
    encoder_ffn_dim: int = 2048
    decoder_ffn_dim: int = 2048
    dropout: float | int = 0.1
    attention_dropout: float | int = 0.0
    activation_dropout: float | int = 0.0
    label_smoothing: float | int = 0.0
    activation_function: str = "relu"
    max_position_embeddings: int = 512
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
    custom_pipelines: dict = field(default_factory=lambda: {k: dict(v) for k, v in TRANSLATION_PIPELINE.items()})

    @classmethod
    def get_config_dict(cls, pretrained_model_name_or_path, **kwargs):
        """As the library's, but a folder or repo without config.json is an error, not a default config."""
        config_dict, kwargs = super().get_config_dict(pretrained_model_name_or_path, **kwargs)
        if not config_dict:  # the library returns {} when the file is missing
            raise OSError(
                f"{pretrained_model_name_or_path} has no config.json; save the model with save_pretrained() "
                "(which writes it), or pass config= to from_pretrained."
            )
        return config_dict, kwargs

    @classmethod
    def from_dict(cls, config_dict, **kwargs):
        """As the library's, and the values given as keyword arguments (`from_pretrained(folder, d_model=...)`),
        which the library sets after creating the config, are checked like the others."""
        result = super().from_dict(config_dict, **kwargs)
        config = result[0] if isinstance(result, tuple) else result
        config.check_values()
        return result

    def update(self, config_dict: dict):
        """As the library's, then the values are checked."""
        super().update(config_dict)
        self.check_values()

    def to_dict(self) -> dict:
        """As the library's, with the pipeline tasks always in their JSON form: `pipeline()` replaces the model
        class names of `custom_pipelines` by the classes themselves, in place, which JSON cannot hold."""
        output = super().to_dict()
        output["custom_pipelines"] = {
            task: {**info, "pt": class_names(info.get("pt", ()))}
            for task, info in (output.get("custom_pipelines") or {}).items()
        }
        return output

    def __post_init__(self, **kwargs):
        super().__post_init__(**kwargs)
        self.check_values()

    def check_values(self):
        """Raise a ValueError naming the field and the fix when a value cannot make a model."""
        self._check_sizes()
        self._check_dropouts()
        self._check_activation()
        self._check_token_ids()

    def _check_sizes(self):
        """Every size must be positive and d_model must split evenly into the heads."""
        for name in (
            "vocab_size",
            "d_model",
            "encoder_layers",
            "decoder_layers",
            "encoder_attention_heads",
            "decoder_attention_heads",
            "encoder_ffn_dim",
            "decoder_ffn_dim",
            "max_position_embeddings",
        ):
            value = getattr(self, name)
            if value <= 0:
                raise ValueError(f"{name} must be a positive integer, got {value}.")
        for name in ("encoder_attention_heads", "decoder_attention_heads"):
            heads = getattr(self, name)
            if self.d_model % heads != 0:
                raise ValueError(
                    f"d_model ({self.d_model}) must be divisible by {name} ({heads}) so that every head gets "
                    f"d_k = d_model / heads dimensions; choose a head count that divides {self.d_model}."
                )

    def _check_dropouts(self):
        """Dropout probabilities and the label smoothing epsilon live in [0, 1)."""
        for name in ("dropout", "attention_dropout", "activation_dropout", "label_smoothing"):
            value = getattr(self, name)
            if not 0.0 <= value < 1.0:
                raise ValueError(f"{name} must be in [0, 1), got {value}.")

    def _check_activation(self):
        """The feed-forward activation must be one the model knows."""
        if self.activation_function not in ACTIVATIONS:
            raise ValueError(
                f"activation_function must be one of {', '.join(ACTIVATIONS)}, got {self.activation_function!r}."
            )

    def _check_token_ids(self):
        """The special token ids index the vocabulary."""
        for name in ("pad_token_id", "bos_token_id", "eos_token_id", "decoder_start_token_id"):
            value = getattr(self, name)
            for token_id in value if isinstance(value, list) else [value]:
                if token_id is not None and not 0 <= token_id < self.vocab_size:
                    raise ValueError(f"{name} ({token_id}) must be in [0, vocab_size={self.vocab_size}).")


__all__ = ["TinyTransformerConfig"]
