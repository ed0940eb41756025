"""Checkpoints (hf_tiny_transformer/trainer/checkpoints.py, training/average_checkpoints.py): averaging the last
checkpoints of a run, and only checkpoints of one run; resuming from the newest complete checkpoint, checked against
the run's model and tokenizer, to the parameters an uninterrupted run reaches; a new run never mixes in an old run's
checkpoints."""

import json
import re
import shutil

import pytest
import torch
from safetensors.torch import load_file, save_file

from bad_arguments import assert_refused_before_any_work, command_lines, folder_digest
from builds import copy_folder
from conftest import ENGLISH, tiny_model
from hf_tiny_transformer.data.tokenizer import train_tokenizer
from hf_tiny_transformer.trainer.checkpoints import (
    average_checkpoints,
    is_complete_checkpoint,
    last_checkpoints,
    last_complete_checkpoint,
)
from running import SMALL_MODEL, assert_one_line_error, few_steps, mode_flags, run_ok, run_script

# Averaging


def save_weights(folder, weights):
    folder.mkdir(parents=True)
    save_file(weights, folder / "model.safetensors")


def test_the_average_of_two_known_checkpoints(tmp_path):
    first = {"a": torch.tensor([1.0, 2.0]), "b": torch.tensor([[0.0, -4.0]])}
    second = {"a": torch.tensor([3.0, 6.0]), "b": torch.tensor([[2.0, -2.0]])}  # near the first, as in one run
    save_weights(tmp_path / "checkpoint-100", first)
    save_weights(tmp_path / "checkpoint-200", second)
    averaged = average_checkpoints([tmp_path / "checkpoint-100", tmp_path / "checkpoint-200"])
    assert torch.equal(averaged["a"], torch.tensor([2.0, 4.0])) and torch.equal(
        averaged["b"], torch.tensor([[1.0, -3.0]])
    )


def test_a_copy_or_a_checkpoint_of_another_run_is_not_averaged(tmp_path):
    """The average of a checkpoint and its copy is the checkpoint (nothing averaged); that of two runs is noise."""
    first = {"a": torch.tensor([1.0, 2.0]), "b": torch.tensor([[0.0, -4.0]])}
    other_run = {"a": torch.tensor([1.0, 2.0]), "b": torch.tensor([[3.0, 0.5]])}  # near orthogonal to the first
    for name, weights in (("checkpoint-1", first), ("copy", first), ("other", other_run)):
        save_weights(tmp_path / name, weights)
    with pytest.raises(ValueError, match="checkpoint-1 and .*copy hold the same weights; average different"):
        average_checkpoints([tmp_path / "checkpoint-1", tmp_path / "copy"])
    different = r"are checkpoints of different runs \(the cosine similarity of their weights is -0\.16\), whose average"
    with pytest.raises(ValueError, match=different):
        average_checkpoints([tmp_path / "checkpoint-1", tmp_path / "other"])


def test_the_last_checkpoints_must_be_evenly_spaced(tmp_path):
    for step in (100, 200, 300, 500):
        save_weights(tmp_path / f"checkpoint-{step}", {"a": torch.zeros(1)})
    (tmp_path / "checkpoint-600").mkdir()  # no weights: an interrupted save
    assert [p.name for p in last_checkpoints(tmp_path, 2)] == ["checkpoint-300", "checkpoint-500"]
    with pytest.raises(ValueError, match=r"not evenly spaced \(steps \[200, 300, 500\]\)"):
        last_checkpoints(tmp_path, 3)
    with pytest.raises(ValueError, match="holds 4 checkpoints with weights, fewer than the 5"):
        last_checkpoints(tmp_path, 5)


def test_training_by_tokens_with_averaging_gives_the_mean_of_the_last_checkpoints(demo_files, tmp_path):
    out = tmp_path / "run"
    recipe = [
        "--batch_tokens", "600", "--max_steps", "6", "--save_strategy", "steps", "--save_steps", "2",
        "--average_checkpoints", "3", "--bf16", "true",
    ]  # fmt: skip  # flag-value pairs side by side
    run_ok("train.py", *few_steps(demo_files, out, *recipe))
    averaged = load_file(out / "hub" / "model.safetensors")
    checkpoints = [load_file(out / f"checkpoint-{step}" / "model.safetensors") for step in (2, 4, 6)]
    for name, tensor in averaged.items():
        expected = sum(checkpoint[name].double() for checkpoint in checkpoints) / 3
        torch.testing.assert_close(tensor.double(), expected, atol=1e-6, rtol=1e-6)
    assert any(not torch.equal(tensor, checkpoints[-1][name]) for name, tensor in averaged.items())
    assert "label_smoothing" not in json.loads((out / "hub" / "config.json").read_text())  # the run's, not the model's


def test_the_averaging_script_writes_a_loadable_model(checkpointed_run, tmp_path):
    out = copy_folder(checkpointed_run, tmp_path / "run")  # 4 steps, a checkpoint every 2
    run_ok("average_checkpoints.py", "--run_dir", str(out), "--last", "2", "--output_dir", str(tmp_path / "averaged"))
    from transformers import AutoModelForSeq2SeqLM

    model = AutoModelForSeq2SeqLM.from_pretrained(tmp_path / "averaged")
    expected = (
        load_file(out / "checkpoint-2" / "model.safetensors")["model.encoder.embed_tokens.weight"]
        + load_file(out / "checkpoint-4" / "model.safetensors")["model.encoder.embed_tokens.weight"]
    ) / 2
    torch.testing.assert_close(model.model.encoder.embed_tokens.weight.detach(), expected)
    assert_one_line_error(
        run_script("average_checkpoints.py", "--run_dir", str(out), "--last", "3", "--output_dir", str(tmp_path / "x")),
        "fewer than the 3 to average",
    )


def save_checkpoint(folder, model, tokenizer):
    """A checkpoint folder as Trainer writes one: the model (config and weights) and its tokenizer."""
    model.save_pretrained(folder)
    tokenizer.save_pretrained(folder)


def test_checkpoints_of_models_of_other_shapes_or_tokenizers_are_not_averaged(tokenizer, tmp_path):
    """Two runs' checkpoints: another vocabulary size (weights that cannot be added), then the same shapes with
    another tokenizer (weights that can, into a model whose token ids mean nothing)."""
    other_tokenizer = train_tokenizer(ENGLISH * 3, vocab_size=len(tokenizer), model_max_length=64)
    assert other_tokenizer.get_vocab() != tokenizer.get_vocab()
    save_checkpoint(tmp_path / "a" / "checkpoint-4", tiny_model(vocab_size=len(tokenizer)), tokenizer)
    save_checkpoint(tmp_path / "b" / "checkpoint-4", tiny_model(vocab_size=len(tokenizer) + 8), tokenizer)
    save_checkpoint(tmp_path / "c" / "checkpoint-4", tiny_model(seed=1, vocab_size=len(tokenizer)), other_tokenizer)
    first = str(tmp_path / "a" / "checkpoint-4")
    for other, difference in (("b", f"vocab_size {len(tokenizer)} and {len(tokenizer) + 8}"), ("c", "tokenizer")):
        second = str(tmp_path / other / "checkpoint-4")
        output = tmp_path / f"averaged-{other}"
        result = run_script("average_checkpoints.py", "--checkpoints", first, second, "--output_dir", str(output))
        assert_one_line_error(result, first, second, difference)
        assert not output.exists()
        with pytest.raises(ValueError, match=difference):  # train.py --average_checkpoints: the same check
            average_checkpoints([first, second])


def test_averaging_a_checkpoint_that_does_not_exist_says_so(tmp_path):
    (tmp_path / "checkpoint-2").mkdir()
    result = run_script(
        "average_checkpoints.py", "--checkpoints", str(tmp_path / "checkpoint-1"), str(tmp_path / "checkpoint-2"),
        "--output_dir", str(tmp_path / "averaged"),
    )  # fmt: skip
    assert_one_line_error(
        result, f"--checkpoints: {tmp_path / 'checkpoint-1'} does not exist; pass checkpoint-N folders"
    )


# Resuming


def test_the_newest_complete_checkpoint_is_resumed(tmp_path):
    """A kill during a save leaves a checkpoint without its trainer_state.json (Trainer writes it last)."""
    for step in (2, 4, 6):
        save_weights(tmp_path / f"checkpoint-{step}", {"a": torch.zeros(1)})
        if step < 6:
            (tmp_path / f"checkpoint-{step}" / "trainer_state.json").write_text(json.dumps({"global_step": step}))
    assert not is_complete_checkpoint(tmp_path / "checkpoint-6") and is_complete_checkpoint(tmp_path / "checkpoint-4")
    assert last_complete_checkpoint(tmp_path).name == "checkpoint-4"
    assert last_complete_checkpoint(tmp_path / "nothing") is None


def test_a_run_with_overwrite_removes_the_earlier_runs_checkpoints(checkpointed_run, demo_files, tmp_path):
    out = copy_folder(checkpointed_run, tmp_path / "run")
    saving = ["--save_strategy", "steps", "--save_steps", "2"]
    assert sorted(p.name for p in out.glob("checkpoint-*")) == ["checkpoint-2", "checkpoint-4"]
    assert_one_line_error(
        run_script("train.py", *few_steps(demo_files, out, *saving)), "already holds a model or checkpoints"
    )
    run_ok("train.py", *few_steps(demo_files, out, *saving, "--max_steps", "2", "--overwrite_output_dir", "true"))
    assert sorted(p.name for p in out.glob("checkpoint-*")) == ["checkpoint-2"]


def test_resume_checks_the_tokenizer_and_the_shape(checkpointed_run, demo_files, tmp_path):
    out = copy_folder(checkpointed_run, tmp_path / "run")  # checkpoint-2 and checkpoint-4
    resume = ["--resume_from_checkpoint", "true", "--max_steps", "6"]
    other_shape = few_steps(demo_files, out, *resume)
    other_shape[other_shape.index(SMALL_MODEL)] = SMALL_MODEL.replace("d_model=32", "d_model=64")
    assert_one_line_error(
        run_script("train.py", *other_shape), "checkpoint-4 is a different model (d_model 32 there, 64 here"
    )
    other = train_tokenizer(["other words entirely"] * 5 + ["ほかの言葉"] * 5, vocab_size=300)
    other.save_pretrained(tmp_path / "other_tokenizer")
    result = run_script(
        "train.py", *few_steps(demo_files, out, *resume, "--tokenizer_name", str(tmp_path / "other_tokenizer"))
    )
    assert_one_line_error(result, "checkpoint-4 was trained with another tokenizer than this run's")


@pytest.mark.parametrize("damage", ["no trainer_state.json", "empty trainer_state.json", "no weights"])
def test_resume_skips_a_half_written_checkpoint(checkpointed_run, demo_files, tmp_path, damage):
    out = copy_folder(checkpointed_run, tmp_path / "run")  # checkpoint-2 and checkpoint-4
    newest = out / "checkpoint-4"
    if damage == "no weights":
        (newest / "model.safetensors").unlink()
    else:
        (newest / "trainer_state.json").unlink()
        if damage.startswith("empty"):
            (newest / "trainer_state.json").write_text("")
    resume = ["--resume_from_checkpoint", "true", "--max_steps", "6", "--save_strategy", "steps", "--save_steps", "2"]
    result = run_ok("train.py", *few_steps(demo_files, out, *resume))
    assert f"skipping {newest}: it is incomplete" in result.stderr
    assert json.loads((out / "metrics.json").read_text())["train_steps"] == 6


def test_resuming_a_run_that_reached_max_steps_trains_nothing_and_leaves_its_model(
    checkpointed_run, demo_files, tmp_path
):
    out = copy_folder(checkpointed_run, tmp_path / "run")  # 4 steps, a checkpoint every 2
    steps = ["--save_strategy", "steps", "--save_steps", "2"]
    before = folder_digest(out)
    again = run_ok("train.py", *few_steps(demo_files, out, *steps, "--resume_from_checkpoint", "true"))
    assert "checkpoint-4 has trained all 4 steps of the run: nothing to train" in again.stderr
    assert folder_digest(out) == before


def test_a_run_killed_mid_training_resumes_to_the_same_parameters(demo_files, tmp_path):
    steps = ["--max_steps", "24", "--save_strategy", "steps", "--save_steps", "8", "--learning_rate", "0.003"]
    full = tmp_path / "full"
    run_ok("train.py", *few_steps(demo_files, full, *steps))
    # the interrupted run trains in the mode the full run's trial chose (bf16 on a CPU where it pays): each run's own
    # trial may choose differently on a busy machine, and another mode is another run, not a resumed one
    steps += mode_flags(json.loads((full / "metrics.json").read_text()))

    killed = tmp_path / "killed"
    interrupted = run_script(
        "train.py", *few_steps(demo_files, killed, *steps), "--dataloader_num_workers", "0", timeout=300,
        kill_when=lambda: (killed / "checkpoint-8" / "trainer_state.json").exists(),
    )  # fmt: skip
    assert interrupted.returncode == -9, "the run ended before it could be killed"
    assert not (killed / "hub").exists(), "the run must have been killed before it finished"

    resume = ["--resume_from_checkpoint", "true", "--log_level", "info"]
    resumed = run_ok("train.py", *few_steps(demo_files, killed, *steps, *resume))
    assert re.search(r"Resuming training from checkpoint with epoch \d+ and global step (8|16)", resumed.stderr)
    expected = load_file(full / "hub" / "model.safetensors")
    got = load_file(killed / "hub" / "model.safetensors")
    for name in expected:
        # float noise only: Adam turns the ~1e-9 gradients of the key biases (zero in exact arithmetic) into
        # steps of any sign, so allow 2e-4; a resume that lost the optimizer state or the data order is off by ~1e-2
        torch.testing.assert_close(got[name], expected[name], atol=2e-4, rtol=1e-3, msg=name)


def test_a_run_killed_after_its_last_checkpoint_resumes_to_its_final_model_metrics_and_test_scores(
    demo_files, tmp_path
):
    """A kill between the last checkpoint and the save of `hub` (simulated: the finished run's hub and metrics removed,
    a dead process's staging folder left): the resume trains nothing and writes them, the average as the recipe
    says; resumed again, it leaves them as they are."""
    out = tmp_path / "run"
    test_split = ["--test_source_file", str(demo_files / "validation.en"), "--test_target_file"]
    flags = [
        *test_split, str(demo_files / "validation.ja"), "--do_predict", "true", "--generation_max_length", "16",
        "--save_strategy", "steps", "--save_steps", "2", "--average_checkpoints", "2",
    ]  # fmt: skip  # flag-value pairs side by side
    run_ok("train.py", *few_steps(demo_files, out, *flags))
    finished = load_file(out / "hub" / "model.safetensors")
    shutil.rmtree(out / "hub")
    (out / "metrics.json").unlink()
    (out / ".hub.saving-999999999-0123abcd").mkdir()  # the staging folder of the killed save

    resumed = run_ok("train.py", *few_steps(demo_files, out, *flags, "--resume_from_checkpoint", "true"))
    assert "the final model is the average of checkpoint-2, checkpoint-4" in resumed.stderr
    metrics = json.loads((out / "metrics.json").read_text())
    assert metrics["train_steps"] == 4 and {"test_bleu", "test_chrf"} <= set(metrics)
    assert "| bleu |" in (out / "hub" / "README.md").read_text()
    assert not (out / ".hub.saving-999999999-0123abcd").exists()
    got = load_file(out / "hub" / "model.safetensors")
    assert got.keys() == finished.keys() and all(torch.equal(got[name], finished[name]) for name in finished)

    before = folder_digest(out)
    again = run_ok("train.py", *few_steps(demo_files, out, *flags, "--resume_from_checkpoint", "true"))
    assert "has trained all 4 steps of the run: nothing to train" in again.stderr
    assert folder_digest(out) == before


# Bad arguments: one line each, before any work


AVERAGE_CASES = """
average_checkpoints.py --output_dir {root}/outputs/averaged
    pass --run_dir (with --last) or --checkpoints
average_checkpoints.py --run_dir {root}/run --last 1 --output_dir {root}/outputs/averaged
    --last must be at least 2
average_checkpoints.py --checkpoints {root}/hub {root}/pickled --output_dir {root}/a_file
    --output_dir {root}/a_file is a file
average_checkpoints.py --checkpoints {root}/hub {root}/pickled --output_dir {root}/hub
    --output_dir {root}/hub is also an input
average_checkpoints.py --checkpoints {root}/hub {root}/pickled --output_dir {root}/pickled/checkpoint-9
    lies inside the input folder {root}/pickled
average_checkpoints.py --checkpoints {root}/hub {root}/pickled --output_dir {root}/foreign
    --output_dir {root}/foreign holds what this command does not write (README.md, configuration_elsewhere.py
average_checkpoints.py --checkpoints {root}/data {root}/hub --output_dir {root}/outputs/averaged
    --checkpoints: {root}/data holds no model.safetensors
average_checkpoints.py --checkpoints {root}/hub {root}/hub/ --output_dir {root}/outputs/averaged
    --checkpoints: {root}/hub is listed twice; pass each checkpoint once
"""


@pytest.mark.parametrize("script, arguments, message", command_lines(AVERAGE_CASES))
def test_bad_arguments_are_one_line_before_any_work(workspace, script, arguments, message):
    assert_refused_before_any_work(workspace, script, arguments, message)
