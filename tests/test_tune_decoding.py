"""training/tune_decoding.py: the decoding settings (beams, length penalty) chosen on a dev set and written into the
model's generation config, beside what training wrote there; bad arguments one line each, before any work."""

import json
import shutil

import pytest

from bad_arguments import assert_refused_before_any_work, command_lines
from running import run_ok


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


# Bad arguments: one line each, before any work


TUNE_CASES = """
tune_decoding.py --model {root}/hub --source_file {root}/data/train.en
    pass --corpus_dir, or --source_file and --reference_file
tune_decoding.py --model {root}/hub --source_file {root}/data/train.en --reference_file {root}/data/three.txt
    --source_file {root}/data/train.en has 40 lines but --reference_file {root}/data/three.txt has 3
tune_decoding.py --model {root}/hub --corpus_dir {root}/data --num_beams 0
    --num_beams must be a whole number of at least 1
tune_decoding.py --model {root}/hub --corpus_dir {root}/data --length_penalty nan
    --length_penalty must be a finite number
"""


@pytest.mark.parametrize("script, arguments, message", command_lines(TUNE_CASES))
def test_bad_arguments_are_one_line_before_any_work(workspace, script, arguments, message):
    assert_refused_before_any_work(workspace, script, arguments, message)
