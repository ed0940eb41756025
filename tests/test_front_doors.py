"""Every front door (the pipeline, every engine's translator, the translate command, evaluate_model.py, the demo
page) handles text the same way: a document longer than the positional table goes in, its translation comes out,
every sentence translated once and in order, paragraphs kept; English output cased; empty text gives empty text."""

import json
import subprocess
import sys

import pytest

from conftest import ROOT, TINY_TRANSFORMER, tiny_model
from hf_tiny_transformer import TranslationPipeline
from hf_tiny_transformer.serving.translator import TransformersTranslator
from hf_tiny_transformer.text_tiny_transformer import english_casing, sentences

ENGLISH_PARAGRAPHS = [
    "I really like green tea. The cat is sleeping on the sofa. She doesn't drink coffee in the morning. "
    "We read three books last year. Do you like dogs? My brother bought 2 tickets for 1500 yen.",
    "He said, \"Let's play catch.\" I can't tell who will arrive first. The cat is sleeping on the sofa. "
    "I really like green tea! Do you like dogs? We read three books last year.",
]
JAPANESE_PARAGRAPHS = [
    "私は緑茶が本当に好きです。猫がソファの上で寝ています。彼女は朝コーヒーを飲みません。"
    "私たちは去年本を三冊読みました。犬が好きですか？兄はチケットを2枚1500円で買った。",
    "彼は「キャッチボールをしよう」と言った。誰が一番に着くか私には分かりません。猫がソファの上で寝ています。"
    "私は緑茶が本当に好きです！犬が好きですか？私たちは去年本を三冊読みました。",
]
DOCUMENTS = {"en": "\n\n".join(ENGLISH_PARAGRAPHS), "ja": "\n\n".join(JAPANESE_PARAGRAPHS)}


MAX_POSITIONS = 24  # the model's positional table: each paragraph is longer, each sentence fits


@pytest.fixture
def model(tokenizer):
    """A random model of the test tokenizer's vocabulary, whose output is joined with spaces and left uncased."""
    model = tiny_model(vocab_size=len(tokenizer), max_position_embeddings=MAX_POSITIONS)
    model.generation_config.target_lang, model.generation_config.english_casing = "en", False
    model.generation_config._from_model_config = False  # kept in a saved folder
    return model


@pytest.fixture
def folder(model, tokenizer, tmp_path):
    model.save_pretrained(tmp_path / "model")
    tokenizer.save_pretrained(tmp_path / "model")
    return tmp_path / "model"


def expected_document(document: str, lang: str, translate_one) -> str:
    """The translation of `document` sentence by sentence, each sentence translated alone: what a front door must
    give for a text longer than the model takes. Checks first that the text is too long and has 12 sentences."""
    paragraphs = document.split("\n\n")
    assert all(len(sentences(paragraph, lang)) == 6 for paragraph in paragraphs)
    return "\n\n".join(
        " ".join(translate_one(s.strip()) for s in sentences(paragraph, lang)) for paragraph in paragraphs
    )


def assert_too_long(tokenizer, document: str):
    for paragraph in document.split("\n\n"):
        assert len(tokenizer(paragraph)["input_ids"]) > MAX_POSITIONS


@pytest.mark.parametrize("lang", ["en", "ja"])
def test_the_pipeline_translates_a_long_document_sentence_by_sentence(model, tokenizer, lang, caplog):
    document = DOCUMENTS[lang]
    assert_too_long(tokenizer, document)
    translate = TranslationPipeline(model=model, tokenizer=tokenizer)
    expected = expected_document(document, lang, lambda sentence: translate(sentence)[0]["translation_text"])
    assert translate(document)[0]["translation_text"] == expected
    assert (
        f"longer than the model takes at once ({MAX_POSITIONS} tokens): translated sentence by sentence" in caplog.text
    )
    caplog.clear()
    first, second = sentences(document.split("\n\n")[0], lang)[:2]
    assert translate(first + second)[0]["translation_text"]  # two short sentences: split, but not too long
    assert "longer than the model takes" not in caplog.text


@pytest.mark.parametrize("lang", ["en", "ja"])
def test_the_transformers_translator_translates_a_long_document_sentence_by_sentence(model, tokenizer, lang):
    translator = TransformersTranslator(model, tokenizer)
    document = DOCUMENTS[lang]
    expected = expected_document(document, lang, lambda sentence: translator.translate([sentence], batch_size=1)[0])
    assert translator.translate([document], batch_size=1) == [expected]
    assert (
        translator([document, "", "  \n "], batch_size=1)
        == [{"translation_text": expected}] + [{"translation_text": ""}] * 2
    )


@pytest.mark.parametrize("lang", ["en", "ja"])
def test_the_ctranslate2_translator_translates_a_long_document_sentence_by_sentence(model, tokenizer, tmp_path, lang):
    from hf_tiny_transformer.serving.ctranslate2 import CTranslate2Translator, export_ctranslate2

    export_ctranslate2(model, tokenizer, tmp_path / "ct2")
    translator = CTranslate2Translator(tmp_path / "ct2", compute_type="float32")
    document = DOCUMENTS[lang]
    expected = expected_document(document, lang, lambda sentence: translator.translate([sentence], batch_size=1)[0])
    assert translator.translate([document, ""], batch_size=1) == [expected, ""]


def run(tool: str, *arguments: str) -> subprocess.CompletedProcess:
    """A training script (`evaluate_model.py`) or a command (`translate`) in a fresh process, which must succeed."""
    command = [sys.executable, str(ROOT / "training" / tool)] if tool.endswith(".py") else [TINY_TRANSFORMER, tool]
    result = subprocess.run(
        [*command, *arguments],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=300,
        stdin=subprocess.DEVNULL,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    return result


def test_translate_and_evaluate_model_py_translate_long_documents_whole(model, tokenizer, folder, tmp_path):
    """The translate command: a document given as an argument comes back whole; evaluate_model.py: a file line that
    holds a paragraph longer than the model takes is translated sentence by sentence, one output line for it."""
    translator = TransformersTranslator(model, tokenizer)
    expected = {
        lang: expected_document(DOCUMENTS[lang], lang, lambda s: translator.translate([s], batch_size=1)[0])
        for lang in DOCUMENTS
    }
    result = run("translate", "--model", str(folder), "--batch_size", "1", DOCUMENTS["en"], DOCUMENTS["ja"])
    assert result.stdout == f"{expected['en']}\n{expected['ja']}\n"
    assert "translated sentence by sentence" in result.stderr

    (tmp_path / "source.txt").write_text("\n".join(ENGLISH_PARAGRAPHS + JAPANESE_PARAGRAPHS) + "\n", encoding="utf-8")
    (tmp_path / "reference.txt").write_text("a\nb\nc\nd\n")
    scores = run(
        "evaluate_model.py",
        "--model",
        str(folder),
        "--source_file",
        str(tmp_path / "source.txt"),
        "--reference_file",
        str(tmp_path / "reference.txt"),
        "--batch_size",
        "1",
        "--output_file",
        str(tmp_path / "out.txt"),
    )
    assert json.loads(scores.stdout.splitlines()[-1])["sentences"] == 4
    assert (tmp_path / "out.txt").read_text(encoding="utf-8").splitlines() == [
        *expected["en"].split("\n\n"),
        *expected["ja"].split("\n\n"),
    ]


def test_the_demo_page_translates_a_long_text_whole_and_says_so(model, tokenizer):
    pytest.importorskip("gradio")
    from hf_tiny_transformer.app.page import TranslationApp

    demo = TranslationApp(model, tokenizer)
    *growing, (translation, picture, note) = demo.translate_and_draw(DOCUMENTS["en"], "cross", 1)
    assert growing and all(picture is None for _, picture, _ in growing)  # the translation grew, then the picture
    assert translation == TransformersTranslator(model, tokenizer).translate([DOCUMENTS["en"]])[0]
    assert "translated in 12 pieces, sentence by sentence" in note and picture.size[0] > 100
    assert list(demo.translate_and_draw("  ", "cross", 1)) == [("", None, "")]


def test_english_output_is_cased_unless_the_generation_config_says_no(model, tokenizer):
    """The models are trained on lowercased text: English output gets capitals at sentence starts and for I."""
    front_doors = {
        "translator": lambda: TransformersTranslator(model, tokenizer).translate(ENGLISH_PARAGRAPHS[:1])[0],
        "pipeline": lambda: TranslationPipeline(model=model, tokenizer=tokenizer)(ENGLISH_PARAGRAPHS[0])[0][
            "translation_text"
        ],
    }
    for name, translate in front_doors.items():
        model.generation_config.english_casing = False
        raw = translate()
        model.generation_config.english_casing = None  # the default: cased where the target is English
        cased = translate()
        assert cased == english_casing(raw) and cased != raw, name
        model.generation_config.target_lang = "ja"  # another target language: left as generated
        assert translate().replace(" ", "") == raw.replace(" ", ""), name  # uncased; pieces joined without spaces
        model.generation_config.target_lang = "en"
