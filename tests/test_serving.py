"""The translators every front door uses (hf_tiny_transformer/serving/translator.py and engines.py): the transformers
engine translates in the given order, in batches, each translation no longer than its source allows; an engine is
chosen by name, and a name that is not one is refused."""

import pytest

from hf_tiny_transformer.errors import UsageError
from hf_tiny_transformer.serving.engines import load_translator
from hf_tiny_transformer.serving.translator import TransformersTranslator, in_length_batches, translation_length_limit


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


class CountingTokenizer:
    """A tokenizer that records what each call to it encodes."""

    def __init__(self, tokenizer):
        self.tokenizer, self.calls = tokenizer, []

    def __call__(self, text, **kwargs):
        self.calls.append(text)
        return self.tokenizer(text, **kwargs)

    def __getattr__(self, name):
        return getattr(self.tokenizer, name)


def test_the_texts_are_encoded_in_one_call_and_each_piece_once(text_model, tokenizer):
    """Counting a text's tokens, cutting it into sentences and encoding them read the ids of one call to the tokenizer
    for all the texts; only the sentences of a longer text are encoded on their own. A call per text and step (three
    for each sentence) cost more than the engine at batch 32 with CTranslate2."""
    texts = ["I like tea.", "Hi.", "The cat is sleeping on the sofa.", "The cat sleeps. My brother reads books."]
    expected = TransformersTranslator(text_model, tokenizer).translate(texts, num_beams=1)
    counting = CountingTokenizer(tokenizer)
    assert TransformersTranslator(text_model, counting).translate(texts, num_beams=1) == expected
    first, *others = counting.calls
    assert first == texts
    assert others and all(isinstance(text, str) and text not in texts for text in others)  # the sentences of the last
    assert len(others) == len(set(others))  # each once


def test_batches_in_flight_are_waited_for_oldest_first_and_put_back_in_order():
    """An engine that translates in the background gets `in_flight` batches before the oldest is waited for; the
    translations come back in the inputs' order whatever the batches' order (by length)."""
    events = []

    def submit(indices):
        events.append(("start", tuple(indices)))

        def result():
            events.append(("wait", tuple(indices)))
            return [f"t{index}" for index in indices]

        return result

    lengths = [5, 1, 4, 2, 3]
    assert in_length_batches(lengths, 2, submit, progress=False, in_flight=2) == [f"t{i}" for i in range(5)]
    assert events == [("start", (1, 3)), ("start", (4, 2)), ("wait", (1, 3)), ("start", (0,)), ("wait", (4, 2)),
                      ("wait", (0,))]  # fmt: skip
    events.clear()
    in_length_batches(lengths, 2, submit, progress=False)  # one at a time: each waited for before the next starts
    assert [kind for kind, _ in events] == ["start", "wait"] * 3
