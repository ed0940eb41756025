"""Trainer checkpoints: which one a run resumes from, and averaging, as the paper's base models (section 6.1: "a
single model obtained by averaging the last 5 checkpoints, which were written at 10-minute intervals").

    from hf_tiny_transformer.trainer.checkpoints import average_checkpoints, last_checkpoints
    weights = average_checkpoints(last_checkpoints("runs/en-ja", 5))   # {name: mean tensor}
    model.load_state_dict(weights)
    last_complete_checkpoint("runs/en-ja")                             # what --resume_from_checkpoint true takes

`training/average_checkpoints.py` writes the averaged model as a folder; `training/train.py --average_checkpoints 5`
makes it the run's final model. Checkpoints of different models (another shape, another tokenizer) are not averaged.
"""

import json
import logging
import math
import re
from pathlib import Path

import torch
from safetensors import safe_open
from safetensors.torch import load_file
from transformers import TrainerState
from transformers.trainer_utils import TrainOutput, sort_checkpoints

from ..errors import UsageError, first_line

logger = logging.getLogger(__name__)

CHECKPOINT = re.compile(r"^checkpoint-(\d+)$")
# Fields that decide the parameters' shapes and meaning: checkpoints that differ in one are of different models.
SHAPE_FIELDS = (
    "model_type vocab_size d_model encoder_layers decoder_layers encoder_attention_heads decoder_attention_heads "
    "encoder_ffn_dim decoder_ffn_dim max_position_embeddings activation_function normalize_before scale_embedding "
    "tie_word_embeddings"
).split()


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


def shape_differences(first: dict, second: dict) -> list[tuple[str, object, object]]:
    """(field, first's value, second's value) for each of SHAPE_FIELDS on which two config.json dicts differ."""
    return [(key, first.get(key), second.get(key)) for key in SHAPE_FIELDS if first.get(key) != second.get(key)]


def vocabulary(tokenizer_json: str) -> dict:
    """The token -> id table of a tokenizer.json."""
    return json.loads(tokenizer_json)["model"]["vocab"]


def model_difference(first: Path, second: Path) -> str | None:
    """How the models of two checkpoint folders differ, or None: a field of SHAPE_FIELDS in their config.json files,
    or the vocabulary of their tokenizer.json files (each compared where both folders hold the file)."""
    if (first / "config.json").is_file() and (second / "config.json").is_file():
        configs = (json.loads((folder / "config.json").read_text()) for folder in (first, second))
        differences = shape_differences(*configs)
        if differences:
            listed = "; ".join(f"{key} {one} and {other}" for key, one, other in differences)
            return f"are checkpoints of different models ({listed})"
    if (first / "tokenizer.json").is_file() and (second / "tokenizer.json").is_file():
        if vocabulary((first / "tokenizer.json").read_text()) != vocabulary((second / "tokenizer.json").read_text()):
            return "were trained with different tokenizers (their tokenizer.json vocabularies differ)"
    return None


def check_same_model(folders: list[str | Path]):
    """A ValueError naming two of the checkpoint folders when their models differ (model_difference): weights of
    different models must not be averaged, even where their shapes would let them."""
    for folder in folders[1:]:
        difference = model_difference(Path(folders[0]), Path(folder))
        if difference:
            raise ValueError(f"{folders[0]} and {folder} {difference}; average checkpoints of one run")


# Below this cosine similarity of their weights, two checkpoints are not of one run (independent runs are near 0,
# the checkpoints of one run near 1): their average would be noise.
LEAST_SIMILARITY = 0.5


def similarity(first: dict[str, torch.Tensor], second: dict[str, torch.Tensor]) -> float:
    """The cosine similarity of two checkpoints' weight matrices, all of them as one vector (LayerNorm's weights,
    which start at 1 in every run, and the biases left out)."""
    names = [name for name, tensor in first.items() if tensor.dim() == 2]
    dot = sum(float((first[name] * second[name]).sum()) for name in names)
    norms = [sum(float(weights[name].square().sum()) for name in names) for weights in (first, second)]
    return dot / math.sqrt(norms[0] * norms[1]) if all(norms) else 1.0


def check_averageable(folders: list, first: dict[str, torch.Tensor], index: int, weights: dict[str, torch.Tensor]):
    """A ValueError where checkpoint `index` holds the first's weights exactly (a copy averages nothing), or weights
    too far from them to be of the same run."""
    if all(torch.equal(first[name], weights[name]) for name in first):
        raise ValueError(f"{folders[0]} and {folders[index]} hold the same weights; average different checkpoints")
    cosine = similarity(first, weights)
    if cosine < LEAST_SIMILARITY:
        raise ValueError(
            f"{folders[0]} and {folders[index]} are checkpoints of different runs (the cosine similarity of their "
            f"weights is {cosine:.2f}), whose average would be noise; average checkpoints of one run"
        )


def read_weights(folder: str | Path) -> dict[str, torch.Tensor]:
    """The weights of a folder's model.safetensors."""
    with safe_open(Path(folder) / "model.safetensors", framework="pt") as weights:
        return {name: weights.get_tensor(name) for name in weights.keys()}


def average_checkpoints(folders: list[str | Path]) -> dict[str, torch.Tensor]:
    """The element-wise mean of the weights in each folder's model.safetensors, accumulated in float64 and
    returned in the weights' own dtype; the folders must be checkpoints of one model (check_same_model) and of one
    run (check_averageable), and hold the same names and shapes."""
    check_same_model(folders)
    first = {name: tensor.double() for name, tensor in read_weights(folders[0]).items()}
    dtypes = {name: tensor.dtype for name, tensor in read_weights(folders[0]).items()}
    total = {name: tensor.clone() for name, tensor in first.items()}
    for index, folder in enumerate(folders[1:], start=1):
        weights = {name: tensor.double() for name, tensor in read_weights(folder).items()}
        if set(weights) != set(first) or any(weights[name].shape != first[name].shape for name in first):
            different = sorted(set(weights) ^ set(first)) or [n for n in first if weights[n].shape != first[n].shape]
            raise ValueError(f"{folder} holds other weights than {folders[0]}: {different[:5]}")
        check_averageable(folders, first, index, weights)
        for name, tensor in weights.items():
            total[name] += tensor
    return {name: (tensor / len(folders)).to(dtypes[name]) for name, tensor in total.items()}


def average_into(model, run_dir: str | Path, count: int) -> list[Path]:
    """Load the average of the run's last `count` checkpoints into `model`; the folders averaged. A UsageError (one
    line) where they are too few, unevenly spaced, or of different models."""
    try:
        folders = last_checkpoints(run_dir, count)
        weights = average_checkpoints(folders)
    except ValueError as error:
        raise UsageError(f"--average_checkpoints {count}: {first_line(error)}") from None
    load_weights(model, weights)
    return folders


def load_weights(model, weights: dict[str, torch.Tensor]):
    """Load a checkpoint's weights into `model`; strict=False, for a checkpoint holds one copy of tied weights, and
    no positional table."""
    unexpected = model.load_state_dict(weights, strict=False).unexpected_keys
    if unexpected:
        raise RuntimeError(f"the checkpoints hold weights this model does not have: {unexpected[:3]}")


def restore_finished_run(trainer, checkpoint: Path) -> TrainOutput:
    """The run of a checkpoint that has trained all its steps, restored without training: its weights and trainer
    state (Trainer's own resume would train one step more), and train()'s output for it, with no time trained."""
    load_weights(trainer.model, load_file(checkpoint / "model.safetensors"))
    trainer.state = TrainerState.load_from_json(str(checkpoint / "trainer_state.json"))
    losses = [entry["loss"] for entry in trainer.state.log_history if "loss" in entry]
    return TrainOutput(trainer.state.global_step, losses[-1] if losses else math.nan, {"train_runtime": 0.0})


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


def resume_checkpoint(value: str, run_dir: str | Path) -> Path:
    """--resume_from_checkpoint PATH, or true / last: the newest complete checkpoint of `run_dir`."""
    if value.lower() in ("true", "last"):
        checkpoint = last_complete_checkpoint(run_dir)
        if checkpoint is None:
            raise UsageError(
                f"--resume_from_checkpoint {value}: no complete checkpoint in {run_dir}; start anew with "
                "--overwrite_output_dir"
            )
        return checkpoint
    if not is_complete_checkpoint(value):
        raise UsageError(
            f"--resume_from_checkpoint {value} is not a complete checkpoint; pass true to take the newest complete one"
        )
    return Path(value)


def trained_steps(checkpoint: str | Path) -> dict:
    """A checkpoint's step and the run's max_steps, from its trainer_state.json."""
    state = json.loads((Path(checkpoint) / "trainer_state.json").read_text())
    return {"global_step": state["global_step"], "max_steps": state.get("max_steps")}


__all__ = [
    "SHAPE_FIELDS",
    "average_checkpoints",
    "average_into",
    "check_same_model",
    "restore_finished_run",
    "last_checkpoints",
    "checkpoint_step",
    "is_complete_checkpoint",
    "last_complete_checkpoint",
    "trained_steps",
    "resume_checkpoint",
]
