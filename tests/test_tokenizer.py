"""The tokenizer: special tokens, round trips in both scripts, unseen characters, save/load identity; its normalizer
cleans text as the front doors do, and a tokenizer trained before it did can be given it."""

import copy
import json
import sys

import pytest
from tokenizers import Regex, normalizers
from transformers import AutoTokenizer

from conftest import ENGLISH, JAPANESE
from hf_tiny_transformer.data.tokenizer import (
    SMALLEST_VOCAB_SIZE,
    lowercases,
    normalizer,
    train_tokenizer,
    with_current_normalizer,
)
from hf_tiny_transformer.text_tiny_transformer import remove_invisible_characters
from running import run_without_package


def test_special_tokens_match_the_model_config(tokenizer):
    assert [tokenizer.pad_token_id, tokenizer.bos_token_id, tokenizer.eos_token_id, tokenizer.unk_token_id] == [
        0,
        1,
        2,
        3,
    ]
    assert tokenizer.convert_ids_to_tokens([0, 1, 2, 3]) == ["<pad>", "<s>", "</s>", "<unk>"]
    assert len(tokenizer) <= 1000


def test_eos_is_appended_and_text_target_gives_labels(tokenizer):
    encoded = tokenizer("I like tea.", text_target="私はお茶が好き。")
    assert encoded["input_ids"][-1] == 2 and encoded["labels"][-1] == 2
    assert 2 not in encoded["input_ids"][:-1]
    assert tokenizer.decode(encoded["labels"], skip_special_tokens=True) == "私はお茶が好き。"


@pytest.mark.parametrize("text", ENGLISH + JAPANESE)
def test_round_trip_of_training_text(tokenizer, text):
    normalized = tokenizer.backend_tokenizer.normalizer.normalize_str(text)
    assert tokenizer.decode(tokenizer(text)["input_ids"], skip_special_tokens=True) == normalized


@pytest.mark.parametrize(
    "text, expected",
    [
        ("猫が好き。", "猫が好き。"),  # kanji and hiragana
        ("コーヒーとチケット", "コーヒーとチケット"),  # katakana
        ("犬が好きですか？", "犬が好きですか?"),  # full-width ? becomes ? (NFKC)
        ("ｃａｔ　２０２４", "cat 2024"),  # full-width letters, digits and space (NFKC)
        ("I read 3 books.", "i read 3 books."),  # numbers, lowercased English
        ("  The   cat  ", "the cat"),  # white space collapsed and stripped
    ],
)
def test_round_trip_after_the_documented_normalization(tokenizer, text, expected):
    assert tokenizer.decode(tokenizer(text)["input_ids"], skip_special_tokens=True) == expected


@pytest.mark.parametrize("text", ["鬱の字", "🍵 tea", "猫😺犬", "Ω"])
def test_unseen_characters_fall_back_to_bytes_and_come_back(tokenizer, text):
    ids = tokenizer(text)["input_ids"]
    assert tokenizer.unk_token_id not in ids
    assert any(token.startswith("<0x") for token in tokenizer.convert_ids_to_tokens(ids))
    assert tokenizer.decode(ids, skip_special_tokens=True) == text.lower()


def test_japanese_decodes_without_spaces_and_english_with_normal_spaces(tokenizer):
    ids = tokenizer(["私は緑茶が本当に好きです。", "The cat is sleeping on the sofa."])["input_ids"]
    assert tokenizer.batch_decode(ids, skip_special_tokens=True) == [
        "私は緑茶が本当に好きです。",
        "the cat is sleeping on the sofa.",
    ]


def test_new_japanese_text_is_split_into_learned_subwords(tokenizer):
    text = "彼女は猫が本当に好きです。"  # not in the training texts, made of their words
    pieces = tokenizer.tokenize(text)
    assert 2 < len(pieces) < len(text)
    assert tokenizer.convert_tokens_to_string(pieces) == text


def test_lowercasing_is_saved_in_the_tokenizer(tokenizer, tmp_path):
    tokenizer.save_pretrained(tmp_path)
    loaded = AutoTokenizer.from_pretrained(tmp_path)
    assert loaded("I REALLY Like GREEN tea.")["input_ids"] == tokenizer("i really like green tea.")["input_ids"]
    cased = train_tokenizer(ENGLISH, vocab_size=300)
    assert cased.decode(cased("The Cat")["input_ids"], skip_special_tokens=True) == "The Cat"


def test_lowercases_reads_the_saved_normalizer(tokenizer, tmp_path):
    tokenizer.save_pretrained(tmp_path)
    assert lowercases(tokenizer) and lowercases(AutoTokenizer.from_pretrained(tmp_path))
    assert not lowercases(train_tokenizer(ENGLISH, vocab_size=300))


def test_save_load_gives_identical_ids(tokenizer, tmp_path):
    tokenizer.save_pretrained(tmp_path)
    loaded = AutoTokenizer.from_pretrained(tmp_path)
    texts = ENGLISH + JAPANESE + ["鬱 🍵"]
    assert loaded(texts)["input_ids"] == tokenizer(texts)["input_ids"]
    assert loaded.model_max_length == 64


def test_autotokenizer_in_a_fresh_process_without_the_package(tokenizer, tmp_path):
    folder = tmp_path / "tok"
    tokenizer.save_pretrained(folder)
    texts = ENGLISH + JAPANESE + ["鬱 🍵"]
    script = (
        "import json, sys\nfrom transformers import AutoTokenizer\n"
        "tok = AutoTokenizer.from_pretrained(sys.argv[1])\n"
        "print(json.dumps(tok(json.loads(sys.argv[2]))['input_ids']))"
    )
    output = run_without_package(script, str(folder), json.dumps(texts), cwd=tmp_path)
    assert json.loads(output) == tokenizer(texts)["input_ids"]


def test_vocab_size_smaller_than_the_special_tokens_is_an_error():
    assert SMALLEST_VOCAB_SIZE == 261  # 4 special tokens, 256 byte pieces, one learned piece
    with pytest.raises(
        ValueError, match="vocab_size \\(3\\) must be at least 261: the 4 special tokens and the 256 byte pieces"
    ):
        train_tokenizer(ENGLISH, vocab_size=3)
    with pytest.raises(ValueError, match="vocab_size \\(260\\) must be at least 261"):
        train_tokenizer(ENGLISH, vocab_size=SMALLEST_VOCAB_SIZE - 1)
    smallest = train_tokenizer(ENGLISH, vocab_size=SMALLEST_VOCAB_SIZE)  # works, mostly on byte pieces
    assert smallest.decode(smallest("green tea 🍵")["input_ids"], skip_special_tokens=True) == "green tea 🍵"


def test_empty_training_corpus_is_an_error():
    with pytest.raises(ValueError, match="training texts are empty"):
        train_tokenizer([], vocab_size=300)


def test_training_is_deterministic():
    texts = ENGLISH * 3 + JAPANESE * 3
    first, second = train_tokenizer(texts, vocab_size=400), train_tokenizer(texts, vocab_size=400)
    assert first.backend_tokenizer.to_str() == second.backend_tokenizer.to_str()


# The normalizer cleans text: one definition (text_tiny_transformer's patterns) for the tokenizer and the front doors

ORDINARY = (
    ENGLISH + JAPANESE + ["ｃａｔ　２０２４", "  The   cat  ", "line\nbreaks\r\n and\ttabs\v\f", "鬱 🍵 e\u0301 Ω"]
)
HOSTILE = "\ufeffI\u200b like\u2800green\u3164tea.\ufffc\ue000\U000e0041\x00"


def normalizer_before_the_cleaning(lowercase: bool) -> normalizers.Normalizer:
    """The normalizer tokenizers were trained with before it cleaned text, which the models saved then carry."""
    steps = [normalizers.NFKC(), normalizers.Replace(Regex(r"\s+"), " "), normalizers.Strip()]
    return normalizers.Sequence(steps + [normalizers.Lowercase()] if lowercase else steps)


def test_the_normalizer_cleans_every_code_point_as_the_front_doors_do():
    """Its first steps (Oniguruma's reading of the patterns) against `remove_invisible_characters` (Python's reading),
    every code point but the surrogates, which no UTF-8 text holds."""
    every = "".join(chr(code) for code in range(sys.maxunicode + 1) if not 0xD800 <= code <= 0xDFFF)
    steps = normalizer(lowercase=False)
    cleaning = normalizers.Sequence([steps[0], steps[1]])
    assert cleaning.normalize_str(every) == remove_invisible_characters(every)


@pytest.mark.parametrize("lowercase", [True, False])
def test_the_normalizer_does_to_ordinary_text_what_it_did(lowercase):
    """NFKC, white space (line breaks too) collapsed and stripped, lowercasing: as before it cleaned text."""
    now, before = normalizer(lowercase), normalizer_before_the_cleaning(lowercase)
    assert [now.normalize_str(text) for text in ORDINARY] == [before.normalize_str(text) for text in ORDINARY]
    assert now.normalize_str(HOSTILE) == ("i like green tea." if lowercase else "I like green tea.")


def trained_before_the_cleaning(tokenizer, folder):
    """`tokenizer` as a model saved before the normalizer cleaned text carries it: with the old normalizer, saved
    and loaded."""
    old = copy.deepcopy(tokenizer)
    old.backend_tokenizer.normalizer = normalizer_before_the_cleaning(lowercases(tokenizer))
    old.save_pretrained(folder)
    return AutoTokenizer.from_pretrained(folder)


def test_with_current_normalizer_cleans_and_keeps_the_ids_of_ordinary_text(tokenizer, tmp_path):
    old = trained_before_the_cleaning(tokenizer, tmp_path / "old")
    assert old(HOSTILE)["input_ids"] != old("I like green tea.")["input_ids"]  # what a saved model did
    with_current_normalizer(old).save_pretrained(tmp_path / "refreshed")
    refreshed = AutoTokenizer.from_pretrained(tmp_path / "refreshed")
    assert refreshed(ORDINARY)["input_ids"] == old(ORDINARY)["input_ids"] == tokenizer(ORDINARY)["input_ids"]
    assert refreshed(HOSTILE)["input_ids"] == refreshed("I like green tea.")["input_ids"]
    assert old(HOSTILE)["input_ids"] != old("I like green tea.")["input_ids"]  # a copy: the old one is unchanged
    assert refreshed.backend_tokenizer.to_str() == tokenizer.backend_tokenizer.to_str()


def test_with_current_normalizer_keeps_the_casing(tmp_path):
    cased = trained_before_the_cleaning(train_tokenizer(ENGLISH, vocab_size=300), tmp_path)
    refreshed = with_current_normalizer(cased)
    assert not lowercases(refreshed)
    assert refreshed.decode(refreshed("The\u200b Cat")["input_ids"], skip_special_tokens=True) == "The Cat"
