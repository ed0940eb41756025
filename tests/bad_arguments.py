"""The bad-arguments tables: each command's and script's bad arguments and files, run against one workspace; each case
must be one line on stderr naming the problem and the fix, exit status 2, no traceback, before any work, and no file
changed."""

import hashlib
import json
import shlex
import shutil
from pathlib import Path

import pytest

from running import assert_one_line_error, run_tool


@pytest.fixture(scope="session")
def workspace(tmp_path_factory, tokenizer):
    """data/ (demo text, broken files), hub/ (a saved model, max_position_embeddings 64), foreign/ (a folder whose
    code would leave a marker file if it ran), pickled/ (a model folder with pickles), run/ (an output folder
    holding a checkpoint), cut/ (weights cut short), ct2/ (what a CTranslate2 export holds), a_file, outputs/
    (empty: where the commands would write)."""
    from conftest import tiny_model
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
    (data / "flags_list.json").write_text('{"shape": "tiny", "learning_rate": [0.1, 0.2]}')
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


def folder_digest(folder: Path) -> dict[str, str]:
    """Every file under `folder` (hidden ones too) and the hash of its bytes: equal digests, nothing changed."""
    return {
        str(p.relative_to(folder)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(folder.rglob("*"))
        if p.is_file()
    }


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
