"""The folder ready for the Hub, its model card, and training/push_to_hub.py."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from huggingface_hub import ModelCard

from hf_tiny_transformer import model_card, save_for_hub
from hf_tiny_transformer.hub import differences_from_the_paper

from conftest import MODEL_FOLDER_FILES, folder_digest, run_without_package

ROOT = Path(__file__).resolve().parents[1]


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
    assert MODEL_FOLDER_FILES | {"pipeline_tiny_transformer.py", "tokenizer.json", "tokenizer_config.json", "README.md"} <= files
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
    assert "| test_bleu | 12.50 |" in card.text
    assert differences_from_the_paper() in card.text


def test_repo_model_card_lists_the_same_differences_as_the_code():
    assert differences_from_the_paper() in (ROOT / "model_card.md").read_text()


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
    env = {k: v for k, v in os.environ.items() if not k.startswith("HF_")}
    env.update({"HF_HOME": str(tmp_path / "hf_home"), **(env_overrides or {})})
    return subprocess.run(
        [sys.executable, str(ROOT / "training" / "push_to_hub.py"), "--folder", str(folder), "--repo-id", "me/tiny", *extra],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
    )


def test_push_dry_run_lists_files_and_card_header(hub_folder, tmp_path):
    before = folder_digest(hub_folder)
    result = push(hub_folder, "--dry-run", tmp_path=tmp_path)
    assert result.returncode == 0, result.stderr
    assert "model.safetensors" in result.stdout and "tokenizer.json" in result.stdout
    assert "pipeline_tag: translation" in result.stdout and "library_name: transformers" in result.stdout
    assert folder_digest(hub_folder) == before


def test_push_without_a_token_fails_in_one_line(hub_folder, tmp_path):
    before = folder_digest(hub_folder)
    result = push(hub_folder, tmp_path=tmp_path)
    assert result.returncode != 0
    assert result.stderr.strip().count("\n") == 0 and "Traceback" not in result.stderr
    assert "no Hugging Face token" in result.stderr
    assert folder_digest(hub_folder) == before


def test_push_without_network_fails_in_one_line(hub_folder, tmp_path):
    before = folder_digest(hub_folder)
    unreachable = {"HF_TOKEN": "hf_not_a_real_token", "HF_ENDPOINT": "http://127.0.0.1:9"}
    result = push(hub_folder, env_overrides=unreachable, tmp_path=tmp_path)
    assert result.returncode != 0
    assert result.stderr.startswith("push_to_hub.py: ") and result.stderr.strip().count("\n") == 0, result.stderr
    assert "Traceback" not in result.stderr
    assert folder_digest(hub_folder) == before


def test_push_refuses_an_incomplete_folder(hub_folder, tmp_path):
    (hub_folder / "README.md").unlink()
    result = push(hub_folder, "--dry-run", tmp_path=tmp_path)
    assert result.returncode == 2 and "lacks README.md" in result.stderr
