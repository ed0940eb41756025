"""Named model shapes, stored as JSON files in `presets/` (one file a preset)."""

import json
from pathlib import Path

from .configuration_tiny_transformer import TinyTransformerConfig

PRESETS_DIR = Path(__file__).parent / "presets"


def preset_names() -> list[str]:
    """The names `load_preset` accepts, e.g. ["paper-base", "tiny"]."""
    return sorted(path.stem for path in PRESETS_DIR.glob("*.json"))


def load_preset(name: str, **overrides) -> TinyTransformerConfig:
    """The config of preset `name`, with `overrides` (e.g. vocab_size=...) applied on top."""
    path = PRESETS_DIR / f"{name}.json"
    if not path.is_file():
        raise ValueError(f"Unknown preset {name!r}; choose one of {', '.join(preset_names())}.")
    return TinyTransformerConfig(**{**json.loads(path.read_text()), **overrides})
