"""One way to read a model folder for every command (hf_tiny_transformer.guards.loading): any problem with config,
weights, generation config or tokenizer is one line that names the folder, the file and the fix; weights missing or
adding a tensor are an error, not a model half made of random numbers."""

import json
import math
import os
import shutil
import subprocess

import pytest
import torch
from safetensors.torch import load_file, save_file

from hf_tiny_transformer import TinyTransformerForConditionalGeneration
from running import TINY_TRANSFORMER, ScriptResult, assert_one_line_error, run_command, run_tool


@pytest.fixture
def folder(text_model, tokenizer, tmp_path):
    text_model.save_pretrained(tmp_path / "model")
    tokenizer.save_pretrained(tmp_path / "model")
    return tmp_path / "model"


def rewrite_weights(folder, change):
    weights = load_file(folder / "model.safetensors")
    change(weights)
    save_file(weights, folder / "model.safetensors", metadata={"format": "pt"})


def truncate(path):
    data = path.read_bytes()
    path.write_bytes(data[: len(data) // 2])


def set_config(folder, **values):
    config = json.loads((folder / "config.json").read_text())
    (folder / "config.json").write_text(json.dumps({**config, **values}))


DAMAGE = {
    "truncated weights": (lambda f: truncate(f / "model.safetensors"), "model.safetensors cannot be loaded"),
    "weights that are not safetensors": (
        lambda f: (f / "model.safetensors").write_bytes(b"\x00" * 64),
        "model.safetensors cannot be loaded",
    ),
    "a tensor missing": (
        lambda f: rewrite_weights(f, lambda w: w.pop("model.decoder.layers.0.feed_forward.fc1.weight")),
        "model.safetensors does not fit config.json (missing: model.decoder.layers.0.feed_forward.fc1.weight)",
    ),
    "a tensor too many": (
        lambda f: rewrite_weights(
            f,
            lambda w: w.update(
                extra=w["lm_head.weight"].clone()
                if "lm_head.weight" in w
                else w["model.encoder.embed_tokens.weight"].clone()
            ),
        ),
        "(unexpected: extra)",
    ),
    "a tensor of the wrong shape": (
        lambda f: rewrite_weights(
            f,
            lambda w: w.update(
                {
                    "model.decoder.layers.0.feed_forward.fc1.weight": w[
                        "model.decoder.layers.0.feed_forward.fc1.weight"
                    ][:5]
                }
            ),
        ),
        "(mismatched: model.decoder.layers.0.feed_forward.fc1.weight",
    ),
    "a config field of the wrong type": (
        lambda f: set_config(f, d_model="big"),
        "config.json cannot be loaded (Validation error for field 'd_model':",
    ),
    "a config value out of range": (
        lambda f: set_config(f, dropout=3),
        "config.json cannot be loaded (Validation error for field 'dropout':",
    ),
    "config.json not JSON": (lambda f: (f / "config.json").write_text("{ not json"), "config.json cannot be loaded"),
    "no config.json": (
        lambda f: (f / "config.json").unlink(),
        "has no config.json; pass a folder saved with save_pretrained",
    ),
    "a corrupt tokenizer.json": (
        lambda f: (f / "tokenizer.json").write_text('{"model": 3}'),
        "tokenizer.json cannot be loaded",
    ),
    "no weights": (lambda f: (f / "model.safetensors").unlink(), "model.safetensors cannot be loaded"),
}


@pytest.mark.parametrize("damage", DAMAGE)
def test_a_damaged_folder_is_one_line_naming_the_folder_the_file_and_the_fix(folder, damage):
    spoil, message = DAMAGE[damage]
    spoil(folder)
    result = run_command("translate", "--model", str(folder), "I like tea.")
    assert_one_line_error(result, f"--model {folder}", message)
    if "cannot be loaded" in message:
        assert "save the model again or copy the folder anew" in result.stderr


def test_every_command_reads_a_folder_the_same_way(folder, tmp_path):
    rewrite_weights(folder, lambda w: w.pop("model.decoder.layers.0.feed_forward.fc1.weight"))
    (tmp_path / "source.txt").write_text("I like tea.\n")
    scored = ["--model", str(folder), "--source_file", str(tmp_path / "source.txt"),
              "--reference_file", str(tmp_path / "source.txt")]  # fmt: skip  # flag-value pairs side by side
    commands = {
        "translate": ["--model", str(folder), "I like tea."],
        "evaluate_model.py": scored,
        "tune_decoding.py": scored,
        "visualize": ["--model", str(folder), "--source", "I like tea.", "--output_dir", str(tmp_path / "pictures")],
        "export-ctranslate2": ["--model", str(folder), "--output_dir", str(tmp_path / "ct2")],
    }
    for tool, arguments in commands.items():
        assert_one_line_error(
            run_tool(tool, *arguments), f"--model {folder}: model.safetensors does not fit config.json (missing:"
        )
    assert not (tmp_path / "pictures").exists() and not (tmp_path / "ct2").exists()


def test_a_copy_of_the_folder_loads(folder, tmp_path):
    """The loader's checks pass a good folder (and its copy) without a word on stderr."""
    shutil.copytree(folder, tmp_path / "copy")
    result = run_command("translate", "--model", str(tmp_path / "copy"), "I like tea.")
    assert result.returncode == 0 and result.stderr.strip() == "", result.stderr


def refuse_the_librarys_load():
    """In the child that runs the command: the library's load fails the test if it starts."""

    def never(*args, **kwargs):
        raise AssertionError("the library's load started")

    TinyTransformerForConditionalGeneration.from_pretrained = classmethod(never)


def test_a_config_far_larger_than_its_weights_is_refused_before_the_model_is_built(folder):
    """d_model raised by hand: the library would build the model at that size (gigabytes) before finding that the
    weights do not fit. The header of model.safetensors tells at once; the library's load never starts."""
    set_config(folder, d_model=8192)
    setup = ("test_loading", "refuse_the_librarys_load", ())
    result = run_command("translate", "--model", str(folder), "I like tea.", setup=setup)
    assert_one_line_error(
        result,
        f"--model {folder}: config.json's d_model 8192 does not fit model.safetensors",
        "fix config.json or save the model again",
    )


def test_a_tokenizer_whose_regex_fails_on_ordinary_text_is_one_line_after_the_panics_own(folder):
    """A normalizer regex that backtracks without end: the tokenizer's Rust code panics (a BaseException, with its
    own message on stderr); the runner says so in one line after it, naming the file to fix."""
    tokenizer = json.loads((folder / "tokenizer.json").read_text())
    backtracking = {"type": "Replace", "pattern": {"Regex": r"(.|..)+\d"}, "content": ""}
    tokenizer["normalizer"] = {"type": "Sequence", "normalizers": [backtracking, tokenizer["normalizer"]]}
    (folder / "tokenizer.json").write_text(json.dumps(tokenizer))
    result = run_command("translate", "--model", str(folder), "My mother really likes green tea, and I do too.")
    assert result.returncode == 1 and "Traceback" not in result.stderr, result.stderr[-2000:]
    last = result.stderr.strip().splitlines()[-1]
    assert last.startswith("tiny-transformer translate: the model's tokenizer fails on this text (Onig: Regex search")
    assert last.endswith("fix the regex of tokenizer.json's normalizer or pre-tokenizer")


def test_a_folder_with_only_a_pickled_checkpoint_is_one_line_and_the_pickle_is_never_loaded(folder):
    """A pickle can run code when loaded: the package loads safetensors only (the library's own one line)."""
    torch.save(load_file(folder / "model.safetensors"), folder / "pytorch_model.bin")
    (folder / "model.safetensors").unlink()
    setup = ("test_loading", "refuse_unpickling", ())
    result = run_command("translate", "--model", str(folder), "I like tea.", setup=setup)
    assert_one_line_error(result, f"--model {folder}: model.safetensors cannot be loaded", "model.safetensors")


def refuse_unpickling():
    """In the child that runs the command: torch.load fails the test if it is called."""
    import torch

    def never(*args, **kwargs):
        raise AssertionError("a pickle was loaded")

    torch.load = never


def test_positions_far_more_than_the_model_holds_are_refused_before_the_table_is_built(folder):
    """max_position_embeddings 4,000,000 by hand: 45 s and 10 GB of positional table before translating."""
    set_config(folder, max_position_embeddings=4_000_000)
    result = run_command(
        "translate", "--model", str(folder), "I like tea.", setup=("test_loading", "refuse_the_librarys_load", ())
    )
    assert_one_line_error(
        result, f"--model {folder}: config.json's max_position_embeddings 4000000 does not fit model.safetensors"
    )


def test_a_broken_special_tokens_map_is_named_as_the_file_at_fault(folder):
    """It was blamed on tokenizer.json."""
    (folder / "special_tokens_map.json").write_text("{ not json")
    result = run_command("translate", "--model", str(folder), "I like tea.")
    assert_one_line_error(result, f"--model {folder}: special_tokens_map.json cannot be loaded")


def test_code_named_by_tokenizer_config_json_is_reported_against_that_file(folder):
    tokenizer_config = json.loads((folder / "tokenizer_config.json").read_text())
    remote = {"tokenizer_class": "OwnTokenizer", "auto_map": {"AutoTokenizer": ["tokenization_own.OwnTokenizer", None]}}
    (folder / "tokenizer_config.json").write_text(json.dumps({**tokenizer_config, **remote}))
    result = run_command("translate", "--model", str(folder), "I like tea.")
    message = f"--model {folder} holds Python code of its own (tokenizer_config.json's auto_map)"
    assert_one_line_error(result, message, "--trust_remote_code")


def test_a_hub_id_that_cannot_be_downloaded_offline_is_one_line(tmp_path):
    """The library's own error, in one line naming the file it could not get. A fresh process: the Hub's settings
    are read when huggingface_hub is imported."""
    env = {**os.environ, "HF_HOME": str(tmp_path / "hf"), "HF_HUB_OFFLINE": "1"}  # an empty cache
    command = [TINY_TRANSFORMER, "translate", "--model", "someone/some-model", "I like tea."]
    done = subprocess.run(command, env=env, cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert_one_line_error(
        ScriptResult(done.returncode, done.stdout, done.stderr),
        "--model someone/some-model: config.json cannot be loaded",
        "check the Hub id and the network, or pass a local folder",
    )


def test_num_beams_too_large_in_generation_config_json_is_reported_against_that_file(folder):
    """Not as a --num_beams flag the user never passed; a --num_beams given replaces the value, and the model
    translates."""
    settings = json.loads((folder / "generation_config.json").read_text())
    (folder / "generation_config.json").write_text(json.dumps({**settings, "num_beams": 10**9}))
    result = run_command("translate", "--model", str(folder), "I like tea.")
    assert_one_line_error(
        result,
        f"--model {folder}: generation_config.json's num_beams 1000000000 does not fit in memory",
        "fix it there, or pass --num_beams",
    )
    assert run_command("translate", "--model", str(folder), "--num_beams", "2", "I like tea.").returncode == 0


# Damage that a trained model's folder shows only when it translates: NaN, impossible settings, no padding token


@pytest.fixture
def trained_copy(trained_demo_model, tmp_path):
    """A copy of the trained demo model's folder, to damage."""
    return shutil.copytree(trained_demo_model, tmp_path / "model")


@pytest.mark.parametrize(
    "damage, message",
    [
        ("layer_norm_eps", "config.json's layer_norm_eps is not a finite number; fix it or save the model again"),
        (
            "weights",
            "model.safetensors holds NaN or infinity in model.encoder.embed_tokens.weight; save a trained model again",
        ),
    ],
)
def test_nan_in_the_config_or_the_weights_is_one_line_not_blank_translations(trained_copy, damage, message):
    if damage == "layer_norm_eps":
        config = json.loads((trained_copy / "config.json").read_text())
        (trained_copy / "config.json").write_text(json.dumps({**config, "layer_norm_eps": math.nan}))
    else:
        weights = load_file(trained_copy / "model.safetensors")
        weights["model.encoder.embed_tokens.weight"][5, 3] = math.nan  # the tied table: lm_head.weight too
        save_file(weights, trained_copy / "model.safetensors", metadata={"format": "pt"})
    assert_one_line_error(
        run_command("translate", "--model", str(trained_copy), "I eat cake."), f"--model {trained_copy}: {message}"
    )


def test_zero_beams_in_the_generation_config_is_one_line(trained_copy):
    settings = json.loads((trained_copy / "generation_config.json").read_text())
    (trained_copy / "generation_config.json").write_text(json.dumps({**settings, "num_beams": 0}))
    assert_one_line_error(
        run_command("translate", "--model", str(trained_copy), "I eat cake."),
        f"--model {trained_copy}: generation_config.json's num_beams must be a whole number of at least 1, got 0; "
        "fix it",
    )


def test_a_tokenizer_without_its_config_is_one_line(trained_copy):
    (trained_copy / "tokenizer_config.json").unlink()
    assert_one_line_error(
        run_command("translate", "--model", str(trained_copy), "I eat cake."),
        f"--model {trained_copy}: the tokenizer has no padding token (tokenizer_config.json is missing or names none)",
    )
