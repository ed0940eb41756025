"""The training recipe's pieces: batches by tokens, checkpoint averaging, decoding settings chosen on dev."""

import json
import shutil

import pytest
import torch
from safetensors.torch import load_file, save_file

from conftest import ENGLISH, assert_one_line_error, few_steps, run_script, tiny_model
from hf_tiny_transformer.data.batching import TokenBatchSampler, batch_shapes, padding_fraction
from hf_tiny_transformer.data.tokenizer import train_tokenizer
from hf_tiny_transformer.serving.translator import TransformersTranslator, translation_length_limit
from hf_tiny_transformer.trainer.checkpoints import (
    average_checkpoints,
    is_complete_checkpoint,
    last_checkpoints,
    last_complete_checkpoint,
)


def run_ok(script: str, *arguments: str):
    result = run_script(script, *arguments, timeout=300)
    assert result.returncode == 0, result.stderr[-3000:]
    return result


def lengths(seed: int, count: int = 500) -> tuple[list[int], list[int]]:
    """Source lengths of 3 to 40 tokens, each target a few tokens longer or shorter, as translations are."""
    generator = torch.Generator().manual_seed(seed)
    sources = torch.randint(3, 40, (count,), generator=generator)
    targets = (sources + torch.randint(-3, 6, (count,), generator=generator)).clamp(min=2)
    return sources.tolist(), targets.tolist()


def test_token_batches_hold_every_pair_once_an_epoch_within_the_budget():
    sources, targets = lengths(0)
    sampler = TokenBatchSampler(sources, targets, max_tokens=600, seed=3)
    epochs = []
    for epoch in range(3):
        sampler.set_epoch(epoch)
        batches = list(sampler)
        assert len(batches) == len(sampler)
        assert sorted(i for batch in batches for i in batch) == list(range(500))  # each pair once
        for batch in batches:
            assert len(batch) * (max(sources[i] for i in batch) + max(targets[i] for i in batch)) <= 600
        epochs.append(batches)
    assert epochs[0] != epochs[1]  # another order each epoch
    sampler.set_epoch(0)
    assert list(sampler) == epochs[0]  # the same order for the same epoch: resuming replays it


def test_token_batches_pad_far_less_than_random_batches_of_as_many_pairs():
    sources, targets = lengths(1)
    sampler = TokenBatchSampler(sources, targets, max_tokens=800)
    pairs_per_batch = round(500 / len(sampler))
    random_batches = torch.randperm(500, generator=torch.Generator().manual_seed(0)).split(pairs_per_batch)
    by_tokens = padding_fraction(sampler.batches, sources, targets)
    random = padding_fraction([b.tolist() for b in random_batches], sources, targets)
    assert by_tokens < 0.15 < random


def test_batch_shapes_are_the_distinct_pairs_and_longest_lengths():
    sources, targets = [3, 5, 4, 2, 5], [4, 7, 7, 1, 6]
    batches = [[0, 1], [2, 3], [1, 0], [4], [2, 1]]
    assert batch_shapes(batches, sources, targets) == {(2, 5, 7), (2, 4, 7), (1, 5, 6)}


def test_a_budget_below_the_longest_pair_is_refused():
    with pytest.raises(
        ValueError, match="smaller than the longest pair \\(12 source \\+ target tokens\\); raise it to at least 12"
    ):
        TokenBatchSampler([3, 5], [4, 7], max_tokens=10)


def save_weights(folder, weights):
    folder.mkdir(parents=True)
    save_file(weights, folder / "model.safetensors")


def test_the_average_of_two_known_checkpoints(tmp_path):
    first = {"a": torch.tensor([1.0, 2.0]), "b": torch.tensor([[0.0, -4.0]])}
    second = {"a": torch.tensor([3.0, 6.0]), "b": torch.tensor([[2.0, 4.0]])}
    save_weights(tmp_path / "checkpoint-100", first)
    save_weights(tmp_path / "checkpoint-200", second)
    averaged = average_checkpoints([tmp_path / "checkpoint-100", tmp_path / "checkpoint-200"])
    assert torch.equal(averaged["a"], torch.tensor([2.0, 4.0])) and torch.equal(
        averaged["b"], torch.tensor([[1.0, 0.0]])
    )


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


def test_the_averaging_script_writes_a_loadable_model(demo_files, tmp_path):
    out = tmp_path / "run"
    run_ok("train.py", *few_steps(demo_files, out, "--max_steps", "4", "--save_strategy", "steps", "--save_steps", "2"))
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


@pytest.mark.parametrize(
    "flags, message",
    [
        (["--average_checkpoints", "3", "--save_strategy", "no"], "--average_checkpoints needs --save_strategy steps"),
        (
            ["--average_checkpoints", "3", "--save_strategy", "steps", "--save_steps", "4", "--max_steps", "10"],
            "must be a multiple of --save_steps",
        ),
        (
            [
                "--average_checkpoints",
                "3",
                "--save_strategy",
                "steps",
                "--save_steps",
                "2",
                "--max_steps",
                "6",
                "--save_total_limit",
                "2",
            ],
            "needs --save_total_limit 3 or more",
        ),
        (["--batch_tokens", "1"], "--batch_tokens must be at least 2"),
    ],
)
def test_recipe_options_that_cannot_work_stop_the_run(demo_files, tmp_path, flags, message):
    assert_one_line_error(
        run_script("train.py", *few_steps(demo_files, tmp_path / "run", "--max_steps", "6", *flags)), message
    )


def test_translations_are_in_the_given_order_and_their_length_follows_the_source(text_model, tokenizer):
    texts = ["I like tea.", "The cat is sleeping on the sofa and my brother reads three books.", "Hi."]
    text_model.generation_config.english_casing = False  # the tokens as generated, to count them
    translator = TransformersTranslator(text_model, tokenizer)
    together = translator.translate(texts, batch_size=2, num_beams=1)
    one_by_one = [translator.translate([text], num_beams=1)[0] for text in texts]
    assert together == one_by_one
    for text, translation in zip(texts, together):
        source_length = len(tokenizer(text)["input_ids"])
        assert len(tokenizer(translation)["input_ids"]) <= translation_length_limit(source_length, 64) + 1
    assert translation_length_limit(3, 64) == 16 and translation_length_limit(100, 64) == 64


def test_decoding_settings_are_chosen_on_dev_and_written_into_the_generation_config(
    trained_demo_model, demo_files, tmp_path
):
    folder = tmp_path / "model"
    shutil.copytree(trained_demo_model, folder)
    arguments = [
        "--model", str(folder), "--source_file", str(demo_files / "validation.en"),
        "--reference_file", str(demo_files / "validation.ja"), "--target_lang", "ja", "--num_beams", "1", "2",
        "--length_penalty", "0.5", "1.5",
    ]  # fmt: skip  # flag-value pairs side by side
    output = run_ok("tune_decoding.py", *arguments).stdout
    result = json.loads([line for line in output.splitlines() if line.startswith("{")][0])
    assert [(r["num_beams"], r["length_penalty"]) for r in result["tried"]] == [(1, 1.0), (2, 0.5), (2, 1.5)]
    best = max(result["tried"], key=lambda r: (r["bleu"], -r["seconds"]))
    generation = json.loads((folder / "generation_config.json").read_text())
    assert (generation["num_beams"], generation.get("length_penalty", 1.0)) == (
        best["num_beams"],
        best["length_penalty"],
    )

    assert generation["target_lang"] == "ja"  # what training wrote stays beside the choice


def test_the_newest_complete_checkpoint_is_resumed(tmp_path):
    """A kill during a save leaves a checkpoint without its trainer_state.json (Trainer writes it last)."""
    for step in (2, 4, 6):
        save_weights(tmp_path / f"checkpoint-{step}", {"a": torch.zeros(1)})
        if step < 6:
            (tmp_path / f"checkpoint-{step}" / "trainer_state.json").write_text(json.dumps({"global_step": step}))
    assert not is_complete_checkpoint(tmp_path / "checkpoint-6") and is_complete_checkpoint(tmp_path / "checkpoint-4")
    assert last_complete_checkpoint(tmp_path).name == "checkpoint-4"
    assert last_complete_checkpoint(tmp_path / "nothing") is None
