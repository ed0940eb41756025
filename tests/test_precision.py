"""The precision and attention a run trains in, on every kind of machine: the CPU's flags faked where the commands
start (hardware.CPUINFO, what the detection reads), CUDA faked where that can be done, and train.py run as users run
it (no --use_cpu). Expected values are written out."""

import copy
import json

import datasets
import pytest
import torch
from accelerate.utils import is_compiled_module
from safetensors import safe_open
from torch._dynamo.utils import counters

from conftest import (
    AMX,
    AVX2,
    AVX512_BF16,
    ROOT,
    fake_cpuinfo,
    fake_process_maps,
    few_steps,
    run_script,
    sgd_arguments,
    tiny_model,
)
from hf_tiny_transformer import hardware
from hf_tiny_transformer.errors import UsageError
from hf_tiny_transformer.hardware import Choice
from hf_tiny_transformer.training import precision
from hf_tiny_transformer.training.arguments import parse_arguments
from hf_tiny_transformer.training.precision import (
    BFloat16Weights,
    Mode,
    Trial,
    candidate_modes,
    chosen,
    time_modes,
)
from hf_tiny_transformer.training.trainer import TranslationTrainer

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
    "precision_choice, native, requested, attention, expected",
    [
        (Choice("bf16", "bf16: AMX"), True, "auto", "auto", ["fp32, sdpa", "bf16, sdpa", "bf16, eager"]),
        (Choice("bf16", "bf16: AMX"), True, "auto", "eager", ["fp32, eager", "bf16, eager"]),
        (Choice("bf16", "bf16: asked for"), True, "bf16", "auto", ["bf16, sdpa", "bf16, eager"]),
        (Choice("bf16", "bf16: asked for, but"), False, "bf16", "auto", ["bf16, sdpa", "bf16, eager"]),
        (Choice("bf16", "bf16: asked for"), True, "bf16", "sdpa", ["bf16, sdpa"]),
        (Choice("fp32", NO_BF16), False, "auto", "auto", ["fp32, sdpa"]),
        (Choice("fp32", "fp32: asked for"), True, "fp32", "auto", ["fp32, sdpa"]),
        (Choice("fp32", "fp32: asked for"), True, "fp32", "eager", ["fp32, eager"]),
    ],
)
def test_the_modes_worth_timing_under_autocast(precision_choice, native, requested, attention, expected):
    modes = candidate_modes(precision_choice, native, requested, attention, bf16_weights="false")
    assert [str(mode) for mode in modes] == expected


@pytest.mark.parametrize(
    "precision_choice, requested, attention, bf16_weights, expected",
    [
        (
            Choice("bf16", "bf16: AMX"),
            "auto",
            "auto",
            "auto",
            ["fp32, sdpa", "bf16, sdpa", "bf16, eager", "bf16 weights, sdpa", "bf16 weights, eager"],
        ),
        (Choice("bf16", "bf16: asked for"), "bf16", "eager", "auto", ["bf16, eager", "bf16 weights, eager"]),
        (
            Choice("bf16", "bf16: AMX"),
            "auto",
            "auto",
            "true",
            ["fp32, sdpa", "bf16 weights, sdpa", "bf16 weights, eager"],
        ),
        (Choice("bf16", "bf16: asked for"), "bf16", "eager", "true", ["bf16 weights, eager"]),
        (Choice("fp32", "fp32: asked for"), "fp32", "auto", "true", ["fp32, sdpa"]),  # --bf16_weights: only under bf16
        (Choice("fp32", NO_BF16), "auto", "auto", "auto", ["fp32, sdpa"]),
    ],
)
def test_bf16_weights_among_the_modes(precision_choice, requested, attention, bf16_weights, expected):
    modes = candidate_modes(precision_choice, True, requested, attention, bf16_weights=bf16_weights)
    assert [str(mode) for mode in modes] == expected


def gradient_vector(model) -> torch.Tensor:
    return torch.cat([parameter.grad.flatten().double() for parameter in model.parameters()])


def test_bf16_weights_give_the_float64_gradient_to_bfloat16_accuracy_and_accumulate_in_float32(batch):
    model = tiny_model(dropout=0.0, init_std=0.02)
    reference = copy.deepcopy(model).double()
    reference(**batch).loss.backward()
    weights = BFloat16Weights(model)
    low = weights.load(model)
    for rounded, weight in zip(low.parameters(), model.parameters(), strict=True):
        assert rounded.dtype == torch.bfloat16 and torch.equal(rounded, weight.to(torch.bfloat16))
    outputs = low(**batch)
    assert outputs.logits.dtype == outputs.loss.dtype == torch.float32  # the loss from float32 outputs
    outputs.loss.backward()
    weights.add_gradients_to(model)
    assert all(parameter.grad is None for parameter in low.parameters())
    assert all(parameter.grad.dtype == torch.float32 for parameter in model.parameters())
    got, expected = gradient_vector(model), gradient_vector(reference)
    error = float((got - expected).norm() / expected.norm())
    assert 1e-4 < error < 3e-2, error  # bfloat16's rounding (2^-8), not float32's, and nothing worse
    first = [parameter.grad.clone() for parameter in model.parameters()]
    weights.load(model)(**batch).loss.backward()  # a second batch of gradient accumulation: added, not replaced
    weights.add_gradients_to(model)
    for parameter, once in zip(model.parameters(), first):
        torch.testing.assert_close(parameter.grad, 2 * once, rtol=0, atol=0)


def trained_parameters(
    tmp_path, bf16_weights: bool, accumulation: int = 1, **arguments
) -> tuple[dict, dict, TranslationTrainer]:
    """Three SGD steps of TranslationTrainer on a tiny model, on bfloat16 weights or in float32, each from
    `accumulation` batches, with Trainer's `arguments`: (before, after, the trainer)."""
    model = tiny_model(seed=1, dropout=0.0, init_std=0.02)  # the model's own initialization: logits of a real scale
    before = {name: parameter.detach().clone() for name, parameter in model.named_parameters()}
    torch.manual_seed(2)
    data = [{"input_ids": torch.randint(4, 50, (6,)), "labels": torch.randint(4, 50, (5,))} for _ in range(12)]
    args = sgd_arguments(
        tmp_path / f"run-{bf16_weights}-{accumulation}-{len(arguments)}",
        per_device_train_batch_size=4 // accumulation,
        gradient_accumulation_steps=accumulation,
        max_steps=3,
        **arguments,
    )
    args.bf16_weights = bf16_weights  # what TranslationTrainingArguments.train_in sets
    trainer = TranslationTrainer(model=model, args=args, train_dataset=data)
    trainer.train()
    return before, {name: parameter.detach().clone() for name, parameter in model.named_parameters()}, trainer


@pytest.mark.parametrize("accumulation", [1, 2])
def test_bf16_weights_train_the_float32_model_as_float32_does_to_bfloat16_accuracy(tmp_path, accumulation):
    """Trainer's steps on the bfloat16 copy move the float32 weights (each step from the weights the last one left) by
    float32 training's updates, to bfloat16's rounding; under gradient accumulation the copy is made once a step."""
    before, in_bf16, trainer = trained_parameters(tmp_path, True, accumulation)
    _, in_fp32, _ = trained_parameters(tmp_path, False, accumulation)
    low = next(trainer.bf16_weights.copy.parameters())
    assert low._version == 3  # copied in (in place) at each of the 3 optimizer steps, not at each of their batches
    assert all(parameter.dtype == torch.float32 for parameter in in_bf16.values())
    update_bf16 = torch.cat([(in_bf16[name] - before[name]).flatten() for name in before])
    update_fp32 = torch.cat([(in_fp32[name] - before[name]).flatten() for name in before])
    assert update_fp32.norm() > 0.1
    error = float((update_bf16 - update_fp32).norm() / update_fp32.norm())
    assert 1e-3 < error < 3e-2, error  # bfloat16's rounding, not float32's (0.6 % here; autocast's 0.3 %)


def test_torch_compile_compiles_the_bfloat16_copy_that_trains(tmp_path):
    """`--torch_compile` on bf16 weights: the copy that runs in the model's place is compiled as accelerate compiles
    the model (here by dynamo's eager backend: the frames traced, no code generated), and trains as uncompiled."""
    torch._dynamo.reset()
    counters.clear()
    _, compiled, trainer = trained_parameters(tmp_path, True, torch_compile=True, torch_compile_backend="eager")
    assert is_compiled_module(trainer.bf16_weights.runs)
    assert trainer.bf16_weights.runs._orig_mod is trainer.bf16_weights.copy
    assert counters["frames"]["ok"] > 0  # the copy's forward traced (the float32 model is never called)
    _, eager, _ = trained_parameters(tmp_path, True)
    for name, parameter in eager.items():
        torch.testing.assert_close(compiled[name], parameter, rtol=0, atol=0)


def test_bf16_weights_refuse_several_processes(monkeypatch, tmp_path):
    """Their gradients are added to the float32 model's after DDP's hooks would have shared them: not shared."""
    from hf_tiny_transformer.training.arguments import TranslationTrainingArguments

    monkeypatch.setattr(TranslationTrainingArguments, "world_size", property(lambda self: 2))
    with pytest.raises(UsageError, match="--bf16_weights true runs in one process, not 2"):
        parse_arguments(["--shape", "tiny", "--output_dir", str(tmp_path), "--bf16_weights", "true"])
    _, _, args = parse_arguments(["--shape", "tiny", "--output_dir", str(tmp_path), "--precision", "bf16"])
    assert (args.requested_bf16_weights, args.bf16_weights) == ("false", False)  # auto: autocast, in every process


@pytest.mark.parametrize("value, expected", [(True, "true"), (False, "false"), ("auto", "auto"), ("TRUE", "true")])
def test_a_recipe_names_the_weights_as_json_or_as_a_flag_would(tmp_path, value, expected):
    recipe = tmp_path / "recipe.json"
    recipe.write_text(json.dumps({"shape": "tiny", "precision": "bf16", "bf16_weights": value}))
    _, _, args = parse_arguments([str(recipe), "--output_dir", str(tmp_path / "run")])
    assert args.requested_bf16_weights == expected
    assert args.bf16_weights == (expected == "true")


def test_a_recipe_with_other_weights_is_refused(tmp_path):
    recipe = tmp_path / "recipe.json"
    recipe.write_text(json.dumps({"shape": "tiny", "bf16_weights": "maybe"}))
    with pytest.raises(UsageError, match="--bf16_weights takes auto, true or false, not 'maybe'"):
        parse_arguments([str(recipe), "--output_dir", str(tmp_path / "run")])


def test_the_trial_keeps_the_fastest_mode_and_leaves_the_random_numbers_alone(monkeypatch, tmp_path):
    seconds = {"fp32, sdpa": 0.3, "bf16, sdpa": 0.4, "bf16, eager": 0.2}
    stepped = []

    def steps(run, batches):
        stepped.append(run.mode)
        torch.rand(3)  # a real step draws dropout masks
        return seconds[str(run.mode)] * len(batches)

    monkeypatch.setattr(precision.ModeRun, "steps", steps)
    _, _, args = parse_arguments(["--shape", "tiny", "--output_dir", str(tmp_path), "--precision", "fp32"])
    modes = [Mode("fp32", "sdpa"), Mode("bf16", "sdpa"), Mode("bf16", "eager")]
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
        "sdpa; 0.400 s in bf16, sdpa); the CPU has AMX (amx_bf16)"
    )


def test_one_mode_is_not_timed():
    trial = time_modes(tiny_model(), [], [Mode("fp32", "sdpa")], None)
    assert trial == Trial(seconds_per_step={}, best=Mode("fp32", "sdpa"))
    assert chosen(trial, Choice("fp32", NO_BF16)) == Choice("fp32", NO_BF16)


def small_run(demo_files, output_dir, *extra: str) -> list[str]:
    """2 steps of the small model: the mode, not the training, is what these tests look at."""
    return few_steps(demo_files, output_dir, "--vocab_size", "300", "--max_steps", "2", "--warmup_steps", "1", *extra)


def test_bf16_asked_for_trains_on_this_cpu_as_a_user_runs_it(demo_files, tmp_path):
    """The issue's case: 2 steps in bf16, no --use_cpu, on whatever CPU runs the suite (emulated where it must)."""
    result = run_script("train.py", *small_run(demo_files, tmp_path / "run", "--precision", "bf16"), timeout=300)
    assert result.returncode == 0, result.stderr[-3000:]
    metrics = json.loads((tmp_path / "run" / "metrics.json").read_text())
    assert metrics["precision"] == "bf16" and metrics["train_steps"] == 2
    assert set(metrics["precision_trial_seconds_per_step"]) == {"bf16, sdpa", "bf16, eager"}


AUTOCAST_MODES = {"fp32, sdpa", "bf16, sdpa", "bf16, eager"}
BOTH_WAYS = AUTOCAST_MODES | {"bf16 weights, sdpa", "bf16 weights, eager"}


@pytest.mark.parametrize(
    "name, weights, modes",
    [("amx", [], AUTOCAST_MODES), ("avx512_bf16", [], AUTOCAST_MODES), ("amx", ["--bf16_weights", "auto"], BOTH_WAYS)],
    ids=["amx", "avx512_bf16", "amx-bf16_weights_auto"],
)
def test_auto_on_a_bf16_cpu_times_the_modes_and_trains_in_the_fastest(demo_files, tmp_path, name, weights, modes):
    """train.py as on an AMX or AVX-512 BF16 machine (the flags faked where the command starts): the trial's three
    figures (five with --bf16_weights auto), the fastest mode, and both in the log, metrics.json and the card."""
    flags, _, evidence, _ = ON_THE_CPU[name]
    out = tmp_path / "run"
    cpuinfo = fake_cpuinfo(tmp_path, flags)
    result = run_script("train.py", *small_run(demo_files, out, *weights), cpuinfo=cpuinfo, timeout=300)
    assert result.returncode == 0, result.stderr[-3000:]
    metrics = json.loads((out / "metrics.json").read_text())
    figures = metrics["precision_trial_seconds_per_step"]
    assert set(figures) == modes and all(value > 0 for value in figures.values())
    fastest = min(figures, key=figures.get)
    trained_in = "bf16 weights" if metrics["bf16_weights"] else metrics["precision"]
    assert f"{trained_in}, {metrics['attention']}" == fastest
    assert not metrics["bf16_weights"] or metrics["precision"] == "bf16"
    assert metrics["precision_reason"].startswith(
        f"{metrics['precision']}: the fastest on this run's batches (a step took"
    )
    assert metrics["precision_reason"].endswith(f"); {evidence.removeprefix('bf16: ')}")
    weights = "; bfloat16 weights, float32 master weights" if metrics["bf16_weights"] else ""
    logged = f"precision {metrics['precision_reason']}; {metrics['attention']} attention{weights}; memory allocator: "
    assert f"{logged}{metrics['memory_allocator']}\n" in result.stderr
    card = (out / "hub" / "README.md").read_text()
    assert f"- Precision: {metrics['precision_reason']}; {metrics['attention']} attention{weights}; denormals" in card


def test_auto_on_a_cpu_without_bf16_times_nothing(demo_files, tmp_path):
    out = tmp_path / "run"
    result = run_script("train.py", *small_run(demo_files, out), cpuinfo=fake_cpuinfo(tmp_path, AVX2), timeout=300)
    assert result.returncode == 0, result.stderr[-3000:]
    metrics = json.loads((out / "metrics.json").read_text())
    assert (metrics["precision"], metrics["precision_reason"], metrics["attention"]) == ("fp32", NO_BF16, "sdpa")
    assert metrics["precision_trial_seconds_per_step"] == {}


def test_a_resumed_run_keeps_the_mode_it_trained_in(demo_files, tmp_path):
    out = tmp_path / "run"
    cpuinfo = fake_cpuinfo(tmp_path, AMX)
    steps = ["--max_steps", "4", "--save_strategy", "steps", "--save_steps", "2"]
    first = run_script("train.py", *small_run(demo_files, out, *steps), cpuinfo=cpuinfo, timeout=300)
    assert first.returncode == 0, first.stderr[-3000:]
    recorded = json.loads((out / "checkpoint-2" / "training_mode.json").read_text())
    metrics = json.loads((out / "metrics.json").read_text())
    assert (recorded["precision"], recorded["attention"]) == (metrics["precision"], metrics["attention"])
    assert recorded["weights"] == ("bf16" if metrics["bf16_weights"] else "fp32")
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
    trained_in = "bf16 weights" if recorded["weights"] == "bf16" else recorded["precision"]
    assert f"resuming a run that trained in {trained_in}, {recorded['attention']}:" in second.stderr
    assert (
        json.loads((out / "metrics.json").read_text())["precision_trial_seconds_per_step"]
        == recorded["seconds_per_step"]
    )


def test_bf16_weights_train_as_a_user_runs_them(demo_files, tmp_path):
    """`--precision bf16 --bf16_weights true`, no --use_cpu, on whatever CPU runs the suite: the trial times the two
    attentions on bfloat16 weights, the run records the mode everywhere, and what it saves is float32."""
    out = tmp_path / "run"
    flags = ["--precision", "bf16", "--bf16_weights", "true", "--save_strategy", "steps", "--save_steps", "2"]
    result = run_script("train.py", *small_run(demo_files, out, *flags), timeout=300)
    assert result.returncode == 0, result.stderr[-3000:]
    metrics = json.loads((out / "metrics.json").read_text())
    assert (metrics["precision"], metrics["bf16_weights"], metrics["train_steps"]) == ("bf16", True, 2)
    assert set(metrics["precision_trial_seconds_per_step"]) == {"bf16 weights, sdpa", "bf16 weights, eager"}
    assert "attention; bfloat16 weights, float32 master weights" in result.stderr
    card = (out / "hub" / "README.md").read_text()
    assert f"- Precision: {metrics['precision_reason']}; {metrics['attention']} attention; bfloat16 weights" in card
    recorded = json.loads((out / "checkpoint-2" / "training_mode.json").read_text())
    assert (recorded["precision"], recorded["weights"]) == ("bf16", "bf16")
    for folder in (out / "checkpoint-2", out / "hub"):
        with safe_open(folder / "model.safetensors", "pt") as saved:
            assert {saved.get_tensor(name).dtype for name in saved.keys()} == {torch.float32}


INSTALL_AND_PRELOAD = (
    "bf16 on this CPU trains about a fifth slower with glibc's allocator than with tcmalloc: install gperftools' "
    "tcmalloc (Debian, Ubuntu: apt-get install libtcmalloc-minimal4) and run with LD_PRELOAD set to it (make "
    "train-* and make demo do where it is installed)"
)


@pytest.mark.parametrize(
    "name, flags, preloaded, allocator, advice",
    [
        ("amx", ["--precision", "bf16"], [], "glibc", INSTALL_AND_PRELOAD),
        ("amx", ["--precision", "bf16"], ["/usr/lib/x86_64-linux-gnu/libtcmalloc_minimal.so.4"], "tcmalloc", None),
        ("avx2", [], [], "glibc", None),  # auto: float32
        ("avx2", ["--precision", "bf16"], [], "glibc", None),  # bf16 emulated: not what the advice measured
    ],
    ids=["amx-glibc", "amx-tcmalloc", "avx2-auto", "avx2-bf16"],
)
def test_the_run_names_its_allocator_and_advises_tcmalloc_where_bf16_runs_on_glibc(
    demo_files, tmp_path, monkeypatch, name, flags, preloaded, allocator, advice
):
    """train.py as on each machine, the CPU's flags and the process's libraries faked where the command starts
    (hardware.CPUINFO, hardware.PROCESS_MAPS; no tcmalloc installed): the allocator in the log, metrics.json and the
    card, and the advice only where bf16 runs natively on glibc's allocator."""
    monkeypatch.setattr(hardware, "PROCESS_MAPS", str(fake_process_maps(tmp_path, *preloaded)))
    monkeypatch.setattr(hardware, "TCMALLOC_LIBRARIES", ("no_such_library_on_any_machine",))
    out = tmp_path / "run"
    cpuinfo = fake_cpuinfo(tmp_path, ON_THE_CPU[name][0])
    result = run_script("train.py", *small_run(demo_files, out, *flags), cpuinfo=cpuinfo, timeout=300)
    assert result.returncode == 0, result.stderr[-3000:]
    metrics = json.loads((out / "metrics.json").read_text())
    assert metrics["memory_allocator"] == allocator
    assert f"attention; memory allocator: {allocator}\n" in result.stderr
    assert (advice in result.stderr) if advice else ("slower with glibc's allocator" not in result.stderr)
    card = (out / "hub" / "README.md").read_text()
    assert f" minutes on {metrics['machine']}; memory allocator: {allocator}\n" in card
