"""All-or-nothing saving (hf_tiny_transformer/guards/writing.py): a killed or failed save leaves the old files or the
new ones, never a mix; a save replaces the whole folder, keeping only what its writer names (a Hub clone's history), and
every folder writer over another model's folder writes what it writes into an empty one; leftovers are cleaned
up."""

import itertools
import json
import os
import shutil
import signal
import stat
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from bad_arguments import folder_digest
from conftest import tiny_model
from hf_tiny_transformer.guards import writing
from hf_tiny_transformer.guards.writing import replaced_file, staged_folder, write_atomically
from running import run_command, run_script

# Two saves of one model folder; every file carries its version. The old save's weights were sharded.
OLD = {
    "config.json": '{"version": 1}',
    "model-00001-of-00002.safetensors": "weights part 1, version 1",
    "model-00002-of-00002.safetensors": "weights part 2, version 1",
    "model.safetensors.index.json": '{"version": 1}',
    "tokenizer.json": '{"version": 1}',
    "README.md": "# version 1",
}
NEW = {
    "config.json": '{"version": 2}',
    "model.safetensors": "weights, version 2",
    "tokenizer.json": '{"version": 2}',
    "README.md": "# version 2",
}
KEPT = {"notes/extra.txt": "written by hand, kept by the saves that name notes/"}  # no save writes it

# Run in a child process: a save of NEW into argv[1], keeping notes/, that dies (SIGKILL) right after its argv[2]-th
# file operation.
KILLED_SAVE = r"""
import json, os, shutil, signal, sys

from hf_tiny_transformer.guards import writing

destination, kill_after, files = sys.argv[1], int(sys.argv[2]), json.loads(sys.argv[3])
steps = 0


def step():
    global steps
    steps += 1
    if steps == kill_after:
        os.kill(os.getpid(), signal.SIGKILL)


def counted(function):
    def counted_function(*args, **kwargs):
        result = function(*args, **kwargs)
        step()
        return result

    return counted_function


for name in ("mkdir", "rename", "replace", "link", "symlink", "unlink", "rmdir"):
    setattr(os, name, counted(getattr(os, name)))
shutil.copy2 = counted(shutil.copy2)
with writing.staged_folder(destination, keep=["notes"]) as staging:
    for name, text in files.items():
        (staging / name).write_text(text)
        step()
print(steps)
"""


def write_files(folder: Path, files: dict[str, str]):
    for name, text in files.items():
        (folder / name).parent.mkdir(parents=True, exist_ok=True)
        (folder / name).write_text(text)


def contents(folder: Path) -> dict[str, str] | None:
    """Every file under `folder` by relative path; None when there is no folder."""
    if not folder.exists():
        return None
    return {path.relative_to(folder).as_posix(): path.read_text() for path in folder.rglob("*") if path.is_file()}


def save(folder: Path, files: dict[str, str], keep: list[str] = ()):
    with staged_folder(folder, keep=keep) as staging:
        write_files(staging, files)


def dead_pid() -> int:
    """The id of a process that has ended."""
    child = subprocess.run(
        [sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True, check=True
    )
    return int(child.stdout)


# --- staged_folder -------------------------------------------------------------------------------------------------


def test_a_save_replaces_the_whole_folder(tmp_path):
    folder = tmp_path / "model"
    write_files(folder, {**OLD, **KEPT, "notes/old.txt": "a second old note"})
    save(folder, {**NEW, "notes/new.txt": "a new note"})
    assert contents(folder) == {**NEW, "notes/new.txt": "a new note"}
    assert os.listdir(tmp_path) == ["model"]


def test_a_save_keeps_what_its_writer_names_unless_it_wrote_that_name(tmp_path):
    folder = tmp_path / "model"
    history = {".git/HEAD": "ref: refs/heads/main", ".git/objects/ab/cdef": "a commit"}
    write_files(folder, {**OLD, **KEPT, **history, ".gitattributes": "old rules"})
    kept_inode = (folder / ".git/objects/ab/cdef").stat().st_ino
    save(folder, {**NEW, ".gitattributes": "new rules"}, keep=[".git", ".gitattributes", "not-there"])
    assert contents(folder) == {**NEW, **history, ".gitattributes": "new rules"}
    assert (folder / ".git/objects/ab/cdef").stat().st_ino == kept_inode  # a hard link, not a copy
    save(folder, {**NEW, "notes/new.txt": "a new note"}, keep=["notes"])  # a folder it wrote is not merged
    assert contents(folder) == {**NEW, "notes/new.txt": "a new note"}
    assert os.listdir(tmp_path) == ["model"]


def test_a_save_creates_a_missing_folder_and_its_parents(tmp_path):
    folder = tmp_path / "runs" / "en-ja" / "hub"
    save(folder, NEW)
    assert contents(folder) == NEW
    assert os.listdir(folder.parent) == ["hub"]


def test_a_save_through_a_symbolic_link_keeps_the_link(tmp_path):
    write_files(tmp_path / "model-v1", OLD)
    (tmp_path / "model").symlink_to("model-v1")
    save(tmp_path / "model", NEW)
    assert (tmp_path / "model").is_symlink() and contents(tmp_path / "model-v1") == NEW


@pytest.mark.parametrize("error", [RuntimeError, KeyboardInterrupt])
def test_a_failed_save_leaves_the_folder_untouched(tmp_path, error):
    folder = tmp_path / "model"
    write_files(folder, {**OLD, **KEPT})
    with pytest.raises(error), staged_folder(folder) as staging:
        write_files(staging, NEW)
        raise error("the save failed half-way")
    assert contents(folder) == {**OLD, **KEPT}
    assert os.listdir(tmp_path) == ["model"]


def test_a_save_onto_a_file_is_refused(tmp_path):
    (tmp_path / "model").write_text("not a folder")
    with pytest.raises(NotADirectoryError, match="is a file"), staged_folder(tmp_path / "model"):
        pass


def test_a_save_removes_the_leftovers_of_dead_processes_only(tmp_path):
    folder, dead, alive = tmp_path / "model", dead_pid(), os.getpid()
    write_files(folder, OLD)
    leftovers = [f".model.saving-{dead}-0a1b2c3d", f".model.saving-{dead}-deadbeef"]
    write_files(tmp_path / leftovers[0], NEW)
    (tmp_path / leftovers[1]).write_text("a staged file")
    others = [f".model.saving-{alive}-0a1b2c3d", f".other.saving-{dead}-0a1b2c3d"]  # a live save; another folder's
    for name in others:
        (tmp_path / name).mkdir()
    save(folder, NEW)
    assert sorted(os.listdir(tmp_path)) == sorted(["model", *others])


def test_an_old_folder_left_aside_by_a_killed_save_is_put_back(tmp_path):
    folder = tmp_path / "model"
    write_files(tmp_path / f".model.replaced-{dead_pid()}-0a1b2c3d", OLD)
    with pytest.raises(RuntimeError), staged_folder(folder):
        raise RuntimeError("the next save fails")
    assert contents(folder) == OLD and os.listdir(tmp_path) == ["model"]


def test_a_save_whose_second_rename_fails_puts_the_old_folder_back(tmp_path, monkeypatch):
    folder = tmp_path / "model"
    write_files(folder, OLD)
    renames = []

    def rename(source, target):
        renames.append(target)
        if len(renames) == 2:  # the new folder into the old one's place
            raise PermissionError("refused")
        return os.replace(source, target)

    monkeypatch.setattr(writing.os, "rename", rename)
    with pytest.raises(PermissionError):
        save(folder, NEW)
    assert contents(folder) == OLD and os.listdir(tmp_path) == ["model"]


def test_ctrl_c_while_the_new_folder_takes_the_old_ones_place_finishes_and_says_so(tmp_path, monkeypatch):
    """The point of no return: a press during the renames and the removal of the old folder is held back until they
    are done, then raised with what is in place (it was: "interrupted", and a half-removed old folder left aside)."""
    folder = tmp_path / "model"
    write_files(folder, {**OLD, "notes/a.txt": "old notes"})
    remove = writing._remove

    def pressed_while_removing(path):
        os.kill(os.getpid(), signal.SIGINT)
        remove(path)

    monkeypatch.setattr(writing, "_remove", pressed_while_removing)
    with pytest.raises(KeyboardInterrupt, match="was saved whole"):
        save(folder, NEW)
    assert contents(folder) == NEW and os.listdir(tmp_path) == ["model"]
    writing.interrupted.clear()


# --- killed saves ---------------------------------------------------------------------------------------------------


def killed_saves(folder: Path, old: dict[str, str] | None):
    """Save NEW into `folder` (set to `old` first; None: absent), keeping notes/, in a child process killed after its
    1st, 2nd, ... file operation; yield after each killed run, until a run completes."""
    for kill_after in itertools.count(1):
        shutil.rmtree(folder.parent, ignore_errors=True)
        folder.parent.mkdir()
        if old is not None:
            write_files(folder, old)
        arguments = [str(folder), str(kill_after), json.dumps(NEW)]
        child = subprocess.run(
            [sys.executable, "-c", KILLED_SAVE, *arguments], capture_output=True, text=True, check=False
        )
        if child.returncode == 0:
            assert int(child.stdout) == kill_after - 1  # the run completed after as many steps as killed runs
            return
        assert child.returncode == -signal.SIGKILL, child.stderr
        yield


@pytest.mark.parametrize("exists", [True, False], ids=["replacing", "creating"])
def test_a_save_killed_at_any_step_leaves_the_old_folder_or_the_new_one(tmp_path, exists):
    """Killed between its two renames, the old folder is aside whole, and the next save puts it back first."""
    folder = tmp_path / "parent" / "model"
    old, new = ({**OLD, **KEPT}, {**NEW, **KEPT}) if exists else (None, NEW)
    seen = []
    for _ in killed_saves(folder, old):
        state = contents(folder)
        aside = [name for name in os.listdir(folder.parent) if name.startswith(".model.replaced-")]
        if state is None and aside:  # between the two renames
            assert contents(folder.parent / aside[0]) == old
            state = "aside"
        assert state in (old, new, "aside"), state
        seen.append("old" if state == old else "new" if state == new else state)
        save(folder, NEW, keep=["notes"])
        assert contents(folder) == new and os.listdir(folder.parent) == ["model"]
    assert len(seen) >= 5 and {"old", "new"} <= set(seen)  # killed both before and after the swap
    assert ("aside" in seen) == exists


# --- files ----------------------------------------------------------------------------------------------------------


def test_write_atomically_writes_text_as_utf8_and_bytes_as_they_are(tmp_path):
    write_atomically(tmp_path / "text.txt", "緑茶\n")
    write_atomically(tmp_path / "data.bin", b"\x00\xff")
    assert (tmp_path / "text.txt").read_bytes() == "緑茶\n".encode() and (
        tmp_path / "data.bin"
    ).read_bytes() == b"\x00\xff"
    assert sorted(os.listdir(tmp_path)) == ["data.bin", "text.txt"]


def test_a_failed_file_write_leaves_the_file_untouched(tmp_path):
    path = tmp_path / "metrics.json"
    path.write_text("old")
    with pytest.raises(KeyboardInterrupt), replaced_file(path) as temporary:
        temporary.write_text("new, half")
        raise KeyboardInterrupt
    assert path.read_text() == "old" and os.listdir(tmp_path) == ["metrics.json"]


def test_replaced_file_removes_leftovers_of_dead_processes(tmp_path):
    (tmp_path / f".metrics.json.saving-{dead_pid()}-0a1b2c3d").write_text("half")
    write_atomically(tmp_path / "metrics.json", "new")
    assert os.listdir(tmp_path) == ["metrics.json"]


# --- a real model folder ----------------------------------------------------------------------------------------------


def save_killed_after(model, tokenizer, folder: Path, kill_after: int) -> bool:
    """save_for_hub(model, tokenizer, folder, ...) (what train.py writes its hub folder with) in a forked child
    killed right after its `kill_after`-th file-system operation; True when the save completed before that."""
    from hf_tiny_transformer import model_card, save_for_hub

    card = model_card(model, source_lang="en", target_lang="ja", training_data="none")
    pid = os.fork()
    if pid == 0:  # the child
        steps = 0

        def counted(function):
            def counted_function(*args, **kwargs):
                nonlocal steps
                result = function(*args, **kwargs)
                steps += 1
                if steps == kill_after:
                    os.kill(os.getpid(), signal.SIGKILL)
                return result

            return counted_function

        for name in ("mkdir", "rename", "replace", "link", "unlink", "rmdir"):
            setattr(os, name, counted(getattr(os, name)))
        save_for_hub(model, tokenizer, folder, card)
        os._exit(0)
    _, status = os.waitpid(pid, 0)
    return os.waitstatus_to_exitcode(status) == 0


def test_a_hub_folder_save_killed_at_any_step_loads_as_the_old_model_or_the_new_one(tmp_path, tokenizer):
    """Kill the Hub-folder writer after every file operation and load the folder each time; killed between its two
    renames, the old folder is aside whole, and the next save puts it back. (A plain `model.save_pretrained` writes
    file by file, as the library's own models do.)"""
    from transformers import AutoModelForSeq2SeqLM

    old, new = tiny_model(seed=1), tiny_model(seed=2)
    source = torch.tensor([[5, 6, 7, 2]])
    decoder = torch.tensor([[1, 8, 9]])

    def logits(model):
        with torch.no_grad():
            return model(input_ids=source, decoder_input_ids=decoder).logits

    seen = set()
    for kill_after in itertools.count(1):
        shutil.rmtree(tmp_path, ignore_errors=True)
        old.save_pretrained(tmp_path / "model")
        completed = save_killed_after(new, tokenizer, tmp_path / "model", kill_after)
        aside = list(tmp_path.glob(".model.replaced-*"))  # whole where the folder is not there
        where = tmp_path / "model" if (tmp_path / "model").exists() else aside[0]
        loaded = logits(AutoModelForSeq2SeqLM.from_pretrained(where))
        state = "old" if torch.equal(loaded, logits(old)) else "new" if torch.equal(loaded, logits(new)) else "mixed"
        assert state != "mixed", f"killed after step {kill_after}: a mix of the two models"
        seen.add(state)
        if completed:
            assert state == "new"
            break
    assert seen == {"old", "new"} and kill_after > 3


def test_a_failed_hub_folder_save_leaves_the_earlier_folder_as_it_was(text_model, tokenizer, tmp_path, monkeypatch):
    """The tooling's saves (save_for_hub: train.py's hub folder, averaging, the exports) are all or nothing; a plain
    `model.save_pretrained` writes in place, as the library's own models do."""
    from hf_tiny_transformer import model_card, save_for_hub

    card = model_card(text_model, source_lang="en", target_lang="ja", training_data="test sentences")
    folder = save_for_hub(text_model, tokenizer, tmp_path / "hub", card)
    before = folder_digest(folder)
    text_model.config.notes = {"a set cannot be JSON"}
    with pytest.raises(TypeError, match="not JSON serializable"):
        save_for_hub(text_model, tokenizer, folder, card)
    assert folder_digest(folder) == before
    del text_model.config.notes

    def killed_while_writing(tensors, filename, metadata=None):
        open(filename, "wb").write(b"half a file")
        raise KeyboardInterrupt

    monkeypatch.setattr("transformers.modeling_utils.safe_save_file", killed_while_writing)
    with pytest.raises(KeyboardInterrupt):
        save_for_hub(text_model, tokenizer, folder, card)
    assert folder_digest(folder) == before


def test_a_pipe_or_device_as_the_destination_is_written_into_not_replaced(tmp_path):
    import threading

    pipe = tmp_path / "pipe"
    os.mkfifo(pipe)
    received = []
    reader = threading.Thread(target=lambda: received.append(pipe.read_bytes()), daemon=True)
    reader.start()
    write_atomically(pipe, "翻訳\n")
    reader.join(10)
    assert received == ["翻訳\n".encode()] and stat.S_ISFIFO(os.stat(pipe).st_mode)


# --- every folder writer over another model's folder ---------------------------------------------------------------
# Each writer, run as users run it with --overwrite over what it (or another writer) wrote for model A (int8 where it
# has int8), writes what it writes for model B (float32) into an empty folder: nothing of A's folder stays beside B's
# files, where an engine or the browser page would take it (A's `_quantized` graphs, A's model.bin) and run model A.

SENTENCES = "My mother really likes green tea. I didn't eat bread. She reads books."


def succeeded(result) -> list[str]:
    """The lines a command that must succeed printed."""
    assert result.returncode == 0, result.stderr[-2000:]
    return result.stdout.splitlines()


def translation(folder: Path, engine: str = "transformers") -> list[str]:
    """What `tiny-transformer translate --engine ENGINE --model FOLDER` prints for SENTENCES (greedy)."""
    return succeeded(
        run_command("translate", "--engine", engine, "--model", str(folder), "--num_beams", "1", SENTENCES)
    )


def commit_everything(folder: Path, message: str):
    """`git init`, `git add .`, `git commit` in `folder`: a clone of a Hub repository, as far as a save can tell."""
    if not shutil.which("git"):
        pytest.skip("git is not installed")
    identity = ["-c", "user.name=test", "-c", "user.email=test@example.com", "-c", "commit.gpgsign=false"]
    for arguments in (["init", "-q"], ["add", "."], ["commit", "-q", "-m", message]):
        subprocess.run(["git", *identity, "-C", str(folder), *arguments], check=True, capture_output=True)


def git_log(folder: Path) -> list[str]:
    return subprocess.run(
        ["git", "-C", str(folder), "log", "--format=%s"], check=True, capture_output=True, text=True
    ).stdout.splitlines()


@pytest.fixture(scope="module")
def other_model(trained_demo_model, tmp_path_factory) -> Path:
    """Model B: the trained demo model (model A) with noise on its weights, same tokenizer, saved with save_for_hub."""
    from transformers import AutoModelForSeq2SeqLM, AutoTokenizer

    from hf_tiny_transformer import model_card, save_for_hub

    model = AutoModelForSeq2SeqLM.from_pretrained(trained_demo_model)
    torch.manual_seed(0)
    with torch.no_grad():
        for parameter in model.parameters():
            parameter.add_(torch.randn_like(parameter) * 0.5 * parameter.abs().mean())
    card = model_card(model, source_lang="en", target_lang="ja", training_data="the demo corpus")
    return save_for_hub(
        model, AutoTokenizer.from_pretrained(trained_demo_model), tmp_path_factory.mktemp("b") / "hub", card
    )


@pytest.fixture(scope="module")
def exports(demo_onnx_int8, demo_ct2, other_model, tmp_path_factory) -> dict[tuple[str, str], Path]:
    """{("a" or "b", "onnx" or "ctranslate2"): the export}: model A's int8 (the trained demo model's exports),
    model B's float32, written into an empty folder by its command (export-onnx without --quantization: the test
    below writes it again with --quantization float32, and finds the same bytes)."""
    pytest.importorskip("ctranslate2", reason="the [ctranslate2] extra is not installed")
    root = tmp_path_factory.mktemp("exports")
    folders = {("a", "onnx"): demo_onnx_int8, ("a", "ctranslate2"): demo_ct2["int8"]}
    for kind, quantization in (("onnx", []), ("ctranslate2", ["--quantization", "float32"])):
        folders["b", kind] = root / "b" / kind  # ONNX: the command's default, which must be float32
        command = ["--model", str(other_model), "--output_dir", str(folders["b", kind]), *quantization]
        result = run_command(f"export-{kind}", *command, timeout=300)
        succeeded(result)
        assert "Warning" not in result.stderr, result.stderr  # torch.onnx's and the converters' warnings are kept quiet
    return folders


@pytest.fixture(scope="module")
def export_translations(exports) -> dict[tuple[str, str], list[str]]:
    """What each of `exports` translates SENTENCES to, with its own engine."""
    return {(name, kind): translation(folder, kind) for (name, kind), folder in exports.items()}


# ONNX over CTranslate2 is left out: the folder is replaced alike whatever the kinds (CTranslate2 over ONNX shows that
# the other kind's files go), and an ONNX export is slow.
@pytest.mark.parametrize(
    "kind, earlier", [("onnx", "onnx"), ("ctranslate2", "onnx"), ("ctranslate2", "ctranslate2")],
    ids=["onnx-over-onnx", "ctranslate2-over-onnx", "ctranslate2-over-ctranslate2"],
)  # fmt: skip
def test_an_export_over_another_models_export_is_the_export_into_an_empty_folder(
    exports, export_translations, other_model, tmp_path, kind, earlier
):
    folder = tmp_path / "export"
    shutil.copytree(exports["a", earlier], folder)
    command = ["--model", str(other_model), "--output_dir", str(folder), "--quantization", "float32", "--overwrite"]
    succeeded(run_command(f"export-{kind}", *command, timeout=300))
    assert translation(folder, kind) == export_translations["b", kind]
    assert folder_digest(folder) == folder_digest(exports["b", kind])
    assert export_translations["b", kind] != export_translations["a", kind]  # else this test could not fail


def page_translation(page: Path, config) -> list[str]:
    """What the page translates SENTENCES to, computed in onnxruntime: translate.js takes the `_quantized` graphs
    (q8) where model/onnx has them, else the float32 ones. `config`: the model's (the page has transformers.js's)."""
    from transformers import AutoTokenizer, GenerationConfig

    from hf_tiny_transformer.serving.files import ENCODER, QUANTIZED
    from hf_tiny_transformer.serving.onnx import OnnxSeq2SeqLM, sessions
    from hf_tiny_transformer.serving.translator import TransformersTranslator

    folder = page / "model"
    model = OnnxSeq2SeqLM(config, *sessions(folder, int8=(folder / f"{ENCODER}{QUANTIZED}.onnx").is_file()))
    model.generation_config = GenerationConfig.from_pretrained(folder)
    return TransformersTranslator(model, AutoTokenizer.from_pretrained(folder)).translate([SENTENCES], num_beams=1)


def test_a_page_over_another_models_page_is_the_page_written_into_an_empty_folder(
    exports, trained_demo_model, tmp_path
):
    from hf_tiny_transformer import TinyTransformerConfig
    from hf_tiny_transformer.serving.browser import VENDOR

    if not all(path.is_file() for path in VENDOR.values()):
        pytest.skip("the page's npm libraries are not installed")
    pages = {name: tmp_path / name for name in ("a", "b", "overwritten")}
    for name, export in (("a", exports["a", "onnx"]), ("b", exports["b", "onnx"])):
        succeeded(run_command("browser-page", "--model", str(export), "--output_dir", str(pages[name])))
    shutil.copytree(pages["a"], pages["overwritten"])
    command = ["--model", str(exports["b", "onnx"]), "--output_dir", str(pages["overwritten"]), "--overwrite"]
    succeeded(run_command("browser-page", *command))
    config = TinyTransformerConfig.from_pretrained(trained_demo_model)  # model B's too
    translated = {name: page_translation(page, config) for name, page in pages.items()}
    assert translated["overwritten"] == translated["b"]
    assert folder_digest(pages["overwritten"]) == folder_digest(pages["b"])
    assert translated["b"] != translated["a"]  # else this test could not fail


def small_checkpoint(folder: Path, run: int, step: int, tokenizer) -> str:
    """A tiny model and its tokenizer saved with save_pretrained, as a checkpoint of a run holds them: the run's
    initial weights (seed `run`) moved a little by `step` (average_checkpoints refuses those of different runs)."""
    model = tiny_model(run, vocab_size=len(tokenizer))
    generator = torch.Generator().manual_seed(step)
    with torch.no_grad():
        for parameter in model.parameters():
            parameter.add_(0.1 * parameter.std().nan_to_num() * torch.randn(parameter.shape, generator=generator))
    model.save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return str(folder)


def test_an_average_over_an_earlier_average_is_the_average_written_into_an_empty_folder(tokenizer, tmp_path):
    from transformers import AutoModelForSeq2SeqLM

    from hf_tiny_transformer import model_card

    first = [small_checkpoint(tmp_path / "first" / f"checkpoint-{step}", 1, step, tokenizer) for step in (1, 2)]
    second = [small_checkpoint(tmp_path / "second" / f"checkpoint-{step}", 2, step, tokenizer) for step in (1, 2)]
    averaged, fresh = tmp_path / "averaged", tmp_path / "fresh"
    succeeded(run_script("average_checkpoints.py", "--checkpoints", *first, "--output_dir", str(averaged)))
    # the card a person adds to push the first average (push-to-hub needs one), with that average's scores
    first_model = AutoModelForSeq2SeqLM.from_pretrained(averaged)
    model_card(first_model, source_lang="en", target_lang="ja", training_data="x", metrics={"bleu": 12.3}).save(
        averaged / "README.md"
    )
    first_translation = translation(averaged)
    again = ["--checkpoints", *second, "--output_dir", str(averaged), "--overwrite"]
    refused = run_script("average_checkpoints.py", *again)  # the card is the person's: never deleted by a save
    assert refused.returncode == 2 and "does not write (README.md)" in refused.stderr, refused.stderr
    (averaged / "README.md").unlink()
    succeeded(run_script("average_checkpoints.py", *again))
    succeeded(run_script("average_checkpoints.py", "--checkpoints", *second, "--output_dir", str(fresh)))
    assert translation(averaged) == translation(fresh)
    assert folder_digest(averaged) == folder_digest(fresh)
    assert translation(fresh) != first_translation  # else this test could not fail


def test_a_hub_folder_saved_into_a_clone_of_another_models_repository_keeps_only_its_history(
    trained_demo_model, other_model, exports, tmp_path
):
    """save_for_hub (train.py's hub folder) into a clone of the user's Hub repository of model A, which also holds
    A's ONNX graphs (onnx/, as repositories for transformers.js do): the folder B's save writes into an empty one,
    and the clone's history and LFS rules."""
    from transformers import AutoModelForSeq2SeqLM, AutoTokenizer

    from hf_tiny_transformer import model_card, save_for_hub

    clone, fresh = tmp_path / "clone", tmp_path / "fresh"
    shutil.copytree(trained_demo_model, clone)
    shutil.copytree(exports["a", "onnx"] / "onnx", clone / "onnx")
    (clone / ".gitattributes").write_text("*.safetensors filter=lfs diff=lfs merge=lfs -text\n")
    commit_everything(clone, "model A")
    history = folder_digest(clone / ".git")
    model, tokenizer = AutoModelForSeq2SeqLM.from_pretrained(other_model), AutoTokenizer.from_pretrained(other_model)
    card = model_card(model, source_lang="en", target_lang="ja", training_data="the demo corpus")
    save_for_hub(model, tokenizer, clone, card)
    save_for_hub(model, tokenizer, fresh, card)
    assert translation(clone) == translation(fresh)
    written = {name: digest for name, digest in folder_digest(clone).items() if not name.startswith(".git")}
    assert written == folder_digest(fresh)
    assert folder_digest(clone / ".git") == history and git_log(clone) == ["model A"]
    assert (clone / ".gitattributes").read_text() == "*.safetensors filter=lfs diff=lfs merge=lfs -text\n"
    assert translation(fresh) != translation(trained_demo_model)  # else this test could not fail


def test_a_space_saved_into_a_clone_of_an_earlier_space_keeps_only_its_history(text_model, tokenizer, tmp_path):
    """A Space written by an older version of the package holds a module this one lacks: it goes."""
    from hf_tiny_transformer import model_card
    from hf_tiny_transformer.hub import save_space

    card = model_card(text_model, source_lang="en", target_lang="ja", training_data="none")
    space, fresh = save_space(text_model, tokenizer, tmp_path / "space", card), tmp_path / "fresh"
    (space / "hf_tiny_transformer" / "removed_module.py").write_text('"""A module of an older version."""\n')
    commit_everything(space, "an earlier Space")
    history = folder_digest(space / ".git")
    save_space(text_model, tokenizer, space, card)
    save_space(text_model, tokenizer, fresh, card)
    written = {name: digest for name, digest in folder_digest(space).items() if not name.startswith(".git")}
    assert written == folder_digest(fresh)
    assert folder_digest(space / ".git") == history and git_log(space) == ["an earlier Space"]
