"""transformers' own implementation of the architecture, `MarianMTModel`, and conversions to and from it.

    from hf_tiny_transformer.marian import from_marian, marian_of_the_same_shape, to_marian
    marian = to_marian(model)          # the same function as `model`, as a MarianMTModel (logits equal to ~1e-6)
    model = from_marian(marian)        # and back
    marian_of_the_same_shape(config)   # a randomly initialized MarianMTModel with every size and id of `config`

That the conversion is exact both ways is the proof that this package's model is the reference architecture; it
is also a bridge to the tools that read Marian models. The one real difference is the positional table: the
paper (and this package) interleaves sines and cosines, PE(pos, 2i) = sin, PE(pos, 2i+1) = cos; Marian puts every
sine first and every cosine after them. Marian's dimension m is therefore this model's dimension 2m (m < D/2) or
2(m - D/2) + 1, and the conversion permutes every weight's model-width axis (the residual stream) that way; the
attention heads' and the feed-forward network's inner axes are untouched.
"""

import copy
import re

import torch
from transformers import MarianConfig, MarianMTModel

from .configuration_tiny_transformer import TinyTransformerConfig
from .modeling_tiny_transformer import TinyTransformerForConditionalGeneration

# Fields that mean the same in MarianConfig and TinyTransformerConfig.
MARIAN_FIELDS = (
    "vocab_size d_model encoder_layers decoder_layers encoder_attention_heads decoder_attention_heads "
    "encoder_ffn_dim decoder_ffn_dim dropout attention_dropout activation_dropout activation_function "
    "max_position_embeddings scale_embedding tie_word_embeddings init_std pad_token_id bos_token_id eos_token_id "
    "decoder_start_token_id"
).split()

# This model's parameter names -> Marian's (the layer's sub-modules; the rest of the name is the same).
NAMES = {
    "self_attn_residual.layer_norm": "self_attn_layer_norm",
    "encoder_attn_residual.layer_norm": "encoder_attn_layer_norm",
    "feed_forward_residual.layer_norm": "final_layer_norm",
    "feed_forward.fc1": "fc1",
    "feed_forward.fc2": "fc2",
}
EMBEDDING = "model.encoder.embed_tokens.weight"


def marian_config(config: TinyTransformerConfig) -> MarianConfig:
    """A MarianConfig with every size, id and option of `config`."""
    values = {name: getattr(config, name) for name in MARIAN_FIELDS}
    return MarianConfig(**values, share_encoder_decoder_embeddings=True, forced_eos_token_id=None)


def marian_of_the_same_shape(config: TinyTransformerConfig) -> MarianMTModel:
    """A randomly initialized MarianMTModel of the shape of `config`."""
    return MarianMTModel(marian_config(config))


def marian_order(d_model: int) -> torch.Tensor:
    """Marian's dimension m is this model's dimension marian_order(D)[m]: the even (sine) ones, then the odd."""
    return torch.cat([torch.arange(0, d_model, 2), torch.arange(1, d_model, 2)])


def model_width_axis(name: str) -> int | None:
    """The axis of a parameter that runs along the model width (the residual stream), or None when none does.

    Embeddings (V, D) and the projections that read the stream (q, k, v, fc1: (out, D)) have it second; those that
    write it (out_proj, fc2: (D, in), and their biases) and the LayerNorms have it first.
    """
    if name.endswith(("embed_tokens.weight", "shared.weight", "lm_head.weight")):
        return 1
    if re.search(r"(q_proj|k_proj|v_proj|fc1)\.weight$", name):
        return 1
    if re.search(r"(q_proj|k_proj|v_proj|fc1)\.bias$", name):
        return None
    return 0  # out_proj, fc2 and every LayerNorm, weight and bias


def permuted(state_dict: dict[str, torch.Tensor], order: torch.Tensor) -> dict[str, torch.Tensor]:
    """Every tensor with its model-width axis reordered by `order`."""
    result = {}
    for name, tensor in state_dict.items():
        axis = model_width_axis(name)
        result[name] = tensor if axis is None else tensor.index_select(axis, order.to(tensor.device))
    return result


def check_convertible(config: TinyTransformerConfig):
    """Marian has the paper's post-LN layers with one vocabulary and LayerNorm epsilon 1e-5."""
    problems = []
    if config.normalize_before:
        problems.append("normalize_before=True (Marian has post-LN layers only)")
    if not config.tie_word_embeddings:
        problems.append("tie_word_embeddings=False (the conversion shares one embedding, as the paper does)")
    if config.layer_norm_eps != 1e-5:
        problems.append(f"layer_norm_eps={config.layer_norm_eps} (Marian's LayerNorms use 1e-5)")
    if problems:
        raise ValueError(f"This model has no MarianMTModel equivalent: {'; '.join(problems)}.")


def to_marian(model: TinyTransformerForConditionalGeneration) -> MarianMTModel:
    """The same function as `model` as a MarianMTModel: weights renamed, model width reordered (see the module)."""
    check_convertible(model.config)
    state = permuted(model.state_dict(), marian_order(model.config.d_model))
    renamed = {}
    for name, tensor in state.items():
        if name == EMBEDDING:
            name = "model.shared.weight"
        for ours, theirs in NAMES.items():
            name = name.replace(ours, theirs)
        renamed[name] = tensor
    marian = MarianMTModel(marian_config(model.config)).to(dtype=model.dtype, device=model.device)
    missing, unexpected = marian.load_state_dict(renamed, strict=False)
    check_complete(
        missing,
        unexpected,
        allowed_missing=("embed_positions.weight", "embed_tokens.weight", "lm_head.weight", "final_logits_bias"),
    )
    marian.generation_config = copy.deepcopy(model.generation_config)
    return marian.train(model.training)


def from_marian(marian: MarianMTModel) -> TinyTransformerForConditionalGeneration:
    """A MarianMTModel with shared embeddings, as this package's model computing the same function."""
    config = marian.config
    if not config.share_encoder_decoder_embeddings or config.decoder_vocab_size != config.vocab_size:
        raise ValueError(
            "Only a MarianMTModel with one shared vocabulary converts (share_encoder_decoder_embeddings=True)."
        )
    if marian.final_logits_bias.abs().max() > 0:
        raise ValueError("This MarianMTModel has a non-zero final_logits_bias, which the paper's model does not have.")
    ours = TinyTransformerConfig(**{name: getattr(config, name) for name in MARIAN_FIELDS})
    state = {}
    for name, tensor in marian.state_dict().items():
        if "embed_positions" in name or name == "final_logits_bias":
            continue
        if name == "model.shared.weight":
            name = EMBEDDING
        for ours_name, marian_name in NAMES.items():
            name = re.sub(rf"\.{re.escape(marian_name)}\.", f".{ours_name}.", name)
        state[name] = tensor
    inverse = torch.argsort(marian_order(config.d_model))
    model = TinyTransformerForConditionalGeneration(ours).to(dtype=marian.dtype, device=marian.device)
    missing, unexpected = model.load_state_dict(permuted(state, inverse), strict=False)
    check_complete(missing, unexpected, allowed_missing=("embed_tokens.weight", "lm_head.weight"))
    model.generation_config = copy.deepcopy(marian.generation_config)
    return model.train(marian.training)


def check_complete(missing: list[str], unexpected: list[str], allowed_missing: tuple[str, ...]):
    """Every parameter found a home: only the tied copies and the positional tables (which both models compute)
    may be missing."""
    missing = [name for name in missing if not name.endswith(allowed_missing)]
    if missing or unexpected:
        raise ValueError(f"The conversion left parameters unmatched: missing {missing}, unexpected {unexpected}.")


__all__ = ["MARIAN_FIELDS", "marian_config", "marian_of_the_same_shape", "to_marian", "from_marian"]
