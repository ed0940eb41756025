"""training/train.py and training/evaluate_model.py: data sources, recipes, the model card, faults, resume, torchrun,
time budgets, learning. The scripts run as a user runs them (a forked child for short runs, a fresh process else)."""

import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import torch
from safetensors.torch import load_file

from conftest import AVX2, HUB_FOLDER_FILES, fake_cpuinfo, few_steps, run_script
from hf_tiny_transformer import TinyTransformerForConditionalGeneration, load_shape
from hf_tiny_transformer.data.demo_corpus import make_demo_corpus
from hf_tiny_transformer.marian import marian_of_the_same_shape
from hf_tiny_transformer.training.arguments import parse_arguments

ROOT = Path(__file__).resolve().parents[1]


def train(arguments: list[str]):
    """train.py run in a forked child, which must succeed (the output is shown when it does not); its result."""
    result = run_script("train.py", *arguments, timeout=300)
    assert result.returncode == 0, result.stderr[-3000:]
    return result


def test_defaults_follow_the_papers_recipe(tmp_path):
    _, _, args = parse_arguments(["--output_dir", str(tmp_path), "--shape", "tiny"])
    assert (args.adam_beta2, args.adam_epsilon, args.label_smoothing_factor) == (0.98, 1e-9, 0.1)
    assert args.lr_scheduler_type == "inverse_sqrt" and args.warmup_steps == 4000
    assert args.train_sampling_strategy == "group_by_length" and args.predict_with_generate


def test_a_json_recipe_holds_the_flags_and_later_flags_override_it(tmp_path):
    recipe = tmp_path / "recipe.json"
    recipe.write_text(
        json.dumps(
            {
                "shape": "tiny",
                "output_dir": str(tmp_path / "out"),
                "max_steps": 7,
                "report_to": ["none"],
                "lowercase": True,
                "batch_tokens": 512,
            }
        )
    )
    model_args, _, args = parse_arguments([str(recipe), "--max_steps", "9"])
    assert model_args.shape == "tiny" and args.max_steps == 9 and args.output_dir == str(tmp_path / "out")
    assert model_args.lowercase is True and args.batch_tokens == 512


def test_the_projects_recipes_force_no_device_precision_or_overwrite(tmp_path):
    """The recipes run where the hardware says (a GPU where there is one: tests/test_precision.py) and never replace
    a user's run (that is asked on the command line)."""
    for recipe in sorted((ROOT / "training" / "recipes").glob("*.json")):
        flags = json.loads(recipe.read_text())
        assert not {"use_cpu", "precision", "bf16", "attn_implementation", "overwrite_output_dir"} & set(flags), recipe
        _, _, args = parse_arguments([str(recipe), "--output_dir", str(tmp_path / recipe.stem)])
        assert args.precision == "auto" and not args.overwrite_output_dir, recipe


def test_training_writes_a_hub_folder_with_test_metrics_in_its_card(demo_files, tmp_path):
    out = tmp_path / "run"
    train(
        few_steps(
            demo_files,
            out,
            "--validation_source_file",
            str(demo_files / "validation.en"),
            "--validation_target_file",
            str(demo_files / "validation.ja"),
            "--test_source_file",
            str(demo_files / "validation.en"),
            "--test_target_file",
            str(demo_files / "validation.ja"),
            "--eval_strategy",
            "steps",
            "--eval_steps",
            "4",
            "--generation_max_length",
            "16",
            "--do_predict",
            "true",
        )
    )
    metrics = json.loads((out / "metrics.json").read_text())
    assert {"test_bleu", "test_chrf", "train_steps"} <= set(metrics) and metrics["train_steps"] == 4
    card = (out / "hub" / "README.md").read_text()
    assert "pipeline_tag: translation" in card and "| bleu |" in card and "- Steps: 4 in" in card
    assert {path.name for path in (out / "hub").iterdir()} == HUB_FOLDER_FILES
    assert not list((out / "hub").glob("*.bin"))


def test_json_lines_and_datasets_sources(demo_files, tmp_path):
    pairs = make_demo_corpus(seed=0)["train"][:64]
    records = [json.dumps({"translation": {"en": p.english, "ja": p.japanese}}, ensure_ascii=False) for p in pairs]
    data = tmp_path / "jsonl"
    data.mkdir()
    (data / "train.jsonl").write_text("\n".join(records) + "\n", encoding="utf-8")
    json_lines = train(few_steps(None, tmp_path / "a", "--train_file", str(data / "train.jsonl")))
    dataset = train(few_steps(None, tmp_path / "b", "--dataset_name", str(data)))
    streamed = train(few_steps(None, tmp_path / "c", "--train_file", str(data / "train.jsonl"), "--streaming", "true"))
    assert "data: {'train': 64}" in json_lines.stderr and "data: {'train': 64}" in dataset.stderr
    assert "data: {'train': 'a stream'}" in streamed.stderr


def test_fine_tuning_a_saved_model_and_training_from_a_config(demo_files, tmp_path):
    first = tmp_path / "first"
    train(few_steps(demo_files, first))
    data = ["--train_source_file", str(demo_files / "train.en"), "--train_target_file", str(demo_files / "train.ja")]
    common = ["--max_steps", "2", "--save_strategy", "no", "--disable_tqdm", "true", *data]
    tuned = tmp_path / "tuned"
    train(["--model_name_or_path", str(first / "hub"), "--output_dir", str(tuned), *common])
    assert not (tuned / "tokenizer").exists()  # the model's own tokenizer, not a new one
    assert (tuned / "hub" / "tokenizer.json").read_text() == (first / "hub" / "tokenizer.json").read_text()
    before, after = load_file(first / "hub" / "model.safetensors"), load_file(tuned / "hub" / "model.safetensors")
    assert before.keys() == after.keys() and any(not torch.equal(before[k], after[k]) for k in before)
    scratch = tmp_path / "scratch"
    args = ["--config_name", str(first / "hub"), "--tokenizer_name", str(first / "hub"), "--output_dir", str(scratch)]
    train(args + common)
    assert json.loads((scratch / "hub" / "config.json").read_text())["d_model"] == 32


def run_train_py(args: list[str], **kwargs) -> subprocess.CompletedProcess:
    """train.py in a fresh process, as a user runs it."""
    return subprocess.run(
        [sys.executable, str(ROOT / "training" / "train.py"), *args],
        capture_output=True,
        text=True,
        timeout=600,
        stdin=subprocess.DEVNULL,
        **kwargs,
    )


def test_an_output_dir_holding_a_model_is_not_overwritten(demo_files, tmp_path):
    out = tmp_path / "run"
    (out / "hub").mkdir(parents=True)
    (out / "hub" / "model.safetensors").write_bytes(b"precious")
    (out / "hub" / "config.json").write_text("{}")
    result = run_script("train.py", *few_steps(demo_files, out))
    assert (
        result.returncode == 2
        and "already holds a model or checkpoints; pass --resume_from_checkpoint true" in result.stderr
    )
    assert (out / "hub" / "model.safetensors").read_bytes() == b"precious"


def mode_flags(metrics: dict) -> list[str]:
    """train.py's flags that repeat the mode a run recorded in its metrics.json (precision, attention, and under bf16
    the weights)."""
    weights = (
        ["--bf16_weights", "true" if metrics["bf16_weights"] else "false"] if metrics["precision"] == "bf16" else []
    )
    return ["--precision", metrics["precision"], "--attn_implementation", metrics["attention"], *weights]


def test_a_run_killed_mid_training_resumes_to_the_same_parameters(demo_files, tmp_path):
    steps = ["--max_steps", "24", "--save_strategy", "steps", "--save_steps", "8", "--learning_rate", "0.003"]
    full = tmp_path / "full"
    assert run_train_py(few_steps(demo_files, full, *steps)).returncode == 0
    # the interrupted run trains in the mode the full run's trial chose (bf16 on a CPU where it pays): each run's own
    # trial may choose differently on a busy machine, and another mode is another run, not a resumed one
    steps += mode_flags(json.loads((full / "metrics.json").read_text()))

    killed = tmp_path / "killed"
    process = subprocess.Popen(
        [
            sys.executable,
            str(ROOT / "training" / "train.py"),
            *few_steps(demo_files, killed, *steps),
            "--dataloader_num_workers",
            "0",
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    deadline = time.time() + 300
    while not (killed / "checkpoint-8" / "trainer_state.json").exists() and time.time() < deadline:
        assert process.poll() is None, "the run ended before it could be killed"
        time.sleep(0.05)
    process.send_signal(signal.SIGKILL)
    process.wait()
    assert not (killed / "hub").exists(), "the run must have been killed before it finished"

    resumed = run_train_py(
        few_steps(demo_files, killed, *steps, "--resume_from_checkpoint", "true", "--log_level", "info")
    )
    assert resumed.returncode == 0, resumed.stderr[-2000:]
    assert re.search(r"Resuming training from checkpoint with epoch \d+ and global step (8|16)", resumed.stderr)
    expected = load_file(full / "hub" / "model.safetensors")
    got = load_file(killed / "hub" / "model.safetensors")
    for name in expected:
        # float noise only: Adam turns the ~1e-9 gradients of the key biases (zero in exact arithmetic) into
        # steps of any sign, so allow 2e-4; a resume that lost the optimizer state or the data order is off by ~1e-2
        torch.testing.assert_close(got[name], expected[name], atol=2e-4, rtol=1e-3, msg=name)


def test_torchrun_with_two_processes(demo_files, tmp_path):
    out = tmp_path / "ddp"
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "torch.distributed.run",
            "--nproc_per_node",
            "2",
            "--master_port",
            "29533",
            str(ROOT / "training" / "train.py"),
            *few_steps(demo_files, out, "--ddp_backend", "gloo", "--batch_tokens", "800"),
        ],
        capture_output=True,
        text=True,
        timeout=600,
        env=env,
        stdin=subprocess.DEVNULL,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    log = result.stdout + result.stderr
    assert "process 0 of 2: 4 optimizer steps" in log and "process 1 of 2: 4 optimizer steps" in log
    assert (out / "hub" / "model.safetensors").is_file()


def test_the_demo_model_learns_held_out_combinations(trained_demo_model, demo_files):
    """A smaller version of `make demo`: held-out exact match far above chance (which is about 0)."""
    result = run_script(
        "evaluate_model.py",
        "--model",
        str(trained_demo_model),
        "--source_file",
        str(demo_files / "test.en"),
        "--reference_file",
        str(demo_files / "test.ja"),
        "--target_lang",
        "ja",
        "--num_beams",
        "1",
        "--batch_size",
        "64",
        "--min_exact_match",
        "40",
    )
    scores = json.loads(result.stdout.strip().splitlines()[-1])
    assert result.returncode == 0, scores
    assert scores["exact_match"] >= 40 and scores["bleu"] > 50


def test_marian_of_the_same_shape_trains_with_the_same_script(demo_files, tmp_path):
    config = load_shape("tiny", vocab_size=600)
    marian = marian_of_the_same_shape(config)
    ours = TinyTransformerForConditionalGeneration(config)
    trainable = sum(p.numel() for p in marian.parameters() if p.requires_grad)
    assert trainable == ours.num_parameters()  # the same shape; Marian also stores its sinusoids as weights
    out = tmp_path / "marian"
    train(few_steps(demo_files, out, "--architecture", "marian"))
    assert json.loads((out / "hub" / "config.json").read_text())["model_type"] == "marian"


def test_the_model_card_states_the_recipe_that_ran(demo_files, tmp_path):
    """Label smoothing, batches by tokens, steps, averaging, precision: each line of the card from the run's flags."""
    out = tmp_path / "run"
    flags = [
        "--batch_tokens", "600", "--label_smoothing_factor", "0.2", "--max_steps", "6", "--save_strategy", "steps",
        "--save_steps", "2", "--average_checkpoints", "3", "--learning_rate", "0.0015",
        "--gradient_accumulation_steps", "2",
    ]  # fmt: skip  # flag-value pairs side by side
    result = run_script(
        "train.py", *few_steps(demo_files, out, *flags), cpuinfo=fake_cpuinfo(tmp_path, AVX2), timeout=300
    )
    assert result.returncode == 0, result.stderr[-3000:]
    card = (out / "hub" / "README.md").read_text()
    metrics = json.loads((out / "metrics.json").read_text())
    lines = dict(line[2:].split(": ", 1) for line in card.splitlines() if line.startswith("- ") and ": " in line)
    assert lines["Steps"].startswith("6 in ")
    assert lines["Batches"].startswith("sentence pairs of similar length, at most 600 source + target tokens a batch")
    assert "x 2 accumulation" in lines["Batches"]
    assert lines["Label smoothing"].startswith("0.2 (in the training loss")
    assert "peak learning rate 0.0015, inverse_sqrt schedule, 2 warmup steps" in lines["Optimizer"]
    assert lines["Checkpoint averaging"] == "the last 3 checkpoints (every 2 steps) averaged"
    no_bf16 = "the CPU has no bfloat16 instructions (no avx512_bf16 or amx_bf16); bf16 would be emulated and slower"
    assert lines["Precision"] == f"fp32: {no_bf16}; sdpa attention; denormals flushed to zero"
    assert (metrics["precision"], metrics["attention"], metrics["flush_denormal"]) == ("fp32", "sdpa", True)
    config = json.loads((out / "hub" / "config.json").read_text())
    assert "label_smoothing" not in config  # a training setting, never the model's
    generation = json.loads((out / "hub" / "generation_config.json").read_text())
    assert (generation["source_lang"], generation["target_lang"]) == ("en", "ja")


def test_a_time_budget_fixes_the_steps_and_the_same_run_repeats_with_max_steps(demo_files, tmp_path):
    """The run measures its speed, fixes max_steps to end within the budget (whole checkpoint intervals), and records
    the number; --max_steps N repeats it exactly."""
    budget = [
        "--max_steps",
        "-1",
        "--time_budget_minutes",
        "0.5",
        "--warmup_steps",
        "400",
        "--save_strategy",
        "steps",
        "--save_steps",
        "5",
        "--average_checkpoints",
        "2",
        "--save_total_limit",
        "2",
    ]
    start = time.monotonic()
    train(few_steps(demo_files, tmp_path / "budget", *budget))
    assert time.monotonic() - start < 40
    metrics = json.loads((tmp_path / "budget" / "metrics.json").read_text())
    steps = metrics["train_steps"]
    assert steps % 5 == 0 and steps >= 10 and metrics["time_budget_minutes"] == 0.5 and metrics["seconds_per_step"] > 0
    card = (tmp_path / "budget" / "hub" / "README.md").read_text()
    mode = mode_flags(metrics)
    assert f"(repeat with --max_steps {steps} {' '.join(mode)})" in card
    repeat = [flag if flag != "-1" else str(steps) for flag in budget] + mode
    train(few_steps(demo_files, tmp_path / "repeat", *repeat))
    first, second = (load_file(tmp_path / run / "hub" / "model.safetensors") for run in ("budget", "repeat"))
    for name in first:
        torch.testing.assert_close(second[name], first[name], msg=name)
