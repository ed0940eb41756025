"""CTranslate2 export and serving: the same tokens as transformers in float32, int8 close to it, clear errors."""

import json

import pytest
import torch
from transformers import AutoModelForSeq2SeqLM, AutoTokenizer

from hf_tiny_transformer.marian import marian_of_the_same_shape
from hf_tiny_transformer.serving import CTranslate2Translator, export_ctranslate2

from conftest import assert_one_line_error, run_script, tiny_config


@pytest.fixture(scope="module")
def exports(trained_demo_model, tmp_path_factory):
    """The trained demo model, its tokenizer, and its exports with float32 and int8 weights."""
    model = AutoModelForSeq2SeqLM.from_pretrained(trained_demo_model).eval()
    tokenizer = AutoTokenizer.from_pretrained(trained_demo_model)
    folder = tmp_path_factory.mktemp("exports")
    before = {name: tensor.clone() for name, tensor in model.state_dict().items()}
    paths = {quantization: export_ctranslate2(model, tokenizer, folder / quantization, quantization=quantization)
             for quantization in ("float32", "int8")}  # fmt: skip
    for name, tensor in model.state_dict().items():  # the int8 export quantized copies, not the model
        assert torch.equal(tensor, before[name]), name
    return model, tokenizer, paths


def test_the_float32_export_gives_the_tokens_of_generate(exports, demo_files):
    model, tokenizer, paths = exports
    translator = CTranslate2Translator(paths["float32"], intra_threads=1)
    sources = (demo_files / "test.en").read_text(encoding="utf-8").splitlines()
    for beams in (1, 4):
        for source in sources:
            encoded = tokenizer(source, return_tensors="pt")
            expected = model.generate(**encoded, num_beams=beams, max_new_tokens=40)[0, 1:].tolist()
            expected = [token for token in expected if token not in (0, 2)]  # without padding and </s>
            result = translator.translator.translate_batch([tokenizer.convert_ids_to_tokens(encoded["input_ids"][0])], beam_size=beams, max_decoding_length=40)
            assert tokenizer.convert_tokens_to_ids(result[0].hypotheses[0]) == expected, (beams, source)


def test_int8_is_within_two_points_of_float32_in_exact_matches(exports, demo_files):
    _, _, paths = exports
    sources = (demo_files / "test.en").read_text(encoding="utf-8").splitlines()
    references = (demo_files / "test.ja").read_text(encoding="utf-8").splitlines()
    rates = {}
    for quantization, folder in paths.items():
        translations = [item["translation_text"] for item in CTranslate2Translator(folder)(sources, num_beams=1)]
        rates[quantization] = 100 * sum(t == r for t, r in zip(translations, references)) / len(references)
    assert rates["float32"] > 50 and abs(rates["int8"] - rates["float32"]) <= 2, rates
    assert json.loads((paths["int8"] / "hf_tiny_transformer.json").read_text())["quantization"] == "int8"


def test_the_translator_has_the_pipelines_shape(exports):
    _, _, paths = exports
    translate = CTranslate2Translator(paths["float32"])
    single = translate("I like cake.")
    assert isinstance(single, list) and set(single[0]) == {"translation_text"}
    many = translate(["I like cake.", "Tom eats bread."], num_beams=2, batch_size=1)
    assert len(many) == 2 and many[0] == single[0]
    with pytest.raises(TypeError, match="text must be a string or a list of strings"):
        translate(42)


def test_exporting_another_model_or_into_a_used_folder_is_an_error(exports, tmp_path):
    model, tokenizer, _ = exports
    with pytest.raises(ValueError, match="exports hf-tiny-transformer models, not MarianMTModel"):
        export_ctranslate2(marian_of_the_same_shape(tiny_config()), tokenizer, tmp_path / "marian")
    (tmp_path / "used").mkdir()
    (tmp_path / "used" / "notes.txt").write_text("mine\n")
    with pytest.raises(ValueError, match="exists and is not an empty folder"):
        export_ctranslate2(model, tokenizer, tmp_path / "used")
    assert (tmp_path / "used" / "notes.txt").read_text() == "mine\n"


def test_the_export_script_and_evaluation_with_the_engine(trained_demo_model, demo_files, tmp_path, capsys):
    import sys

    from conftest import ROOT

    sys.path.insert(0, str(ROOT / "training"))
    import evaluate_model
    import export_ctranslate2 as export_script

    assert export_script.main(["--model", str(trained_demo_model), "--output_dir", str(tmp_path / "ct2"), "--quantization", "int8"]) == 0
    capsys.readouterr()
    arguments = ["--engine", "ctranslate2", "--model", str(tmp_path / "ct2"), "--source_file", str(demo_files / "validation.en"),
                 "--reference_file", str(demo_files / "validation.ja"), "--target_lang", "ja", "--num_beams", "1"]  # fmt: skip
    assert evaluate_model.main(arguments) == 0
    scores = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert scores["sentences"] == 40 and scores["exact_match"] > 50
    assert_one_line_error(
        run_script("export_ctranslate2.py", "--model", str(trained_demo_model), "--output_dir", str(tmp_path / "ct2")),
        "is not empty; export into a new folder",
    )
    marian = tmp_path / "marian"
    marian_of_the_same_shape(tiny_config(vocab_size=600)).save_pretrained(marian)
    AutoTokenizer.from_pretrained(trained_demo_model).save_pretrained(marian)
    assert_one_line_error(
        run_script("export_ctranslate2.py", "--model", str(marian), "--output_dir", str(tmp_path / "m")),
        "exports hf-tiny-transformer models, not MarianMTModel",
    )
    assert_one_line_error(
        run_script("evaluate_model.py", *arguments[:3], str(trained_demo_model), *arguments[4:]),
        "is not a folder written by export_ctranslate2",
    )
