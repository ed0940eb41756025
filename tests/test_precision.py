"""The precision and attention a run trains in, on every kind of machine: the CPU's flags faked where the commands
start (hardware.CPUINFO, what the detection reads), CUDA faked where that can be done, and train.py run as users run
it (no --use_cpu). Expected values are written out."""

import json
import re
import shlex

import datasets
import pytest
import torch

from conftest import tiny_model
from hf_tiny_transformer import hardware
from hf_tiny_transformer.hardware import Choice
from hf_tiny_transformer.trainer import precision
from hf_tiny_transformer.trainer.arguments import parse_arguments
from hf_tiny_transformer.trainer.precision import (
    Mode,
    Trial,
    candidate_modes,
    chosen,
    time_modes,
)
from hf_tiny_transformer.trainer.trainer import TranslationTrainer
from running import AMX, AVX2, AVX512_BF16, ROOT, fake_cpuinfo, few_steps, run_script

RECIPES = sorted((ROOT / "training" / "recipes").glob("*.json"))
NO_BF16 = "fp32: the CPU has no bfloat16 instructions (no avx512_bf16 or amx_bf16); bf16 would be emulated and slower"
# machine -> (the precision the hardware rule gives, its reason, whether the arguments tell the library "CPU")
ON_THE_CPU = {
    "amx": (AMX, "bf16", "bf16: the CPU has AMX (amx_bf16)", True),
    "avx512_bf16": (AVX512_BF16, "bf16", "bf16: the CPU has AVX-512 BF16 (avx512_bf16)", True),
    "avx2": (AVX2, "fp32", NO_BF16, False),
}


@pytest.fixture
def machine(tmp_path, monkeypatch):
    """Makes this process see a CPU with the given flags and no GPU; returns the fake /proc/cpuinfo."""

    def install(flags: frozenset[str]):
        cpuinfo = fake_cpuinfo(tmp_path, flags)
        monkeypatch.setattr(hardware, "CPUINFO", str(cpuinfo))
        monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
        return cpuinfo

    return install


def tiny_dataset() -> datasets.Dataset:
    return datasets.Dataset.from_dict({"input_ids": [[5, 6, 7, 2], [8, 2]] * 4, "labels": [[9, 10, 2], [11, 2]] * 4})


@pytest.mark.parametrize("recipe", RECIPES, ids=[recipe.stem for recipe in RECIPES])
@pytest.mark.parametrize("name", ON_THE_CPU)
def test_every_recipe_builds_a_trainer_on_every_kind_of_cpu(machine, tmp_path, recipe, name):
    """The failure of the AMX and AVX-512 BF16 machines: bf16 chosen, and the library refusing it without a GPU."""
    flags, expected_precision, reason, on_cpu = ON_THE_CPU[name]
    machine(flags)
    _, _, args = parse_arguments([str(recipe), "--output_dir", str(tmp_path / "run")])
    assert args.precision_choice == Choice(expected_precision, reason)
    assert (args.bf16, args.use_cpu, args.mixed_precision) == (on_cpu, on_cpu, "bf16" if on_cpu else "no")
    trainer = TranslationTrainer(model=tiny_model(), args=args, train_dataset=tiny_dataset())
    assert trainer.accelerator.mixed_precision == ("bf16" if on_cpu else "no")
    assert trainer.args.device.type == "cpu"


@pytest.mark.parametrize("recipe", RECIPES, ids=[recipe.stem for recipe in RECIPES])
def test_every_recipe_takes_bf16_on_a_cuda_gpu_that_has_it(machine, monkeypatch, tmp_path, recipe):
    machine(AVX2)
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "is_bf16_supported", lambda including_emulation=True: True)
    monkeypatch.setattr(torch.cuda, "get_device_name", lambda device=None: "NVIDIA H200")
    monkeypatch.setattr(torch.cuda, "set_device", lambda device: None)  # what TrainingArguments does with the device
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 1)
    _, _, args = parse_arguments([str(recipe), "--output_dir", str(tmp_path / "run")])
    assert args.precision_choice == Choice("bf16", "bf16: CUDA device NVIDIA H200 supports bfloat16")
    assert (args.bf16, args.use_cpu, args.mixed_precision, args.bf16_native) == (True, False, "bf16", True)


@pytest.mark.parametrize(
    "precision_choice, native, requested, device, expected",
    [
        (Choice("bf16", "bf16: AMX"), True, "auto", "cpu", ["fp32, sdpa", "bf16, eager"]),
        (Choice("bf16", "bf16: asked for"), True, "bf16", "cpu", ["bf16, eager"]),
        (Choice("bf16", "bf16: asked for, but"), False, "bf16", "cpu", ["bf16, eager"]),
        (Choice("bf16", "bf16: CUDA"), True, "auto", "cuda", ["fp32, sdpa", "bf16, sdpa"]),
        (Choice("fp32", NO_BF16), False, "auto", "cpu", ["fp32, sdpa"]),
        (Choice("fp32", "fp32: asked for"), True, "fp32", "cpu", ["fp32, sdpa"]),
    ],
)
def test_the_precision_decides_the_attention_and_auto_times_both_precisions(
    precision_choice, native, requested, device, expected
):
    """--precision is the one speed flag: under bf16 on a CPU the eager attention, sdpa everywhere else."""
    modes = candidate_modes(precision_choice, native, requested, device)
    assert [str(mode) for mode in modes] == expected


def test_the_trial_keeps_the_fastest_mode_and_leaves_the_random_numbers_alone(monkeypatch, tmp_path):
    seconds = {"fp32, sdpa": 0.3, "bf16, eager": 0.2}
    stepped = []

    def steps(run, batches):
        stepped.append(run.mode)
        torch.rand(3)  # a real step draws dropout masks
        return seconds[str(run.mode)] * len(batches)

    monkeypatch.setattr(precision.ModeRun, "steps", steps)
    _, _, args = parse_arguments(["--shape", "tiny", "--output_dir", str(tmp_path), "--precision", "fp32"])
    modes = [Mode("fp32", "sdpa"), Mode("bf16", "eager")]
    batch = {"input_ids": torch.tensor([[5, 2]]), "labels": torch.tensor([[6, 2]])}
    model = tiny_model()
    before = torch.get_rng_state()
    trial = time_modes(model, [batch, batch], modes, args, rounds=3)
    assert torch.equal(torch.get_rng_state(), before)
    assert trial.best == Mode("bf16", "eager") and trial.seconds_per_step == pytest.approx(seconds)
    assert stepped == modes * 4  # a warm-up pass, then 3 rounds taking turns
    reason = chosen(trial, Choice("bf16", "bf16: the CPU has AMX (amx_bf16)")).reason
    assert reason == (
        "bf16: the fastest on this run's batches (a step took 0.200 s in bf16, eager; 0.300 s in fp32, "
        "sdpa); the CPU has AMX (amx_bf16)"
    )


def test_one_mode_is_not_timed():
    trial = time_modes(tiny_model(), [], [Mode("fp32", "sdpa")], None)
    assert trial == Trial(seconds_per_step={}, best=Mode("fp32", "sdpa"))
    assert chosen(trial, Choice("fp32", NO_BF16)) == Choice("fp32", NO_BF16)


def small_run(demo_files, output_dir, *extra: str) -> list[str]:
    """2 steps of the small model: the mode, not the training, is what these tests look at."""
    return few_steps(demo_files, output_dir, "--vocab_size", "300", "--max_steps", "2", "--warmup_steps", "1", *extra)


def test_bf16_asked_for_trains_on_this_cpu_as_a_user_runs_it(demo_files, tmp_path):
    """2 steps in bf16, no --use_cpu, on whatever CPU runs the suite (emulated where it must)."""
    result = run_script("train.py", *small_run(demo_files, tmp_path / "run", "--precision", "bf16"), timeout=300)
    assert result.returncode == 0, result.stderr[-3000:]
    metrics = json.loads((tmp_path / "run" / "metrics.json").read_text())
    assert metrics["precision"] == "bf16" and metrics["train_steps"] == 2
    assert metrics["attention"] == "eager" and metrics["precision_trial_seconds_per_step"] == {}


@pytest.mark.parametrize("name", ["amx", "avx512_bf16"])
def test_auto_on_a_bf16_cpu_times_the_two_precisions_and_trains_in_the_faster(demo_files, tmp_path, name):
    """train.py as on an AMX or AVX-512 BF16 machine (the flags faked where the command starts): the trial's two
    figures, the faster mode, and both in the log, metrics.json and the card."""
    flags, _, evidence, _ = ON_THE_CPU[name]
    out = tmp_path / "run"
    cpuinfo = fake_cpuinfo(tmp_path, flags)
    result = run_script("train.py", *small_run(demo_files, out), cpuinfo=cpuinfo, timeout=300)
    assert result.returncode == 0, result.stderr[-3000:]
    metrics = json.loads((out / "metrics.json").read_text())
    figures = metrics["precision_trial_seconds_per_step"]
    assert set(figures) == {"fp32, sdpa", "bf16, eager"} and all(value > 0 for value in figures.values())
    assert f"{metrics['precision']}, {metrics['attention']}" == min(figures, key=figures.get)
    assert metrics["precision_reason"].startswith(
        f"{metrics['precision']}: the fastest on this run's batches (a step took"
    )
    assert metrics["precision_reason"].endswith(f"); {evidence.removeprefix('bf16: ')}")
    assert f"precision {metrics['precision_reason']}; {metrics['attention']} attention\n" in result.stderr
    card = (out / "hub" / "README.md").read_text()
    assert f"- Precision: {metrics['precision_reason']}; {metrics['attention']} attention\n" in card


def test_auto_on_a_cpu_without_bf16_times_nothing(demo_files, tmp_path):
    out = tmp_path / "run"
    result = run_script("train.py", *small_run(demo_files, out), cpuinfo=fake_cpuinfo(tmp_path, AVX2), timeout=300)
    assert result.returncode == 0, result.stderr[-3000:]
    metrics = json.loads((out / "metrics.json").read_text())
    assert (metrics["precision"], metrics["precision_reason"], metrics["attention"]) == ("fp32", NO_BF16, "sdpa")
    assert metrics["precision_trial_seconds_per_step"] == {}


def test_the_training_maps_widest_shape_trains_in_float32_where_bf16_is_absent(demo_files, tmp_path):
    """The map's `wide` shape, its flags as docs/training-map.md gives them, on a CPU without bfloat16: the automatic
    choice trains it in float32, at whatever speed that CPU has."""
    flags = re.search(r'^WIDE="(.+)"$', (ROOT / "docs" / "training-map.md").read_text(), re.MULTILINE)[1]
    out = tmp_path / "run"
    run = small_run(demo_files, out, *shlex.split(flags))
    result = run_script("train.py", *run, cpuinfo=fake_cpuinfo(tmp_path, AVX2), timeout=300)
    assert result.returncode == 0, result.stderr[-3000:]
    metrics = json.loads((out / "metrics.json").read_text())
    assert (metrics["precision"], metrics["precision_reason"], metrics["train_steps"]) == ("fp32", NO_BF16, 2)
    config = json.loads((out / "hub" / "config.json").read_text())
    assert (config["d_model"], config["encoder_ffn_dim"], config["decoder_attention_heads"]) == (512, 2048, 8)


def test_a_resumed_run_keeps_the_mode_it_trained_in(demo_files, tmp_path):
    out = tmp_path / "run"
    cpuinfo = fake_cpuinfo(tmp_path, AMX)
    steps = ["--max_steps", "4", "--save_strategy", "steps", "--save_steps", "2"]
    first = run_script("train.py", *small_run(demo_files, out, *steps), cpuinfo=cpuinfo, timeout=300)
    assert first.returncode == 0, first.stderr[-3000:]
    recorded = json.loads((out / "checkpoint-2" / "training_mode.json").read_text())
    metrics = json.loads((out / "metrics.json").read_text())
    assert (recorded["precision"], recorded["attention"]) == (metrics["precision"], metrics["attention"])
    assert recorded["seconds_per_step"] == metrics["precision_trial_seconds_per_step"]
    resumed = [
        "--max_steps",
        "4",
        "--save_strategy",
        "steps",
        "--save_steps",
        "2",
        "--resume_from_checkpoint",
        str(out / "checkpoint-2"),
    ]
    second = run_script("train.py", *small_run(demo_files, out, *resumed), cpuinfo=cpuinfo, timeout=300)
    assert second.returncode == 0, second.stderr[-3000:]
    assert f"resuming a run that trained in {recorded['precision']}, {recorded['attention']}:" in second.stderr
    assert (
        json.loads((out / "metrics.json").read_text())["precision_trial_seconds_per_step"]
        == recorded["seconds_per_step"]
    )
