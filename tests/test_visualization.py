"""The pictures (hf_tiny_transformer/app/visualization.py, `tiny-transformer visualize`): the right panels, the
tokens as labels, and the model's own attention matrices; the text drawn is the text without its invisible
characters; the command's bad arguments are one line each, before any work."""

import builtins
import importlib.util
import logging

import pytest
import torch
from transformers.dynamic_module_utils import get_class_from_dynamic_module

from bad_arguments import apply_changes, assert_refused_before_any_work
from hf_tiny_transformer.app.visualization import attention_weights, plot_attention, plot_positional_encoding
from hf_tiny_transformer.modeling_tiny_transformer import sinusoidal_table
from running import assert_one_line_error, run_command

SOURCE = "The cat is sleeping on the sofa."
TARGET = "猫がソファの上で寝ています。"


def tick_labels(axes, which):
    return [label.get_text() for label in (axes.get_xticklabels() if which == "x" else axes.get_yticklabels())]


def test_positional_encoding_picture_is_the_table(text_model):
    figure = plot_positional_encoding(text_model.config, num_positions=20)
    image = figure.axes[0].images[0].get_array()
    assert image.shape == (20, 32)
    torch.testing.assert_close(torch.tensor(image.data), sinusoidal_table(20, 32))


@pytest.mark.parametrize(
    "kind, rows_from, columns_from",
    [("encoder", "source", "source"), ("decoder", "target", "target"), ("cross", "target", "source")],
)
def test_every_head_is_a_panel_labelled_with_tokens(text_model, tokenizer, kind, rows_from, columns_from):
    figure = plot_attention(text_model, tokenizer, SOURCE, TARGET, kind=kind, layer=1)
    panels = [axes for axes in figure.axes if axes.images]
    assert len(panels) == 4  # one per head
    attention = attention_weights(text_model, tokenizer, SOURCE, TARGET)
    tokens = {"source": attention.source_tokens, "target": attention.target_tokens}
    assert tick_labels(panels[0], "y") == tokens[rows_from]
    assert tick_labels(panels[0], "x") == tokens[columns_from]
    assert attention.target_tokens[0] == "<s>" and attention.source_tokens[-1] == "</s>"
    assert "猫" in "".join(attention.target_tokens)


def test_plotted_matrices_are_the_models_attention(text_model, tokenizer):
    for kind in ("encoder", "decoder", "cross"):
        figure = plot_attention(text_model, tokenizer, SOURCE, TARGET, kind=kind, layer=0, head=2)
        matrix = torch.tensor(figure.axes[0].images[0].get_array().data)
        torch.testing.assert_close(matrix.sum(-1), torch.ones(matrix.shape[0]))
        encoded = tokenizer(SOURCE, return_tensors="pt")
        labels = tokenizer(text_target=TARGET, return_tensors="pt")["input_ids"]
        with torch.no_grad():
            text_model.set_attn_implementation("eager")
            output = text_model(**encoded, labels=labels, output_attentions=True)
            text_model.set_attn_implementation("sdpa")
        expected = {
            "encoder": output.encoder_attentions,
            "decoder": output.decoder_attentions,
            "cross": output.cross_attentions,
        }[kind][0][0, 2]
        torch.testing.assert_close(matrix, expected)
        if kind == "decoder":
            assert torch.all(torch.triu(matrix, diagonal=1) == 0)  # the causal mask: no future position
    assert text_model.config._attn_implementation == "sdpa"  # switched back


def test_target_defaults_to_the_models_translation(text_model, tokenizer):
    attention = attention_weights(text_model, tokenizer, SOURCE, num_beams=1)
    generated = text_model.generate(**tokenizer(SOURCE, return_tensors="pt"), max_new_tokens=63)[0]
    expected = generated[:-1] if generated[-1] == 2 else generated
    assert len(attention.target_tokens) == len(expected) <= 64
    assert attention.target_tokens[0] == "<s>" and attention.cross[0].shape[1] == len(expected)


def test_works_on_a_model_loaded_as_remote_code(text_model, tokenizer, tmp_path):
    text_model.save_pretrained(tmp_path)
    # the class from the folder's own code (in this process the Auto classes would pick the installed package)
    remote_class = get_class_from_dynamic_module(
        "modeling_tiny_transformer.TinyTransformerForConditionalGeneration", str(tmp_path)
    )
    remote = remote_class.from_pretrained(tmp_path).eval()
    assert type(remote).__module__.startswith("transformers_modules")
    figure = plot_attention(remote, tokenizer, SOURCE, TARGET, kind="cross", layer=0)
    assert len([axes for axes in figure.axes if axes.images]) == 4


def test_bad_arguments(text_model, tokenizer):
    with pytest.raises(ValueError, match="kind must be one of encoder, decoder, cross"):
        plot_attention(text_model, tokenizer, SOURCE, kind="self")
    with pytest.raises(ValueError, match=r"layer must be in \[0, 2\)"):
        plot_attention(text_model, tokenizer, SOURCE, TARGET, layer=2)
    with pytest.raises(ValueError, match=r"head must be in \[0, 4\)"):
        plot_attention(text_model, tokenizer, SOURCE, TARGET, head=7)


def test_without_matplotlib_the_error_says_how_to_install_it(text_model, monkeypatch):
    real_import = builtins.__import__

    def no_matplotlib(name, *args, **kwargs):
        if name.startswith("matplotlib"):
            raise ImportError(f"No module named {name!r}")
        return real_import(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", no_matplotlib)
    with pytest.raises(ImportError, match=r"pip install 'hf-tiny-transformer\[viz\]'"):
        plot_positional_encoding(text_model.config)


def test_without_the_japanese_font_a_warning_and_a_picture_still(text_model, tokenizer, monkeypatch, caplog):
    real_find_spec = importlib.util.find_spec
    monkeypatch.setattr(
        importlib.util, "find_spec", lambda name, *a: None if name == "matplotlib_fontja" else real_find_spec(name, *a)
    )
    with caplog.at_level(logging.WARNING):
        figure = plot_attention(text_model, tokenizer, SOURCE, TARGET, kind="cross", layer=0, head=0)
    assert "matplotlib-fontja is not installed" in caplog.text
    assert figure.axes[0].images


def test_the_package_imports_without_matplotlib():
    import subprocess
    import sys

    script = (
        "import builtins\nreal = builtins.__import__\n"
        "def guard(name, *a, **k):\n"
        "    if name.startswith('matplotlib'): raise ImportError(name)\n"
        "    return real(name, *a, **k)\n"
        "builtins.__import__ = guard\n"
        "import hf_tiny_transformer, hf_tiny_transformer.app.visualization\nprint('ok')\n"
    )
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
    assert result.stdout.strip() == "ok", result.stderr[-2000:]


# The text drawn is the text a person sees: invisible characters removed

PLAIN = "I like green tea."


def with_invisible(characters: str) -> str:
    return f"I{characters} like green tea.{characters}{characters}"


def test_attention_pictures_are_of_the_text_without_its_invisible_characters(trained_demo_model):
    from hf_tiny_transformer.guards.loading import load_model_folder

    model, tokenizer = load_model_folder(str(trained_demo_model))
    plain = attention_weights(model, tokenizer, PLAIN)
    hostile = attention_weights(model, tokenizer, with_invisible("\u200b\u2066"))
    assert (hostile.source_tokens, hostile.target_text) == (plain.source_tokens, plain.target_text)
    given = attention_weights(model, tokenizer, PLAIN, target=f"\ufeff{plain.target_text}\u200b\0")
    assert given.target_tokens == plain.target_tokens


def test_visualize_draws_the_text_without_its_invisible_characters(trained_demo_model, tmp_path):
    model = str(trained_demo_model)
    plain = run_command("visualize", "--model", model, "--source", PLAIN, "--output_dir", str(tmp_path / "plain"))
    hostile = with_invisible("\u200b\u202e\0")
    drawn = run_command("visualize", "--model", model, "--source", hostile, "--output_dir", str(tmp_path / "hostile"))
    assert plain.returncode == drawn.returncode == 0, drawn.stderr[-2000:]
    assert drawn.stdout.splitlines()[:2] == plain.stdout.splitlines()[:2]  # the tokens drawn, source and target
    invisible_only = run_command(
        "visualize", "--model", model, "--source", "\u200b", "--output_dir", str(tmp_path / "x")
    )
    assert_one_line_error(invisible_only, "--source is empty; pass a sentence")


# Bad arguments: one line each, before any work

VISUALIZE_CASES = {
    "empty sentence": (["--source", " "], "--source is empty"),
    "longer than the model": (
        ["--source", "tea " * 70],
        "--source has 71 tokens but the model takes at most 64; pass one sentence",
    ),
    "output inside the model": (["--output_dir", "{root}/hub/pictures"], "lies inside the input folder {root}/hub"),
    "output is a file (the old spelling)": (["--out", "{root}/a_file"], "--output_dir {root}/a_file is a file"),
    "output is a run": (
        ["--output_dir", "{root}/run"],
        "--output_dir {root}/run already holds a model or checkpoints; choose another --output_dir for the pictures",
    ),
    "missing model": (["--model", "{root}/nothing"], "--model {root}/nothing does not exist"),
    "code of another model": (["--model", "{root}/foreign"], "pass --trust_remote_code to run it"),
}


@pytest.mark.parametrize("case", VISUALIZE_CASES)
def test_bad_arguments_are_one_line_before_any_work(workspace, case):
    changes, message = VISUALIZE_CASES[case]
    arguments = ["--model", "{root}/hub", "--source", "I like tea.", "--output_dir", "{root}/outputs/pictures"]
    assert_refused_before_any_work(workspace, "visualize", apply_changes(arguments, changes, workspace), message)
