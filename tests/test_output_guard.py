"""The output guard every command runs before any work (hf_tiny_transformer.commands.shared.check_output): a
destination that is, holds or lies inside an input, an existing model or checkpoints (unless asked), the wrong kind
or place, or a place that cannot be written is one line naming the flag, the problem and the fix."""

import errno
import os
from pathlib import Path

import pytest

from hf_tiny_transformer.commands import shared as cli
from hf_tiny_transformer.commands.shared import check_output, check_report
from hf_tiny_transformer.errors import UsageError


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
        ("run", "folder", ["run/checkpoint-1"], "holds the input run/checkpoint-1, which the save would replace"),
        ("run", "folder", ["source.txt", "run/model/config.json"], "holds the input run/model/config.json"),
        ("run/model/export", "folder", ["run/model"], "lies inside the input folder run/model, which is being read"),
        ("run/model/hypotheses.txt", "file", ["run/model"], "lies inside the input folder run/model"),
    ],
)
def test_an_output_that_overlaps_an_input_is_refused(run_dir, monkeypatch, output, kind, inputs, fragment):
    monkeypatch.chdir(run_dir.parent)
    os.link("source.txt", "source-link.txt")  # the same file under another name
    assert fragment in refusal(output, kind=kind, inputs=[None, "Helsinki-NLP/opus-mt-en-jap", *inputs])


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


def test_a_benchmarks_report_gets_its_missing_folders_but_no_other_leniency(tmp_path):
    """A report under runs/speed/ on a fresh clone (no runs/ yet) passes with its folders made; a folder, or a path
    under a file, is refused as check_output refuses it, and nothing is made there."""
    report = tmp_path / "runs" / "speed" / "report.json"
    assert check_report(report) == report and report.parent.is_dir() and not report.exists()
    with pytest.raises(UsageError, match=f"^--output {tmp_path} is a folder; pass a file name"):
        check_report(tmp_path)
    (tmp_path / "file.txt").write_text("text")
    under_a_file = tmp_path / "file.txt" / "speed" / "report.json"
    with pytest.raises(UsageError, match=f"{tmp_path / 'file.txt'} is a file, not a folder; pass a path inside"):
        check_report(under_a_file)
    assert (tmp_path / "file.txt").read_text() == "text"


@pytest.mark.skipif(os.geteuid() == 0, reason="root writes in read-only folders; the monkeypatched tests cover it")
def test_a_read_only_place_is_refused(tmp_path):
    (tmp_path / "locked").mkdir(mode=0o555)
    (tmp_path / "out.txt").write_text("text")
    (tmp_path / "out.txt").chmod(0o444)
    assert "cannot write in" in refusal(tmp_path / "locked" / "new" / "model", kind="folder")
    assert "out.txt is read-only" in refusal(tmp_path / "out.txt", kind="file", overwrite=True)


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


def test_a_place_where_creating_a_file_fails_is_refused(tmp_path, monkeypatch):
    """os.access can say yes where writing fails (a read-only mount, ACLs): a real file is tried."""

    def refuse(*args, **kwargs):
        raise PermissionError(errno.EROFS, "Read-only file system")

    monkeypatch.setattr(cli.tempfile, "NamedTemporaryFile", refuse)
    assert f"cannot write in {tmp_path} (permission denied)" in refusal(tmp_path / "out.txt", kind="file")
