"""The Hub (hf_tiny_transformer/hub.py, `tiny-transformer push-to-hub`): the folder ready for the Hub, its model card
(and the metrics block the tools rewrite), the Space folder, which runs the app without the installed package, and
the push: only what a model repository needs, nothing from a training output, bad arguments one line each."""

import json
import os
import subprocess
from pathlib import Path

import pytest
from huggingface_hub import ModelCard

from bad_arguments import apply_changes, assert_refused_before_any_work, folder_digest
from conftest import HUB_FOLDER_FILES
from hf_tiny_transformer import model_card, save_for_hub
from hf_tiny_transformer.hub import BEGIN_METRICS, END_METRICS, differences_from_the_paper, save_space, with_evaluation
from hf_tiny_transformer.serving.translator import TransformersTranslator
from running import ROOT, TINY_TRANSFORMER, assert_one_line_error, run_command, run_without_package


@pytest.fixture
def hub_folder(text_model, tokenizer, tmp_path):
    card = model_card(
        text_model,
        source_lang="en",
        target_lang="ja",
        training_data="A few test sentences.",
        metrics={"test_bleu": 12.5, "test_chrf": 30.25},
        datasets=["small_parallel_enja"],
    )
    return save_for_hub(text_model, tokenizer, tmp_path / "hub", card)


def test_folder_holds_everything_a_hub_repo_needs(hub_folder):
    files = {path.name for path in hub_folder.iterdir()}
    assert files == HUB_FOLDER_FILES
    assert not [name for name in files if name.endswith((".bin", ".pt", ".pkl", ".pth"))]
    config = json.loads((hub_folder / "config.json").read_text())
    assert set(config["auto_map"]) == {"AutoConfig", "AutoModel", "AutoModelForSeq2SeqLM"}
    assert "translation" in config["custom_pipelines"]


def test_model_card_has_the_hub_metadata_header(hub_folder):
    card = ModelCard.load(hub_folder / "README.md")
    assert card.data.language == ["en", "ja"]
    assert card.data.license == "apache-2.0"
    assert card.data.library_name == "transformers"
    assert card.data.pipeline_tag == "translation"
    assert card.data.datasets == ["small_parallel_enja"]
    assert set(card.data.metrics) == {"bleu", "chrf"}
    assert "translation" in card.data.tags
    [block] = metrics_blocks(card.text)  # the measured scores sit in the block the tools rewrite
    assert "| test_bleu | 12.50 |" in block and "| test_chrf | 30.25 |" in block
    assert differences_from_the_paper() in card.text


def test_repo_model_card_lists_the_same_differences_as_the_code():
    assert differences_from_the_paper() in (ROOT / "model_card.md").read_text()


PERSONS_NOTE = "Checked by hand on 50 sentences of our own: most were right, long ones lose their ends."


def card_without_metrics(text_model) -> str:
    return model_card(text_model, source_lang="en", target_lang="ja", training_data="A few test sentences.").content


def metrics_blocks(card_text: str) -> list[str]:
    """The marked blocks the tools wrote, markers included."""
    return [BEGIN_METRICS + part.split(END_METRICS, 1)[0] + END_METRICS for part in card_text.split(BEGIN_METRICS)[1:]]


def test_updating_the_metrics_keeps_what_a_person_wrote_under_evaluation(text_model):
    differences = "## Differences from the paper"
    written = card_without_metrics(text_model).replace(differences, f"## Evaluation\n\n{PERSONS_NOTE}\n\n{differences}")
    first = with_evaluation(written, {"test_bleu": 10.0}, "first run")
    end_of_note = written.index(PERSONS_NOTE) + len(PERSONS_NOTE)
    # the block is added after the person's text, at the end of the section; nothing else changes
    assert first.startswith(written[:end_of_note]) and first.endswith(written[end_of_note:])
    second = with_evaluation(first, {"test_bleu": 20.0}, "second run")
    assert second.count(PERSONS_NOTE) == 1 and second.count("## Evaluation") == 1
    [block] = metrics_blocks(second)  # replaced, not added a second time
    assert "| test_bleu | 20.00 |" in block and "second run" in block
    assert "10.00" not in second and "first run" not in second
    assert second.index("## Evaluation") < second.index(PERSONS_NOTE) < second.index(block) < second.index(differences)
    assert second.replace(block, "") == first.replace(metrics_blocks(first)[0], "")


def test_metrics_block_of_a_new_card_is_replaced_and_a_card_without_evaluation_gets_the_section(text_model):
    card = model_card(
        text_model, source_lang="en", target_lang="ja", training_data="A few sentences.", metrics={"test_bleu": 1.0}
    )
    [block] = metrics_blocks(card.content)
    edited = card.content.replace(block, f"{block}\n\n{PERSONS_NOTE}")  # a person's text below the block
    updated = with_evaluation(edited, {"test_chrf": 33.0}, "")
    assert updated == edited.replace(
        block, "\n\n".join([BEGIN_METRICS, "| metric | value |\n|---|---:|\n| test_chrf | 33.00 |", END_METRICS])
    )
    bare = card_without_metrics(text_model)
    twice = with_evaluation(with_evaluation(bare, {"test_bleu": 1.0}, ""), {"test_bleu": 2.0}, "")
    assert twice.count("## Evaluation") == 1 and len(metrics_blocks(twice)) == 1 and "| test_bleu | 2.00 |" in twice
    assert twice.index("## Evaluation") < twice.index("## Differences from the paper")  # made before the differences


def test_space_folder_carries_the_whole_package_and_starts_the_app(text_model, tokenizer, tmp_path):
    card = model_card(text_model, source_lang="en", target_lang="ja", training_data="A few test sentences.")
    space = save_space(text_model, tokenizer, tmp_path / "space", card)
    package = ROOT / "hf_tiny_transformer"
    wanted = {path.relative_to(package) for pattern in ("*.py", "*.json") for path in package.rglob(pattern)}
    copied = {path.relative_to(space / "hf_tiny_transformer") for path in (space / "hf_tiny_transformer").rglob("*")}
    assert {
        Path("app/page.py"),
        Path("data/tokenizer.py"),
        Path("serving/translator.py"),
        Path("shapes/tiny.json"),
    } <= wanted
    assert wanted <= copied, wanted - copied  # subpackages included
    assert 'main(["app", "--model", "."])' in (space / "app.py").read_text()  # what `tiny-transformer app` runs
    assert HUB_FOLDER_FILES - {"README.md"} <= {path.name for path in space.iterdir()}
    assert ModelCard.load(space / "README.md").data.to_dict()["sdk"] == "gradio"


def test_a_space_folder_runs_the_app_without_the_installed_package(trained_demo_model, tmp_path):
    from transformers import AutoModelForSeq2SeqLM, AutoTokenizer

    model = AutoModelForSeq2SeqLM.from_pretrained(trained_demo_model)
    tokenizer = AutoTokenizer.from_pretrained(trained_demo_model)
    card = model_card(model, source_lang="en", target_lang="ja", training_data="the demo corpus")
    save_for_hub(model, tokenizer, tmp_path / "hub", card, space_folder=tmp_path / "space")
    space = tmp_path / "space"
    assert {"app.py", "requirements.txt", "README.md", "model.safetensors", "tokenizer.json"} <= {
        p.name for p in space.iterdir()
    }
    assert (space / "hf_tiny_transformer" / "app" / "page.py").is_file()
    assert (
        'sdk: "gradio"' in (space / "README.md").read_text()
        and 'app_file: "app.py"' in (space / "README.md").read_text()
    )
    script = (
        "import json, os\nimport hf_tiny_transformer  # the folder's copy: python -c puts the working folder first\n"
        "assert hf_tiny_transformer.__file__.startswith(os.getcwd()), hf_tiny_transformer.__file__\n"
        "from hf_tiny_transformer.guards.loading import load_model_folder\n"
        "from hf_tiny_transformer.app.page import TranslationApp\n"
        "app = TranslationApp(*load_model_folder('.'))\n"
        "*_, (translation, picture, note) = app.translate_and_draw('I eat cake.', 'cross', 1)\n"
        "print(json.dumps([translation, picture.size[0] > 200]))"
    )
    result = json.loads(run_without_package(script, cwd=space))
    assert result == [TransformersTranslator(model, tokenizer).translate(["I eat cake."])[0], True]


def test_hub_folder_generates_the_same_tokens_without_the_package(hub_folder, text_model, tokenizer, tmp_path):
    script = (
        "import json, sys\nfrom transformers import AutoModelForSeq2SeqLM, AutoTokenizer\n"
        "model = AutoModelForSeq2SeqLM.from_pretrained(sys.argv[1], trust_remote_code=True).eval()\n"
        "tok = AutoTokenizer.from_pretrained(sys.argv[1], trust_remote_code=True)\n"
        "enc = tok(['I really like green tea.', '猫が好きです。'], return_tensors='pt', padding=True)\n"
        "print(json.dumps(model.generate(**enc, max_new_tokens=8, min_new_tokens=8, num_beams=2).tolist()))"
    )
    got = json.loads(run_without_package(script, str(hub_folder), cwd=tmp_path))
    encoded = tokenizer(["I really like green tea.", "猫が好きです。"], return_tensors="pt", padding=True)
    assert got == text_model.generate(**encoded, max_new_tokens=8, min_new_tokens=8, num_beams=2).tolist()


def push(folder, *extra, env_overrides=None, tmp_path):
    """`tiny-transformer push-to-hub` in a fresh process whose environment names no Hub token or address of the
    user's (the library reads them when it is imported), only `env_overrides`."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("HF_")}
    env.update({"HF_HOME": str(tmp_path / "hf_home"), **(env_overrides or {})})
    return subprocess.run(
        [TINY_TRANSFORMER, "push-to-hub", "--folder", str(folder), "--repo_id", "me/tiny", *extra],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
    )


def listed_for_upload(stdout: str) -> set[str]:
    """The file names a --dry-run lists under "Would upload N files", one `  name (size bytes)` line each."""
    listing = stdout.split("Would upload", 1)[1].split("\n", 1)[1].split("Model card header:", 1)[0]
    return {line.split(" (", 1)[0].strip() for line in listing.splitlines() if line.startswith("  ")}


def test_push_dry_run_lists_files_and_card_header(hub_folder):
    (hub_folder / "scratch.py").write_text("print('mine')\n")  # a code file config.json does not name
    (hub_folder / "notes.txt").write_text("mine\n")
    before = folder_digest(hub_folder)
    result = succeeded(run_command("push-to-hub", "--folder", str(hub_folder), "--repo_id", "me/tiny", "--dry_run"))
    uploaded = listed_for_upload(result.stdout)
    # the code files config.json names, and what they import (pipeline, text, saving): everything remote code loads
    assert uploaded == HUB_FOLDER_FILES, uploaded
    assert not uploaded & {"scratch.py", "notes.txt"}, uploaded
    assert "Not uploaded (2, " in result.stdout and "scratch.py" in result.stdout and "notes.txt" in result.stdout
    assert "pipeline_tag: translation" in result.stdout and "library_name: transformers" in result.stdout
    assert folder_digest(hub_folder) == before


def test_push_without_a_token_fails_in_one_line(hub_folder, tmp_path):
    before = folder_digest(hub_folder)
    result = push(hub_folder, tmp_path=tmp_path)
    assert_one_line_error(result, "tiny-transformer push-to-hub: no Hugging Face token", "hf auth login", code=1)
    assert folder_digest(hub_folder) == before


def test_push_without_network_fails_in_one_line(hub_folder, tmp_path):
    before = folder_digest(hub_folder)
    unreachable = {"HF_TOKEN": "hf_not_a_real_token", "HF_ENDPOINT": "http://127.0.0.1:9"}
    result = push(hub_folder, env_overrides=unreachable, tmp_path=tmp_path)
    assert_one_line_error(result, code=1)
    assert result.stderr.startswith("tiny-transformer push-to-hub: "), result.stderr
    assert folder_digest(hub_folder) == before


def test_push_refuses_an_incomplete_folder(hub_folder):
    (hub_folder / "README.md").unlink()
    result = run_command("push-to-hub", "--folder", str(hub_folder), "--repo_id", "me/tiny", "--dry_run")
    assert_one_line_error(result, "lacks README.md", "save_for_hub")


def test_a_score_is_shown_with_its_confidence_interval(text_model):
    bare = card_without_metrics(text_model)
    card = with_evaluation(bare, {"bleu": 34.5, "bleu_ci": 2.58, "chrf": 37.05}, "")
    [block] = metrics_blocks(card)
    assert "| metric | value (± the 95 % confidence interval) |" in block
    assert "| bleu | 34.50 ± 2.58 |" in block and "| chrf | 37.05 |" in block and "bleu_ci" not in block


def succeeded(result):
    assert result.returncode == 0, result.stderr[-3000:]
    return result


def fake_hub(uploaded: str):
    """In the child that runs push-to-hub: no network, no token needed; the patterns uploaded go to `uploaded`."""
    import huggingface_hub

    def upload_folder(self, folder_path, repo_id, repo_type, allow_patterns):
        Path(uploaded).write_text(json.dumps(sorted(allow_patterns)))
        return type("Commit", (), {"commit_url": "https://hub/commit"})()

    huggingface_hub.HfApi.create_repo = lambda self, *args, **kwargs: None
    huggingface_hub.HfApi.upload_folder = upload_folder
    huggingface_hub.get_token = lambda: "hf_token"


def test_push_uploads_only_what_a_model_repository_needs(hub_folder, tmp_path):
    (hub_folder / ".env").write_text("HF_TOKEN=hf_secret\n")
    (hub_folder / "notes.txt").write_text("my notes\n")
    (hub_folder / "runs").mkdir()
    (hub_folder / "runs" / "events.out").write_text("logs\n")
    uploaded = tmp_path / "uploaded.json"
    push = ["--folder", str(hub_folder), "--repo_id", "me/tiny"]
    succeeded(run_command("push-to-hub", *push, setup=("test_hub", "fake_hub", (str(uploaded),))))
    assert json.loads(uploaded.read_text()) == [
        "README.md",
        "config.json",
        "configuration_tiny_transformer.py",
        "generation_config.json",
        "model.safetensors",
        "modeling_tiny_transformer.py",
        "pipeline_tiny_transformer.py",
        "text_tiny_transformer.py",
        "tokenizer.json",
        "tokenizer_config.json",
    ]
    dry_run = succeeded(run_command("push-to-hub", "--folder", str(hub_folder), "--repo-id", "me/tiny", "--dry-run"))
    assert "Not uploaded (3, not part of a model repository): .env, notes.txt, runs/events.out" in dry_run.stdout


def test_push_refuses_a_training_output_and_its_card_has_no_local_paths(checkpointed_run, demo_files):
    result = run_command("push-to-hub", "--folder", str(checkpointed_run), "--repo_id", "me/tiny", "--dry_run")
    assert_one_line_error(result, "holds pickled files (checkpoint-2/optimizer.pt", "push the hub folder")
    card = (checkpointed_run / "hub" / "README.md").read_text()
    assert str(demo_files) not in card and str(checkpointed_run) not in card and "`train.en`, `train.ja`" in card


# Bad arguments: one line each, before any work

PUSH_CASES = {
    "missing folder": (["--folder", "{root}/nothing"], "--folder {root}/nothing is not a folder"),
    "not a model folder": (["--folder", "{root}/data"], "lacks config.json"),
    "bad repository id": (["--repo_id", "me/two words"], "--repo_id 'me/two words' is not a Hub repository id"),
    "pickles in the tree": (
        ["--folder", "{root}/pickled"],
        "holds pickled files (checkpoint-8/optimizer.pt, training_args.bin)",
    ),
    "damaged weights": (["--folder", "{root}/cut"], "--folder {root}/cut: model.safetensors cannot be loaded"),
    "a CTranslate2 export": (
        ["--folder", "{root}/ct2"],
        "--folder {root}/ct2 is a CTranslate2 export (model.bin); push the model folder it was exported from",
    ),
}


@pytest.mark.parametrize("case", PUSH_CASES)
def test_bad_arguments_are_one_line_before_any_work(workspace, case):
    changes, message = PUSH_CASES[case]
    arguments = apply_changes(["--folder", "{root}/hub", "--repo_id", "me/tiny", "--dry_run"], changes, workspace)
    assert_refused_before_any_work(workspace, "push-to-hub", arguments, message)
