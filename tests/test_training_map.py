"""training/training_map.py: the points of the training map, as a table and a plot; unfinished points left out; a
bad --runs is one line."""

import importlib.util
import json
import subprocess
from pathlib import Path

from running import ROOT, assert_one_line_error, run_script


def make_point(runs: Path, name: str, minutes: float, bleu: float, layers: int = 3):
    """A finished point as training/map_point.sh leaves it: metrics.json, hub/config.json and the three scores."""
    folder = runs / name
    (folder / "hub").mkdir(parents=True)
    (folder / "metrics.json").write_text(json.dumps({"train_runtime_s": 60 * minutes, "train_steps": 5900}))
    config = {"encoder_layers": layers, "decoder_layers": layers, "d_model": 256}
    (folder / "hub" / "config.json").write_text(json.dumps(config))
    for offset, split in enumerate(("test", "test_far", "unseen")):
        score = {"bleu": bleu - offset, "bleu_ci": 2.5, "chrf": 35.1}
        (folder / f"{split}.score").write_text(f"translating ...\n{json.dumps(score)}\n")


def test_the_map_tables_every_finished_point_and_plots_them(tmp_path):
    runs = tmp_path / "map"
    make_point(runs, "en-ja-tiny-linear", 34, 33.5)
    make_point(runs, "en-ja-tiny-linear-90min-s1", 90, 34.5)
    make_point(runs, "ja-en-deep-linear", 34, 38.0, layers=6)
    (runs / "ja-en-wide-linear").mkdir()  # still training: no scores yet
    (runs / "notes").mkdir()
    result = run_script("training_map.py", "--runs", str(runs))
    assert result.returncode == 0, result.stderr
    rows = [line for line in result.stdout.splitlines() if line.startswith("| ") and "---" not in line][1:]
    assert rows == [
        "| en-ja-tiny-linear | 3+3 x 256 | 34 | 5,900 | 33.50 ± 2.50 | 35.10 | 32.50 ± 2.50 | 31.50 ± 2.50 |",
        "| en-ja-tiny-linear-90min-s1 | 3+3 x 256 | 90 | 5,900 | 34.50 ± 2.50 | 35.10 | 33.50 ± 2.50 | 32.50 ± 2.50 |",
        "| ja-en-deep-linear | 6+6 x 256 | 34 | 5,900 | 38.00 ± 2.50 | 35.10 | 37.00 ± 2.50 | 36.00 ± 2.50 |",
    ]
    script = load_script()  # the plot in this process, where the other tests' matplotlib is loaded already
    points = [script.read_point(folder) for folder in sorted(runs.iterdir())]
    script.plot([point for point in points if point], tmp_path / "map.png")
    assert (tmp_path / "map.png").read_bytes().startswith(b"\x89PNG")


def load_script():
    spec = importlib.util.spec_from_file_location("training_map", ROOT / "training" / "training_map.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_a_folder_without_points_is_one_line(tmp_path):
    result = run_script("training_map.py", "--runs", str(tmp_path))
    assert_one_line_error(result, f"--runs {tmp_path} holds no finished point; train one with training/map_point.sh")
    result = run_script("training_map.py", "--runs", str(tmp_path / "nope"))
    assert_one_line_error(result, f"--runs {tmp_path / 'nope'} is not a folder")


def test_a_damaged_point_is_one_line_naming_its_file(tmp_path):
    make_point(tmp_path, "en-ja-tiny-linear", 34, 33.5)
    (tmp_path / "en-ja-tiny-linear" / "unseen.score").write_bytes(b"\xff\xfe garbage")
    result = run_script("training_map.py", "--runs", str(tmp_path))
    assert_one_line_error(result, f"{tmp_path / 'en-ja-tiny-linear' / 'unseen.score'} holds no JSON object")
    result = subprocess.run(
        ["bash", str(ROOT / "training" / "map_point.sh"), "x", "fr-en"], capture_output=True, text=True
    )
    assert result.returncode == 2 and result.stderr.strip().splitlines() == [
        "map_point.sh: pass a point's name and its direction (en-ja or ja-en), then train.py's flags"
    ]
