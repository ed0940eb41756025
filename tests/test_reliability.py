"""Nothing a user saved is lost, and nothing runs unasked: one test per failure a user could hit (issue 10)."""

import copy
import json

import pytest
import torch
from huggingface_hub.errors import StrictDataclassError
from safetensors.torch import load_file
from transformers import AutoModelForSeq2SeqLM, Seq2SeqTrainer, pipeline

from conftest import (
    SMALL_MODEL,
    assert_one_line_error,
    few_steps,
    folder_digest,
    run_command,
    run_script,
    run_tool,
    run_without_package,
    tiny_model,
)
from hf_tiny_transformer import TinyTransformerConfig, TranslationPipeline, model_card, save_for_hub, train_tokenizer
from hf_tiny_transformer.data.demo_corpus import make_demo_corpus


def run_ok(script: str, *arguments: str):
    """A training script or a command run as a user runs it (a forked child), which must succeed."""
    result = run_tool(script, *arguments, timeout=300)
    assert result.returncode == 0, result.stderr[-3000:]
    return result


SOURCE = torch.tensor([[5, 6, 7, 8, 2], [9, 10, 2, 0, 0]])
MASK = (SOURCE != 0).long()


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    """A slice of the demo corpus: train (400 pairs) and test (40 pairs), as parallel text files."""
    folder = tmp_path_factory.mktemp("data")
    corpus = make_demo_corpus(seed=0)
    for split, pairs in (("train", corpus["train"][:400]), ("test", corpus["test"][:40])):
        (folder / f"{split}.en").write_text("".join(p.english + "\n" for p in pairs), encoding="utf-8")
        (folder / f"{split}.ja").write_text("".join(p.japanese + "\n" for p in pairs), encoding="utf-8")
    return folder


def train_args(data, output_dir, *extra: str) -> list[str]:
    return few_steps(data, output_dir, "--vocab_size", "400", *extra)


def hub_card(model):
    return model_card(model, source_lang="en", target_lang="ja", training_data="test sentences")


# 1. A documented pipeline form no longer breaks later saves, and a failed save leaves a good folder as it was.


def test_item1_saving_after_the_pipeline_by_task_works(text_model, tokenizer, tmp_path):
    pipeline(
        "translation",
        model=text_model,
        config=text_model.config,
        tokenizer=tokenizer,
        pipeline_class=TranslationPipeline,
    )
    text_model.save_pretrained(tmp_path / "model")
    saved = json.loads((tmp_path / "model" / "config.json").read_text())
    assert saved["custom_pipelines"]["translation"]["pt"] == ["AutoModelForSeq2SeqLM"]
    save_for_hub(text_model, tokenizer, tmp_path / "hub", hub_card(text_model))
    assert TinyTransformerConfig.from_pretrained(tmp_path / "hub").custom_pipelines == saved["custom_pipelines"]


def test_item1_a_failed_save_leaves_the_earlier_folder_as_it_was(text_model, tokenizer, tmp_path, monkeypatch):
    """The tooling's saves (save_for_hub: train.py's hub folder, averaging, the exports) are all or nothing; a plain
    `model.save_pretrained` writes in place, as the library's own models do (issue 27)."""
    folder = save_for_hub(text_model, tokenizer, tmp_path / "hub", hub_card(text_model))
    before = folder_digest(folder)
    text_model.config.notes = {"a set cannot be JSON"}
    with pytest.raises(TypeError, match="not JSON serializable"):
        save_for_hub(text_model, tokenizer, folder, hub_card(text_model))
    assert folder_digest(folder) == before
    del text_model.config.notes

    def killed_while_writing(tensors, filename, metadata=None):
        open(filename, "wb").write(b"half a file")
        raise KeyboardInterrupt

    monkeypatch.setattr("transformers.modeling_utils.safe_save_file", killed_while_writing)
    with pytest.raises(KeyboardInterrupt):
        save_for_hub(text_model, tokenizer, folder, hub_card(text_model))
    assert folder_digest(folder) == before


# 2. Half-precision loads work on every path and give the tokens of the float32 model cast the same way.


def generate(model):
    return model.generate(input_ids=SOURCE, attention_mask=MASK, max_new_tokens=8, min_new_tokens=8)


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
def test_item2_half_precision_loads(model, tmp_path, dtype):
    model.save_pretrained(tmp_path / "float32")
    cast = copy.deepcopy(model).to(dtype)
    expected = generate(cast)
    cast.save_pretrained(tmp_path / "cast")
    from_config = AutoModelForSeq2SeqLM.from_config(model.config, dtype=dtype)
    from_config.load_state_dict(cast.state_dict())
    loaded = {
        "from_pretrained": AutoModelForSeq2SeqLM.from_pretrained(tmp_path / "float32", dtype=dtype),
        "device_map": AutoModelForSeq2SeqLM.from_pretrained(tmp_path / "float32", dtype=dtype, device_map="auto"),
        "from_config": from_config,
        "saved after .to()": AutoModelForSeq2SeqLM.from_pretrained(tmp_path / "cast"),
    }
    for path, half in loaded.items():
        assert half.dtype == dtype, path
        assert torch.equal(generate(half.eval()), expected), path


def test_item2_half_precision_as_remote_code(model, tmp_path):
    model.save_pretrained(tmp_path / "folder")
    script = (
        "import json, sys, torch\nfrom transformers import AutoModelForSeq2SeqLM\n"
        "model = AutoModelForSeq2SeqLM.from_pretrained(sys.argv[1], trust_remote_code=True, dtype=torch.bfloat16)\n"
        f"source = torch.tensor({SOURCE.tolist()})\n"
        "print(json.dumps(model.generate(input_ids=source, attention_mask=(source != 0).long(), max_new_tokens=8, "
        "min_new_tokens=8).tolist()))"
    )
    got = json.loads(run_without_package(script, str(tmp_path / "folder"), cwd=tmp_path))
    assert got == generate(copy.deepcopy(model).to(torch.bfloat16)).tolist()


# 3. Lengths are checked before training; the trained model is saved before the test set is translated.


def test_item3_a_small_positional_table_with_default_lengths_trains_evaluates_and_saves(data, tmp_path, capsys):
    """max_position_embeddings 64 and every length left at its default: an untrained model translates the test
    set to the longest length the table allows, and everything is saved."""
    out = tmp_path / "run"
    test_files = [
        "--test_source_file", f"{data}/test.en", "--test_target_file", f"{data}/test.ja", "--do_predict", "true",
    ]  # fmt: skip  # flag-value pairs side by side
    run_ok("train.py", *train_args(data, out, *test_files))
    assert {"test_bleu", "test_chrf"} <= set(json.loads((out / "metrics.json").read_text()))
    arguments = ["--model", str(out / "hub"), "--source_file", f"{data}/test.en", "--reference_file", f"{data}/test.ja"]
    run_ok("evaluate_model.py", *arguments, "--num_beams", "1", "--output_file", str(tmp_path / "hypotheses"))
    assert len((tmp_path / "hypotheses").read_text().splitlines()) == 40


def test_item3_the_model_is_saved_before_the_test_set_is_translated(data, tmp_path, monkeypatch):
    def dies(*args, **kwargs):
        raise RuntimeError("killed while translating the test set")

    monkeypatch.setattr(Seq2SeqTrainer, "predict", dies)  # in the forked child too
    out = tmp_path / "run"
    test_files = [
        "--test_source_file", f"{data}/test.en", "--test_target_file", f"{data}/test.ja", "--do_predict", "true",
    ]  # fmt: skip  # flag-value pairs side by side
    result = run_script("train.py", *train_args(data, out, *test_files), timeout=300)
    assert result.returncode == 1 and "killed while translating" in result.stderr
    model = AutoModelForSeq2SeqLM.from_pretrained(out / "hub")
    assert model.config.d_model == 32 and (out / "hub" / "tokenizer.json").is_file()


def test_item3_lengths_beyond_the_positional_table_stop_the_run_before_any_work(data, tmp_path):
    out = tmp_path / "run"
    result = run_script("train.py", *train_args(data, out, "--generation_max_length", "128"))
    assert_one_line_error(result, "--generation_max_length 128 is longer than the model can take (65")
    assert not out.exists()


# 4. Old checkpoints are never mixed into a new run.


def test_item4_overwrite_removes_the_earlier_runs_checkpoints(data, tmp_path):
    out = tmp_path / "run"
    saving = ["--save_strategy", "steps", "--save_steps", "2"]
    run_ok("train.py", *train_args(data, out, *saving))
    assert sorted(p.name for p in out.glob("checkpoint-*")) == ["checkpoint-2", "checkpoint-4"]
    assert_one_line_error(
        run_script("train.py", *train_args(data, out, *saving)), "already holds a model or checkpoints"
    )
    run_ok("train.py", *train_args(data, out, *saving, "--max_steps", "2", "--overwrite_output_dir", "true"))
    assert sorted(p.name for p in out.glob("checkpoint-*")) == ["checkpoint-2"]


def test_item4_a_folder_with_checkpoints_but_no_model_is_protected(data, tmp_path):
    out = tmp_path / "run"
    (out / "checkpoint-6").mkdir(parents=True)
    (out / "checkpoint-6" / "trainer_state.json").write_text('{"global_step": 6}')
    before = folder_digest(out)
    assert_one_line_error(
        run_script("train.py", *train_args(data, out)), f"--output_dir {out} already holds a model or checkpoints"
    )
    assert folder_digest(out) == before


def test_item4_resume_checks_the_tokenizer_and_the_shape(data, tmp_path):
    out = tmp_path / "run"
    run_ok("train.py", *train_args(data, out, "--save_strategy", "steps", "--save_steps", "2"))
    resume = ["--resume_from_checkpoint", "true", "--max_steps", "6"]
    other_shape = train_args(data, out, *resume)
    other_shape[other_shape.index(SMALL_MODEL)] = SMALL_MODEL.replace("d_model=32", "d_model=64")
    assert_one_line_error(
        run_script("train.py", *other_shape), "checkpoint-4 is a different model (d_model 32 there, 64 here"
    )
    other = train_tokenizer(["other words entirely"] * 5 + ["ほかの言葉"] * 5, vocab_size=300)
    other.save_pretrained(tmp_path / "other_tokenizer")
    result = run_script(
        "train.py", *train_args(data, out, *resume, "--tokenizer_name", str(tmp_path / "other_tokenizer"))
    )
    assert_one_line_error(result, "checkpoint-4 was trained with another tokenizer than this run's")


# 5. A checkpoint half-written when the run was killed does not block resuming.


@pytest.mark.parametrize("damage", ["no trainer_state.json", "empty trainer_state.json", "no weights"])
def test_item5_resume_skips_a_half_written_checkpoint(data, tmp_path, damage):
    out = tmp_path / "run"
    run_ok("train.py", *train_args(data, out, "--save_strategy", "steps", "--save_steps", "2"))
    newest = out / "checkpoint-4"
    if damage == "no weights":
        (newest / "model.safetensors").unlink()
    else:
        (newest / "trainer_state.json").unlink()
        if damage.startswith("empty"):
            (newest / "trainer_state.json").write_text("")
    resume = ["--resume_from_checkpoint", "true", "--max_steps", "6", "--save_strategy", "steps", "--save_steps", "2"]
    result = run_ok("train.py", *train_args(data, out, *resume))
    assert f"skipping {newest}: it is incomplete" in result.stderr
    assert json.loads((out / "metrics.json").read_text())["train_steps"] == 6


# 6. A folder's code runs only when asked.


def test_item6_code_in_a_folder_runs_only_with_trust_remote_code(text_model, tokenizer, tmp_path):
    folder = save_for_hub(text_model, tokenizer, tmp_path / "foreign", hub_card(text_model))
    config = json.loads((folder / "config.json").read_text())
    config.update(model_type="somebody_elses_model", auto_map={"AutoConfig": "configuration_elsewhere.Config"})
    (folder / "config.json").write_text(json.dumps(config))
    marker = tmp_path / "code_ran"
    (folder / "configuration_elsewhere.py").write_text(f"open({str(marker)!r}, 'w').write('ran')\n")
    arguments = ["--model", str(folder), "--source_file", str(tmp_path / "s"), "--reference_file", str(tmp_path / "s")]
    (tmp_path / "s").write_text("I like tea.\n")
    assert_one_line_error(run_script("evaluate_model.py", *arguments), "pass --trust_remote_code to run it")
    assert not marker.exists()
    run_script("evaluate_model.py", *arguments, "--trust_remote_code")
    assert marker.exists()


# 7. push_to_hub.py uploads only what a model repository needs.


def test_item7_only_the_model_files_are_uploaded(text_model, tokenizer, tmp_path, monkeypatch):
    import huggingface_hub

    folder = save_for_hub(text_model, tokenizer, tmp_path / "hub", hub_card(text_model))
    (folder / ".env").write_text("HF_TOKEN=hf_secret\n")
    (folder / "notes.txt").write_text("my notes\n")
    (folder / "runs").mkdir()
    (folder / "runs" / "events.out").write_text("logs\n")
    uploaded = tmp_path / "uploaded.json"

    def upload_folder(self, folder_path, repo_id, repo_type, allow_patterns):
        uploaded.write_text(json.dumps(sorted(allow_patterns)))
        return type("Commit", (), {"commit_url": "https://hub/commit"})()

    # the forked child that runs the script inherits these: no network, no token needed
    monkeypatch.setattr(huggingface_hub.HfApi, "create_repo", lambda self, *args, **kwargs: None)
    monkeypatch.setattr(huggingface_hub.HfApi, "upload_folder", upload_folder)
    monkeypatch.setattr(huggingface_hub, "get_token", lambda: "hf_token")
    run_ok("push-to-hub", "--folder", str(folder), "--repo_id", "me/tiny")
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
    dry_run = run_ok("push-to-hub", "--folder", str(folder), "--repo-id", "me/tiny", "--dry-run")
    assert "Not uploaded (3, not part of a model repository): .env, notes.txt, runs/events.out" in dry_run.stdout


def test_item7_a_training_output_is_refused_and_its_card_has_no_local_paths(data, tmp_path):
    out = tmp_path / "run"
    run_ok("train.py", *train_args(data, out, "--save_strategy", "steps", "--save_steps", "4"))
    result = run_command("push-to-hub", "--folder", str(out), "--repo_id", "me/tiny", "--dry_run")
    assert_one_line_error(result, "holds pickled files (checkpoint-4/optimizer.pt", "push the hub folder")
    card = (out / "hub" / "README.md").read_text()
    assert str(data) not in card and str(tmp_path) not in card and "`train.en`, `train.ja`" in card


# 8-10. An output file never overwrites an input; config values are checked on every path; no step means an error.


def test_item8_the_output_file_cannot_be_an_input(data, tmp_path):
    before = folder_digest(data)
    arguments = ["--model", "unused", "--source_file", f"{data}/test.en", "--reference_file", f"{data}/test.ja"]
    for output in ("test.en", "test.ja"):
        result = run_script("evaluate_model.py", *arguments, "--output_file", f"{data}/{output}")
        assert_one_line_error(result, f"--output_file {data}/{output} is also an input ({data}/{output})")
    assert folder_digest(data) == before


def test_item9_config_values_are_checked_on_every_path(tmp_path, data):
    tiny_model().config.save_pretrained(tmp_path)
    with pytest.raises(StrictDataclassError, match=r"divisible by encoder_attention_heads \(3\)"):
        TinyTransformerConfig.from_pretrained(tmp_path, encoder_attention_heads=3).validate()
    with pytest.raises(StrictDataclassError, match="(?s)field 'dropout'.*must be in"):
        TinyTransformerConfig.from_pretrained(tmp_path).update({"dropout": 1.5})
    result = run_script("train.py", *train_args(data, tmp_path / "run", "--config_overrides", "d_modle=32"))
    assert_one_line_error(result, "--config_overrides d_modle=32: key d_modle isn't in the original config dict")


@pytest.mark.parametrize(
    "steps, message",
    [
        (["--max_steps", "0"], "--max_steps must be positive"),
        (["--max_steps", "-1", "--num_train_epochs", "0"], "--num_train_epochs must be positive"),
    ],
)
def test_item10_no_training_step_is_an_error(data, tmp_path, steps, message):
    result = run_script("train.py", *train_args(data, tmp_path / "run", *steps))
    assert_one_line_error(result, message)
    assert not (tmp_path / "run").exists()


def test_item1_saving_twice_leaves_the_models_weights_and_no_temporary_files(model, tmp_path):
    """A save over an earlier one replaces every file whole: the weights read back equal to the model's."""
    model.save_pretrained(tmp_path)
    model.save_pretrained(tmp_path)
    assert not [p for p in tmp_path.parent.iterdir() if ".saving-" in p.name]
    weights = load_file(tmp_path / "model.safetensors")
    for name, value in model.state_dict().items():
        if name in weights:
            assert torch.equal(weights[name], value), name
