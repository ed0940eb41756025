"""The benchmarks run end to end as smoke runs of seconds (one tiny iteration), and refuse bad flags in one line; speed
itself is never asserted in a test."""

import importlib.util
import json
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from hf_tiny_transformer.guards.runner import run
from running import SMALL_MODEL, run_script

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "benchmarks" / "speed_vs_marian.py"


def load_benchmark(script: str = SCRIPT.name):
    spec = importlib.util.spec_from_file_location(script.removesuffix(".py"), SCRIPT.with_name(script))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_benchmarks_refuse_a_bad_output_before_any_work(tmp_path, capsys):
    """A folder, or a path under a file, is one line and exit 2 before the models are built or loaded (they would have
    written it only after minutes of work)."""
    (tmp_path / "file.txt").write_text("text")
    cases = {
        str(tmp_path): f"--output {tmp_path} is a folder; pass a file name",
        str(tmp_path / "file.txt" / "r.json"): f"{tmp_path / 'file.txt'} is a file, not a folder; pass a path inside",
    }
    for script in ("speed_vs_marian.py", "training_modes.py", "profile_training.py", "start_up.py"):
        for output, message in cases.items():
            result = run_script(script, "--output", output, folder="benchmarks")
            [line] = result.stderr.strip().splitlines()
            assert result.returncode == 2 and line.startswith(f"{script}: ") and message in line, line
    assert (tmp_path / "file.txt").read_text() == "text"
    speed = load_benchmark()
    for flags, message in (
        (["--repeats", "0"], "--repeats must be at least 1, got 0"),
        (["--batch_size", "0"], "--batch_size must be at least 1, got 0"),
        (["--batch_size", "abc"], "argument --batch_size/--batch-size: invalid int value: 'abc'"),
    ):
        assert run(speed.main, flags, prog="speed_vs_marian.py") == 2
        [line] = capsys.readouterr().err.strip().splitlines()
        assert line.startswith("speed_vs_marian.py: ") and message in line, line


def test_speed_benchmark_runs_and_prints_every_ratio(tmp_path):
    output = tmp_path / "result.json"
    command = [
        sys.executable,
        str(SCRIPT),
        "--repeats",
        "1",
        "--warmup",
        "0",
        "--skip_paper_base",
        "--bf16",
        "--ctranslate2",
    ]
    # a fresh process: CTranslate2's OpenMP threads do not survive a fork of a process that has used them
    flags = ["--vocab_size", "512", "--batch_size", "4", "--output", str(output)]  # bfloat16 is slow on some CPUs
    result = subprocess.run([*command, *flags], capture_output=True, text=True, cwd=ROOT)
    assert result.returncode == 0, result.stderr[-2000:]
    ratios = json.loads(result.stdout.strip().splitlines()[-1])
    engines = {
        f"{workload}_ctranslate2_{q}"
        for workload in ("greedy_b1", "greedy_b32", "beam4_b8")
        for q in ("float32", "int8")
    }
    assert set(ratios) == {
        "training_fp32",
        "training_bf16",
        "ours_bf16_vs_marian_fp32",
        "memory",
        "greedy_b1",
        "greedy_b32",
        "beam4_b8",
        *engines,
    }
    assert all(value > 0 for value in ratios.values())
    table = json.loads(output.read_text())["table"]
    parameters = sum(p.numel() for p in load_benchmark().build_models("tiny", 512, "cpu")["ours"].parameters())
    for model in ("ours", "marian"):  # float32 parameters, gradients and Adam's two moments are alive at once
        assert table["memory"][model] >= 4 * 4 * parameters
    median, low, high = table["greedy_b1"]["ratio"]
    assert low == median == high and round(median, 2) == ratios["greedy_b1"]  # one round: the interval is that round
    for model in ("ours", "marian"):
        operators, reads = table["operators_greedy_b1"][model]
        assert operators > 24 * 10 and 0 <= reads < operators  # 24 decoding steps of many operators each


def test_the_speed_ratio_interval_is_the_medians_order_statistics():
    """Fifteen rounds: the median's 95 % interval runs from the 4th to the 12th smallest ratio (binomial)."""
    benchmark = load_benchmark()
    ours = [1.0] * 15
    marian = [1.0 + k / 100 for k in (7, 3, 11, 0, 14, 5, 9, 1, 13, 2, 8, 12, 4, 10, 6)]  # ratios 1.00 ... 1.14
    median, low, high = benchmark.ratio_interval(ours, marian)
    assert (median, low, high) == pytest.approx((1.07, 1.03, 1.11))
    assert benchmark.ratio_interval([2.0] * 5, [1.0] * 4 + [3.0]) == (0.5, 0.5, 1.5)  # too few rounds: the extremes


def test_peak_tensor_memory_counts_what_is_alive_at_once():
    benchmark = load_benchmark()
    start = torch.zeros(1000)  # 4,000 bytes alive from the start
    with benchmark.PeakTensorMemory([start]) as memory:
        first = torch.ones(2000)  # 8,000 bytes
        del first
        second = torch.ones(3000)  # 12,000 bytes, after the first was freed
    assert memory.peak == 4000 + 12000
    assert memory.current == 4000 + 12000
    del second
    assert memory.current == 4000


def demo_corpus(demo_files: Path, folder: Path) -> Path:
    """The demo corpus under the names of small_parallel_enja's files (train, dev, test)."""
    folder.mkdir()
    for split, name in (("train", "train"), ("validation", "dev"), ("test", "test")):
        for lang in ("en", "ja"):
            (folder / f"{name}.{lang}").write_bytes((demo_files / f"{split}.{lang}").read_bytes())
    return folder


def test_training_modes_benchmark_times_the_modes_asked_and_the_recommended_one(demo_files, tmp_path):
    corpus = demo_corpus(demo_files, tmp_path / "corpus")
    output = tmp_path / "modes.json"
    flags = [
        "--recipe", str(ROOT / "training" / "recipes" / "en-ja.json"), "--corpus_dir", str(corpus),
        "--max_steps", "2", "--rounds", "1", "--output", str(output), "--modes", "Marian, Trainer's defaults",
        "--extra", "--vocab_size", "300", "--config_overrides", SMALL_MODEL,
    ]  # fmt: skip  # flag-value pairs side by side
    result = run_script("training_modes.py", *flags, folder="benchmarks", timeout=600)  # it runs train.py itself
    assert result.returncode == 0, result.stderr[-2000:]
    ratios = json.loads(result.stdout.strip().splitlines()[-1])
    assert list(ratios) == ["ours, recommended", "Marian, Trainer's defaults"]  # the recommended mode always, first
    report = json.loads(output.read_text())
    speeds = report["speeds"]
    assert all(len(values) == 1 and values[0] > 0 for values in speeds.values())
    recommended = speeds["ours, recommended"][0]
    assert ratios == {mode: round(recommended / values[0], 2) for mode, values in speeds.items()}  # what it measured
    [trained_in] = report["recommended_trained_in"]
    assert trained_in in ("fp32 (sdpa)", "bf16 (eager)")  # the trial's choice, which the CPU decides
    assert f"ours, recommended trained in: {trained_in} (the trial's choice in each round)" in result.stdout


def test_training_modes_benchmark_refuses_a_missing_tokenizer(tmp_path):
    result = run_script("training_modes.py", "--tokenizer", str(tmp_path / "nope"), folder="benchmarks")
    assert result.returncode == 2
    message = (
        f"training_modes.py: --tokenizer {tmp_path / 'nope'} holds no tokenizer.json; pass a saved tokenizer's folder"
    )
    assert result.stderr.strip().splitlines() == [message]


def test_the_profile_runs_on_the_threads_asked_and_its_kinds_add_up(tmp_path):
    """One float32 step of a small batch on one thread: the kinds' shares make the whole, their milliseconds are the
    shares of the profiled operator time, and the table prints both, with the step's time without the profiler."""
    output = tmp_path / "profile.json"
    flags = ["--steps", "1", "--warmup", "1", "--batch_tokens", "64", "--threads", "1", "--precision", "fp32"]
    result = run_script("profile_training.py", *flags, "--output", str(output), folder="benchmarks")
    assert result.returncode == 0, result.stderr[-2000:]
    assert "torch uses 1 thread;" in result.stdout
    profile = json.loads(output.read_text())["fp32"]
    assert "fp32 (sdpa): " in result.stdout and profile["attention"] == "sdpa"
    shares, milliseconds = profile["shares"], profile["milliseconds"]
    assert abs(sum(shares.values()) - 1) < 1e-9 and list(milliseconds) == list(shares)
    total = sum(milliseconds.values())
    for kind, share in shares.items():
        assert abs(milliseconds[kind] - share * total) < 1e-6
        assert f"| {kind} | {share:.1%} | {milliseconds[kind]:.1f} |" in result.stdout
    assert f"without the profiler {profile['seconds_per_step_unprofiled'] * 1000:.0f} ms a step" in result.stdout


def test_the_profile_refuses_bad_flags_in_one_line_before_any_work(tmp_path):
    cases = {
        ("--threads", "0"): "--threads must be at least 1, got 0",
        ("--steps", "0"): "--steps must be at least 1, got 0",
        ("--batch_tokens", "17"): "--batch_tokens must be at least 18, got 17",  # not one pair of 9 + 9 tokens
        ("--recipe", str(tmp_path / "nope.json")): f"--recipe {tmp_path / 'nope.json'} does not exist",
        ("--shape", "nope"): "argument --shape: invalid choice: 'nope' (choose from 'paper-base', 'tiny')",
        ("--precision", "bf16_weights"): "argument --precision: invalid choice: 'bf16_weights'",
    }
    for flags, message in cases.items():
        output = ["--output", str(tmp_path / "profile.json")]
        result = run_script("profile_training.py", *output, *flags, folder="benchmarks")
        [line] = result.stderr.strip().splitlines()
        assert result.returncode == 2 and line.startswith(f"profile_training.py: {message}")
    assert not (tmp_path / "profile.json").exists()


def test_the_engines_benchmark_times_the_engines_asked_each_in_a_process_of_its_own(trained_demo_model, demo_files,
                                                                                     tmp_path):  # fmt: skip
    """Every kind of engine but ONNX (its export is slow; the benchmark loads it as it loads CTranslate2), both
    workloads, the translator and the bare call (none for Marian), each engine in a fresh process of its own (in one
    process the engines' thread pools meet), transformers with them; the model's own engine agrees with itself."""
    source = tmp_path / "source.en"
    source.write_text("".join(demo_files.joinpath("test.en").read_text().splitlines(keepends=True)[:8]))
    output = tmp_path / "engines.json"
    engines = ["ctranslate2 int8", "Marian (transformers)"]
    flags = ["--model", str(trained_demo_model), "--source_file", str(source), "--rounds", "2", "--output", str(output),
             "--engines", *engines]  # fmt: skip
    # a fresh process, as the script's own children are (spawned)
    result = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "engines.py"), *flags],
                            capture_output=True, text=True, cwd=ROOT, timeout=600)  # fmt: skip
    assert result.returncode == 0, result.stderr[-2000:]
    report = json.loads(output.read_text())
    engines.insert(0, "transformers")
    assert list(report["engines"]) == [
        f"{engine}, {workload}" for engine in engines for workload in ("batch 1", "batch 32")
    ]
    for name, row in report["engines"].items():
        assert len(row["seconds"]) == 2 and all(value > 0 for value in row["seconds"]), name
        assert (row["bare_seconds"] is None) == name.startswith("Marian"), name
        assert row["translator_over_bare"] is None or row["translator_over_bare"] > 0, name
    assert report["engines"]["transformers, batch 32"]["differ"] == 0
    assert report["engines"]["Marian (transformers), batch 32"]["differ"] == 0  # the exact conversion
    processes = report["processes"]
    assert len(set(processes.values())) == len(engines) + 1  # the benchmark's own and one per engine
    assert "| ctranslate2 int8 | batch 32 | " in result.stdout


def test_the_engines_benchmark_refuses_bad_flags_and_sources_in_one_line(capsys, tmp_path):
    engines = load_benchmark("engines.py")
    (tmp_path / "empty.en").write_text("\n")
    (tmp_path / "binary.en").write_bytes(b"I eat cake.\n\xff\xfe\n")
    for flags, message in (
        (["--engines", "nope"], "argument --engines: invalid choice: 'nope'"),
        (["--rounds", "1"], "--rounds must be at least 2"),
        (["--source_file", str(tmp_path / "empty.en")], "is empty; pass a file with one sentence per line"),
        (["--source_file", str(tmp_path / "binary.en")], "is not UTF-8 text (line 2)"),
    ):
        assert run(engines.main, flags, prog="engines.py") == 2
        [line] = capsys.readouterr().err.strip().splitlines()
        assert line.startswith("engines.py: ") and message in line, line


def test_the_quality_benchmark_trains_both_models_alike_and_scores_them(demo_files, tmp_path):
    """Ours and Marian from the same recipe, steps and tokenizer (Marian's run reads ours), each scored on the test
    set; the table and result.json say the same."""
    corpus = demo_corpus(demo_files, tmp_path / "corpus")
    flags = ["--direction", "en-ja", "--max_steps", "2", "--corpus_dir", str(corpus), "--output_dir", str(tmp_path),
             "--extra", "--vocab_size", "300", "--config_overrides", SMALL_MODEL, "--save_steps", "1",
             "--average_checkpoints", "2", "--save_total_limit", "2"]  # fmt: skip
    result = run_script("quality_vs_marian.py", *flags, folder="benchmarks", timeout=600)
    assert result.returncode == 0, result.stderr[-2000:]
    report = json.loads((tmp_path / "en-ja" / "result.json").read_text())
    assert json.loads(result.stdout.strip().splitlines()[-1]) == report and report["max_steps"] == 2
    for model, name in (("ours", "hf-tiny-transformer"), ("marian", "MarianMTModel")):
        scores = report[model]
        assert 0 <= scores["bleu"] <= 100 and scores["chrf"] >= 0, scores
        assert f"| {name} | {scores['bleu']:.2f} ± {scores['bleu_ci']:.2f} | {scores['chrf']:.2f} |" in result.stdout
    [marian_run] = [line for line in result.stdout.splitlines() if line.startswith("$ ") and "marian" in line]
    assert f"--tokenizer_name {tmp_path / 'en-ja' / 'ours' / 'tokenizer'}" in marian_run  # the tokenizer ours trained


def test_the_quality_benchmark_refuses_bad_flags_in_one_line_before_any_work(tmp_path):
    cases = {
        ("--max_steps", "0"): "--max_steps must be at least 1, got 0",
        ("--corpus_dir", str(tmp_path / "nope")): f"--corpus_dir {tmp_path / 'nope'} holds no train.en; run make data",
    }
    for flags, message in cases.items():
        result = run_script("quality_vs_marian.py", "--direction", "en-ja", "--output_dir", str(tmp_path / "q"), *flags,
                            folder="benchmarks")  # fmt: skip
        [line] = result.stderr.strip().splitlines()
        assert result.returncode == 2 and line.startswith(f"quality_vs_marian.py: {message}"), line
    assert not (tmp_path / "q" / "en-ja" / "result.json").exists()


def test_the_start_up_benchmark_times_every_command_in_fresh_processes(tmp_path):
    """One run of each command (the shipped models' translate among them), in the order of its table."""
    output = tmp_path / "start_up.json"
    flags = ["--runs", "1", "--warm_up", "0", "--output", str(output)]
    script = str(ROOT / "benchmarks" / "start_up.py")
    result = subprocess.run([sys.executable, script, *flags], capture_output=True, text=True, timeout=300, cwd=ROOT)
    assert result.returncode == 0, result.stderr[-3000:]
    report = json.loads(output.read_text())
    assert [len(times) for times in report["seconds"].values()] == [1, 1, 1, 1]
    assert all(0 < seconds < 120 for times in report["seconds"].values() for seconds in times)
    assert result.stdout.count("\n| `") == 4
