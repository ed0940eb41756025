"""training/compare_models.py: pairs of saved models on one test set, each pair's BLEU difference with its paired
bootstrap p-value and its cross-entropy difference, and the means over the pairs."""

import json
import math
from pathlib import Path

import pytest
import torch

from conftest import tiny_model
from running import assert_one_line_error, run_script


@pytest.fixture
def models(tmp_path, tokenizer) -> dict[str, str]:
    """Two saved random models of the tokenizer's vocabulary: "uniform", whose tied embeddings are zero, so that its
    logits are all 0 and every token has probability 1 / V; and "random", of seed 1."""
    folders = {}
    for name, seed in (("uniform", 0), ("random", 1)):
        model = tiny_model(seed, vocab_size=len(tokenizer))
        if name == "uniform":
            torch.nn.init.zeros_(model.get_input_embeddings().weight)
        model.save_pretrained(tmp_path / name)
        tokenizer.save_pretrained(tmp_path / name)
        folders[name] = str(tmp_path / name)
    return folders


def vocabulary_size(folder: str) -> int:
    return json.loads((Path(folder) / "config.json").read_text())["vocab_size"]


@pytest.fixture
def texts(tmp_path) -> list[str]:
    (tmp_path / "source.txt").write_text("i like the cat .\nwhere is the station ?\nhe said so .\n")
    (tmp_path / "reference.txt").write_text("私は猫が好きです。\n駅はどこですか。\n彼はそう言った。\n")
    return ["--source_file", str(tmp_path / "source.txt"), "--reference_file", str(tmp_path / "reference.txt")]


def test_pairs_are_scored_in_order_with_their_differences_and_means(tmp_path, models, texts):
    """A model whose logits are all 0 scores ln(V) nats a token, whatever the text; a pair is (baseline, system), its
    differences system - baseline; two pairs in opposite orders and a model against itself average to 0, with the
    standard error of (d, -d, 0)."""
    uniform, random = models["uniform"], models["random"]
    output = tmp_path / "comparison.json"
    pairs = ["--pair", uniform, random, "--pair", random, uniform, "--pair", uniform, uniform]
    result = run_script("compare_models.py", *texts, *pairs, "--num_beams", "1", "--batch_size", "2",
                        "--output_file", str(output), timeout=300)  # fmt: skip
    assert result.returncode == 0, result.stderr[-2000:]
    report = json.loads(output.read_text())
    first, second, same = report["pairs"]
    assert first["pair"] == [uniform, random] and second["pair"] == [random, uniform]
    assert first["nats"][0] == pytest.approx(math.log(vocabulary_size(uniform)), abs=1e-5)
    assert first["nats_difference"] == pytest.approx(first["nats"][1] - first["nats"][0]) != 0
    assert second["nats_difference"] == pytest.approx(-first["nats_difference"])
    assert same["nats_difference"] == 0.0 and same["bleu_difference"] == 0.0
    assert first["bleu_difference"] == pytest.approx(first["bleu"][1] - first["bleu"][0]) and 0 <= first["p"] <= 1
    assert report["nats"]["mean"] == pytest.approx(0.0, abs=1e-9)
    assert report["nats"]["standard_error"] == pytest.approx(abs(first["nats_difference"]) / 3**0.5)
    assert f"| {uniform} | {random} |" in result.stdout and "mean over 3 pair(s), system - baseline:" in result.stdout


def test_bad_models_and_flags_are_one_line(tmp_path, models, texts):
    (tmp_path / "empty").mkdir()
    good = models["random"]
    cases = {
        ("--pair", good, str(tmp_path / "empty")): f"--pair {tmp_path / 'empty'}",
        ("--pair", good, good, "--batch_size", "0"): "--batch_size must be a whole number of at least 1",
        ("--pair", good, good, "--output_file", str(tmp_path)): f"--output_file {tmp_path} is a folder",
        ("--pair", good): "argument --pair: expected 2 arguments",
        ("--pair", good, good, "--output_file", texts[1]): f"--output_file {texts[1]} is also an input",
    }
    for flags, message in cases.items():
        result = run_script("compare_models.py", *texts, *flags)
        assert_one_line_error(result, message)
        assert result.stderr.startswith(f"compare_models.py: {message}"), result.stderr
