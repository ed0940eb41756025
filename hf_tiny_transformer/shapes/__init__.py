"""Model shapes, stored as JSON files beside this one (one file a shape): `tiny` for CPU training, `paper-base`
for the paper's base model.

    from hf_tiny_transformer import load_shape
    config = load_shape("tiny", vocab_size=8000)
"""

import json
from pathlib import Path

from ..configuration_tiny_transformer import TinyTransformerConfig

SHAPES_DIR = Path(__file__).parent


def shape_names() -> list[str]:
    """The names `load_shape` accepts, e.g. ["paper-base", "tiny"]."""
    return sorted(path.stem for path in SHAPES_DIR.glob("*.json"))


def load_shape(name: str, **overrides) -> TinyTransformerConfig:
    """The config of shape `name`, with `overrides` (e.g. vocab_size=...) applied on top."""
    path = SHAPES_DIR / f"{name}.json"
    if not path.is_file():
        raise ValueError(f"Unknown shape {name!r}; choose one of {', '.join(shape_names())}.")
    return TinyTransformerConfig(**{**json.loads(path.read_text()), **overrides})
