"""training/evaluate_model.py: a model's translations of a test set scored (BLEU, chrF, exact match) and written a
line each, its source read as every front door reads text (UTF-8, a leading byte-order mark dropped); the
exact-match gate of `make demo`; the metrics block of the model card rewritten, nothing else; a folder's own code run
only when asked; a progress bar only at a terminal; bad arguments and files one line each, before any work."""

import json

import pytest

from bad_arguments import apply_changes, assert_refused_before_any_work
from builds import copy_folder
from hf_tiny_transformer import model_card, save_for_hub
from running import assert_one_line_error, run_in_terminal, run_ok, run_script


def test_a_byte_order_mark_at_the_start_of_the_files_is_not_text(trained_demo_model, tmp_path):
    """The translation of a source file that starts with a byte-order mark is that of its text."""
    sources, references = tmp_path / "sources.en", tmp_path / "references.ja"
    sources.write_text("\ufeffI eat cake.\n", encoding="utf-8")
    references.write_text("\ufeffケーキを食べます。\n", encoding="utf-8")
    output = tmp_path / "hypotheses.ja"
    run_ok(
        "evaluate_model.py", "--model", str(trained_demo_model), "--source_file", str(sources),
        "--reference_file", str(references), "--output_file", str(output),
    )  # fmt: skip
    first = run_ok("translate", "--model", str(trained_demo_model), "I eat cake.").stdout
    assert output.read_text(encoding="utf-8") == first


def test_a_lone_carriage_return_inside_a_line_does_not_end_it(trained_demo_model, tmp_path):
    """evaluate_model.py counts lines as `wc -l` does."""
    (tmp_path / "sources.en").write_bytes(b"I eat cake.\rShe reads books.\nI drink tea.\r\n")
    (tmp_path / "references.ja").write_text("a\nb\n")
    evaluated = run_ok(
        "evaluate_model.py", "--model", str(trained_demo_model), "--source_file", str(tmp_path / "sources.en"),
        "--reference_file", str(tmp_path / "references.ja"),
    )  # fmt: skip
    assert json.loads(evaluated.stdout.strip().splitlines()[-1])["sentences"] == 2


def test_a_file_in_utf16_is_one_line_naming_it(trained_demo_model, tmp_path):
    (tmp_path / "sources.en").write_bytes("I eat cake.\nShe reads books.\n".encode("utf-16"))
    (tmp_path / "references.ja").write_text("a\nb\n", encoding="utf-8")
    refused = run_script(
        "evaluate_model.py", "--model", str(trained_demo_model), "--source_file", str(tmp_path / "sources.en"),
        "--reference_file", str(tmp_path / "references.ja"),
    )  # fmt: skip
    assert_one_line_error(refused, f"--source_file {tmp_path / 'sources.en'} is UTF-16LE text", "iconv -f UTF-16LE")


def test_make_demos_gate_fails_below_its_exact_match(trained_demo_model, demo_files):
    """`make demo` ends with evaluate_model.py --min_exact_match 95: a model below it fails the run."""
    result = run_script(
        "evaluate_model.py", "--model", str(trained_demo_model), "--source_file", str(demo_files / "validation.en"),
        "--reference_file", str(demo_files / "validation.ja"), "--num_beams", "1", "--min_exact_match", "100",
    )  # fmt: skip
    scores = json.loads(result.stdout.strip().splitlines()[-1])
    assert scores["exact_match"] < 100 and result.returncode == 1, scores
    assert result.stderr.strip().splitlines()[-1] == (
        f"evaluate_model.py: exact match {scores['exact_match']:.1f}% is below 100.0%"
    )


def test_update_model_card_rewrites_only_the_metrics_block(trained_demo_model, demo_files, tmp_path):
    copy = copy_folder(trained_demo_model, tmp_path / "model")
    card_before = (copy / "README.md").read_text()
    result = run_script(
        "evaluate_model.py", "--model", str(copy), "--source_file", str(demo_files / "validation.en"),
        "--reference_file", str(demo_files / "validation.ja"), "--num_beams", "1", "--update_model_card",
    )  # fmt: skip
    assert result.returncode == 0, result.stderr[-2000:]
    scores = json.loads(result.stdout.strip().splitlines()[-1])
    card = (copy / "README.md").read_text()
    assert f"| bleu | {scores['bleu']:.2f} ± {scores['bleu_ci']:.2f} |" in card
    assert "40 sentences of `validation.en`, beam search with 1 beams" in card
    added = card[card.index("## Evaluation") : card.index("## Differences from the paper")]
    assert "<!-- metrics: written by hf-tiny-transformer -->" in added
    assert card.replace(added, "") == card_before  # the rest of the card, a person's, as it was


def test_a_folders_own_code_runs_only_with_trust_remote_code(text_model, tokenizer, tmp_path):
    card = model_card(text_model, source_lang="en", target_lang="ja", training_data="test sentences")
    folder = save_for_hub(text_model, tokenizer, tmp_path / "foreign", card)
    config = json.loads((folder / "config.json").read_text())
    config.update(model_type="somebody_elses_model", auto_map={"AutoConfig": "configuration_elsewhere.Config"})
    (folder / "config.json").write_text(json.dumps(config))
    marker = tmp_path / "code_ran"
    (folder / "configuration_elsewhere.py").write_text(f"open({str(marker)!r}, 'w').write('ran')\n")
    arguments = ["--model", str(folder), "--source_file", str(tmp_path / "s"), "--reference_file", str(tmp_path / "s")]
    (tmp_path / "s").write_text("I like tea.\n")
    assert_one_line_error(run_script("evaluate_model.py", *arguments), "pass --trust_remote_code to run it")
    assert not marker.exists()
    run_script("evaluate_model.py", *arguments, "--trust_remote_code")
    assert marker.exists()


def test_evaluation_shows_a_bar_over_sentences_only_at_a_terminal(trained_demo_model, demo_files):
    arguments = [
        "--model", str(trained_demo_model), "--source_file", str(demo_files / "validation.en"),
        "--reference_file", str(demo_files / "validation.ja"), "--num_beams", "1", "--batch_size", "8",
    ]  # fmt: skip  # flag-value pairs side by side
    at_terminal = run_in_terminal("evaluate_model.py", *arguments)
    assert "translating" in at_terminal and "/40 [" in at_terminal and "sentences/s]" in at_terminal
    to_file = run_ok("evaluate_model.py", *arguments)  # output into files
    assert "\r" not in to_file.stderr and "translating" not in to_file.stderr


# Bad arguments and files: one line each, before any work


def evaluate_args(root) -> list[str]:
    return [
        "--model", str(root / "hub"), "--source_file", str(root / "data" / "train.en"),
        "--reference_file", str(root / "data" / "train.ja"), "--target_lang", "ja",
        "--output_file", str(root / "outputs" / "hypotheses.txt"),
    ]  # fmt: skip  # flag-value pairs side by side


EVALUATE_CASES = {
    "no model": (["--model", None], "the following arguments are required: --model"),
    "no data": (["--source_file", None], "pass --corpus_dir, or --source_file and --reference_file"),
    "beams 0": (["--num_beams", "0"], "--num_beams must be a whole number of at least 1, got 0"),
    "batch size 0": (["--batch_size", "0"], "--batch_size must be a whole number of at least 1"),
    "no new tokens": (["--max_new_tokens", "0"], "--max_new_tokens must be a whole number of at least 1"),
    "length penalty not a number": (["--length_penalty", "nan"], "--length_penalty must be a finite number, got nan"),
    "exact match over 100": (["--min_exact_match", "150"], "--min_exact_match is a percentage"),
    "missing source": (
        ["--source_file", "{root}/data/nothing.en"],
        "--source_file {root}/data/nothing.en does not exist",
    ),
    "not UTF-8": (["--source_file", "{root}/data/latin1.txt"], "is not UTF-8 text"),
    "empty reference": (
        ["--reference_file", "{root}/data/empty.txt"],
        "--reference_file {root}/data/empty.txt is empty",
    ),
    "uneven": (
        ["--reference_file", "{root}/data/three.txt"],
        "--source_file {root}/data/train.en has 40 lines but --reference_file {root}/data/three.txt has 3",
    ),
    "output is a folder": (["--output_file", "{root}/outputs"], "--output_file {root}/outputs is a folder"),
    "output in a missing folder": (
        ["--output_file", "{root}/nothing/out.txt"],
        "the folder {root}/nothing does not exist",
    ),
    "output over the source": (
        ["--output_file", "{root}/data/train.en"],
        "--output_file {root}/data/train.en is also an input ({root}/data/train.en)",
    ),
    "output over the reference": (
        ["--output_file", "{root}/data/train.ja"],
        "--output_file {root}/data/train.ja is also an input ({root}/data/train.ja)",
    ),
    "output inside the model folder": (
        ["--output_file", "{root}/hub/translations.txt"],
        "lies inside the input folder {root}/hub",
    ),
    "output over a model file": (
        ["--output_file", "{root}/hub/config.json"],
        "lies inside the input folder {root}/hub",
    ),
    "missing model": (["--model", "{root}/nothing/model"], "--model {root}/nothing/model does not exist"),
    "not a model": (["--model", "{root}/data"], "--model {root}/data has no config.json"),
    "code of another model": (["--model", "{root}/foreign"], "pass --trust_remote_code to run it"),
    "split not in the corpus": (
        ["--corpus_dir", "{root}/data", "--split", "valid"],
        "--corpus_dir {root}/data: {root}/data/valid.en does not exist; pass the folder that holds the corpus",
    ),
}


@pytest.mark.parametrize("case", EVALUATE_CASES)
def test_bad_arguments_are_one_line_before_any_work(workspace, case):
    changes, message = EVALUATE_CASES[case]
    arguments = apply_changes(evaluate_args(workspace), changes, workspace)
    assert_refused_before_any_work(workspace, "evaluate_model.py", arguments, message)
