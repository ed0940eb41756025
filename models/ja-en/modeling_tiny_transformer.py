"""The encoder-decoder Transformer of "Attention Is All You Need" (Vaswani et al., 2017) for transformers 5.x.

The file reads in the paper's order: embeddings and positional encoding (sections 3.4, 3.5), scaled dot-product
and multi-head attention (3.2), the position-wise feed-forward network (3.3), the residual connection around each
sub-layer and the encoder and decoder layers and stacks (3.1, 5.4), then the models. The few input checks come last.

Differences from the paper (also listed in model_card.md):
1. LayerNorm placement is the paper's post-LN, LayerNorm(x + Dropout(Sublayer(x))), by default;
   `normalize_before=True` switches to pre-LN, x + Dropout(Sublayer(LayerNorm(x))), with a final LayerNorm
   on each stack (not in the paper; often trains more stably for deep stacks).
2. Dropout on the attention weights (`attention_dropout`) and after the feed-forward activation
   (`activation_dropout`) are extra options, 0 by default, as in the paper.
3. Initialization is not given in the paper: linear layers and the embedding take N(0, init_std^2), biases 0,
   LayerNorm weight 1 and bias 0. The padding row of the embedding starts at 0; the embedding lookup gives it no
   gradient, but the tied output projection does (it learns that padding is never the next token).
4. The sinusoidal table covers `max_position_embeddings` positions; the model rejects longer inputs, and the
   package's translators (pipeline, commands, the app) translate any text sentence by sentence.
5. Decoding starts from `decoder_start_token_id` (`<s>`); the paper does not say which start symbol it uses.
6. The model's loss is plain cross-entropy, summed over target tokens and divided by their number (exact under
   gradient accumulation); the paper's label smoothing (section 5.4) belongs to training and is applied there
   (hf_tiny_transformer.trainer), never by a saved model.
7. The feed-forward activation can be changed (`activation_function`, "relu" by default as in the paper).
"""

import inspect
import math
from collections.abc import Callable

import torch
from torch import nn
from transformers import GenerationMixin, PreTrainedModel
from transformers import initialization as init
from transformers.activations import ACT2FN
from transformers.cache_utils import Cache, DynamicCache, EncoderDecoderCache
from transformers.loss.loss_utils import fixed_cross_entropy
from transformers.masking_utils import create_bidirectional_mask, create_causal_mask
from transformers.modeling_layers import GradientCheckpointingLayer
from transformers.modeling_outputs import (
    BaseModelOutput,
    BaseModelOutputWithPastAndCrossAttentions,
    Seq2SeqLMOutput,
    Seq2SeqModelOutput,
)
from transformers.modeling_utils import ALL_ATTENTION_FUNCTIONS, slice_logits_to_keep
from transformers.processing_utils import Unpack
from transformers.utils import TransformersKwargs, can_return_tuple
from transformers.utils.deprecation import deprecate_kwarg
from transformers.utils.generic import merge_with_config_defaults
from transformers.utils.output_capturing import OutputRecorder, capture_outputs

from .configuration_tiny_transformer import TinyTransformerConfig

# ---------------------------------------------------------------------------------------------------------------
# Embeddings and positional encoding (paper sections 3.4 and 3.5)
# ---------------------------------------------------------------------------------------------------------------


def sinusoidal_table(num_positions: int, d_model: int) -> torch.Tensor:
    """PE(pos, 2i) = sin(pos / 10000^(2i/d_model)), PE(pos, 2i+1) = cos(pos / 10000^(2i/d_model)).

    Returns:
        A float32 tensor of shape (num_positions, d_model), sines in even and cosines in odd dimensions.
    """
    position = torch.arange(num_positions, dtype=torch.float64)[:, None]  # (P, 1)
    two_i = torch.arange(0, d_model, 2, dtype=torch.float64)  # (ceil(D/2),)
    angle = position / torch.pow(10000.0, two_i / d_model)  # (P, ceil(D/2))
    table = torch.zeros(num_positions, d_model, dtype=torch.float64)
    table[:, 0::2] = torch.sin(angle)
    table[:, 1::2] = torch.cos(angle[:, : d_model // 2])
    return table.float()


class SinusoidalPositionalEncoding(nn.Module):
    """The fixed sinusoidal positional encoding, looked up by position."""

    def __init__(self, num_positions: int, d_model: int):
        super().__init__()
        self.num_positions = num_positions
        self.d_model = d_model
        # Not saved with the weights: it is a function of the shape. `_init_weights` refills it after loading.
        self.register_buffer("pe", sinusoidal_table(num_positions, d_model), persistent=False)

    def forward(self, position_ids: torch.Tensor) -> torch.Tensor:
        """(T,) position ids -> (T, D) encodings."""
        return self.pe[position_ids]


# ---------------------------------------------------------------------------------------------------------------
# Scaled dot-product attention and multi-head attention (paper section 3.2)
# ---------------------------------------------------------------------------------------------------------------


def eager_attention_forward(
    module: nn.Module,
    query: torch.Tensor,
    key: torch.Tensor,
    value: torch.Tensor,
    attention_mask: torch.Tensor | None,
    scaling: float,
    dropout: float = 0.0,
    **kwargs: Unpack[TransformersKwargs],
) -> tuple[torch.Tensor, torch.Tensor]:
    """Attention(Q, K, V) = softmax(Q K^T / sqrt(d_k)) V, written out so that the weights can be returned.

    Args:
        query: (B, H, Tq, Dh); key, value: (B, H, Tk, Dh).
        attention_mask: additive mask broadcastable to (B, H, Tq, Tk): 0 where allowed, a large negative
            number where masked, or None.

    Returns:
        The attended values (B, Tq, H, Dh) and the attention weights (B, H, Tq, Tk).
    """
    scores = torch.matmul(query, key.transpose(2, 3)) * scaling  # (B, H, Tq, Tk)
    if attention_mask is not None:
        scores = scores + attention_mask
    weights = nn.functional.softmax(scores, dim=-1)
    weights = nn.functional.dropout(weights, p=dropout, training=module.training)
    output = torch.matmul(weights, value)  # (B, H, Tq, Dh)
    return output.transpose(1, 2).contiguous(), weights  # (B, Tq, H, Dh)


class MultiHeadAttention(nn.Module):
    """MultiHead(Q, K, V) = Concat(head_1, ..., head_h) W^O, head_i = Attention(Q W_i^Q, K W_i^K, V W_i^V).

    Self-attention when `key_value_states` is None, otherwise cross-attention (decoder queries over the
    encoder output, the paper's "memory"). The attention function is chosen by
    `config._attn_implementation` ("sdpa" by default, "eager" to return the attention weights); the config
    is read for nothing else.

    Args:
        d_model: model width; the h heads each get d_k = d_v = d_model / h dimensions.
        num_heads: number of heads h.
        attention_dropout: dropout on the attention weights while training.
        is_causal: True for the decoder's masked self-attention.
        layer_idx: index of the layer in its stack, the key of this layer in the cache.
        config: the model config, for the attention implementation.
    """

    def __init__(
        self,
        d_model: int,
        num_heads: int,
        *,
        attention_dropout: float,
        is_causal: bool,
        layer_idx: int,
        config: TinyTransformerConfig,
    ):
        super().__init__()
        self.num_heads = num_heads
        self.head_dim = d_model // num_heads
        self.scaling = self.head_dim**-0.5  # 1 / sqrt(d_k)
        self.attention_dropout = attention_dropout
        self.is_causal = is_causal
        self.layer_idx = layer_idx
        self.config = config
        # W^Q, W^K, W^V of all heads side by side, each (D, D), and W^O; nn.Linear computes x W^T + b.
        self.q_proj = nn.Linear(d_model, d_model)
        self.k_proj = nn.Linear(d_model, d_model)
        self.v_proj = nn.Linear(d_model, d_model)
        self.out_proj = nn.Linear(d_model, d_model)

    def split_heads(self, x: torch.Tensor) -> torch.Tensor:
        """(B, T, D) -> (B, H, T, Dh)."""
        return x.view(*x.shape[:-1], self.num_heads, self.head_dim).transpose(1, 2)

    def keys_and_values(
        self, source: torch.Tensor, cache: EncoderDecoderCache | None, is_cross_attention: bool
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """Project keys and values, (B, H, Tk, Dh) each, through the cache when there is one.

        Without a cache, project the whole source. Self-attention with a cache appends this step's keys and
        values to it and attends over all of them. Cross-attention with a cache projects the encoder output
        once per sequence and reuses it at every later step.
        """
        if cache is None:
            return self.split_heads(self.k_proj(source)), self.split_heads(self.v_proj(source))
        if is_cross_attention:
            layer_cache = cache.cross_attention_cache
            if cache.is_updated.get(self.layer_idx):
                layer = layer_cache.layers[self.layer_idx]
                return layer.keys, layer.values
            cache.is_updated[self.layer_idx] = True
        else:
            layer_cache = cache.self_attention_cache
        key, value = self.split_heads(self.k_proj(source)), self.split_heads(self.v_proj(source))
        return layer_cache.update(key, value, self.layer_idx)

    def forward(
        self,
        hidden_states: torch.Tensor,
        key_value_states: torch.Tensor | None = None,
        attention_mask: torch.Tensor | None = None,
        cache: EncoderDecoderCache | None = None,
        **kwargs: Unpack[TransformersKwargs],
    ) -> tuple[torch.Tensor, torch.Tensor | None]:
        """
        Args:
            hidden_states: queries' source, (B, Tq, D).
            key_value_states: the encoder output (B, Tk, D) for cross-attention, None for self-attention.
            attention_mask: mask made by `transformers.masking_utils` for the attention implementation.
            cache: the `EncoderDecoderCache` while generating, else None.

        Returns:
            The output (B, Tq, D), and the weights (B, H, Tq, Tk) from the eager implementation (None from sdpa).
        """
        is_cross_attention = key_value_states is not None
        source = key_value_states if is_cross_attention else hidden_states
        query = self.split_heads(self.q_proj(hidden_states))  # (B, H, Tq, Dh)
        key, value = self.keys_and_values(source, cache, is_cross_attention)  # (B, H, Tk, Dh)

        attention: Callable = ALL_ATTENTION_FUNCTIONS.get_interface(
            self.config._attn_implementation, eager_attention_forward
        )
        output, weights = attention(
            self,
            query,
            key,
            value,
            attention_mask,
            scaling=self.scaling,
            dropout=self.attention_dropout if self.training else 0.0,
            **kwargs,
        )  # (B, Tq, H, Dh)
        output = output.reshape(*hidden_states.shape[:-1], -1)  # (B, Tq, D): concatenate the heads
        return self.out_proj(output), weights


# ---------------------------------------------------------------------------------------------------------------
# Position-wise feed-forward network (paper section 3.3)
# ---------------------------------------------------------------------------------------------------------------


class PositionwiseFeedForward(nn.Module):
    """FFN(x) = max(0, x W_1 + b_1) W_2 + b_2, applied to each position separately.

    Args:
        d_model: input and output width.
        ffn_dim: inner width d_ff.
        activation: name of the activation in `transformers.activations.ACT2FN` ("relu" in the paper).
        activation_dropout: dropout after the activation while training (not in the paper).
    """

    def __init__(self, d_model: int, ffn_dim: int, *, activation: str, activation_dropout: float):
        super().__init__()
        self.fc1 = nn.Linear(d_model, ffn_dim)  # W_1 and b_1
        self.activation_fn = ACT2FN[activation]
        self.activation_dropout = activation_dropout
        self.fc2 = nn.Linear(ffn_dim, d_model)  # W_2 and b_2

    def forward(self, hidden_states: torch.Tensor) -> torch.Tensor:
        """(B, T, D) -> (B, T, D)."""
        hidden_states = self.activation_fn(self.fc1(hidden_states))  # (B, T, F)
        hidden_states = nn.functional.dropout(hidden_states, p=self.activation_dropout, training=self.training)
        return self.fc2(hidden_states)


# ---------------------------------------------------------------------------------------------------------------
# The residual connection around each sub-layer, and the encoder and decoder layers (sections 3.1, 5.4, Figure 1)
# ---------------------------------------------------------------------------------------------------------------


class ResidualSublayer(nn.Module):
    """The residual connection, dropout and LayerNorm around a sub-layer.

    Post-LN (the paper): LayerNorm(x + Dropout(Sublayer(x))). Pre-LN: x + Dropout(Sublayer(LayerNorm(x))).
    Call `before` on the sub-layer's input and `after` on its output.
    """

    def __init__(self, d_model: int, *, dropout: float, layer_norm_eps: float, normalize_before: bool):
        super().__init__()
        self.layer_norm = nn.LayerNorm(d_model, eps=layer_norm_eps)
        self.dropout = dropout
        self.normalize_before = normalize_before

    def before(self, residual: torch.Tensor) -> torch.Tensor:
        """The sub-layer's input: LayerNorm(x) for pre-LN, x for post-LN."""
        return self.layer_norm(residual) if self.normalize_before else residual

    def after(self, residual: torch.Tensor, sublayer_output: torch.Tensor) -> torch.Tensor:
        """x + Dropout(Sublayer(...)), followed by LayerNorm for post-LN."""
        hidden_states = residual + nn.functional.dropout(sublayer_output, p=self.dropout, training=self.training)
        return hidden_states if self.normalize_before else self.layer_norm(hidden_states)


def residual_sublayer(config: TinyTransformerConfig) -> ResidualSublayer:
    return ResidualSublayer(
        config.d_model,
        dropout=config.dropout,
        layer_norm_eps=config.layer_norm_eps,
        normalize_before=config.normalize_before,
    )


def attention(config: TinyTransformerConfig, num_heads: int, layer_idx: int, *, is_causal: bool) -> MultiHeadAttention:
    return MultiHeadAttention(
        config.d_model,
        num_heads,
        attention_dropout=config.attention_dropout,
        is_causal=is_causal,
        layer_idx=layer_idx,
        config=config,
    )


def feed_forward(config: TinyTransformerConfig, ffn_dim: int) -> PositionwiseFeedForward:
    return PositionwiseFeedForward(
        config.d_model, ffn_dim, activation=config.activation_function, activation_dropout=config.activation_dropout
    )


class TransformerLayer(GradientCheckpointingLayer):
    """What encoder and decoder layers are made of: attention sub-layers, then the position-wise feed-forward
    network (`feed_forward`), each inside its residual connection and LayerNorm."""

    feed_forward: PositionwiseFeedForward
    feed_forward_residual: ResidualSublayer

    @staticmethod
    def attention_sublayer(
        attention: MultiHeadAttention, around: ResidualSublayer, hidden_states: torch.Tensor, **kwargs
    ) -> torch.Tensor:
        """(B, T, D) -> (B, T, D): `attention` (with its mask, cache, ... in kwargs) in its residual connection."""
        residual = hidden_states
        hidden_states, _ = attention(around.before(residual), **kwargs)
        return around.after(residual, hidden_states)

    def feed_forward_sublayer(self, hidden_states: torch.Tensor) -> torch.Tensor:
        """(B, T, D) -> (B, T, D): the feed-forward network in its residual connection."""
        residual = hidden_states
        hidden_states = self.feed_forward(self.feed_forward_residual.before(residual))
        return self.feed_forward_residual.after(residual, hidden_states)


class EncoderLayer(TransformerLayer):
    """Self-attention, then the feed-forward network."""

    def __init__(self, config: TinyTransformerConfig, layer_idx: int):
        super().__init__()
        self.self_attn = attention(config, config.encoder_attention_heads, layer_idx, is_causal=False)
        self.self_attn_residual = residual_sublayer(config)
        self.feed_forward = feed_forward(config, config.encoder_ffn_dim)
        self.feed_forward_residual = residual_sublayer(config)

    def forward(
        self, hidden_states: torch.Tensor, attention_mask: torch.Tensor | None, **kwargs: Unpack[TransformersKwargs]
    ) -> torch.Tensor:
        """(B, Ts, D) -> (B, Ts, D)."""
        hidden_states = self.attention_sublayer(
            self.self_attn, self.self_attn_residual, hidden_states, attention_mask=attention_mask, **kwargs
        )
        return self.feed_forward_sublayer(hidden_states)


class DecoderLayer(TransformerLayer):
    """Masked self-attention, cross-attention over the encoder output, then the feed-forward network."""

    def __init__(self, config: TinyTransformerConfig, layer_idx: int):
        super().__init__()
        heads = config.decoder_attention_heads
        self.self_attn = attention(config, heads, layer_idx, is_causal=True)
        self.self_attn_residual = residual_sublayer(config)
        self.encoder_attn = attention(config, heads, layer_idx, is_causal=False)
        self.encoder_attn_residual = residual_sublayer(config)
        self.feed_forward = feed_forward(config, config.decoder_ffn_dim)
        self.feed_forward_residual = residual_sublayer(config)

    def forward(
        self,
        hidden_states: torch.Tensor,
        attention_mask: torch.Tensor | None,
        encoder_hidden_states: torch.Tensor,
        encoder_attention_mask: torch.Tensor | None = None,
        cache: EncoderDecoderCache | None = None,
        **kwargs: Unpack[TransformersKwargs],
    ) -> torch.Tensor:
        """(B, Tt, D) -> (B, Tt, D), the encoder output (B, Ts, D) attended to in the middle."""
        hidden_states = self.attention_sublayer(  # masked self-attention
            self.self_attn, self.self_attn_residual, hidden_states, attention_mask=attention_mask, cache=cache, **kwargs
        )
        hidden_states = self.attention_sublayer(  # cross-attention over the encoder output
            self.encoder_attn,
            self.encoder_attn_residual,
            hidden_states,
            key_value_states=encoder_hidden_states,
            attention_mask=encoder_attention_mask,
            cache=cache,
            **kwargs,
        )
        return self.feed_forward_sublayer(hidden_states)


# ---------------------------------------------------------------------------------------------------------------
# Encoder and decoder stacks (section 3.1)
# ---------------------------------------------------------------------------------------------------------------


class TinyTransformerPreTrainedModel(PreTrainedModel):
    config_class = TinyTransformerConfig
    config: TinyTransformerConfig
    base_model_prefix = "model"
    main_input_name = "input_ids"
    supports_gradient_checkpointing = True
    _no_split_modules = ["EncoderLayer", "DecoderLayer"]
    _supports_sdpa = True  # sdpa and eager; flash attention needs a GPU and flash-attn, flex a compile of its kernels
    _can_compile_fullgraph = True

    def _init_weights(self, module: nn.Module):
        super()._init_weights(module)
        if isinstance(module, SinusoidalPositionalEncoding):
            init.copy_(module.pe, sinusoidal_table(module.num_positions, module.d_model))


class TransformerStack(TinyTransformerPreTrainedModel):
    """What encoder and decoder share: token embedding * sqrt(d_model) + positional encoding, then dropout."""

    def __init__(self, config: TinyTransformerConfig, layers: list[TransformerLayer]):
        super().__init__(config)
        self.embed_tokens = nn.Embedding(config.vocab_size, config.d_model, config.pad_token_id)
        self.embed_scale = math.sqrt(config.d_model) if config.scale_embedding else 1.0
        self.embed_positions = SinusoidalPositionalEncoding(config.max_position_embeddings, config.d_model)
        self.layers = nn.ModuleList(layers)
        # Pre-LN normalizes the stack's output once more; post-LN already ends each layer with a LayerNorm.
        self.layer_norm = nn.LayerNorm(config.d_model, config.layer_norm_eps) if config.normalize_before else None
        self.post_init()

    def embed(
        self, name: str, input_ids: torch.Tensor | None, inputs_embeds: torch.Tensor | None, past_length: int = 0
    ) -> torch.Tensor:
        """Token ids (B, T), or their embeddings (B, T, D) as `embed_tokens` gives them, at positions
        past_length..past_length+T-1 -> (B, T, D) layer input. `name` names the ids in error messages."""
        if inputs_embeds is None:
            check_token_ids(name, input_ids, self.config.vocab_size, past_length)
            inputs_embeds = self.embed_tokens(input_ids)
        length = inputs_embeds.shape[1]
        check_positions(name, past_length, length, self.config.max_position_embeddings)
        position_ids = torch.arange(length, device=inputs_embeds.device) + past_length  # (T,)
        token_embeddings = inputs_embeds * self.embed_scale  # (B, T, D)
        # The table is made in float32; a model loaded in bfloat16 or float16 adds it in its own dtype.
        hidden_states = token_embeddings + self.embed_positions(position_ids).to(token_embeddings.dtype)
        return nn.functional.dropout(hidden_states, p=self.config.dropout, training=self.training)

    def final_norm(self, hidden_states: torch.Tensor) -> torch.Tensor:
        """The pre-LN stack's final LayerNorm; identity for post-LN."""
        return hidden_states if self.layer_norm is None else self.layer_norm(hidden_states)


class TinyTransformerEncoder(TransformerStack):
    """N encoder layers over the embedded source (paper section 3.1)."""

    _can_record_outputs = {"hidden_states": EncoderLayer, "attentions": MultiHeadAttention}

    def __init__(self, config: TinyTransformerConfig):
        super().__init__(config, [EncoderLayer(config, i) for i in range(config.encoder_layers)])

    @merge_with_config_defaults
    @capture_outputs
    def forward(
        self,
        input_ids: torch.LongTensor | None = None,
        attention_mask: torch.Tensor | None = None,
        inputs_embeds: torch.Tensor | None = None,
        **kwargs: Unpack[TransformersKwargs],
    ) -> BaseModelOutput:
        """
        Args:
            input_ids: source token ids (B, Ts), or instead
            inputs_embeds: their embeddings (B, Ts, D), before the sqrt(d_model) scale (`get_input_embeddings()(ids)`).
            attention_mask: (B, Ts), 1 for real tokens and 0 for padding.

        Returns:
            `BaseModelOutput` with last_hidden_state (B, Ts, D) (the decoder's "memory"), and when asked for
            hidden_states (embeddings + one per layer) and attentions (one (B, H, Ts, Ts) per layer).
        """
        if (input_ids is None) == (inputs_embeds is None):
            raise ValueError("Pass exactly one of input_ids or inputs_embeds.")
        hidden_states = self.embed("input_ids", input_ids, inputs_embeds)  # (B, Ts, D)
        check_padding_mask("attention_mask", attention_mask, hidden_states.shape[:2])
        mask = create_bidirectional_mask(config=self.config, inputs_embeds=hidden_states, attention_mask=attention_mask)
        for layer in self.layers:
            hidden_states = layer(hidden_states, mask, **kwargs)
        return BaseModelOutput(last_hidden_state=self.final_norm(hidden_states))


class TinyTransformerDecoder(TransformerStack):
    """N decoder layers over the embedded, right-shifted target, attending to the encoder output."""

    _can_record_outputs = {
        "hidden_states": DecoderLayer,
        "attentions": OutputRecorder(MultiHeadAttention, index=1, layer_name="self_attn"),
        "cross_attentions": OutputRecorder(MultiHeadAttention, index=1, layer_name="encoder_attn"),
    }

    def __init__(self, config: TinyTransformerConfig):
        super().__init__(config, [DecoderLayer(config, i) for i in range(config.decoder_layers)])

    @merge_with_config_defaults
    @capture_outputs
    @deprecate_kwarg("past_key_values", "5.40.0", new_name="cache")  # the old name, as transformers' own models take it
    def forward(
        self,
        input_ids: torch.LongTensor | None = None,
        attention_mask: torch.Tensor | None = None,
        encoder_hidden_states: torch.Tensor | None = None,
        encoder_attention_mask: torch.Tensor | None = None,
        cache: EncoderDecoderCache | None = None,
        inputs_embeds: torch.Tensor | None = None,
        use_cache: bool | None = None,
        **kwargs: Unpack[TransformersKwargs],
    ) -> BaseModelOutputWithPastAndCrossAttentions:
        """
        Args:
            input_ids: target token ids (B, Tt): the whole shifted target, or only the new tokens with a cache;
            inputs_embeds: or instead their embeddings (B, Tt, D), before the sqrt(d_model) scale.
            attention_mask: target padding mask (B, past + Tt); the causal mask is added here.
            encoder_hidden_states: the encoder output (B, Ts, D).
            encoder_attention_mask: source padding mask (B, Ts).
            cache: keys/values of earlier steps; created when use_cache is True and none is given.

        Returns:
            `BaseModelOutputWithPastAndCrossAttentions` with last_hidden_state (B, Tt, D), the cache, and when
            asked for hidden_states, attentions (B, H, Tt, past + Tt) and cross_attentions (B, H, Tt, Ts).
        """
        if (input_ids is None) == (inputs_embeds is None):
            raise ValueError(
                "Pass exactly one of decoder_input_ids or decoder_inputs_embeds (or labels, which the decoder inputs "
                "are then made from)."
            )
        if use_cache and cache is None:
            cache = EncoderDecoderCache(DynamicCache(config=self.config), DynamicCache(config=self.config))
        past_length = cache.get_seq_length() if cache is not None else 0
        hidden_states = self.embed("decoder_input_ids", input_ids, inputs_embeds, past_length)  # (B, Tt, D)
        batch_size, length = hidden_states.shape[:2]
        check_padding_mask("decoder_attention_mask", attention_mask, (batch_size, past_length + length))
        check_padding_mask("attention_mask", encoder_attention_mask, encoder_hidden_states.shape[:2])

        self_attn_cache = cache.self_attention_cache if cache is not None else None
        causal_mask = create_causal_mask(
            config=self.config, inputs_embeds=hidden_states, attention_mask=attention_mask, cache=self_attn_cache
        )
        cross_mask = create_bidirectional_mask(
            config=self.config,
            inputs_embeds=hidden_states,
            attention_mask=encoder_attention_mask,
            encoder_hidden_states=encoder_hidden_states,
        )
        for layer in self.layers:
            hidden_states = layer(hidden_states, causal_mask, encoder_hidden_states, cross_mask, cache, **kwargs)
        return BaseModelOutputWithPastAndCrossAttentions(
            last_hidden_state=self.final_norm(hidden_states), cache=cache if use_cache else None
        )


# ---------------------------------------------------------------------------------------------------------------
# Models
# ---------------------------------------------------------------------------------------------------------------


def shift_tokens_right(labels: torch.Tensor, pad_token_id: int, decoder_start_token_id: int) -> torch.Tensor:
    """Decoder inputs from labels (B, T): start token first, labels shifted one step right, -100 -> pad."""
    decoder_input_ids = labels.new_full(labels.shape, pad_token_id)
    decoder_input_ids[:, 1:] = labels[:, :-1]
    decoder_input_ids[:, 0] = decoder_start_token_id
    return decoder_input_ids.masked_fill(decoder_input_ids == -100, pad_token_id)


class TinyTransformerModel(TinyTransformerPreTrainedModel):
    """The encoder-decoder Transformer without a head; returns the decoder's last hidden state."""

    _auto_class = "AutoModel"  # save_pretrained copies the code files and names the class in auto_map
    _tied_weights_keys = {"decoder.embed_tokens.weight": "encoder.embed_tokens.weight"}

    def __init__(self, config: TinyTransformerConfig):
        super().__init__(config)
        self.encoder = TinyTransformerEncoder(config)
        self.decoder = TinyTransformerDecoder(config)
        self.post_init()

    def get_input_embeddings(self) -> nn.Embedding:
        return self.encoder.embed_tokens

    def set_input_embeddings(self, value: nn.Embedding):
        """Set the source embedding, and the target embedding with it: the same matrix when they are tied (the
        paper's sharing); untied, the target's follows a new size (resize_token_embeddings, which resizes the
        source's and the output projection), its new rows those the source's got."""
        self.encoder.embed_tokens = value
        if self.config.tie_word_embeddings:
            self.decoder.embed_tokens = value
        elif value.num_embeddings != self.decoder.embed_tokens.num_embeddings:
            old = self.decoder.embed_tokens
            new = nn.Embedding(value.num_embeddings, old.embedding_dim, old.padding_idx).to(value.weight)
            kept = min(old.num_embeddings, value.num_embeddings)
            with torch.no_grad():
                new.weight[:kept] = old.weight[:kept]
                new.weight[kept:] = value.weight[kept:]
            self.decoder.embed_tokens = new

    @can_return_tuple
    @deprecate_kwarg("past_key_values", "5.40.0", new_name="cache")
    def forward(
        self,
        input_ids: torch.LongTensor | None = None,
        attention_mask: torch.Tensor | None = None,
        decoder_input_ids: torch.LongTensor | None = None,
        decoder_attention_mask: torch.Tensor | None = None,
        encoder_outputs: BaseModelOutput | tuple | None = None,
        cache: Cache | None = None,
        inputs_embeds: torch.Tensor | None = None,
        decoder_inputs_embeds: torch.Tensor | None = None,
        use_cache: bool | None = None,
        **kwargs: Unpack[TransformersKwargs],
    ) -> Seq2SeqModelOutput:
        """
        Args:
            input_ids: source token ids (B, Ts); not needed when `encoder_outputs` or `inputs_embeds` is given.
            attention_mask: source padding mask (B, Ts), 1 for tokens and 0 for padding.
            decoder_input_ids: target token ids (B, Tt), starting with `decoder_start_token_id`.
            decoder_attention_mask: target padding mask (B, Tt) (with a cache: (B, past + Tt)).
            encoder_outputs: the encoder's output, to skip running the encoder again.
            cache: an `EncoderDecoderCache` of earlier decoding steps.
            inputs_embeds, decoder_inputs_embeds: embeddings (B, T, D) instead of ids, before the sqrt(d_model)
                scale, as `get_input_embeddings()(ids)` gives them (prompt tuning, soft prompts).
            kwargs: output_attentions, output_hidden_states, return_dict, and the attention function's arguments;
                what the model does not use (generate() passes its own keywords on) is left alone.

        Returns:
            `Seq2SeqModelOutput`: last_hidden_state (B, Tt, D), cache, decoder/encoder hidden states and
            attentions, cross_attentions, encoder_last_hidden_state.
        """
        if encoder_outputs is None:
            encoder_outputs = self.encoder(input_ids, attention_mask, inputs_embeds, **kwargs)
        elif not isinstance(encoder_outputs, BaseModelOutput):
            encoder_outputs = BaseModelOutput(*encoder_outputs)
        decoder_outputs = self.decoder(
            decoder_input_ids,
            decoder_attention_mask,
            encoder_outputs.last_hidden_state,
            attention_mask,
            cache=cache,
            inputs_embeds=decoder_inputs_embeds,
            use_cache=use_cache,
            **kwargs,
        )
        return Seq2SeqModelOutput(
            last_hidden_state=decoder_outputs.last_hidden_state,
            cache=decoder_outputs.cache,
            decoder_hidden_states=decoder_outputs.hidden_states,
            decoder_attentions=decoder_outputs.attentions,
            cross_attentions=decoder_outputs.cross_attentions,
            encoder_last_hidden_state=encoder_outputs.last_hidden_state,
            encoder_hidden_states=encoder_outputs.hidden_states,
            encoder_attentions=encoder_outputs.attentions,
        )


class TinyTransformerForConditionalGeneration(TinyTransformerPreTrainedModel, GenerationMixin):
    """The encoder-decoder Transformer with the pre-softmax linear projection, tied to the embeddings."""

    _auto_class = "AutoModelForSeq2SeqLM"  # save_pretrained copies the code files and names the class in auto_map
    _tied_weights_keys = {"lm_head.weight": "model.encoder.embed_tokens.weight"}

    def __init__(self, config: TinyTransformerConfig):
        super().__init__(config)
        self.model = TinyTransformerModel(config)
        self.lm_head = nn.Linear(config.d_model, config.vocab_size, bias=False)
        self.post_init()

    def get_input_embeddings(self) -> nn.Embedding:
        return self.model.get_input_embeddings()

    def set_input_embeddings(self, value: nn.Embedding):
        self.model.set_input_embeddings(value)

    def prepare_decoder_input_ids_from_labels(self, labels: torch.Tensor) -> torch.Tensor:
        return shift_tokens_right(labels, self.config.pad_token_id, self.config.decoder_start_token_id)

    def _reorder_cache(self, cache: EncoderDecoderCache, beam_idx: torch.LongTensor) -> EncoderDecoderCache:
        """Beam search's choice of beams after each step (`generate` calls this hook where a model has it): only the
        self-attention keys and values are reordered. The beams of a sentence share its encoder output, repeated for
        each beam, so their cross-attention keys and values are equal rows, and beam search picks among the beams of
        the same sentence: reordering them would copy every row onto an equal one at each step."""
        cache.self_attention_cache.reorder_cache(beam_idx)
        return cache

    @can_return_tuple
    @deprecate_kwarg("past_key_values", "5.40.0", new_name="cache")
    def forward(
        self,
        input_ids: torch.LongTensor | None = None,
        attention_mask: torch.Tensor | None = None,
        decoder_input_ids: torch.LongTensor | None = None,
        decoder_attention_mask: torch.Tensor | None = None,
        encoder_outputs: BaseModelOutput | tuple | None = None,
        cache: Cache | None = None,
        inputs_embeds: torch.Tensor | None = None,
        decoder_inputs_embeds: torch.Tensor | None = None,
        labels: torch.LongTensor | None = None,
        use_cache: bool | None = None,
        logits_to_keep: int | torch.Tensor = 0,
        **kwargs: Unpack[TransformersKwargs],
    ) -> Seq2SeqLMOutput:
        """
        Args:
            labels: target token ids (B, Tt); -100 marks positions left out of the loss. Without decoder inputs,
                the decoder reads the labels shifted right.
            logits_to_keep: the decoder positions to make logits for, as transformers' models take it: 0 all,
                an int the last ones (`generate` asks for 1), a tensor of positions (an empty one: none, for a
                training loss that makes the logits itself from the decoder's output, `trainer.loss`).
            kwargs: `num_items_in_batch` (passed by Trainer) divides the summed token loss, so that the loss is
                exact under gradient accumulation; the others as in `TinyTransformerModel.forward`.
            Other arguments as in `TinyTransformerModel.forward`.

        Returns:
            `Seq2SeqLMOutput` with the cross-entropy loss (when labels are given), logits (B, Tt, V) and the
            model's outputs.
        """
        num_items_in_batch = kwargs.pop("num_items_in_batch", None)
        if labels is not None:
            use_cache = False
            if decoder_input_ids is None and decoder_inputs_embeds is None:
                decoder_input_ids = self.prepare_decoder_input_ids_from_labels(labels)
        outputs = self.model(
            input_ids,
            attention_mask=attention_mask,
            decoder_input_ids=decoder_input_ids,
            decoder_attention_mask=decoder_attention_mask,
            encoder_outputs=encoder_outputs,
            cache=cache,
            inputs_embeds=inputs_embeds,
            decoder_inputs_embeds=decoder_inputs_embeds,
            use_cache=use_cache,
            **kwargs,
        )
        logits = self.lm_head(slice_logits_to_keep(outputs.last_hidden_state, logits_to_keep))  # (B, Tt, V)
        loss = None
        if labels is not None:
            labels = labels.to(logits.device)
            loss = fixed_cross_entropy(logits.flatten(0, 1).float(), labels.flatten(), num_items_in_batch)
        return Seq2SeqLMOutput(
            loss=loss, logits=logits, **{k: v for k, v in outputs.items() if k != "last_hidden_state"}
        )


# generate() reads the signature of a remote-code model's forward at every step (a model with an `_auto_class`, as
# this one has for its Hub folders); computed once here, the step costs what it costs for the library's own models.
TinyTransformerForConditionalGeneration.forward.__signature__ = inspect.signature(
    TinyTransformerForConditionalGeneration.forward
)


# ---------------------------------------------------------------------------------------------------------------
# Input checks: only where a mistake would otherwise give a silently wrong result or a crash deep inside torch
# ---------------------------------------------------------------------------------------------------------------


def check_token_ids(name: str, input_ids: torch.Tensor, vocab_size: int, past_length: int):
    """Ids outside the vocabulary, checked when a sequence starts (reading them is a host synchronization, not
    repeated for every token generate() feeds back)."""
    if torch.compiler.is_compiling() or past_length or input_ids.numel() == 0:
        return
    low, high = int(input_ids.min()), int(input_ids.max())
    if low < 0 or high >= vocab_size:
        raise ValueError(
            f"{name} holds token id {low if low < 0 else high}, outside [0, vocab_size={vocab_size}); encode the "
            "text with this model's tokenizer, or resize_token_embeddings after adding tokens."
        )


def check_positions(name: str, past_length: int, length: int, max_positions: int):
    """An empty sequence (attention over nothing is NaN), or one longer than the positional table."""
    if length == 0:
        raise ValueError(f"{name} is empty; every sequence needs at least one token (the tokenizer appends </s>).")
    if not torch.compiler.is_compiling() and past_length + length > max_positions:
        raise ValueError(
            f"{name} reaches position {past_length + length} but max_position_embeddings is {max_positions}; "
            "pass truncation=True to the tokenizer, lower max_new_tokens, or raise max_position_embeddings."
        )


def check_padding_mask(name: str, mask: torch.Tensor | None, expected: tuple[int, int]):
    """A 2D padding mask must be (batch_size, length): another shape would broadcast over the wrong tokens. (4D
    masks come prebuilt from generate's static cache.)"""
    if mask is not None and mask.dim() != 4 and tuple(mask.shape) != tuple(expected):
        raise ValueError(
            f"{name} has shape {tuple(mask.shape)} but the sequences it masks have shape {tuple(expected)}; pass "
            "the attention_mask the tokenizer returned with these ids, 1 for tokens and 0 for padding."
        )


__all__ = [
    "TinyTransformerPreTrainedModel",
    "TinyTransformerModel",
    "TinyTransformerForConditionalGeneration",
]
