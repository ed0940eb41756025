"""What every command shares: the runner (hf_tiny_transformer.guards.runner), the output guard
(hf_tiny_transformer.guards.outputs), and a help text for each command and training script.

The runner: Ctrl-C anywhere in a command (its imports, model loading, an export) and a full disk are one line and an
exit status, never a traceback, and an interrupted or failed save leaves nothing behind. The output guard every
command runs before any work (check_output): a destination that is, holds or lies inside an input, an existing model
or checkpoints (unless asked), a folder holding what its writer does not write (where it replaces the folder), a
symbolic link, the wrong kind or place, or a place that cannot be written is one line naming the flag, the problem
and the fix.
"""

import argparse
import errno
import json
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from hf_tiny_transformer.commands import COMMANDS
from hf_tiny_transformer.errors import UsageError
from hf_tiny_transformer.guards.outputs import check_output, inputs_of
from hf_tiny_transformer.guards.runner import run
from hf_tiny_transformer.guards.writing import replaced_file, staged_folder
from running import ROOT, TINY_TRANSFORMER, ScriptResult, assert_one_line_error, run_command, run_tool


def write_files(folder: Path, files: dict[str, str]):
    for name, text in files.items():
        (folder / name).parent.mkdir(parents=True, exist_ok=True)
        (folder / name).write_text(text)


def refusal(path, **options) -> str:
    """The one-line message check_output raises for `path`."""
    with pytest.raises(UsageError) as raised:
        check_output(path, flag="--out", **options)
    message = str(raised.value)
    assert message.startswith("--out ") and "\n" not in message
    return message


@pytest.fixture
def run_dir(tmp_path) -> Path:
    """A training run: two checkpoints, a model folder and a source file."""
    for name in ("checkpoint-1", "checkpoint-2", "model"):
        write_files(tmp_path / "run" / name, {"config.json": "{}", "model.safetensors": "weights"})
    (tmp_path / "source.txt").write_text("a sentence\n")
    return tmp_path / "run"


@pytest.mark.parametrize(
    "output, kind, inputs, fragment",
    [
        ("source.txt", "file", ["source-link.txt"], "is also an input (source-link.txt)"),
        ("run/checkpoint-2", "folder", ["run/checkpoint-1", "run/checkpoint-2"], "is also an input (run/checkpoint-2)"),
        ("run", "replaced", ["run/checkpoint-1"], "holds the input run/checkpoint-1, which the save would replace"),
        ("run", "replaced", ["source.txt", "run/model/config.json"], "holds the input run/model/config.json"),
        ("run", "added to", ["run/model/config.json"], "holds the input run/model/config.json, which the save would"),
        ("run/model/export", "folder", ["run/model"], "lies inside the input folder run/model, which is being read"),
        ("run/model/hypotheses.txt", "file", ["run/model"], "lies inside the input folder run/model"),
    ],
)
def test_an_output_that_overlaps_an_input_is_refused(run_dir, monkeypatch, output, kind, inputs, fragment):
    """A folder the writer replaces must hold no input; one it adds to, none where it writes (here: model/)."""
    monkeypatch.chdir(run_dir.parent)
    os.link("source.txt", "source-link.txt")  # the same file under another name
    folder = {"replaced": {"kind": "folder", "replaces": True}, "added to": {"kind": "folder", "writes": ["model"]}}
    options = folder.get(kind, {"kind": kind})
    assert fragment in refusal(output, inputs=inputs, **options, overwrite=True)


def test_a_folder_added_to_may_hold_inputs_where_it_does_not_write(run_dir):
    """train.py's --output_dir runs/demo with its data in runs/demo/data (make demo)."""
    write_files(run_dir / "data", {"train.en": "a sentence"})
    inputs = [run_dir / "data" / "train.en", run_dir / "data"]
    assert check_output(run_dir, flag="--out", kind="folder", inputs=inputs, writes=["hub"], overwrite=True) == run_dir


def test_the_inputs_are_every_argument_that_names_an_existing_path(run_dir, monkeypatch):
    """compare_models.py --source_file t.en --output_file t.en replaced the sources with its report: the outputs are
    checked against every input the arguments name, lists of pairs included."""
    monkeypatch.chdir(run_dir.parent)
    pairs = [["run/model", "run/checkpoint-1"]]
    args = argparse.Namespace(source_file="source.txt", pair=pairs, output_file="source.txt", num_beams=4, lang="en",
                              missing="nowhere.txt")  # fmt: skip
    assert inputs_of(args, but=["output_file"]) == [Path("source.txt"), Path("run/model"), Path("run/checkpoint-1")]
    assert "is also an input (source.txt)" in refusal(
        "source.txt", kind="file", inputs=inputs_of(args, but=["output_file"])
    )


EXPORT_LIKE = ["config.json", "onnx", "hf_tiny_transformer.json"]


def test_a_folder_the_writer_replaces_holds_nothing_it_does_not_write(tmp_path):
    """export-onnx --overwrite deleted a user's README.md and my_eval.en beside an export: they are named instead."""
    write_files(
        tmp_path / "export", {"config.json": "{}", "onnx/a.onnx": "graph", "README.md": "mine", "my_eval.en": "x"}
    )
    message = refusal(tmp_path / "export", kind="folder", writes=EXPORT_LIKE, replaces=True, overwrite=True)
    assert "holds what this command does not write (README.md, my_eval.en), which replacing the folder would" in message
    (tmp_path / "export" / "README.md").unlink()
    (tmp_path / "export" / "my_eval.en").unlink()
    assert "already holds a model or checkpoints; pass --overwrite" in refusal(
        tmp_path / "export", kind="folder", writes=EXPORT_LIKE, replaces=True
    )
    check_output(tmp_path / "export", flag="--out", kind="folder", writes=EXPORT_LIKE, replaces=True, overwrite=True)


def test_a_read_only_entry_where_the_writer_writes_is_refused_before_any_work(tmp_path, monkeypatch):
    """train.py over a read-only hub/ trained to the end, then failed to replace it with a traceback."""
    write_files(tmp_path / "run", {"hub/config.json": "{}", "notes/a.txt": "mine"})
    real_access = os.access
    monkeypatch.setattr(
        os, "access", lambda path, mode: Path(path).name not in ("hub", "notes") and real_access(path, mode)
    )
    message = refusal(tmp_path / "run", kind="folder", writes=["hub"], overwrite=True)
    assert "holds hub, which is read-only; chmod -R u+w it, or choose another folder" in message
    write_files(tmp_path / "other", {"notes/a.txt": "mine"})  # a read-only entry it does not write is no concern
    assert check_output(tmp_path / "other", flag="--out", kind="folder", writes=["hub"]) == tmp_path / "other"


def test_nothing_is_written_through_a_symbolic_link(tmp_path):
    """A folder from elsewhere (an archive, a shared disk) with `hub -> ~/notes`: an output or an entry a command
    writes that is a link is refused, naming the link's target."""
    (tmp_path / "notes").mkdir()
    (tmp_path / "run").mkdir()
    (tmp_path / "run" / "hub").symlink_to(tmp_path / "notes")
    message = refusal(tmp_path / "run", kind="folder", writes=["hub"], overwrite=True)
    assert f"holds hub, a symbolic link (to {tmp_path / 'notes'}), where it writes; remove the link" in message
    (tmp_path / "link.txt").symlink_to(tmp_path / "notes" / "x.txt")
    assert f"link.txt is a symbolic link (to {tmp_path / 'notes' / 'x.txt'}); pass the path it points to" in refusal(
        tmp_path / "link.txt", kind="file"
    )


@pytest.mark.parametrize("folder", ["run", "run/model", "run/weights-only"])
def test_a_folder_holding_a_model_or_checkpoints_is_replaced_only_when_asked(run_dir, folder):
    write_files(run_dir / "weights-only", {"model-00001-of-00002.safetensors": "weights"})
    message = refusal(run_dir.parent / folder, kind="folder", overwrite_fix="pass --overwrite_output_dir to replace it")
    assert "already holds a model or checkpoints; pass --overwrite_output_dir to replace it" in message
    assert check_output(run_dir.parent / folder, kind="folder", flag="--out", overwrite=True) == run_dir.parent / folder


def test_an_existing_output_file_is_replaced_as_any_command_replaces_its_output(run_dir):
    """Only models and checkpoints need --overwrite; a file of translations or pictures is simply written anew."""
    source = run_dir.parent / "source.txt"
    assert check_output(source, kind="file", flag="--out") == source


def test_new_outputs_and_folders_without_a_model_pass(tmp_path):
    write_files(tmp_path / "data", {"train.en": "text"})
    assert check_output(tmp_path / "data", kind="folder", flag="--out") == tmp_path / "data"
    assert check_output(tmp_path / "new" / "deeper", kind="folder", flag="--out") == tmp_path / "new" / "deeper"
    assert check_output(tmp_path / "out.txt", kind="file", flag="--out") == tmp_path / "out.txt"


def test_an_output_of_the_wrong_kind_or_place_is_refused(tmp_path):
    (tmp_path / "file.txt").write_text("text")
    assert f"{tmp_path} is a folder; pass a file name, e.g. {tmp_path / 'output.txt'}" in refusal(tmp_path, kind="file")
    assert "file.txt is a file; pass a folder name" in refusal(tmp_path / "file.txt", kind="folder")
    missing = tmp_path / "missing" / "out.txt"
    message = refusal(missing, kind="file")
    assert f"the folder {missing.parent} does not exist; create it first (mkdir -p {missing.parent})" in message
    for kind in ("file", "folder"):
        message = refusal(tmp_path / "file.txt" / "sub" / "out", kind=kind)
        assert f"{tmp_path / 'file.txt'} is a file, not a folder; pass a path inside a folder" in message


def test_a_read_only_place_is_refused(tmp_path):
    """As a user without write permission there: the suite runs as root, who may write anywhere, so the check runs
    in a child that has given up root (the user nobody) where the suite is root."""
    import tempfile

    place = tempfile.mkdtemp(prefix="read-only-")
    try:
        os.chmod(place, 0o777)  # nobody may create files here; only the two below are locked
        locked = os.path.join(place, "locked")
        os.mkdir(locked, 0o555)
        with open(os.path.join(place, "out.txt"), "w") as file:
            file.write("text")
        os.chmod(os.path.join(place, "out.txt"), 0o444)
        read, write = os.pipe()
        pid = os.fork()
        if pid == 0:  # the child
            try:
                if os.geteuid() == 0:
                    os.setgid(65534)
                    os.setuid(65534)
                from hf_tiny_transformer.guards.outputs import check_output

                messages = []
                for path, kind in (
                    (os.path.join(locked, "new", "model"), "folder"),
                    (os.path.join(place, "out.txt"), "file"),
                ):
                    try:
                        check_output(path, kind=kind, flag="--output", overwrite=True)
                        messages.append("accepted")
                    except UsageError as error:
                        messages.append(str(error))
                os.write(write, json.dumps(messages).encode())
            finally:
                os._exit(0)
        os.close(write)
        os.waitpid(pid, 0)
        messages = json.loads(os.read(read, 65536).decode())
    finally:
        shutil.rmtree(place, ignore_errors=True)
    assert messages == [
        f"--output {locked}/new/model: cannot write in {locked} (permission denied); choose another place or chmod "
        "u+w it",
        f"--output {place}/out.txt is read-only; choose another file or chmod u+w it",
    ]


def test_a_place_os_access_denies_is_refused(tmp_path, monkeypatch):
    (tmp_path / "out.txt").write_text("text")
    real_access = os.access
    monkeypatch.setattr(os, "access", lambda path, mode: Path(path) != tmp_path / "out.txt" and real_access(path, mode))
    assert "out.txt is read-only; choose another file or chmod u+w it" in refusal(
        tmp_path / "out.txt", kind="file", overwrite=True
    )
    monkeypatch.setattr(os, "access", lambda path, mode: False)
    message = refusal(tmp_path / "new" / "model", kind="folder")
    assert f"cannot write in {tmp_path} (permission denied); choose another place or chmod u+w it" in message


# ---------------------------------------------------------------------------------------------------------------
# The runner: Ctrl-C, and a full disk
# ---------------------------------------------------------------------------------------------------------------

IMPORT_TIME = "import time:"  # the start of each line PYTHONPROFILEIMPORTTIME writes on stderr, a line a module


def imported(module: str) -> Callable[[list[str]], bool]:
    """Whether a process's stderr lines so far show that it has imported `module`."""
    return lambda lines: any(line.startswith(IMPORT_TIME) and line.split("|")[-1].strip() == module for line in lines)


def collect(stream, lines: list[str]):
    """Append each line of `stream` to `lines` as it comes, until the stream ends."""
    for line in stream:
        lines.append(line)


def interrupted(command: list[str], ready: Callable[[list[str]], bool], cwd: Path) -> ScriptResult:
    """Start `command` in a fresh process as a shell does (standard input open and never written), press Ctrl-C
    (SIGINT) once `ready(its stderr lines so far)` holds, and say how it ended. The process reports each module it
    imports (PYTHONPROFILEIMPORTTIME: where it is); those lines are left out of the stderr returned."""
    env = {**os.environ, "PYTHONPROFILEIMPORTTIME": "1", "HF_HUB_OFFLINE": "1"}
    pipes = {"stdin": subprocess.PIPE, "stdout": subprocess.PIPE, "stderr": subprocess.PIPE}
    process = subprocess.Popen(command, cwd=cwd, env=env, text=True, **pipes)
    output: dict[str, list[str]] = {"stdout": [], "stderr": []}
    readers = [threading.Thread(target=collect, args=(getattr(process, name), output[name])) for name in output]
    for reader in readers:
        reader.start()
    deadline = time.monotonic() + 300
    try:
        while not ready(output["stderr"]):
            assert process.poll() is None, f"it ended before the moment: {''.join(output['stderr'])[-3000:]}"
            assert time.monotonic() < deadline, "the moment never came"
            time.sleep(0.01)
        process.send_signal(signal.SIGINT)
        process.wait(timeout=120)
    finally:
        process.kill()
        process.wait()
        for reader in readers:
            reader.join()
        process.stdin.close()
    stderr = "".join(line for line in output["stderr"] if not line.startswith(IMPORT_TIME))
    return ScriptResult(process.returncode, "".join(output["stdout"]), stderr)


def assert_interrupted(result: ScriptResult, prog: str):
    """Exit status 130 and one line on stderr, `{prog}: interrupted`: no traceback."""
    assert (result.returncode, result.stderr.strip()) == (130, f"{prog}: interrupted"), result.stderr[-3000:]


def test_ctrl_c_in_a_command_is_one_line_and_exit_status_130(capsys):
    def main(argv):
        raise KeyboardInterrupt

    assert run(main, [], prog="tool") == 130
    assert capsys.readouterr().err == "tool: interrupted\n"


def press_ctrl_c_and_lose_it():
    """Ctrl-C whose KeyboardInterrupt a library catches and goes on (or Python prints and ignores, where it lands in a
    callback)."""
    try:
        signal.raise_signal(signal.SIGINT)
    except KeyboardInterrupt:
        pass


def save_a_folder(folder: Path):
    with staged_folder(folder) as staging:
        (staging / "model.safetensors").write_text("new")
        press_ctrl_c_and_lose_it()


def save_a_file(folder: Path):
    with replaced_file(folder / "model.safetensors") as temporary:
        temporary.write_text("new")
        press_ctrl_c_and_lose_it()


@pytest.mark.parametrize("save", [save_a_folder, save_a_file, None], ids=["folder", "file", "nothing-saved"])
def test_ctrl_c_whose_exception_was_lost_still_ends_the_command_and_puts_no_save_in_place(tmp_path, capsys, save):
    """The press is remembered: a save finished after it does not replace what was there, and the command ends as
    Ctrl-C ends it (one line, 130) even where it had nothing to save."""
    folder = tmp_path / "model"
    folder.mkdir()
    (folder / "model.safetensors").write_text("old")

    def main(argv):
        if save:
            save(folder)
        else:
            press_ctrl_c_and_lose_it()

    assert run(main, [], prog="tool") == 130
    assert capsys.readouterr().err == "tool: interrupted\n"
    assert [path.name for path in tmp_path.iterdir()] == ["model"] and os.listdir(folder) == ["model.safetensors"]
    assert (folder / "model.safetensors").read_text() == "old"
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler  # the handler before run() is back
    save_a_file(folder)  # a save after run(): the press is forgotten
    assert (folder / "model.safetensors").read_text() == "new"


@pytest.mark.parametrize(
    "moment",
    ["torch", "hf_tiny_transformer.serving.engines"],
    ids=["while-importing-its-libraries", "while-loading-the-model"],
)
def test_ctrl_c_while_translate_starts_is_one_line(trained_demo_model, tmp_path, moment):
    """Pressed as the command imports the libraries it needs (torch, then the engines), and once the engines are
    imported (the model is then loaded): the installed command, in a fresh process (pip's wrapper imports the
    package, which imports nothing heavy, then the runner starts)."""
    command = [TINY_TRANSFORMER, "translate", "--model", str(trained_demo_model)]
    assert_interrupted(interrupted(command, imported(moment), tmp_path), "tiny-transformer translate")


@pytest.mark.parametrize("moment", ["loading", "writing"])
def test_ctrl_c_during_export_onnx_is_one_line_and_leaves_nothing(trained_demo_model, tmp_path, moment):
    """Pressed as the model is loaded (once the loader is imported), and as the export is written (once its staging
    folder exists): one line, and no export and no staging folder left."""
    pytest.importorskip("onnxscript")
    place = tmp_path / "exports"
    place.mkdir()
    ready = {
        "loading": imported("hf_tiny_transformer.guards.loading"),
        "writing": lambda lines: any(place.glob(".onnx.saving-*")),
    }[moment]
    command = [TINY_TRANSFORMER, "export-onnx", "--model", str(trained_demo_model), "--output_dir", str(place / "onnx")]
    assert_interrupted(interrupted(command, ready, tmp_path), "tiny-transformer export-onnx")
    assert list(place.iterdir()) == []


@pytest.mark.parametrize(
    "code, problem",
    [(errno.ENOSPC, "no space is left on its disk"), (errno.EDQUOT, "your disk quota there is used up")],
)
def test_a_full_disk_names_the_output_the_command_checked(tmp_path, capsys, code, problem):
    """A write's error names no file: the runner names the output the command checked before its work."""

    def main(argv):
        check_output(tmp_path / "out", kind="folder", flag="--output_dir")
        raise OSError(code, os.strerror(code))

    assert run(main, [], prog="tool") == 1
    fix = "free space there or choose another place"
    assert capsys.readouterr().err == f"tool: --output_dir {tmp_path / 'out'}: {problem}; {fix}\n"


def test_a_full_disk_names_the_file_the_error_names_where_no_output_was_checked(tmp_path, capsys):
    def main(argv):
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), str(tmp_path / "cache" / "file"))

    assert run(main, [], prog="tool") == 1
    message = f"tool: {tmp_path / 'cache' / 'file'}: no space is left on its disk; free space there or choose"
    assert capsys.readouterr().err.startswith(message)


@pytest.fixture
def small_disk(tmp_path):
    """A folder on a tmpfs of 64 KiB (mounting one needs root)."""
    disk = tmp_path / "disk"
    disk.mkdir()
    if subprocess.run(["mount", "-t", "tmpfs", "-o", "size=64k", "tmpfs", str(disk)], capture_output=True).returncode:
        pytest.skip("mounting a small tmpfs needs root; test_a_full_disk_names_the_output_... covers the message")
    yield disk
    subprocess.run(["umount", str(disk)], check=True)


def test_an_export_to_a_full_disk_is_one_line_naming_the_destination_and_leaves_nothing(trained_demo_model, small_disk):
    pytest.importorskip("ctranslate2")
    output = small_disk / "ct2"
    result = run_command("export-ctranslate2", "--model", str(trained_demo_model), "--output_dir", str(output))
    fix = "free space there or choose another place"
    assert_one_line_error(result, f"--output_dir {output}: no space is left on its disk; {fix}", code=1)
    assert list(small_disk.iterdir()) == []


def test_a_panic_of_a_rust_library_is_one_line_after_its_own_message(capfd):
    """A tokenizer's regex that backtracks without end on this text: its Rust code panics (a BaseException) and
    writes the panic on stderr itself; the runner adds one line naming the tokenizer, not a Python traceback."""
    from tokenizers import Regex, normalizers

    backtracking = normalizers.Replace(Regex(r"(.|..)+\d"), "")

    def main(argv):
        backtracking.normalize_str("My mother really likes green tea, and I do too.")

    assert run(main, [], prog="tool") == 1
    stderr = capfd.readouterr().err
    assert "Traceback" not in stderr
    assert stderr.splitlines()[-1].startswith("tool: the model's tokenizer fails on this text (Onig: Regex search")


def test_a_full_disk_where_no_output_was_checked_is_said_of_the_commands_output(capsys):
    """A command that writes on standard output (translate > file): the write's error names no file."""

    def main(argv):
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    assert run(main, [], prog="tool") == 1
    fix = "free space there or write the output elsewhere"
    assert capsys.readouterr().err == f"tool: writing its output: no space is left on its disk; {fix}\n"


# ---------------------------------------------------------------------------------------------------------------
# Every command and training script prints its help
# ---------------------------------------------------------------------------------------------------------------

TOOLS = [*sorted(path.name for path in (ROOT / "training").glob("*.py")), *COMMANDS]


@pytest.mark.parametrize("tool", TOOLS)
def test_every_command_and_script_prints_its_help(tool):
    result = run_tool(tool, "--help")
    prog = f"tiny-transformer {tool}" if tool in COMMANDS else tool
    assert result.returncode == 0 and result.stdout.startswith(f"usage: {prog}"), result.stderr[-2000:]


@pytest.mark.parametrize("command", [None, *COMMANDS])
def test_help_imports_neither_torch_nor_transformers(command):
    """`tiny-transformer --help` and each `tiny-transformer COMMAND --help` answer at once: a fresh interpreter (the
    suite's own has torch loaded) runs the installed entry point and lists what it imported."""
    argv = ["--help"] if command is None else [command, "--help"]
    program = (
        "import sys\nfrom hf_tiny_transformer.commands import main\n"
        f"try:\n    main({argv!r})\nexcept SystemExit:\n    pass\n"
        "print([name for name in ('torch', 'transformers') if name in sys.modules], file=sys.stderr)"
    )
    result = subprocess.run([sys.executable, "-c", program], capture_output=True, text=True, timeout=60, cwd=ROOT)
    assert result.stdout.startswith("usage: tiny-transformer"), result.stderr[-2000:]
    assert result.stderr.strip().splitlines()[-1] == "[]"


def test_train_help_offers_one_speed_flag():
    """--precision is the one speed choice; the knobs that did not pay are gone."""
    help_text = run_tool("train.py", "--help").stdout
    assert "--precision" in help_text
    for removed in ("--bf16_weights", "--attn_implementation", "--flush_denormal"):
        assert removed not in help_text
