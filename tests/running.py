"""Commands and scripts run as a shell runs them, in child processes of a fork server that has imported their
libraries once (child_process.py is the child's side), and what their runs are checked with."""

import fcntl
import multiprocessing
import os
import pty
import signal
import struct
import subprocess
import sys
import tempfile
import termios
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import child_process

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


def assert_one_line_error(result: ScriptResult, *fragments: str, code: int = 2):
    """The script failed with `code`, printing one line on stderr that holds every fragment, and no traceback."""
    assert result.returncode == code, (result.returncode, result.stderr[-2000:])
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in result.stderr, result.stderr[-2000:]
    for fragment in fragments:
        assert fragment in lines[0], lines[0]


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
