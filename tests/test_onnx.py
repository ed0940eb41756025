"""The ONNX engine (hf_tiny_transformer/serving/onnx.py, `tiny-transformer export-onnx`): the graphs' translations
equal generate()'s tokens in float32 (greedy and beam 4) for the trained demo model and a model of the real
recipes' shape (models/en-ja); int8 close to float32 on the demo test set; onnxruntime as the third engine of every
front door; the export command's checks; a damaged export, or one of another kind, is one line naming the file and
the fix."""

import importlib.abc
import importlib.util
import json
import shutil
import sys
from pathlib import Path

import pytest
import torch
from transformers import AutoModelForSeq2SeqLM, AutoTokenizer

from bad_arguments import cut, folder_digest, removed
from builds import copy_folder, load_demo_model
from hf_tiny_transformer.evaluation import scores
from hf_tiny_transformer.serving.engines import load_translator
from hf_tiny_transformer.serving.onnx import OnnxTranslator, onnx_packages
from hf_tiny_transformer.serving.translator import TransformersTranslator
from running import ROOT, assert_one_line_error, run_command, run_script

pytest.importorskip("onnxruntime", reason="the [onnx] extra is not installed")


def tokens(model, tokenizer, sentences: list[str], beams: int) -> list[list[int]]:
    batch = tokenizer(sentences, return_tensors="pt", padding=True)
    with torch.inference_mode():
        return model.generate(**batch, num_beams=beams, max_new_tokens=30).tolist()


@pytest.mark.parametrize("beams", [1, 4])
def test_the_export_translates_to_generates_tokens(trained_demo_model, demo_onnx_int8, demo_files, beams):
    model = AutoModelForSeq2SeqLM.from_pretrained(trained_demo_model).eval()
    tokenizer = AutoTokenizer.from_pretrained(trained_demo_model)
    exported = OnnxTranslator(demo_onnx_int8, compute_type="float32").model
    sentences = (demo_files / "validation.en").read_text(encoding="utf-8").splitlines()[:16]
    assert tokens(exported, tokenizer, sentences, beams) == tokens(model, tokenizer, sentences, beams)


def test_a_model_of_the_recipes_shape_exports_exactly(shipped_onnx):
    """The real recipes' shape (tiny: d_model 256, 3+3 layers, 4 heads, FFN 1024): models/en-ja."""
    from hf_tiny_transformer.guards.loading import load_model_folder

    texts = ["I really like green tea.", "The cat is sleeping.", "Where is the station?", "She reads books."]
    model, tokenizer = load_model_folder(str(ROOT / "models" / "en-ja"))
    exported = OnnxTranslator(shipped_onnx).model
    for beams in (1, 4):
        assert tokens(exported, tokenizer, texts, beams) == tokens(model, tokenizer, texts, beams)
    files = {str(path.relative_to(shipped_onnx)) for path in shipped_onnx.rglob("*") if path.is_file()}
    assert files == {"onnx/encoder_model.onnx", "onnx/decoder_model_merged.onnx", "onnx/embeddings.onnx_data",
                     "config.json", "tokenizer.json", "tokenizer_config.json", "generation_config.json",
                     "hf_tiny_transformer.json"}  # fmt: skip
    # the tied table stored once, referenced by both graphs: the data file holds one (V, D) float32 table
    table_bytes = 4 * model.config.vocab_size * model.config.d_model
    assert (shipped_onnx / "onnx" / "embeddings.onnx_data").stat().st_size == table_bytes
    config = json.loads((shipped_onnx / "config.json").read_text())
    assert (config["model_type"], config["d_model"], config["decoder_layers"]) == ("marian", 256, 3)


def test_int8_translates_the_demo_test_set_within_half_a_bleu_of_float32(demo_onnx_int8, demo_files):
    sources = (demo_files / "test.en").read_text(encoding="utf-8").splitlines()
    references = (demo_files / "test.ja").read_text(encoding="utf-8").splitlines()
    result = {}
    for compute_type in ("float32", "int8"):
        translations = OnnxTranslator(demo_onnx_int8, compute_type=compute_type).translate(sources, num_beams=1)
        result[compute_type] = scores(translations, references, "ja")
    assert result["float32"]["exact_match"] > 50, result
    assert abs(result["int8"]["bleu"] - result["float32"]["bleu"]) <= 0.5, result


def test_onnx_is_an_engine_of_every_front_door(trained_demo_model, demo_onnx_int8, demo_files):
    sentence = "My mother really likes green tea. She reads books."
    expected = TransformersTranslator(*load_demo_model(trained_demo_model)).translate([sentence], num_beams=1)
    assert (
        load_translator(str(demo_onnx_int8), engine="onnx", compute_type="float32").translate([sentence], num_beams=1)
        == expected
    )
    result = run_command("translate", "--engine", "onnx", "--compute_type", "float32", "--model", str(demo_onnx_int8),
                         "--num_beams", "1", sentence)  # fmt: skip
    assert result.returncode == 0 and result.stdout.splitlines() == expected, result.stderr[-2000:]
    evaluated = run_script(
        "evaluate_model.py", "--engine", "onnx", "--model", str(demo_onnx_int8), "--source_file",
        str(demo_files / "validation.en"), "--reference_file", str(demo_files / "validation.ja"), "--num_beams", "1",
    )  # fmt: skip
    scores = json.loads(evaluated.stdout.strip().splitlines()[-1])
    assert (scores["engine"], scores["compute_type"]) == ("onnx", "int8") and scores["exact_match"] > 50, scores


def test_the_sessions_threads_wait_without_spinning(demo_onnx_int8):
    """generate() runs in torch between the graphs' steps on the same cores: onnxruntime's threads spinning while
    they wait took the cores from it (a third of the speed at batch 32)."""
    translator = load_translator(str(demo_onnx_int8), engine="onnx", compute_type="int8")
    for session in (translator.model.encoder.session, translator.model.decoder_session):
        assert session.get_session_options().get_session_config_entry("session.intra_op.allow_spinning") == "0"


def test_the_export_command_refuses_what_it_cannot_do(trained_demo_model, demo_onnx_int8, demo_onnx):
    """(The command's own export without --quantization is float32 only: tests/test_saving.py writes one and another
    with --quantization float32, byte for byte the same.)"""
    before = folder_digest(demo_onnx_int8)
    assert_one_line_error(
        run_command("export-onnx", "--model", str(trained_demo_model), "--output_dir", str(demo_onnx_int8)),
        f"--output_dir {demo_onnx_int8} already holds a model",
    )
    assert_one_line_error(
        run_command("translate", "--model", str(demo_onnx_int8), "I eat cake."),
        f"--model {demo_onnx_int8} is an ONNX export, not a model folder",
        "--engine onnx",
    )
    assert_one_line_error(
        run_command("translate", "--engine", "onnx", "--model", str(trained_demo_model), "I eat cake."),
        f"--engine onnx --model {trained_demo_model}: ",
        "is not a folder written by export_onnx",
    )
    assert_one_line_error(
        run_command("translate", "--engine", "onnx", "--compute_type", "int8", "--model", str(demo_onnx), "x"),
        "compute type 'int8' is not one",
        "it was exported without --quantization int8",
    )
    assert folder_digest(demo_onnx_int8) == before


# A damaged export, or one of the other kind: one line naming the file and the fix, before any work

EXPORT_AGAIN = "export the model again with tiny-transformer export-onnx --overwrite"


def with_an_unknown_operator(name: str):
    """The graph parses and has the right shape, but onnxruntime has no operator for one of its nodes."""

    def damage(folder):
        import onnx

        graph = onnx.load(str(folder / name))
        graph.graph.node[-1].op_type = "NoSuchOperator"
        onnx.save(graph, str(folder / name))

    return damage


def edited_settings(change):
    def damage(folder):
        path = folder / "hf_tiny_transformer.json"
        settings = json.loads(path.read_text())
        change(settings)
        path.write_text(json.dumps(settings))

    return damage


def with_config(**fields):
    return edited_settings(lambda settings: settings["config"].update(fields))


def another_models_tokenizer(folder: Path):
    """Its tokenizer.json with two pieces' ids swapped: a tokenizer of the same size that gives other ids (it
    translated into garbage without an error)."""
    state = json.loads((folder / "tokenizer.json").read_text(encoding="utf-8"))
    vocab = state["model"]["vocab"]
    first, second = sorted(vocab, key=vocab.get)[300:302]
    vocab[first], vocab[second] = vocab[second], vocab[first]
    (folder / "tokenizer.json").write_text(json.dumps(state, ensure_ascii=False), encoding="utf-8")


DAMAGED_ONNX_EXPORTS = [
    pytest.param(removed("onnx/decoder_model_merged.onnx"), "onnx/decoder_model_merged.onnx is missing",
                 id="graph missing"),
    pytest.param(removed("onnx/encoder_model_quantized.onnx"), "onnx/encoder_model_quantized.onnx is missing",
                 id="int8 graph missing"),
    pytest.param(cut("onnx/encoder_model.onnx"), "onnx/encoder_model.onnx is not a whole ONNX file", id="graph cut"),
    pytest.param(removed("onnx/embeddings.onnx_data"), "onnx/embeddings.onnx_data, which encoder_model.onnx reads, "
                 "is missing", id="shared embedding table missing"),
    pytest.param(cut("onnx/embeddings_quantized.onnx_data"), "onnx/embeddings_quantized.onnx_data is cut short",
                 id="shared int8 embedding table cut"),
    pytest.param(cut("onnx/decoder_model_merged_quantized.onnx"),
                 "onnx/decoder_model_merged_quantized.onnx is not a whole ONNX file", id="int8 graph cut"),
    pytest.param(with_an_unknown_operator("onnx/decoder_model_merged_quantized.onnx"),
                 "onnx/decoder_model_merged_quantized.onnx did not load in onnxruntime", id="runtime refuses graph"),
    pytest.param(removed("hf_tiny_transformer.json"), "hf_tiny_transformer.json is missing", id="settings missing"),
    pytest.param(lambda folder: (folder / "hf_tiny_transformer.json").write_text("{not json"),
                 "hf_tiny_transformer.json is not a JSON object", id="settings not JSON"),
    pytest.param(lambda folder: (folder / "hf_tiny_transformer.json").write_text("[]"),
                 "hf_tiny_transformer.json is not a JSON object", id="settings not an object"),
    pytest.param(edited_settings(lambda settings: settings.pop("quantization")),
                 "hf_tiny_transformer.json has no quantization", id="without quantization"),
    pytest.param(edited_settings(lambda settings: settings.update(quantization="int4")),
                 "hf_tiny_transformer.json's quantization must be float32 or int8, not 'int4'", id="int4"),
    pytest.param(with_config(d_model="wide"), "hf_tiny_transformer.json's config", id="d_model not a number"),
    pytest.param(with_config(d_model=96), "onnx/encoder_model.onnx computes d_model 64, not d_model 96",
                 id="d_model changed"),
    pytest.param(with_config(decoder_layers=3), "onnx/decoder_model_merged.onnx takes the keys and values of 2 decoder "
                 "layers, not decoder_layers 3", id="decoder_layers changed"),
    pytest.param(with_config(decoder_attention_heads=8), "onnx/decoder_model_merged.onnx takes keys and values of 4 "
                 "heads, not decoder_attention_heads 8", id="heads changed"),
    pytest.param(with_config(max_position_embeddings=128), "onnx/encoder_model.onnx has positions for 64 tokens, not "
                 "max_position_embeddings 128", id="max_position_embeddings raised"),
    pytest.param(with_config(vocab_size=700), "onnx/decoder_model_merged.onnx gives scores for 600 tokens, not "
                 "vocab_size 700", id="vocab_size changed"),
    pytest.param(removed("tokenizer.json"), "tokenizer.json is missing", id="no tokenizer.json"),
    pytest.param(cut("tokenizer.json"), "tokenizer.json cannot be loaded", id="tokenizer.json cut"),
    pytest.param(removed("tokenizer_config.json"), "tokenizer_config.json is missing", id="no tokenizer_config.json"),
    pytest.param(another_models_tokenizer, "tokenizer.json is not the tokenizer the model was exported with",
                 id="another model's tokenizer"),
    pytest.param(removed("generation_config.json"), "generation_config.json is missing", id="no generation config"),
]  # fmt: skip


@pytest.mark.parametrize(("damage", "problem"), DAMAGED_ONNX_EXPORTS)
def test_a_damaged_onnx_export_is_one_line_naming_the_file_and_the_fix(demo_onnx_int8, tmp_path, damage, problem):
    folder = shutil.copytree(demo_onnx_int8, tmp_path / "export")
    damage(folder)
    assert_one_line_error(
        run_command("translate", "--engine", "onnx", "--model", str(folder), "I like green tea."),
        f"--engine onnx --model {folder}: {folder}/{problem}",
        EXPORT_AGAIN,
    )


def test_a_ctranslate2_export_given_to_the_onnx_engine_names_the_engine_to_use(demo_ct2, tmp_path):
    folder = copy_folder(demo_ct2["float32"], tmp_path / "ct2")
    problem = (
        f"--engine onnx --model {folder}: {folder} is a CTranslate2 export, not an ONNX one; translate with it with "
        "the ctranslate2 engine (--engine ctranslate2)"
    )
    translate = ("translate", "--engine", "onnx", "--model", str(folder), "I like green tea.")
    assert_one_line_error(run_command(*translate), problem)
    edited_settings(lambda settings: settings.pop("format"))(folder)  # as exports before the format key
    assert_one_line_error(run_command(*translate), problem)


# The onnx packages' import: "install" only where one is not installed


class FakePackage(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """An import of `name` that runs `body` as the package's code (found before any installed package)."""

    def __init__(self, name: str, body: str):
        self.name, self.body = name, body

    def find_spec(self, fullname, path, target=None):
        return importlib.util.spec_from_loader(fullname, self) if fullname == self.name else None

    def exec_module(self, module):
        exec(self.body, module.__dict__)


@pytest.fixture
def fake_onnxruntime(monkeypatch):
    """fake_onnxruntime(name, body): imports of `name` run `body`, as an installed package's own code would."""
    for name in [name for name in sys.modules if name.partition(".")[0] == "onnxruntime"]:
        monkeypatch.delitem(sys.modules, name)
    return lambda name, body: monkeypatch.setattr(sys, "meta_path", [FakePackage(name, body), *sys.meta_path])


def test_an_interrupted_import_of_onnxruntime_is_an_interruption_not_a_missing_package(fake_onnxruntime):
    # what a compiled extension raises when Ctrl-C comes while its module initializes (pybind11)
    fake_onnxruntime("onnxruntime", "raise ImportError('initialization failed') from KeyboardInterrupt()")
    with pytest.raises(KeyboardInterrupt):
        onnx_packages()


def test_a_broken_onnxruntime_is_named_with_its_own_error_not_as_missing(fake_onnxruntime):
    fake_onnxruntime("onnxruntime", "raise ImportError('import numpy failed')")
    with pytest.raises(ImportError, match="^importing onnxruntime failed: import numpy failed$"):
        onnx_packages()


def test_a_missing_onnxruntime_says_how_to_install_it(monkeypatch):
    monkeypatch.setitem(sys.modules, "onnxruntime", None)  # what an import finds for a package not installed
    with pytest.raises(ImportError, match=r"pip install 'hf-tiny-transformer\[onnx\]'"):
        onnx_packages()
