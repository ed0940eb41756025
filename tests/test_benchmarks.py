"""The speed benchmark runs end to end (one tiny iteration; speed itself is never asserted in a test)."""

import importlib.util
import json
import math
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from conftest import SMALL_MODEL, assert_one_line_error, run_script, tiny_model
from hf_tiny_transformer import hardware

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "benchmarks" / "speed_vs_marian.py"


def load_benchmark():
    spec = importlib.util.spec_from_file_location("speed_vs_marian", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_older_benchmarks_refuse_a_bad_output_before_any_work(tmp_path):
    """speed_vs_marian.py and quantization.py: a folder, or a path under a file, is one line and exit 2 before the
    models are built or loaded (they would have written it only after minutes of work)."""
    (tmp_path / "file.txt").write_text("text")
    cases = {
        str(tmp_path): f"--output {tmp_path} is a folder; pass a file name",
        str(tmp_path / "file.txt" / "r.json"): f"{tmp_path / 'file.txt'} is a file, not a folder; pass a path inside",
    }
    for script in ("speed_vs_marian.py", "quantization.py"):
        for output, message in cases.items():
            result = run_script(script, "--output", output, folder="benchmarks")
            [line] = result.stderr.strip().splitlines()
            assert result.returncode == 2 and line.startswith(f"{script}: ") and message in line, line
    assert (tmp_path / "file.txt").read_text() == "text"


def test_the_quantization_benchmark_without_torchao_is_one_line(tmp_path, text_model, tokenizer):
    """Without the [quantize] extra, int8 in PyTorch cannot be measured: one line naming the extra, exit 2."""
    if importlib.util.find_spec("torchao") is not None:
        pytest.skip("torchao is installed: the benchmark would run")
    text_model.save_pretrained(tmp_path / "model")
    tokenizer.save_pretrained(tmp_path / "model")
    (tmp_path / "source.en").write_text("a sentence.\n")
    (tmp_path / "reference.ja").write_text("文。\n")
    flags = ["--model", str(tmp_path / "model"), "--output", str(tmp_path / "q.json")]
    flags += ["--source_file", str(tmp_path / "source.en"), "--reference_file", str(tmp_path / "reference.ja")]
    result = run_script("quantization.py", *flags, folder="benchmarks")
    [line] = result.stderr.strip().splitlines()
    assert result.returncode == 2
    assert (
        line
        == "quantization.py: int8 quantization in PyTorch needs torchao: pip install 'hf-tiny-transformer[quantize]'."
    )
    assert not (tmp_path / "q.json").exists()


def test_the_quantization_benchmark_refuses_bad_inputs_in_one_line_before_loading(tmp_path):
    """A missing or empty model folder, a missing source file or files of different lengths: one line, exit 2."""
    (tmp_path / "source.en").write_text("a.\nb.\n")
    (tmp_path / "reference.ja").write_text("あ。\n")
    (tmp_path / "empty").mkdir()
    output = ["--output", str(tmp_path / "q.json")]
    files = ["--source_file", str(tmp_path / "source.en"), "--reference_file", str(tmp_path / "reference.ja")]
    cases = {
        ("--source_file", str(tmp_path / "none.en")): f"--source_file {tmp_path / 'none.en'} does not exist",
        tuple(files): f"--source_file {tmp_path / 'source.en'} has 2 lines but --reference_file",
        ("--repeats", "0"): "--repeats must be at least 1, got 0",
    }
    if importlib.util.find_spec("torchao") is not None:  # without it, torchao's line comes first
        (tmp_path / "reference.ja").write_text("あ。\nい。\n")
        cases[("--model", str(tmp_path / "empty"), *files)] = f"{tmp_path / 'empty'}"
    for flags, message in cases.items():
        result = run_script("quantization.py", *output, *flags, folder="benchmarks")
        [line] = result.stderr.strip().splitlines()
        assert result.returncode == 2 and line.startswith(f"quantization.py: {message}"), line
    assert not (tmp_path / "q.json").exists()


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
    result = subprocess.run(
        [*command, "--vocab_size", "512", "--output", str(output)], capture_output=True, text=True, cwd=ROOT
    )
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


def test_training_modes_benchmark_runs_every_mode(demo_files, tmp_path):
    corpus = tmp_path / "corpus"
    corpus.mkdir()
    for split, name in (("train", "train"), ("validation", "dev"), ("test", "test")):
        for lang in ("en", "ja"):
            (corpus / f"{name}.{lang}").write_bytes((demo_files / f"{split}.{lang}").read_bytes())
    output = tmp_path / "modes.json"
    command = [
        sys.executable,
        str(ROOT / "benchmarks" / "training_modes.py"),
        "--recipe",
        str(ROOT / "training" / "recipes" / "en-ja.json"),
        "--corpus_dir",
        str(corpus),
        "--max_steps",
        "2",
        "--rounds",
        "1",
        "--output",
        str(output),
        "--extra",
        "--vocab_size",
        "300",
        "--config_overrides",
        SMALL_MODEL,
    ]
    result = subprocess.run(command, capture_output=True, text=True, cwd=ROOT)
    assert result.returncode == 0, result.stderr[-2000:]
    ratios = json.loads(result.stdout.strip().splitlines()[-1])
    modes = ["ours, recommended", "ours, float32", "ours, bf16 weights", "Marian, the same flags"]
    assert list(ratios) == [*modes, "Marian, Trainer's defaults"]
    speeds = json.loads(output.read_text())["speeds"]
    assert all(len(values) == 1 and values[0] > 0 for values in speeds.values())
    recommended = speeds["ours, recommended"][0]
    assert ratios == {mode: round(recommended / values[0], 2) for mode, values in speeds.items()}  # what it measured
    here = hardware.memory_allocator()  # glibc's, unless pytest itself runs with one preloaded, which runs inherit
    assert json.loads(output.read_text())["memory_allocators"] == {mode: [here] for mode in ratios}
    [trained_in] = json.loads(output.read_text())["recommended_trained_in"]
    assert trained_in in ("fp32 (sdpa)", "bf16 (sdpa)", "bf16 (eager)")  # the trial's choice, which the CPU decides
    assert f"ours, recommended trained in: {trained_in} (the trial's choice in each round)" in result.stdout
    # --modes: the recommended mode is always timed, first, and only the modes asked for beside it
    extra = command.index("--extra")
    subset = [*command[:extra], "--modes", "Marian, the same flags", *command[extra:]]
    result = subprocess.run(subset, capture_output=True, text=True, cwd=ROOT)
    assert result.returncode == 0, result.stderr[-2000:]
    assert list(json.loads(output.read_text())["speeds"]) == ["ours, recommended", "Marian, the same flags"]


def test_training_modes_benchmark_refuses_the_tcmalloc_modes_where_it_is_not_installed(tmp_path, monkeypatch):
    monkeypatch.setattr(hardware, "TCMALLOC_LIBRARIES", ("no_such_library_on_any_machine",))  # as on a machine without
    for modes in (["ours, tcmalloc"], ["ours, float32", "ours, float32, tcmalloc"]):
        result = run_script(
            "training_modes.py", "--modes", *modes, "--output", str(tmp_path / "m.json"), folder="benchmarks"
        )
        assert_one_line_error(
            result,
            "training_modes.py: the tcmalloc modes need tcmalloc: install gperftools' tcmalloc (Debian, Ubuntu: "
            "apt-get install libtcmalloc-minimal4), or leave them out of --modes",
        )
    assert not (tmp_path / "m.json").exists()


def test_training_modes_benchmark_refuses_a_missing_tokenizer(tmp_path):
    result = run_script("training_modes.py", "--tokenizer", str(tmp_path / "nope"), folder="benchmarks")
    assert result.returncode == 2
    message = (
        f"training_modes.py: --tokenizer {tmp_path / 'nope'} holds no tokenizer.json; pass a saved tokenizer's folder"
    )
    assert result.stderr.strip().splitlines() == [message]


def test_the_profile_runs_on_the_threads_asked_and_its_kinds_add_up(tmp_path):
    """One float32 step and one on bfloat16 weights, of a small batch on one thread: the kinds' shares make the
    whole, their milliseconds are the shares of the profiled operator time, and the table prints both; the phases,
    timed without the profiler, come in the step's order and add up to the step."""
    output = tmp_path / "profile.json"
    command = [sys.executable, str(ROOT / "benchmarks" / "profile_training.py"), "--steps", "1", "--warmup", "1"]
    command += ["--batch_tokens", "64", "--threads", "1", "--precision", "fp32", "bf16_weights"]
    command += ["--attn_implementation", "sdpa", "eager"]
    result = subprocess.run([*command, "--output", str(output)], capture_output=True, text=True, cwd=ROOT)
    assert result.returncode == 0, result.stderr[-2000:]
    assert "torch uses 1 thread;" in result.stdout
    profiles = json.loads(output.read_text())
    assert "bf16_weights (eager): " in result.stdout and profiles["bf16_weights"]["attention"] == "eager"
    for name in ("fp32", "bf16_weights"):
        profile = profiles[name]
        shares, milliseconds = profile["shares"], profile["milliseconds"]
        assert abs(sum(shares.values()) - 1) < 1e-9 and list(milliseconds) == list(shares)
        total = sum(milliseconds.values())
        for kind, share in shares.items():
            assert abs(milliseconds[kind] - share * total) < 1e-6
            assert f"| {kind} | {share:.1%} | {milliseconds[kind]:.1f} |" in result.stdout
        phases, step = profile["phases"], profile["seconds_per_step_unprofiled"] * 1000
        names = ["weights in", "forward", "loss", "backward", "gradients out", "clipping", "optimizer"]
        assert list(phases) == names  # the recipe smooths its labels: forward and loss apart
        assert abs(sum(phases.values()) - step) < max(1.0, 0.02 * step)
        assert f"without the profiler {step:.0f} ms a step" in result.stdout
        for phase, milliseconds in phases.items():
            assert f"| {phase} | {milliseconds:.1f} |" in result.stdout


def test_the_profile_refuses_bad_flags_in_one_line_before_any_work(tmp_path):
    cases = {
        ("--threads", "0"): "--threads must be at least 1, got 0",
        ("--precision", "fp32"): "give --attn_implementation one implementation for each --precision",
        ("--steps", "0"): "--steps must be at least 1, got 0",
        ("--batch_tokens", "17"): "--batch_tokens must be at least 18, got 17",  # not one pair of 9 + 9 tokens
        ("--recipe", str(tmp_path / "nope.json")): f"--recipe {tmp_path / 'nope.json'} does not exist",
        ("--shape", "nope"): "argument --shape: invalid choice: 'nope' (choose from 'paper-base', 'tiny')",
        ("--output", str(tmp_path)): f"--output {tmp_path} is a folder; pass a file name",
    }
    for flags, message in cases.items():
        output = ["--output", str(tmp_path / "profile.json")]
        result = run_script("profile_training.py", *output, *flags, folder="benchmarks")
        [line] = result.stderr.strip().splitlines()
        assert result.returncode == 2 and line.startswith(f"profile_training.py: {message}")
    assert not (tmp_path / "profile.json").exists()


def test_bf16_steps_benchmark_runs_every_configuration(demo_files, tmp_path):
    """Each configuration in its own process, on a corpus of the recipe's layout (the demo's), a tokenizer trained
    on it as the benchmark does when none is given; the table's ratios are those of what it measured. The recipe is
    ja-en's with batches of 256 tokens and a 300-token vocabulary: where bfloat16 is emulated (no AVX-512 BF16 or
    AMX), a bf16 step of the recipe's 2,048-token batches takes many seconds, and this runs ten of them."""
    corpus = tmp_path / "corpus"
    corpus.mkdir()
    for split, name in (("train", "train"), ("validation", "dev"), ("test", "test")):
        for lang in ("en", "ja"):
            (corpus / f"{name}.{lang}").write_bytes((demo_files / f"{split}.{lang}").read_bytes())
    recipe = tmp_path / "recipe.json"
    settings = json.loads((ROOT / "training" / "recipes" / "ja-en.json").read_text())
    recipe.write_text(json.dumps({**settings, "batch_tokens": 256, "vocab_size": 300}))
    output = tmp_path / "steps.json"
    command = [sys.executable, str(ROOT / "benchmarks" / "bf16_steps.py"), "--recipe", str(recipe)]
    command += ["--corpus_dir", str(corpus)]
    command += ["--batches", "1", "--rounds", "1", "--threads", "1", "--output", str(output)]
    result = subprocess.run(command, capture_output=True, text=True, cwd=ROOT)
    assert result.returncode == 0, result.stderr[-2000:]
    measured = json.loads(output.read_text())
    assert measured["threads"] == 1 and measured["recipe"] == "recipe.json"
    assert "recipe.json, 1 batches, 1 rounds, torch's threads: 1 in every configuration" in result.stdout
    names = ["fp32 before", "bf16 before", "+ eager attention", "+ kernel cache", "+ dropout masks from 64-bit draws"]
    names += ["+ the loss from one softmax", "+ the loss with the output projection", "+ bf16 weights", "fp32 now"]
    assert list(measured["medians"]) == names
    assert all(len(values) == 1 and values[0] > 0 for values in measured["seconds"].values())
    assert all(share is None or 0 <= share < 1 for shares in measured["steal"].values() for share in shares)
    fp32_now = measured["medians"]["fp32 now"]
    for name, seconds in measured["medians"].items():
        [share] = measured["steal"][name]
        stolen = "unknown" if share is None else f"{share:.1%}"
        assert f"| {name} | {seconds:.3f} | {fp32_now / seconds:.2f} | {stolen} |" in result.stdout.splitlines()


def test_bf16_steps_refuses_bad_flags_in_one_line_before_any_work(tmp_path):
    recipe = ROOT / "training" / "recipes" / "ja-en.json"
    cases = {
        ("--threads", "0"): "--threads must be at least 1, got 0",
        ("--tokenizer", str(tmp_path)): f"--tokenizer {tmp_path} holds no tokenizer.json; pass a saved tokenizer's",
        ("--recipe", str(tmp_path / "none.json")): f"--recipe {tmp_path / 'none.json'} does not exist; check the path",
        ("--output", str(tmp_path)): f"--output {tmp_path} is a folder; pass a file name",
        ("--output", str(recipe / "steps.json")): f"--output {recipe / 'steps.json'}: {recipe} is a file, not a folder",
    }
    for flags, message in cases.items():
        result = run_script("bf16_steps.py", "--output", str(tmp_path / "steps.json"), *flags, folder="benchmarks")
        [line] = result.stderr.strip().splitlines()
        assert result.returncode == 2 and line.startswith(f"bf16_steps.py: {message}")
    assert not (tmp_path / "steps.json").exists()


def test_dropout_benchmark_times_both_masks_and_keeps_their_shares(tmp_path):
    """Both dropouts in both dtypes, in the table with their ratio to torch's and the share of elements each kept
    (about 1 - p: a mask that kept everything, or nothing, would show here)."""
    output = tmp_path / "dropout.json"
    command = [sys.executable, str(ROOT / "benchmarks" / "dropout.py"), "--rows", "64", "--p", "0.25"]
    command += ["--repeats", "2", "--rounds", "1", "--output", str(output)]
    result = subprocess.run(command, capture_output=True, text=True, cwd=ROOT)
    assert result.returncode == 0, result.stderr[-2000:]
    measured = json.loads(output.read_text())
    assert measured["shape"] == [64, 256] and measured["p"] == 0.25
    for dtype in ("float32", "bfloat16"):
        kinds = measured["results"][dtype]
        assert list(kinds) == ["torch (bernoulli_)", "the model's (64-bit draws)"]
        for kind, values in kinds.items():
            assert 0.72 < values["kept"] < 0.78, (dtype, kind, values["kept"])
            ratio = kinds["torch (bernoulli_)"]["ms"] / values["ms"]
            assert f"| {dtype} | {kind} | {values['ms']:.3f} | {ratio:.2f} | {values['kept']:.4f} |" in result.stdout


def test_padding_benchmark_counts_padding_and_shapes_of_each_kind_of_batch(demo_files, tokenizer, tmp_path):
    """Each kind of batch gets a row: batches by tokens pad less than random batches of pairs, and an epoch's
    distinct shapes are at least one and at most its batches."""
    tokenizer.save_pretrained(tmp_path / "tokenizer")
    command = [sys.executable, str(ROOT / "benchmarks" / "padding.py"), "--tokenizer", str(tmp_path / "tokenizer")]
    command += ["--corpus_dir", str(demo_files), "--batch_size", "16", "--batch_tokens", "256"]
    result = subprocess.run(command, capture_output=True, text=True, cwd=ROOT)
    assert result.returncode == 0, result.stderr[-2000:]
    assert "| batches | padding | batches an epoch | pairs a batch (median) | shapes an epoch |" in result.stdout
    rows = {}
    for line in result.stdout.splitlines()[3:]:
        name, padding, batches, _, shapes = line.strip("|").split(" | ")
        rows[name.strip()] = (float(padding.rstrip("%")), int(batches.replace(",", "")), int(shapes.strip()))
    assert list(rows) == ["random, 16 pairs", "group_by_length, 16 pairs", "by tokens, at most 256"]
    assert rows["by tokens, at most 256"][0] < rows["random, 16 pairs"][0]
    for _, batches, shapes in rows.values():
        assert 1 <= shapes <= batches


def test_padding_benchmark_refuses_bad_flags_in_one_line(demo_files, tokenizer, tmp_path):
    tokenizer.save_pretrained(tmp_path / "tokenizer")
    good = ["--tokenizer", str(tmp_path / "tokenizer"), "--corpus_dir", str(demo_files)]
    cases = {
        ("--batch_tokens", "0"): "--batch_tokens must be at least 1, got 0",
        ("--batch_size", "0"): "--batch_size must be at least 1, got 0",
        ("--tokenizer", str(tmp_path)): f"--tokenizer {tmp_path} holds no tokenizer.json; pass a saved tokenizer's",
        ("--corpus_dir", str(tmp_path)): f"--corpus_dir {tmp_path}: {tmp_path}/train.en does not exist; pass the",
        ("--source_lang", "fr"): "argument --source_lang/--source-lang: invalid choice: 'fr'",
        ("--batch_tokens", "8"): "--batch_tokens 8: max_tokens 8 is smaller than the longest pair",
    }
    for flags, message in cases.items():
        result = run_script("padding.py", *good, *flags, folder="benchmarks")
        assert_one_line_error(result, f"padding.py: {message}")


def test_dropout_benchmark_refuses_bad_flags_in_one_line(tmp_path):
    cases = {
        ("--p", "1"): "--p must lie between 0 and 1 (exclusive), got 1.0",
        ("--rounds", "0"): "--rounds must",
        ("--output", str(tmp_path)): f"--output {tmp_path} is a folder; pass a file name",
    }
    for flags, message in cases.items():
        result = run_script("dropout.py", "--output", str(tmp_path / "d"), *flags, folder="benchmarks")
        assert result.returncode == 2 and len(result.stderr.strip().splitlines()) == 1
        assert result.stderr.startswith(f"dropout.py: {message}")
    assert not (tmp_path / "d").exists()


@pytest.mark.parametrize("compiled", [False, True])
def test_label_smoothing_benchmark_times_the_losses_whose_gradients_agree(tmp_path, compiled):
    """The loss before and now (and compiled, where asked), in both dtypes, in the table with the ratio to the one
    before; their gradients are the same function's (a loss that computed something else would show here)."""
    output = tmp_path / "loss.json"
    command = [sys.executable, str(ROOT / "benchmarks" / "label_smoothing.py"), "--rows", "30", "--vocab", "50"]
    command += ["--repeats", "2", "--rounds", "1", "--output", str(output)] + (["--compiled"] if compiled else [])
    result = subprocess.run(command, capture_output=True, text=True, cwd=ROOT)
    assert result.returncode == 0, result.stderr[-2000:]
    measured = json.loads(output.read_text())
    assert measured["shape"] == [30, 50]
    others = ["now (one softmax)"] + (["compiled (torch.compile of the formula)"] if compiled else [])
    for dtype, largest in (("float32", 1e-6), ("bfloat16", 2**-8)):
        kinds = measured["results"][dtype]
        assert list(kinds["ms"]) == ["before (logsumexp, exp again)", *others]
        assert list(kinds["largest_gradient_difference"]) == others
        assert all(0 <= difference < largest for difference in kinds["largest_gradient_difference"].values())
        before = kinds["ms"]["before (logsumexp, exp again)"]
        for kind, ms in kinds["ms"].items():
            assert f"| {dtype} | {kind} | {ms:.2f} | {before / ms:.2f} |" in result.stdout


def test_label_smoothing_benchmark_refuses_bad_flags_in_one_line(tmp_path):
    cases = {
        ("--vocab", "0"): "--vocab must",
        ("--output", str(tmp_path)): f"--output {tmp_path} is a folder; pass a file name",
    }
    for flags, message in cases.items():
        result = run_script("label_smoothing.py", *flags, folder="benchmarks")
        assert result.returncode == 2 and len(result.stderr.strip().splitlines()) == 1
        assert result.stderr.startswith(f"label_smoothing.py: {message}")


def test_allocator_and_denormals_benchmarks_refuse_bad_flags_in_one_line(tmp_path):
    cases = {
        ("allocator.py", "--rounds", "0"): "--rounds must be at least 1, got 0",
        ("denormals.py", "--checkpoint", str(tmp_path)): f"--checkpoint {tmp_path} holds no optimizer.pt; pass a",
        ("denormals.py", "--checkpoint", str(tmp_path), "--steps", "0"): "--steps must be at least 1, got 0",
    }
    for (script, *flags), message in cases.items():
        result = run_script(script, *flags, folder="benchmarks")
        assert result.returncode == 2 and len(result.stderr.strip().splitlines()) == 1, result.stderr
        assert result.stderr.startswith(f"{script}: {message}")


def paired_bleu_files(tmp_path) -> dict[str, Path]:
    """References of 20 sentences; the same cased (a perfect translation once lowercased); and a system with every
    other sentence's last words wrong."""
    references = [f"the cat number {i} sat on the mat near tree {i} today ." for i in range(20)]
    wrong = [
        text if i % 2 else text.replace("tree", "a house by").replace("today", "yesterday")
        for i, text in enumerate(references)
    ]
    files = {"source": ["ignored"] * 20, "reference": references, "cased": [t.capitalize() for t in references]}
    files["wrong"] = wrong
    for name, lines in files.items():
        (tmp_path / f"{name}.txt").write_text("\n".join(lines) + "\n")
    return {name: tmp_path / f"{name}.txt" for name in files}


def test_paired_bleu_scores_each_pair_in_order_and_their_mean(tmp_path):
    """A pair is (baseline, system): the difference is system - baseline; two pairs in opposite orders average to
    0 with a standard error of the difference; --lowercase scores the cased copy of the references 100."""
    from sacrebleu.metrics import BLEU

    files = paired_bleu_files(tmp_path)
    output = tmp_path / "paired.json"
    flags = ["--source_file", str(files["source"]), "--reference_file", str(files["reference"]), "--lowercase"]
    flags += ["--pair", str(files["cased"]), str(files["wrong"]), "--pair", str(files["wrong"]), str(files["cased"])]
    result = run_script("paired_bleu.py", *flags, "--target_lang", "en", "--output", str(output), folder="benchmarks")
    assert result.returncode == 0, result.stderr
    report = json.loads(output.read_text())
    references = files["reference"].read_text().splitlines()
    wrong = BLEU().corpus_score(files["wrong"].read_text().splitlines(), [references]).score  # sacrebleu's own
    assert wrong < 90
    first, second = report["results"]
    assert first["baseline"] == pytest.approx(100.0) and first["system"] == pytest.approx(wrong)
    assert second["baseline"] == pytest.approx(wrong) and second["system"] == pytest.approx(100.0)
    assert first["difference"] == pytest.approx(wrong - 100.0) and 0 <= first["p"] <= 1
    assert report["mean_difference"] == pytest.approx(0.0)
    assert report["standard_error"] == pytest.approx(100.0 - wrong)  # stdev of (d, -d) is d * sqrt(2), over sqrt(2)
    assert f"| {files['cased']} | {files['wrong']} | 100.00 | {wrong:.2f} | {wrong - 100:+.2f} |" in result.stdout

    cased = run_script(
        "paired_bleu.py",
        *flags[:4],
        "--pair",
        str(files["cased"]),
        str(files["reference"]),
        "--target_lang",
        "en",
        "--output",
        str(output),
        folder="benchmarks",
    )
    assert cased.returncode == 0, cased.stderr
    [only] = json.loads(output.read_text())["results"]
    assert only["baseline"] < 100.0 and only["system"] == pytest.approx(100.0)  # without --lowercase: cased differs
    assert "standard_error" not in json.loads(output.read_text())


def test_paired_bleu_refuses_bad_files_in_one_line(tmp_path):
    files = paired_bleu_files(tmp_path)
    (tmp_path / "short.txt").write_text("one line\n")
    references = ["--source_file", str(files["source"]), "--reference_file", str(files["reference"])]
    good = str(files["wrong"])
    cases = {
        ("--pair", good, str(tmp_path / "none.txt")): f"--pair file {tmp_path / 'none.txt'} does not exist",
        ("--pair", good, str(tmp_path / "short.txt")): f"--pair file {tmp_path / 'short.txt'} has 1 lines for 20",
        ("--pair", good, good, "--output", str(tmp_path)): f"--output {tmp_path} is a folder; pass a file name",
        ("--pair", good): "argument --pair: expected 2 arguments",
    }
    for flags, message in cases.items():
        result = run_script("paired_bleu.py", *references, *flags, folder="benchmarks")
        assert result.returncode == 2 and len(result.stderr.strip().splitlines()) == 1, result.stderr
        assert result.stderr.startswith(f"paired_bleu.py: {message}"), result.stderr


def saved_models(tmp_path, tokenizer) -> dict[str, Path]:
    """Two saved random models of the tokenizer's vocabulary: "uniform", whose tied embeddings are zero, so that its
    logits are all 0 and every token has probability 1 / V; and "random", of seed 1."""
    folders = {}
    for name, seed in (("uniform", 0), ("random", 1)):
        model = tiny_model(seed, vocab_size=len(tokenizer))
        if name == "uniform":
            torch.nn.init.zeros_(model.get_input_embeddings().weight)
        folders[name] = tmp_path / name
        model.save_pretrained(folders[name])
        tokenizer.save_pretrained(folders[name])
    return folders


def test_paired_loss_is_the_references_cross_entropy_and_pairs_are_in_order(tmp_path, tokenizer):
    """A model whose logits are all 0 scores ln(V) nats a token, whatever the text; a pair is (baseline, system),
    its difference system - baseline; two pairs in opposite orders average to 0 with a standard error of that
    difference; the same model twice differs by exactly 0."""
    folders = saved_models(tmp_path, tokenizer)
    (tmp_path / "source.txt").write_text("i like the cat .\nwhere is the station ?\nhe said so .\n")
    (tmp_path / "reference.txt").write_text("私は猫が好きです。\n駅はどこですか。\n彼はそう言った。\n")
    output = tmp_path / "loss.json"
    flags = ["--source_file", str(tmp_path / "source.txt"), "--reference_file", str(tmp_path / "reference.txt")]
    uniform, random = str(folders["uniform"]), str(folders["random"])
    pairs = ["--pair", uniform, random, "--pair", random, uniform, "--pair", uniform, uniform]
    result = run_script("paired_loss.py", *flags, *pairs, "--batch_size", "2", "--output", str(output),
                        folder="benchmarks")  # fmt: skip
    assert result.returncode == 0, result.stderr
    report = json.loads(output.read_text())
    first, second, same = report["results"]
    assert first["baseline"] == pytest.approx(math.log(len(tokenizer)), abs=1e-5)
    assert first["system"] > 0 and first["system"] != pytest.approx(first["baseline"])
    assert first["difference"] == pytest.approx(first["system"] - first["baseline"])
    assert second["difference"] == pytest.approx(-first["difference"])
    assert same["difference"] == 0.0
    assert report["mean_difference"] == pytest.approx(0.0, abs=1e-9)
    assert report["standard_error"] == pytest.approx(abs(first["difference"]) / 3**0.5)  # stdev of (d, -d, 0) is |d|
    assert f"| {uniform} | {random} | {first['baseline']:.4f} | {first['system']:.4f} |" in result.stdout


def test_paired_loss_refuses_bad_models_and_flags_in_one_line(tmp_path, tokenizer):
    folders = saved_models(tmp_path, tokenizer)
    (tmp_path / "source.txt").write_text("i like the cat .\n")
    (tmp_path / "reference.txt").write_text("私は猫が好きです。\n")
    (tmp_path / "empty").mkdir()
    texts = ["--source_file", str(tmp_path / "source.txt"), "--reference_file", str(tmp_path / "reference.txt")]
    good = str(folders["random"])
    cases = {
        ("--pair", good, str(tmp_path / "empty")): f"--pair {tmp_path / 'empty'}",
        ("--pair", good, good, "--batch_size", "0"): "--batch_size must be at least 1",
        ("--pair", good, good, "--output", str(tmp_path)): f"--output {tmp_path} is a folder; pass a file name",
        ("--pair", good): "argument --pair: expected 2 arguments",
    }
    for flags, message in cases.items():
        result = run_script("paired_loss.py", *texts, *flags, folder="benchmarks")
        assert_one_line_error(result, message)
        assert result.stderr.startswith(f"paired_loss.py: {message}"), result.stderr
