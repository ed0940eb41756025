"""Shared fixtures: tiny configs and models (vocab ~50, d_model 32, 2 layers) with fixed seeds."""

import pytest
import torch

from hf_tiny_transformer import TinyTransformerConfig, TinyTransformerForConditionalGeneration

TINY = dict(
    vocab_size=50,
    d_model=32,
    encoder_layers=2,
    decoder_layers=2,
    encoder_attention_heads=4,
    decoder_attention_heads=4,
    encoder_ffn_dim=64,
    decoder_ffn_dim=64,
    max_position_embeddings=64,
)


def tiny_config(**overrides) -> TinyTransformerConfig:
    return TinyTransformerConfig(**{**TINY, **overrides})


def tiny_model(seed: int = 0, **overrides) -> TinyTransformerForConditionalGeneration:
    """A random tiny model in eval mode. init_std 0.3 gives logits varied enough for generation tests."""
    torch.manual_seed(seed)
    return TinyTransformerForConditionalGeneration(tiny_config(**{"init_std": 0.3, **overrides})).eval()


@pytest.fixture
def model():
    return tiny_model()


@pytest.fixture
def batch():
    """Two sources of different length (the second padded) and their targets (-100 where padded)."""
    input_ids = torch.tensor([[5, 6, 7, 8, 2], [9, 10, 2, 0, 0]])
    labels = torch.tensor([[11, 12, 13, 2], [14, 2, -100, -100]])
    return {"input_ids": input_ids, "attention_mask": (input_ids != 0).long(), "labels": labels}
