"""Folders saved with the parameter layout of 0.1 (hf_tiny_transformer/upgrade.py, `tiny-transformer upgrade`):
refused in one line until converted, in place, once; every folder is checked before any is changed."""

import json
import re
from pathlib import Path

import pytest
import torch
from transformers import AutoModelForSeq2SeqLM

from conftest import assert_one_line_error, run_command
from hf_tiny_transformer.commands.upgrade import main as upgrade_main
from hf_tiny_transformer.errors import UsageError
from hf_tiny_transformer.loading import load_model_folder

SOURCE = torch.tensor([[5, 6, 7, 8, 2], [9, 10, 2, 0, 0]])


MASK = (SOURCE != 0).long()


DECODER = torch.tensor([[1, 11, 12, 13], [1, 14, 15, 0]])


def logits(model):
    return model(input_ids=SOURCE, attention_mask=MASK, decoder_input_ids=DECODER).logits


def old_layout(state_dict: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """The parameter layout of 0.1: keys and values in one kv_proj, every projection stored (in, out)."""
    old = {}
    for name, tensor in state_dict.items():
        module = name.rsplit(".", 2)[-2]
        if module == "v_proj":
            continue
        if module == "k_proj":
            tensor = torch.cat([tensor, state_dict[name.replace("k_proj", "v_proj")]])
            name = name.replace("k_proj", "kv_proj")
        if module in ("q_proj", "k_proj", "out_proj", "fc1", "fc2") and name.endswith("weight"):
            tensor = tensor.T
        old[name] = tensor.contiguous()
    return old


def test_a_folder_of_the_old_layout_is_refused_until_converted(model, tmp_path, capsys):
    from safetensors.torch import load_file, save_file

    model.save_pretrained(tmp_path)
    save_file(
        old_layout(load_file(tmp_path / "model.safetensors")), tmp_path / "model.safetensors", metadata={"format": "pt"}
    )
    message = f"{tmp_path} was saved with the parameter layout of hf-tiny-transformer 0.1 (kv_proj); convert it once"
    with pytest.raises(
        UsageError, match=rf"^{re.escape(message)}, in place, with: tiny-transformer upgrade {tmp_path}$"
    ):
        load_model_folder(str(tmp_path))
    assert upgrade_main([str(tmp_path)]) == 0
    assert upgrade_main([str(tmp_path)]) == 0
    assert capsys.readouterr().out.splitlines() == [
        f"{tmp_path}: weights converted",
        f"{tmp_path}: already up to date",
    ]
    assert torch.equal(logits(AutoModelForSeq2SeqLM.from_pretrained(tmp_path)), logits(model))
    assert json.loads((tmp_path / "config.json").read_text())["model_type"] == "tiny_transformer"


def test_the_upgrade_checks_every_folder_before_it_changes_one(model, tmp_path):
    from safetensors.torch import load_file, save_file

    old, damaged = tmp_path / "old", tmp_path / "damaged"
    for folder in (old, damaged):
        model.save_pretrained(folder)
        save_file(
            old_layout(load_file(folder / "model.safetensors")), folder / "model.safetensors", metadata={"format": "pt"}
        )
    (damaged / "model.safetensors").write_bytes((damaged / "model.safetensors").read_bytes()[:1000])  # cut short
    before = (old / "model.safetensors").read_bytes()
    result = run_command("upgrade", str(old), str(damaged))
    assert_one_line_error(result, "damaged/model.safetensors cannot be read")
    assert (old / "model.safetensors").read_bytes() == before
    help_text = run_command("upgrade", "--help")
    assert help_text.returncode == 0 and help_text.stdout.startswith("usage: tiny-transformer upgrade [-h] FOLDER")


def test_the_code_files_a_folder_carries_are_replaced_by_this_versions(model, tmp_path, capsys):
    """A folder saved by an earlier version carries that version's code (for trust_remote_code): upgrade replaces it,
    and says so; the package's own file is what the folder then holds."""
    import hf_tiny_transformer

    model.save_pretrained(tmp_path)
    carried = tmp_path / "text_tiny_transformer.py"
    carried.write_text("# the code of an earlier version\n")
    assert upgrade_main([str(tmp_path)]) == 0
    assert upgrade_main([str(tmp_path)]) == 0
    assert capsys.readouterr().out.splitlines() == [
        f"{tmp_path}: code files replaced (text_tiny_transformer.py)",
        f"{tmp_path}: already up to date",
    ]
    package = Path(hf_tiny_transformer.__file__).parent
    assert carried.read_bytes() == (package / "text_tiny_transformer.py").read_bytes()
