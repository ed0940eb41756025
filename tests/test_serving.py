"""The translators every front door uses (hf_tiny_transformer/serving/translator.py and engines.py): the transformers
engine translates in the given order, in batches, each translation no longer than its source allows; an engine is
chosen by name, and a name that is not one is refused."""

import pytest

from hf_tiny_transformer.errors import UsageError
from hf_tiny_transformer.serving.engines import load_translator
from hf_tiny_transformer.serving.translator import TransformersTranslator, translation_length_limit


def test_translations_are_in_the_given_order_and_their_length_follows_the_source(text_model, tokenizer):
    texts = ["I like tea.", "The cat is sleeping on the sofa and my brother reads three books.", "Hi."]
    text_model.generation_config.english_casing = False  # the tokens as generated, to count them
    translator = TransformersTranslator(text_model, tokenizer)
    together = translator.translate(texts, batch_size=2, num_beams=1)
    one_by_one = [translator.translate([text], num_beams=1)[0] for text in texts]
    assert together == one_by_one
    for text, translation in zip(texts, together):
        source_length = len(tokenizer(text)["input_ids"])
        assert len(tokenizer(translation)["input_ids"]) <= translation_length_limit(source_length, 64) + 1
    assert translation_length_limit(3, 64) == 16 and translation_length_limit(100, 64) == 64


def test_an_engine_that_does_not_exist_is_refused(trained_demo_model):
    with pytest.raises(UsageError, match=rf"^{trained_demo_model}: engine 'tensorrt' is not one of transformers"):
        load_translator(str(trained_demo_model), engine="tensorrt")
