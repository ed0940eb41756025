"""The ONNX export (hf_tiny_transformer.serving.onnx): the graphs' translations equal generate()'s tokens in float32
(greedy and beam 4) for the trained demo model and a fresh model of the real recipes' shape; int8 close to float32
on the demo test set; onnxruntime as the third engine of every front door; the export command's checks."""

import json

import pytest
import torch
from transformers import AutoModelForSeq2SeqLM, AutoTokenizer

from conftest import assert_one_line_error, folder_digest, run_command, run_script
from hf_tiny_transformer import TinyTransformerForConditionalGeneration, load_shape, train_tokenizer
from hf_tiny_transformer.evaluation import scores
from hf_tiny_transformer.serving.engines import load_translator
from hf_tiny_transformer.serving.onnx import OnnxTranslator, export_onnx
from hf_tiny_transformer.serving.translator import TransformersTranslator

pytest.importorskip("onnxruntime", reason="the [onnx] extra is not installed")


@pytest.fixture(scope="module")
def demo_export(trained_demo_model, tmp_path_factory):
    folder = tmp_path_factory.mktemp("onnx") / "demo"
    model = AutoModelForSeq2SeqLM.from_pretrained(trained_demo_model)
    export_onnx(model, AutoTokenizer.from_pretrained(trained_demo_model), folder, quantization="int8")
    return folder


def tokens(model, tokenizer, sentences: list[str], beams: int) -> list[list[int]]:
    batch = tokenizer(sentences, return_tensors="pt", padding=True)
    with torch.inference_mode():
        return model.generate(**batch, num_beams=beams, max_new_tokens=30).tolist()


@pytest.mark.parametrize("beams", [1, 4])
def test_the_export_translates_to_generates_tokens(trained_demo_model, demo_export, demo_files, beams):
    model = AutoModelForSeq2SeqLM.from_pretrained(trained_demo_model).eval()
    tokenizer = AutoTokenizer.from_pretrained(trained_demo_model)
    exported = OnnxTranslator(demo_export, compute_type="float32").model
    sentences = (demo_files / "validation.en").read_text(encoding="utf-8").splitlines()[:16]
    assert tokens(exported, tokenizer, sentences, beams) == tokens(model, tokenizer, sentences, beams)


def test_a_fresh_model_of_the_recipes_shape_exports_exactly(tmp_path):
    """The real recipes' shape (tiny: d_model 256, 3+3 layers, 4 heads, FFN 1024), random weights."""
    texts = ["I really like green tea.", "The cat is sleeping.", "私は緑茶が好きです。", "猫が寝ています。"] * 20
    tokenizer = train_tokenizer(texts, vocab_size=500, model_max_length=64)
    torch.manual_seed(0)
    model = TinyTransformerForConditionalGeneration(load_shape("tiny", vocab_size=len(tokenizer))).eval()
    export_onnx(model, tokenizer, tmp_path / "tiny")
    exported = OnnxTranslator(tmp_path / "tiny").model
    for beams in (1, 4):
        assert tokens(exported, tokenizer, texts[:4], beams) == tokens(model, tokenizer, texts[:4], beams)
    files = {str(path.relative_to(tmp_path / "tiny")) for path in (tmp_path / "tiny").rglob("*") if path.is_file()}
    assert files == {"onnx/encoder_model.onnx", "onnx/decoder_model_merged.onnx", "config.json", "tokenizer.json",
                     "tokenizer_config.json", "generation_config.json", "hf_tiny_transformer.json"}  # fmt: skip
    config = json.loads((tmp_path / "tiny" / "config.json").read_text())
    assert (config["model_type"], config["d_model"], config["decoder_layers"]) == ("marian", 256, 3)


def test_int8_translates_the_demo_test_set_within_half_a_bleu_of_float32(demo_export, demo_files):
    sources = (demo_files / "test.en").read_text(encoding="utf-8").splitlines()
    references = (demo_files / "test.ja").read_text(encoding="utf-8").splitlines()
    result = {}
    for compute_type in ("float32", "int8"):
        translations = OnnxTranslator(demo_export, compute_type=compute_type).translate(sources, num_beams=1)
        result[compute_type] = scores(translations, references, "ja")
    assert result["float32"]["exact_match"] > 50, result
    assert abs(result["int8"]["bleu"] - result["float32"]["bleu"]) <= 0.5, result


def test_onnx_is_an_engine_of_every_front_door(trained_demo_model, demo_export, demo_files):
    sentence = "My mother really likes green tea. She reads books."
    expected = TransformersTranslator(*load_pair(trained_demo_model)).translate([sentence], num_beams=1)
    assert (
        load_translator(str(demo_export), engine="onnx", compute_type="float32").translate([sentence], num_beams=1)
        == expected
    )
    result = run_command("translate", "--engine", "onnx", "--compute_type", "float32", "--model", str(demo_export),
                         "--num_beams", "1", sentence)  # fmt: skip
    assert result.returncode == 0 and result.stdout.splitlines() == expected, result.stderr[-2000:]
    evaluated = run_script(
        "evaluate_model.py", "--engine", "onnx", "--model", str(demo_export), "--source_file",
        str(demo_files / "validation.en"), "--reference_file", str(demo_files / "validation.ja"), "--num_beams", "1",
    )  # fmt: skip
    scores = json.loads(evaluated.stdout.strip().splitlines()[-1])
    assert (scores["engine"], scores["compute_type"]) == ("onnx", "int8") and scores["exact_match"] > 50, scores


def load_pair(folder):
    return AutoModelForSeq2SeqLM.from_pretrained(folder), AutoTokenizer.from_pretrained(folder)


def test_the_export_command_refuses_what_it_cannot_do(trained_demo_model, demo_export, tmp_path):
    before = folder_digest(demo_export)
    assert_one_line_error(
        run_command("export-onnx", "--model", str(trained_demo_model), "--output_dir", str(demo_export)),
        f"--output_dir {demo_export} already holds a model",
    )
    assert_one_line_error(
        run_command("translate", "--model", str(demo_export), "I eat cake."),
        f"--model {demo_export} is an ONNX export, not a model folder",
        "--engine onnx",
    )
    assert_one_line_error(
        run_command("translate", "--engine", "onnx", "--model", str(trained_demo_model), "I eat cake."),
        f"--engine onnx --model {trained_demo_model}: ",
        "is not a folder written by export_onnx",
    )
    float32_only = tmp_path / "float32"
    result = run_command("export-onnx", "--model", str(trained_demo_model), "--output_dir", str(float32_only))
    assert result.returncode == 0, result.stderr[-2000:]
    assert_one_line_error(
        run_command("translate", "--engine", "onnx", "--compute_type", "int8", "--model", str(float32_only), "x"),
        "compute type 'int8' is not one",
        "it was exported without --quantization int8",
    )
    assert folder_digest(demo_export) == before
