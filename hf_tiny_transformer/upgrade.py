"""Bring a saved model folder up to this version, in place: the parameter layout of hf-tiny-transformer 0.1 converted,
and the code files a folder carries (its remote code: the model, the pipeline, the text handling) replaced by this
version's, so that the folder translates as the package does (invisible characters removed, for one).

    upgrade_folder("runs/en-ja/hub", *read_weights("runs/en-ja/hub"))    # the command: tiny-transformer upgrade FOLDER
    refresh_code_files("runs/en-ja/hub")

Version 0.1 projected keys and values with one matrix (`kv_proj`, W^K and W^V side by side) and, from one commit
on, stored every projection as (in, out) (transformers' `Conv1D`). The current layout (0.2) is the one of
transformers' encoder-decoder models: `nn.Linear` (out, in) with separate `q_proj`, `k_proj`, `v_proj`,
`out_proj`, `fc1`, `fc2`. The model computes the same function before and after; the package's model-folder loader
(hf_tiny_transformer.loading) refuses the old layout with a message that names the command. model.safetensors is
rewritten all or nothing.
"""

from pathlib import Path

import torch
from safetensors import SafetensorError, safe_open
from safetensors.torch import save_file

from .errors import UsageError, first_line
from .saving import replaced_file, write_atomically

PROJECTIONS = ("q_proj", "kv_proj", "out_proj", "fc1", "fc2")


def upgrade_state_dict(state_dict: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """The 0.1 layout -> the current one. The (in, out) layout shows in kv_proj's shape: (D, 2D), not (2D, D)."""
    transposed = any(name.endswith("kv_proj.weight") and t.shape[0] * 2 == t.shape[1] for name, t in state_dict.items())
    upgraded = {}
    for name, tensor in state_dict.items():
        module = name.rsplit(".", 2)[-2]
        if transposed and module in PROJECTIONS and name.endswith(".weight"):
            tensor = tensor.T.contiguous()  # (in, out) -> nn.Linear's (out, in)
        if module == "kv_proj":
            key, value = tensor.chunk(2, dim=0)  # W^K and W^V were stacked along the output axis
            upgraded[name.replace("kv_proj", "k_proj")] = key.contiguous()
            upgraded[name.replace("kv_proj", "v_proj")] = value.contiguous()
        else:
            upgraded[name] = tensor
    return upgraded


def read_weights(folder: str | Path) -> tuple[dict[str, torch.Tensor], dict[str, str] | None]:
    """The tensors and metadata of `folder`/model.safetensors; a UsageError in one line when they cannot be read."""
    weights_file = Path(folder) / "model.safetensors"
    if not weights_file.is_file():
        raise UsageError(f"{folder} has no model.safetensors; pass a folder saved with save_pretrained")
    try:
        with safe_open(weights_file, framework="pt") as weights:
            return {name: weights.get_tensor(name) for name in weights.keys()}, weights.metadata()
    except (OSError, SafetensorError) as error:
        raise UsageError(
            f"{weights_file} cannot be read ({first_line(error)}); save the model again or copy the folder anew"
        ) from None


def upgrade_folder(folder: str | Path, state_dict: dict[str, torch.Tensor], metadata: dict[str, str] | None) -> bool:
    """Rewrite `folder`/model.safetensors (read as `state_dict`, `metadata`) in the current layout; False when it
    already has it."""
    if not any(name.endswith("kv_proj.weight") for name in state_dict):
        return False
    with replaced_file(Path(folder) / "model.safetensors") as temporary:
        save_file(upgrade_state_dict(state_dict), temporary, metadata=metadata)
    return True


def refresh_code_files(folder: str | Path) -> list[str]:
    """Replace the package's code files that `folder` carries (`*_tiny_transformer.py`, which save_pretrained copied
    there) by this version's, each all or nothing; the names of those that changed."""
    package = Path(__file__).parent
    changed = []
    for saved in sorted(Path(folder).glob("*_tiny_transformer.py")):
        current = package / saved.name
        if current.is_file() and saved.read_bytes() != current.read_bytes():
            write_atomically(saved, current.read_bytes())
            changed.append(saved.name)
    return changed


__all__ = ["upgrade_state_dict", "read_weights", "upgrade_folder", "refresh_code_files"]
