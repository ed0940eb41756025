"""The translation pipeline in every form, and its handling of bad input."""

import json

import pytest
from transformers import pipeline

from hf_tiny_transformer import TranslationPipeline
from running import run_without_package

TEXTS = ["I really like green tea.", "The cat is sleeping on the sofa.", "Do you like dogs?"]


@pytest.fixture
def text_model(text_model):
    """The random model, its output left as generate() gives it (casing is tested in test_text.py)."""
    text_model.generation_config.english_casing = False
    text_model.generation_config._from_model_config = False  # kept when saved and loaded again
    return text_model


def expected_translation(model, tokenizer, text, **generate_kwargs):
    encoded = tokenizer(text, return_tensors="pt")
    output = model.generate(**encoded, **generate_kwargs)
    return tokenizer.decode(output[0], skip_special_tokens=True)


def test_in_memory_pipeline_returns_a_translation_per_text(text_model, tokenizer):
    translate = TranslationPipeline(model=text_model, tokenizer=tokenizer, max_new_tokens=8)
    single = translate(TEXTS[0])
    assert single == [{"translation_text": expected_translation(text_model, tokenizer, TEXTS[0], max_new_tokens=8)}]
    many = translate(TEXTS)
    assert many == [
        {"translation_text": expected_translation(text_model, tokenizer, text, max_new_tokens=8)} for text in TEXTS
    ]


def test_generate_parameters_pass_through(text_model, tokenizer):
    translate = TranslationPipeline(model=text_model, tokenizer=tokenizer)
    kwargs = dict(num_beams=3, max_new_tokens=6, min_new_tokens=6)
    assert translate(TEXTS[1], **kwargs)[0]["translation_text"] == expected_translation(
        text_model, tokenizer, TEXTS[1], **kwargs
    )
    short = translate(TEXTS[1], max_new_tokens=2, min_new_tokens=2)[0]["translation_text"]
    assert short == expected_translation(text_model, tokenizer, TEXTS[1], max_new_tokens=2, min_new_tokens=2)
    assert short != translate(TEXTS[1], **kwargs)[0]["translation_text"]


def test_batch_size_gives_the_same_translations(text_model, tokenizer):
    translate = TranslationPipeline(model=text_model, tokenizer=tokenizer, max_new_tokens=8)
    assert translate(TEXTS, batch_size=3) == translate(TEXTS, batch_size=1)


def test_pipeline_function_with_an_in_memory_model(text_model, tokenizer):
    translate = pipeline(
        "translation",
        model=text_model,
        config=text_model.config,
        tokenizer=tokenizer,
        pipeline_class=TranslationPipeline,
    )
    assert isinstance(translate, TranslationPipeline)
    assert translate(TEXTS[0], max_new_tokens=8) == TranslationPipeline(model=text_model, tokenizer=tokenizer)(
        TEXTS[0], max_new_tokens=8
    )


def test_translation_task_without_our_config_is_gone_from_transformers():
    with pytest.raises(KeyError):
        pipeline("translation", model=None)


PIPELINE_SCRIPT = """
import json, sys
from transformers import pipeline
folder, texts = sys.argv[1], json.loads(sys.argv[2])
by_task = pipeline("translation", model=folder, trust_remote_code=True)
inferred = pipeline(model=folder, trust_remote_code=True)
print(json.dumps({"by_task": by_task(texts, max_new_tokens=8), "inferred": inferred(texts[0], max_new_tokens=8),
                  "class": type(inferred).__name__}))
"""


def test_pipeline_from_a_saved_folder_without_the_package(text_model, tokenizer, tmp_path):
    folder = tmp_path / "exported"
    text_model.save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    config = json.loads((folder / "config.json").read_text())
    assert config["custom_pipelines"]["translation"]["impl"] == "pipeline_tiny_transformer.TranslationPipeline"
    assert (folder / "pipeline_tiny_transformer.py").is_file()
    result = json.loads(run_without_package(PIPELINE_SCRIPT, str(folder), json.dumps(TEXTS), cwd=tmp_path))
    expected = TranslationPipeline(model=text_model, tokenizer=tokenizer)(TEXTS, max_new_tokens=8)
    assert result["by_task"] == expected
    assert result["inferred"] == [expected[0]]
    assert result["class"] == "TranslationPipeline"


def test_empty_text_gives_an_empty_translation(text_model, tokenizer):
    translate = TranslationPipeline(model=text_model, tokenizer=tokenizer, max_new_tokens=8)
    assert translate("") == [{"translation_text": ""}]
    assert translate("   ") == [{"translation_text": ""}]
    mixed = translate(["", TEXTS[0], ""])
    assert mixed[0] == mixed[2] == {"translation_text": ""}
    assert mixed[1] == translate(TEXTS[0])[0]


def test_a_generator_of_texts_gives_a_generator_of_translations(text_model, tokenizer):
    """As transformers' pipelines take them (no stricter than the library): one translation a text, as they come."""
    translate = TranslationPipeline(model=text_model, tokenizer=tokenizer, max_new_tokens=8)
    results = translate(text for text in TEXTS[:2])
    assert not isinstance(results, list)
    assert list(results) == [translate(TEXTS[0]), translate(TEXTS[1])]


@pytest.mark.parametrize("bad", [None, 42, ["fine", None], b"bytes"])
def test_non_string_input_is_a_type_error_naming_the_argument(text_model, tokenizer, bad):
    translate = TranslationPipeline(model=text_model, tokenizer=tokenizer)
    with pytest.raises(TypeError, match="text must be a string or a list of strings"):
        translate(bad)


@pytest.mark.parametrize(
    "setting, message",
    [
        ({"num_beams": 0}, "num_beams must be a whole number of at least 1"),
        ({"num_beams": 2.5}, "num_beams"),
        ({"length_penalty": float("nan")}, "length_penalty must be a finite number"),
        ({"max_new_tokens": 0}, "max_new_tokens"),
    ],
)
def test_nonsensical_generation_settings_are_a_value_error_naming_them(text_model, tokenizer, setting, message):
    translate = TranslationPipeline(model=text_model, tokenizer=tokenizer)
    with pytest.raises(ValueError, match=message):
        translate(TEXTS[0], **setting)
