"""Shared fixtures: tiny configs and models (vocab ~50, d_model 32, 2 layers) with fixed seeds."""

import fcntl
import hashlib
import json
import multiprocessing
import os
import pty
import shlex
import shutil
import signal
import struct
import subprocess
import sys
import tempfile
import termios
import threading
import time
import traceback
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import child_process
import pytest
import torch
from transformers import Seq2SeqTrainingArguments

from hf_tiny_transformer import TinyTransformerConfig, TinyTransformerForConditionalGeneration

# A suite started in the background of a script (`nohup make test &`) inherits Ctrl-C ignored, and so would every
# command the tests start: the tests that press Ctrl-C need the disposition of a terminal.
signal.signal(signal.SIGINT, signal.default_int_handler)

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
    pid: int | None = None  # the process's id, where the test started it


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
    name: str,
    *args: str,
    cwd=None,
    timeout: float = 120,
    cpuinfo: Path | None = None,
    folder: str = "training",
    stdin: bytes | None = None,
    kill_when: Callable[[], bool] | None = None,
    terminal: bool = False,
    setup: tuple | None = None,
) -> ScriptResult:
    """Run {folder}/{name} (training/train.py, benchmarks/profile_training.py) as `python {folder}/{name} args...`
    would (see run_in_child)."""
    spec = {"kind": "script", "path": str(ROOT / folder / name), "args": list(args)}
    options = {"stdin": stdin, "kill_when": kill_when, "terminal": terminal, "setup": setup}
    return run_in_child(spec, f"{name} {' '.join(args)}", cwd, timeout, cpuinfo, **options)


def run_command(
    name: str,
    *args: str,
    cwd=None,
    timeout: float = 120,
    cpuinfo: Path | None = None,
    stdin: bytes | None = None,
    stdin_file: bool = False,
    terminal: bool = False,
    setup: tuple | None = None,
) -> ScriptResult:
    """Run `tiny-transformer {name} args...` (see run_in_child)."""
    spec = {"kind": "command", "path": None, "args": [name, *args]}
    options = {"stdin": stdin, "stdin_file": stdin_file, "terminal": terminal, "setup": setup}
    return run_in_child(spec, f"tiny-transformer {name} {' '.join(args)}", cwd, timeout, cpuinfo, **options)


def run_tool(name: str, *args: str, **kwargs) -> ScriptResult:
    """A training script (`train.py`: run_script) or a `tiny-transformer` subcommand (`translate`: run_command)."""
    return (run_script if name.endswith(".py") else run_command)(name, *args, **kwargs)


def run_ok(name: str, *args: str, **kwargs) -> ScriptResult:
    """run_tool, for a run that must succeed: the output is shown when it does not."""
    result = run_tool(name, *args, **{"timeout": 300, **kwargs})
    assert result.returncode == 0, result.stderr[-3000:]
    return result


def mode_flags(metrics: dict) -> list[str]:
    """train.py's flag that repeats the mode a run recorded in its metrics.json (the precision; the attention goes
    with it)."""
    return ["--precision", metrics["precision"]]


# The children of run_in_child (child_process.py): forked from a fork server that has imported what the commands and
# scripts need, once (by module name: the server does not see this folder).
CHILDREN = multiprocessing.get_context("forkserver")
CHILDREN.set_forkserver_preload(
    ["torch", "transformers.trainer", "hf_tiny_transformer.commands", "hf_tiny_transformer.trainer.trainer",
     "hf_tiny_transformer.serving.engines", "transformers.models.marian.modeling_marian", "sacrebleu", "onnx", "gradio"]
)  # fmt: skip


def run_in_child(
    spec: dict,
    description: str,
    cwd,
    timeout: float,
    cpuinfo: Path | None,
    stdin: bytes | None = None,
    stdin_file: bool = False,
    kill_when: Callable[[], bool] | None = None,
    terminal: bool = False,
    setup: tuple | None = None,
) -> ScriptResult:
    """Run a script or command (`spec`: see child_process.run) in a child process, as it would run in a shell.

    The child has torch, transformers and this package imported already (a fresh interpreter spends seconds importing
    them), and this process's environment; it exits with the command's exit status, its output captured. Its
    standard input holds `stdin`: a pipe (as `printf ... | command` gives it; nothing by default, as `< /dev/null`),
    or with `stdin_file` a file (as `< file`). Meant for short runs (bad arguments, a few training steps of a tiny
    model); the child computes on one thread, and is stopped when it runs longer than `timeout` seconds (printing
    where it was), or killed with SIGKILL (its exit status then -9) as soon as `kill_when()` holds. With `cpuinfo`
    (see fake_cpuinfo), the command runs as on a machine whose /proc/cpuinfo that file is; `setup` (module,
    function, args) is called in the child first (what a test patches there). With `terminal`, its standard output
    and error are a terminal of 24 rows and 120 columns (as a person's at a terminal), and the result's stdout is
    all it wrote there.
    """
    with tempfile.TemporaryDirectory() as folder:
        out, err = Path(folder) / "out", Path(folder) / "err"
        out.touch()
        err.touch()
        spec = {
            **spec, "cwd": str(cwd or ROOT), "timeout": timeout, "cpuinfo": None if cpuinfo is None else str(cpuinfo),
            "stdin": stdin or b"", "stdin_file": stdin_file, "setup": setup, "environ": dict(os.environ),
            "folder": folder, "out": str(out), "err": str(err), "terminal": None,
        }  # fmt: skip
        if terminal:
            leader, follower = pty.openpty()
            # a real terminal's size: tqdm draws nothing on one of unknown size (0 rows)
            fcntl.ioctl(follower, termios.TIOCSWINSZ, struct.pack("HHHH", 24, 120, 0, 0))
            spec["terminal"] = os.ttyname(follower)
            shown = []  # a thread reads the terminal, so that a full one does not block the child
            reader = threading.Thread(target=read_terminal, args=(leader, shown), daemon=True)
            reader.start()
        process = CHILDREN.Process(target=child_process.run, args=(spec,))
        process.start()
        deadline = time.monotonic() + timeout + 10  # the child stops itself at its timeout, saying where it was
        while process.exitcode is None:
            if kill_when is not None and kill_when():
                os.kill(process.pid, signal.SIGKILL)
                break
            if time.monotonic() > deadline:
                os.kill(process.pid, signal.SIGKILL)
                process.join()
                raise AssertionError(f"{description} still ran after {timeout} s: {err.read_text()[-3000:]}")
            time.sleep(0.01)
        process.join()
        if terminal:
            os.close(follower)  # the reader now gets to the end of what the child wrote
            reader.join()
            os.close(leader)
            return ScriptResult(process.exitcode, b"".join(shown).decode(errors="replace"), "", process.pid)
        outputs = (out.read_text(errors="replace"), err.read_text(errors="replace"))
        return ScriptResult(process.exitcode, *outputs, process.pid)


def read_terminal(leader: int, shown: list[bytes]):
    """Append what a program writes on a pseudo-terminal to `shown`, until it closes the terminal."""
    while True:
        try:
            chunk = os.read(leader, 65536)
        except OSError:  # the program ended and closed the terminal
            return
        if not chunk:
            return
        shown.append(chunk)


def run_in_terminal(name: str, *args: str, timeout: float = 300) -> str:
    """A training script (`train.py`) or a command (`translate`) run as a person at a terminal runs it (its output
    and errors a terminal), which must succeed: all it wrote there."""
    result = run_tool(name, *args, timeout=timeout, terminal=True)
    assert result.returncode == 0, result.stdout[-3000:]
    return result.stdout


# Damage done to an export or model folder, by file: a test's parameters name them.
def cut(name: str):
    """The file `name` of a folder cut to half its bytes, as an interrupted copy leaves it."""

    def damage(folder):
        path = folder / name
        path.write_bytes(path.read_bytes()[: path.stat().st_size // 2])

    return damage


def removed(name: str):
    """The file `name` of a folder deleted."""
    return lambda folder: (folder / name).unlink()


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


# Shared builds: what tests of several files need and takes long to make (the demo corpus's trained model, its
# exports, a checkpointed run) is made once for the whole run, pytest-xdist's workers included. At the end of
# collection a child forked from the first worker builds what the collected tests need, in the run's shared temporary
# folder, while the tests that need none of it run first; a fixture waits for its build. A build the child was not
# asked for (a fixture requested by name at run time) is made by the first process that asks, the others waiting.
# Tests copy a build before they change it.
SHARED_BUILDS = ("trained_demo_model", "demo_ct2", "demo_onnx", "demo_onnx_int8", "checkpointed_run")
builder_pid: int | None = None  # the child this process forked to build, if it did


def pytest_collection_modifyitems(items):
    """The tests that need a shared build run last, each group in its order, so that the builds are done when the
    first of them starts."""
    items.sort(key=lambda item: any(name in item.fixturenames for name in SHARED_BUILDS))


def pytest_collection_finish(session):
    needed = [name for name in SHARED_BUILDS if any(name in item.fixturenames for item in session.items)]
    if needed and not session.config.option.collectonly:
        start_builder(shared_root(session.config), needed)


def pytest_sessionfinish(session):
    """A worker whose builds another worker may still wait for ends only when they are done."""
    if builder_pid is not None:
        os.waitpid(builder_pid, 0)


def shared_root(config) -> Path:
    """The run's temporary folder for shared builds: pytest-xdist's workers each have theirs below the run's."""
    base = config._tmp_path_factory.getbasetemp()
    folder = (base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base) / "shared"
    folder.mkdir(parents=True, exist_ok=True)
    return folder


def start_builder(root: Path, needed: list[str]):
    """Fork the child that makes the `needed` builds, unless another worker did; builder.json says which it makes."""
    global builder_pid
    try:
        os.close(os.open(root / "builder", os.O_CREAT | os.O_EXCL | os.O_WRONLY))
    except FileExistsError:
        return
    builder_pid = os.fork()
    if builder_pid == 0:  # the child: never returns into pytest
        try:
            with open(root / "builder.log", "w") as log:
                child_process.redirect_output(log.fileno(), log.fileno())
            torch.set_num_threads(1)
            for name in SHARED_BUILDS:  # the model before its exports
                if name in needed:
                    make_build(root, name)
        finally:
            os._exit(0)
    (root / "builder.json.tmp").write_text(json.dumps({"pid": builder_pid, "builds": needed}))
    os.replace(root / "builder.json.tmp", root / "builder.json")


def make_build(root: Path, name: str):
    """Make one build into root/name; root/name.done marks it made, root/name.failed holds why it was not."""
    try:
        BUILDS[name](root / name, root)
    except Exception:
        (root / f"{name}.failed").write_text(traceback.format_exc())
    else:
        (root / f"{name}.done").touch()


def shared_build(config, name: str) -> Path:
    """root/name once it is made: made by the builder child if it was asked to, else here (the first process to
    ask makes it, the others wait for it)."""
    root = shared_root(config)
    deadline = time.monotonic() + 1800
    while (root / "builder").exists() and not (root / "builder.json").exists():
        time.sleep(0.05)  # the worker that forked the builder is about to say what it makes
    builder = json.loads((root / "builder.json").read_text()) if (root / "builder.json").exists() else None
    if builder is None or name not in builder["builds"]:
        with open(root / f"{name}.lock", "w") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            if not (root / f"{name}.done").exists():
                shutil.rmtree(root / name, ignore_errors=True)
                (root / f"{name}.failed").unlink(missing_ok=True)
                make_build(root, name)
    while not (root / f"{name}.done").exists():
        if (root / f"{name}.failed").exists():
            raise AssertionError(f"building {name} failed:\n{(root / f'{name}.failed').read_text()[-3000:]}")
        if not alive(builder["pid"]) or time.monotonic() > deadline:
            log = (root / "builder.log").read_text()[-3000:]
            raise AssertionError(f"the builder of {name} ended without making it:\n{log}")
        time.sleep(0.1)
    return root / name


def alive(pid: int) -> bool:
    """Whether process `pid` still runs (not ended, nor ended and waiting to be reaped)."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(") ", 1)[1][0] != "Z"
    except (FileNotFoundError, ProcessLookupError):
        return False


def write_demo_files(folder: Path) -> Path:
    """The demo corpus as parallel text files: train (all), a 40-pair validation split, and test; written whole
    or not at all, so that processes may race to write it."""
    from hf_tiny_transformer.data.demo_corpus import make_demo_corpus

    if folder.exists():
        return folder
    staging = Path(tempfile.mkdtemp(dir=folder.parent, prefix=f".{folder.name}-"))
    corpus = make_demo_corpus(seed=0)
    splits = {"train": corpus["train"], "validation": corpus["test"][:40], "test": corpus["test"]}
    for split, pairs in splits.items():
        (staging / f"{split}.en").write_text("".join(p.english + "\n" for p in pairs), encoding="utf-8")
        (staging / f"{split}.ja").write_text("".join(p.japanese + "\n" for p in pairs), encoding="utf-8")
    try:
        staging.rename(folder)
    except OSError:  # another process wrote it first
        shutil.rmtree(staging)
    return folder


def build_trained_demo_model(folder: Path, root: Path):
    """A smaller `make demo`: d_model 64, 2+2 layers, 350 steps of 64 pairs (train.py's output folder)."""
    data = write_demo_files(root / "demo_data")
    larger = "d_model=64,encoder_ffn_dim=256,decoder_ffn_dim=256,encoder_layers=2,decoder_layers=2"
    larger += ",max_position_embeddings=64"
    arguments = few_steps(data, folder, "--config_overrides", larger, "--per_device_train_batch_size", "64",
                          "--max_steps", "350", "--warmup_steps", "100", "--learning_rate", "0.003")  # fmt: skip
    result = run_script("train.py", *arguments, timeout=1200)
    assert result.returncode == 0, result.stderr[-3000:]


def demo_model_folder(root: Path) -> Path:
    if not (root / "trained_demo_model.done").exists():
        raise AssertionError("the trained demo model was not made")
    return root / "trained_demo_model" / "hub"


def build_demo_ct2(folder: Path, root: Path):
    """The demo model's CTranslate2 exports, by quantization: float32/ and int8/."""
    from hf_tiny_transformer.serving.ctranslate2 import export_ctranslate2

    model, tokenizer = load_demo_model(demo_model_folder(root))
    before = {name: tensor.clone() for name, tensor in model.state_dict().items()}
    for quantization in ("float32", "int8"):
        export_ctranslate2(model, tokenizer, folder / quantization, quantization=quantization)
    for name, tensor in model.state_dict().items():  # the int8 export quantized copies, not the model
        assert torch.equal(tensor, before[name]), name


def build_demo_onnx(quantization: str):
    def build(folder: Path, root: Path):
        from hf_tiny_transformer.serving.onnx import export_onnx

        export_onnx(*load_demo_model(demo_model_folder(root)), folder, quantization=quantization)

    return build


def build_checkpointed_run(folder: Path, root: Path):
    """4 steps of the small model (few_steps) saving a checkpoint every 2 (train.py's output folder)."""
    data = write_demo_files(root / "demo_data")
    result = run_script("train.py", *few_steps(data, folder, "--save_strategy", "steps", "--save_steps", "2"))
    assert result.returncode == 0, result.stderr[-3000:]


BUILDS = {
    "trained_demo_model": build_trained_demo_model,
    "demo_ct2": build_demo_ct2,
    "demo_onnx": build_demo_onnx("float32"),
    "demo_onnx_int8": build_demo_onnx("int8"),
    "checkpointed_run": build_checkpointed_run,
}


def load_demo_model(folder: Path):
    """The model (in eval mode) and the tokenizer of a model folder, as transformers' Auto classes load them."""
    from transformers import AutoModelForSeq2SeqLM, AutoTokenizer

    return AutoModelForSeq2SeqLM.from_pretrained(folder).eval(), AutoTokenizer.from_pretrained(folder)


@pytest.fixture(scope="session")
def demo_files(request):
    """The demo corpus as parallel text files: train (all), a 40-pair validation split, and test."""
    return write_demo_files(shared_root(request.config) / "demo_data")


@pytest.fixture(scope="session")
def trained_demo_model(request, demo_files):
    """The hub folder of a model trained by training/train.py on the demo corpus: a smaller `make demo`
    (d_model 64, 2+2 layers, 350 steps of 64 pairs), shared by the tests that need a model that has really learned
    something. Tests copy it before they change it."""
    return shared_build(request.config, "trained_demo_model") / "hub"


@pytest.fixture(scope="session")
def demo_ct2(request, trained_demo_model) -> dict[str, Path]:
    """The trained demo model's CTranslate2 exports, by quantization (float32, int8); tests copy one before they
    change it."""
    folder = shared_build(request.config, "demo_ct2")
    return {quantization: folder / quantization for quantization in ("float32", "int8")}


@pytest.fixture(scope="session")
def demo_onnx(request, trained_demo_model) -> Path:
    """The trained demo model's ONNX export in float32; tests copy it before they change it."""
    pytest.importorskip("onnxruntime", reason="the [onnx] extra is not installed")
    return shared_build(request.config, "demo_onnx")


@pytest.fixture(scope="session")
def demo_onnx_int8(request, trained_demo_model) -> Path:
    """The trained demo model's ONNX export with int8 weights (its float32 graphs beside the int8 ones); tests copy
    it before they change it."""
    pytest.importorskip("onnxruntime", reason="the [onnx] extra is not installed")
    return shared_build(request.config, "demo_onnx_int8")


@pytest.fixture(scope="session")
def demo_browser_page(demo_onnx, tmp_path_factory) -> Path:
    """The browser page's folder written for the float32 ONNX export (skipped where the page's npm libraries are
    missing); tests copy it before they change it."""
    from hf_tiny_transformer.serving.browser import VENDOR, write_browser_page

    if not all(path.is_file() for path in VENDOR.values()):
        pytest.skip("the page's npm libraries are not installed")
    return write_browser_page(demo_onnx, tmp_path_factory.mktemp("page") / "site")


@pytest.fixture(scope="session")
def checkpointed_run(request, demo_files) -> Path:
    """The output folder of train.py after 4 steps of the small model (few_steps) that saved a checkpoint every 2:
    checkpoint-2 and checkpoint-4 (with their optimizer states), tokenizer/, hub/, metrics.json. Tests copy it
    (copy_folder) before they train into it or change it."""
    return shared_build(request.config, "checkpointed_run")


def copy_folder(folder: Path, destination: Path) -> Path:
    """A copy of a folder a session fixture made, for a test that changes it."""
    return Path(shutil.copytree(folder, destination, symlinks=True))


# The bad-arguments tables: each command's and script's bad arguments and files, run against one workspace; each
# case must be one line on stderr naming the problem and the fix, exit status 2, no traceback, before any work, and
# no file changed.


@pytest.fixture(scope="session")
def workspace(tmp_path_factory, tokenizer):
    """data/ (demo text, broken files), hub/ (a saved model, max_position_embeddings 64), foreign/ (a folder whose
    code would leave a marker file if it ran), pickled/ (a model folder with pickles), run/ (an output folder
    holding a checkpoint), cut/ (weights cut short), ct2/ (what a CTranslate2 export holds), a_file, outputs/
    (empty: where the commands would write)."""
    from hf_tiny_transformer import model_card, save_for_hub
    from hf_tiny_transformer.data.demo_corpus import make_demo_corpus

    root = tmp_path_factory.mktemp("workspace")
    data = root / "data"
    data.mkdir()
    pairs = make_demo_corpus(seed=0)["train"][:40]
    (data / "train.en").write_text("".join(p.english + "\n" for p in pairs), encoding="utf-8")
    (data / "train.ja").write_text("".join(p.japanese + "\n" for p in pairs), encoding="utf-8")
    (data / "three.txt").write_text("a\nb\nc\n")
    (data / "empty.txt").write_text("\n \n")
    (data / "latin1.txt").write_bytes("caf\xe9\n".encode("latin-1"))
    (data / "not_json.jsonl").write_text('{"translation": {"en": "a", "ja": "b"}}\nnot json\n')
    (data / "array.jsonl").write_text("[1, 2]\n")
    (data / "no_ja.jsonl").write_text('{"translation": {"en": "a"}}\n')
    (data / "flags_array.json").write_text("[1, 2]")
    (data / "flags_empty.json").write_text("\n")
    (data / "flags_broken.json").write_text("{ not json")
    (data / "unknown_flag.json").write_text('{"learnin_rate": 0.1}')
    model = tiny_model(vocab_size=len(tokenizer))
    card = model_card(model, source_lang="en", target_lang="ja", training_data="test sentences")
    save_for_hub(model, tokenizer, root / "hub", card)
    foreign = root / "foreign"
    shutil.copytree(root / "hub", foreign)
    config = json.loads((foreign / "config.json").read_text())
    config["model_type"] = "somebody_elses_model"
    config["auto_map"] = {
        "AutoConfig": "configuration_elsewhere.Config",
        "AutoModelForSeq2SeqLM": "modeling_elsewhere.Model",
    }
    (foreign / "config.json").write_text(json.dumps(config))
    marker = root / "code_ran"
    for name in ("configuration_elsewhere.py", "modeling_elsewhere.py"):
        (foreign / name).write_text(f"open({str(marker)!r}, 'w').write('ran')\n")
    pickled = root / "pickled"  # a training output: a model, and pickles beside it
    shutil.copytree(root / "hub", pickled)
    (pickled / "checkpoint-8").mkdir()
    (pickled / "checkpoint-8" / "optimizer.pt").write_bytes(b"a pickle")
    (pickled / "training_args.bin").write_bytes(b"a pickle holding --hub_token")
    (root / "run" / "checkpoint-4").mkdir(parents=True)
    (root / "run" / "checkpoint-4" / "trainer_state.json").write_text('{"global_step": 4}')
    cut = root / "cut"  # a Hub folder whose weights file was cut short
    shutil.copytree(root / "hub", cut)
    (cut / "model.safetensors").write_bytes((cut / "model.safetensors").read_bytes()[:1000])
    (root / "ct2").mkdir()  # what export_ctranslate2.py writes
    for name in ("model.bin", "config.json", "tokenizer.json"):
        (root / "ct2" / name).write_bytes(b"{}")
    (root / "a_file").write_text("a file, not a folder\n")
    (root / "outputs").mkdir()
    return root


def apply_changes(arguments: list[str], changes: list[str | None], root) -> list[str]:
    """Replace the value of each flag in `changes` (None removes the flag), or append it; "{root}" in a value is
    the workspace."""
    arguments = list(arguments)
    for flag, value in zip(changes[::2], changes[1::2]):
        value = value.format(root=root) if value is not None else None
        if flag in arguments:
            index = arguments.index(flag)
            del arguments[index : index + 2]
            if value is None:
                continue
            arguments[index:index] = [flag, value]
        elif value is not None:
            arguments += [flag, value]
    return arguments


def assert_refused_before_any_work(workspace, tool: str, arguments: list[str], message: str):
    """`tool arguments` (a training script or a command, "{root}" in them the workspace) is one line holding
    `message`, exit status 2; no file of the workspace changed, nothing written into outputs/, and no folder's code
    ran."""
    before = folder_digest(workspace)
    result = run_tool(tool, *[argument.format(root=workspace) for argument in arguments])
    assert_one_line_error(result, message.format(root=workspace))
    assert folder_digest(workspace) == before, "a file was changed"
    assert list((workspace / "outputs").iterdir()) == [], "an output was written"
    assert not (workspace / "code_ran").exists(), "a folder's code ran without --trust_remote_code"


def command_lines(table: str) -> list[tuple[str, list[str], str]]:
    """(tool, arguments, message) for each pair of lines of `table`: a command line, then (indented) the one-line
    error it must give."""
    rows = table.strip("\n").split("\n")
    return [(*(lambda words: (words[0], words[1:]))(shlex.split(command)), message.strip())
            for command, message in zip(rows[::2], rows[1::2], strict=True)]  # fmt: skip
