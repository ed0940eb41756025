"""Trainer checkpoints: which one a run resumes from, and averaging, as the paper's base models (section 6.1: "a
single model obtained by averaging the last 5 checkpoints, which were written at 10-minute intervals").

    from hf_tiny_transformer.training.checkpoints import average_checkpoints, last_checkpoints
    weights = average_checkpoints(last_checkpoints("runs/en-ja", 5))   # {name: mean tensor}
    model.load_state_dict(weights)
    last_complete_checkpoint("runs/en-ja")                             # what --resume_from_checkpoint true takes

`scripts/average_checkpoints.py` writes the averaged model as a folder; `scripts/train.py --average_checkpoints 5`
makes it the run's final model.
"""

import json
import logging
import re
from pathlib import Path

import torch
from safetensors import safe_open
from transformers.trainer_utils import sort_checkpoints

logger = logging.getLogger(__name__)

CHECKPOINT = re.compile(r"^checkpoint-(\d+)$")


def checkpoint_step(folder: Path) -> int | None:
    """The step of a Trainer checkpoint folder (checkpoint-1200 -> 1200), None for another folder."""
    match = CHECKPOINT.match(Path(folder).name)
    return int(match.group(1)) if match else None


def last_checkpoints(run_dir: str | Path, count: int) -> list[Path]:
    """The `count` newest checkpoint folders of a run that hold weights, oldest first; a ValueError when there are
    fewer, or when they were not written at evenly spaced steps (the average would then weigh them unevenly)."""
    folders = [
        p for p in Path(run_dir).iterdir() if checkpoint_step(p) is not None and (p / "model.safetensors").is_file()
    ]
    folders = sorted(folders, key=checkpoint_step)[-count:]
    if len(folders) < count:
        raise ValueError(f"{run_dir} holds {len(folders)} checkpoints with weights, fewer than the {count} to average")
    steps = [checkpoint_step(folder) for folder in folders]
    if len({b - a for a, b in zip(steps, steps[1:])}) > 1:
        raise ValueError(f"the last {count} checkpoints of {run_dir} are not evenly spaced (steps {steps})")
    return folders


def average_checkpoints(folders: list[str | Path]) -> dict[str, torch.Tensor]:
    """The element-wise mean of the weights in each folder's model.safetensors, accumulated in float64 and
    returned in the weights' own dtype; all folders must hold the same names and shapes."""
    total: dict[str, torch.Tensor] = {}
    dtypes: dict[str, torch.dtype] = {}
    for folder in folders:
        with safe_open(Path(folder) / "model.safetensors", framework="pt") as weights:
            names = set(weights.keys())
            if total and names != set(total):
                raise ValueError(f"{folder} holds other weights than {folders[0]}: {sorted(names ^ set(total))[:5]}")
            for name in names:
                tensor = weights.get_tensor(name)
                dtypes[name] = tensor.dtype
                total[name] = total[name] + tensor.double() if name in total else tensor.double()
    return {name: (tensor / len(folders)).to(dtypes[name]) for name, tensor in total.items()}


def is_complete_checkpoint(folder: str | Path) -> bool:
    """Trainer writes trainer_state.json last: a checkpoint whose state parses and whose weights open is complete
    (a kill during a save leaves one that is not)."""
    folder = Path(folder)
    try:
        state = json.loads((folder / "trainer_state.json").read_text())
        with safe_open(folder / "model.safetensors", framework="pt"):
            pass
    except (OSError, ValueError, RuntimeError):
        return False
    return isinstance(state, dict) and "global_step" in state


def last_complete_checkpoint(run_dir: str | Path) -> Path | None:
    """The newest complete checkpoint of a run (one a kill left half-written is skipped, with a warning), or None."""
    if not Path(run_dir).is_dir():
        return None
    for folder in reversed(sort_checkpoints(str(run_dir))):
        if is_complete_checkpoint(folder):
            return Path(folder)
        logger.warning("skipping %s: it is incomplete (a save was interrupted)", folder)
    return None


def trained_steps(checkpoint: str | Path) -> dict:
    """A checkpoint's step and the run's max_steps, from its trainer_state.json."""
    state = json.loads((Path(checkpoint) / "trainer_state.json").read_text())
    return {"global_step": state["global_step"], "max_steps": state.get("max_steps")}


__all__ = [
    "average_checkpoints",
    "last_checkpoints",
    "checkpoint_step",
    "is_complete_checkpoint",
    "last_complete_checkpoint",
    "trained_steps",
]
