"""Shared fixtures: tiny configs and models (vocab ~50, d_model 32, 2 layers) with fixed seeds."""

import hashlib
import logging
import os
import runpy
import signal
import subprocess
import sys
import tempfile
import time
import traceback
from dataclasses import dataclass
from pathlib import Path

import pytest
import torch
from transformers import Seq2SeqTrainingArguments

from hf_tiny_transformer import TinyTransformerConfig, TinyTransformerForConditionalGeneration

# pytest-xdist runs a worker a CPU (pyproject.toml's addopts): each worker, and every process it starts, computes on
# its share of the CPUs, so that the workers do not fight over them.
if workers := int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "0")):
    os.environ["OMP_NUM_THREADS"] = str(max(1, (os.cpu_count() or 1) // workers))
    torch.set_num_threads(int(os.environ["OMP_NUM_THREADS"]))

# What save_pretrained writes for a model: config, generation config, safetensors weights, and the code files (the
# remote code: the modeling and configuration files, and what they import: the pipeline and its text handling).
MODEL_FOLDER_FILES = {
    "config.json",
    "generation_config.json",
    "model.safetensors",
    "configuration_tiny_transformer.py",
    "modeling_tiny_transformer.py",
    "pipeline_tiny_transformer.py",
    "text_tiny_transformer.py",
}
# What save_for_hub (train.py's hub folder) writes besides: the tokenizer and the model card.
HUB_FOLDER_FILES = MODEL_FOLDER_FILES | {"tokenizer.json", "tokenizer_config.json", "README.md"}

TINY = dict(
    vocab_size=50,
    d_model=32,
    encoder_layers=2,
    decoder_layers=2,
    encoder_attention_heads=4,
    decoder_attention_heads=4,
    encoder_ffn_dim=64,
    decoder_ffn_dim=64,
    max_position_embeddings=64,
)


def tiny_config(**overrides) -> TinyTransformerConfig:
    return TinyTransformerConfig(**{**TINY, **overrides})


def tiny_model(seed: int = 0, **overrides) -> TinyTransformerForConditionalGeneration:
    """A random tiny model in eval mode. init_std 0.3 gives logits varied enough for generation tests."""
    torch.manual_seed(seed)
    return TinyTransformerForConditionalGeneration(tiny_config(**{"init_std": 0.3, **overrides})).eval()


def sgd_arguments(output_dir, **overrides) -> Seq2SeqTrainingArguments:
    """Trainer's arguments for a few steps on the CPU that tests can compare: plain SGD at a constant learning rate of
    0.5 (Adam would blow up float noise in gradients that are zero in exact arithmetic, key biases), nothing saved or
    reported."""
    fixed = {"optim": "sgd", "learning_rate": 0.5, "lr_scheduler_type": "constant", "report_to": []}
    return Seq2SeqTrainingArguments(str(output_dir), **fixed, save_strategy="no", use_cpu=True, **overrides)


@pytest.fixture
def model():
    return tiny_model()


@pytest.fixture
def batch():
    """Two sources of different length (the second padded) and their targets (-100 where padded)."""
    input_ids = torch.tensor([[5, 6, 7, 8, 2], [9, 10, 2, 0, 0]])
    labels = torch.tensor([[11, 12, 13, 2], [14, 2, -100, -100]])
    return {"input_ids": input_ids, "attention_mask": (input_ids != 0).long(), "labels": labels}


ENGLISH = [
    "I really like green tea.",
    "The cat is sleeping on the sofa.",
    "She doesn't drink coffee in the morning.",
    "We read three books last year.",
    "I can't tell who will arrive first.",
    "My brother bought 2 tickets for 1500 yen.",
    "Do you like dogs?",
    'He said, "Let\'s play catch."',
]
JAPANESE = [
    "私は緑茶が本当に好きです。",
    "猫がソファの上で寝ています。",
    "彼女は朝コーヒーを飲みません。",
    "私たちは去年本を三冊読みました。",
    "誰が一番に着くか私には分かりません。",
    "兄はチケットを2枚1500円で買った。",
    "犬が好きですか？",
    "彼は「キャッチボールをしよう」と言った。",
]


@pytest.fixture(scope="session")
def tokenizer():
    """A tokenizer trained on a few English and Japanese sentences (lowercased, as the demo's is)."""
    from hf_tiny_transformer import train_tokenizer

    return train_tokenizer(ENGLISH * 3 + JAPANESE * 3, vocab_size=1000, lowercase=True, model_max_length=64)


@pytest.fixture
def text_model(tokenizer):
    """A random tiny model whose vocabulary is the tokenizer's."""
    return tiny_model(vocab_size=len(tokenizer))


def run_without_package(script: str, *args: str, cwd) -> str:
    """Run a Python script in a fresh process from which hf_tiny_transformer cannot be imported."""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    env["HF_HUB_OFFLINE"] = "1"
    env["HF_MODULES_CACHE"] = str(cwd / "modules")
    blocker = cwd / "blocker"
    blocker.mkdir(exist_ok=True)
    # an installed (editable) package is still found through site-packages: hide it with a failing module
    (blocker / "hf_tiny_transformer.py").write_text("raise ImportError('hidden for this test')\n")
    env["PYTHONPATH"] = str(blocker)
    result = subprocess.run(
        [sys.executable, "-c", script, *args],
        cwd=cwd,
        env=env,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    return result.stdout.strip().splitlines()[-1]


ROOT = Path(__file__).resolve().parents[1]
# The installed command, as `pip install` puts it beside the interpreter (for the tests that need a fresh process).
TINY_TRANSFORMER = str(Path(sys.executable).with_name("tiny-transformer"))


@dataclass
class ScriptResult:
    returncode: int
    stdout: str
    stderr: str


# The project's machines by the CPU flags that matter (and a few that do not): what /proc/cpuinfo shows there.
AMX = frozenset(
    {"fma", "avx2", "avx512f", "avx512_vnni", "avx512_bf16", "avx512_fp16", "amx_bf16", "amx_tile", "amx_int8"}
)  # Intel Xeon, Sapphire Rapids and later
AVX512_BF16 = frozenset({"fma", "avx2", "avx512f", "avx512_vnni", "avx512_bf16"})  # AMD EPYC (Zen 4)
AVX2 = frozenset({"fma", "avx2", "f16c"})  # no bfloat16 instructions
MACHINES = {"amx": AMX, "avx512_bf16": AVX512_BF16, "avx2": AVX2}


def fresh_python_number(code: str, argument: str) -> int:
    """The whole number that `python -c code argument` prints, in a fresh interpreter (nothing set up by the
    suite's own process: threads, CPU settings)."""
    result = subprocess.run([sys.executable, "-c", code, argument], capture_output=True, text=True, check=True)
    return int(result.stdout)


def fake_cpuinfo(folder: Path, flags: frozenset[str], model: str = "Intel(R) Xeon(R) Platinum 8480+") -> Path:
    """A /proc/cpuinfo of one CPU with these flags, for `hardware.CPUINFO` (what the hardware detection reads)."""
    path = folder / "cpuinfo"
    path.write_text(f"processor\t: 0\nmodel name\t: {model}\nflags\t\t: {' '.join(sorted(flags))}\n")
    return path


# `python -c FAKED_CPU cpuinfo script args...`: the script run as __main__ on a machine whose /proc/cpuinfo is the
# given file: the detection is faked where the command starts, and everything after it runs as it would there.
FAKED_CPU = (
    "import runpy, sys; import hf_tiny_transformer.hardware as hardware; hardware.CPUINFO = sys.argv.pop(1); "
    "sys.argv = sys.argv[1:]; runpy.run_path(sys.argv[0], run_name='__main__')"
)
# The small model of the training tests (train.py's --config_overrides with --shape tiny): one layer each, d_model 32
SMALL_MODEL = (
    "d_model=32,encoder_ffn_dim=64,decoder_ffn_dim=64,encoder_layers=1,decoder_layers=1,max_position_embeddings=64"
)


def few_steps(data: Path | None, output_dir: Path, *extra: str) -> list[str]:
    """train.py's flags for 4 steps of the small model on the demo files of `data` (None: pass the data in `extra`),
    batches of 16 pairs, no checkpoints; `extra` comes last, so that a flag given there replaces the default."""
    data_flags = ["--train_source_file", f"{data}/train.en", "--train_target_file", f"{data}/train.ja"] if data else []
    return [
        "--shape", "tiny", "--config_overrides", SMALL_MODEL, "--vocab_size", "600", *data_flags,
        "--output_dir", str(output_dir), "--per_device_train_batch_size", "16", "--max_steps", "4",
        "--warmup_steps", "2", "--save_strategy", "no", "--disable_tqdm", "true", "--report_to", "none",
        "--seed", "0", *extra,
    ]  # fmt: skip  # flag-value pairs side by side


def run_script(
    name: str, *args: str, cwd=None, timeout: float = 120, cpuinfo: Path | None = None, folder: str = "training"
) -> ScriptResult:
    """Run {folder}/{name} (training/train.py, benchmarks/bf16_steps.py) as `python {folder}/{name} args...` would,
    in a child process forked from this one (see run_in_child)."""
    script = str(ROOT / folder / name)

    def script_main():
        sys.argv = [script, *args]
        runpy.run_path(script, run_name="__main__")

    return run_in_child(script_main, f"{name} {' '.join(args)}", cwd, timeout, cpuinfo)


def run_command(name: str, *args: str, cwd=None, timeout: float = 120, cpuinfo: Path | None = None) -> ScriptResult:
    """Run `tiny-transformer {name} args...` in a child process forked from this one (see run_in_child)."""
    from hf_tiny_transformer.commands import main

    def command_main():
        sys.argv = ["tiny-transformer", name, *args]
        sys.exit(main([name, *args]))

    return run_in_child(command_main, f"tiny-transformer {name} {' '.join(args)}", cwd, timeout, cpuinfo)


def run_tool(name: str, *args: str, **kwargs) -> ScriptResult:
    """A training script (`train.py`: run_script) or a `tiny-transformer` subcommand (`translate`: run_command)."""
    return (run_script if name.endswith(".py") else run_command)(name, *args, **kwargs)


def run_in_child(target, description: str, cwd, timeout: float, cpuinfo: Path | None) -> ScriptResult:
    """Call `target()` in a child process forked from this one, as the command would run in a shell.

    The child has torch and transformers imported already (a fresh interpreter spends about 8 s importing them on
    this project's machine); it exits with the command's exit status, its output captured. Meant for short runs (bad
    arguments, a few training steps of a tiny model); the child computes on one thread, since OpenMP thread pools do
    not survive fork, and is killed when it runs longer than `timeout` seconds. With `cpuinfo` (see fake_cpuinfo),
    the command runs as on a machine whose /proc/cpuinfo that file is.
    """
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        pid = os.fork()
        if pid == 0:  # the child: never returns into pytest
            code = 1
            try:
                torch.set_num_threads(1)
                if cpuinfo is not None:
                    from hf_tiny_transformer import hardware

                    hardware.CPUINFO = str(cpuinfo)
                logging.root.handlers.clear()  # pytest's capture handlers: the command configures its own
                os.dup2(out.fileno(), 1)
                os.dup2(err.fileno(), 2)
                sys.stdout, sys.stderr = open(1, "w", closefd=False), open(2, "w", closefd=False)
                os.chdir(cwd or ROOT)
                target()
                code = 0
            except SystemExit as exit_:
                code = exit_.code if isinstance(exit_.code, int) else (0 if exit_.code is None else 1)
            except BaseException:
                traceback.print_exc()
            finally:
                sys.stdout.flush()
                sys.stderr.flush()
                os._exit(code)
        deadline = time.monotonic() + timeout
        while (finished := os.waitpid(pid, os.WNOHANG))[0] == 0:
            if time.monotonic() > deadline:
                os.kill(pid, signal.SIGKILL)
                os.waitpid(pid, 0)
                raise AssertionError(f"{description} still ran after {timeout} s")
            time.sleep(0.01)
        status = finished[1]
        out.seek(0)
        err.seek(0)
        return ScriptResult(os.waitstatus_to_exitcode(status), out.read().decode(), err.read().decode())


def folder_digest(folder: Path) -> dict[str, str]:
    """Every file under `folder` (hidden ones too) and the hash of its bytes: equal digests, nothing changed."""
    return {
        str(p.relative_to(folder)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(folder.rglob("*"))
        if p.is_file()
    }


def assert_one_line_error(result: ScriptResult, *fragments: str, code: int = 2):
    """The script failed with `code`, printing one line on stderr that holds every fragment, and no traceback."""
    assert result.returncode == code, (result.returncode, result.stderr[-2000:])
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in result.stderr, result.stderr[-2000:]
    for fragment in fragments:
        assert fragment in lines[0], lines[0]


@pytest.fixture(scope="session")
def demo_files(tmp_path_factory):
    """The demo corpus as parallel text files: train (all), a 40-pair validation split, and test."""
    from hf_tiny_transformer.data.demo_corpus import make_demo_corpus

    folder = tmp_path_factory.mktemp("demo_data")
    corpus = make_demo_corpus(seed=0)
    splits = {"train": corpus["train"], "validation": corpus["test"][:40], "test": corpus["test"]}
    for split, pairs in splits.items():
        (folder / f"{split}.en").write_text("".join(p.english + "\n" for p in pairs), encoding="utf-8")
        (folder / f"{split}.ja").write_text("".join(p.japanese + "\n" for p in pairs), encoding="utf-8")
    return folder


@pytest.fixture(scope="session")
def trained_demo_model(demo_files, tmp_path_factory):
    """The hub folder of a model trained by training/train.py on the demo corpus: a smaller `make demo`
    (d_model 64, 2+2 layers, 350 steps of 64 pairs, about half a minute), shared by the tests that need a model
    that has really learned something."""
    out = tmp_path_factory.mktemp("trained_demo")
    larger = "d_model=64,encoder_ffn_dim=256,decoder_ffn_dim=256,encoder_layers=2,decoder_layers=2"
    larger += ",max_position_embeddings=64"
    arguments = few_steps(demo_files, out, "--config_overrides", larger, "--per_device_train_batch_size", "64",
                          "--max_steps", "350", "--warmup_steps", "100", "--learning_rate", "0.003")  # fmt: skip
    result = subprocess.run(
        [sys.executable, str(ROOT / "training" / "train.py"), *arguments], capture_output=True, text=True
    )
    assert result.returncode == 0, result.stderr[-3000:]
    return out / "hub"
