"""Text around the model: sentence splitting, hard splits, segments and join, English casing."""

import sys
import unicodedata

import pytest

from hf_tiny_transformer.text_tiny_transformer import Segment, english_casing, hard_split, join, segments, sentences


def count_words(text: str) -> int:
    """A fake tokenizer: one token per whitespace-separated word."""
    return len(text.split())


# (text, the sentences without their trailing whitespace)
ENGLISH_SENTENCES = [
    (
        "Mr. Smith met Dr. Jones at 3 p.m. yesterday. They talked.",
        ["Mr. Smith met Dr. Jones at 3 p.m. yesterday.", "They talked."],
    ),
    (
        "Use tools, e.g. hammers. The U.S. is big. It works.",
        ["Use tools, e.g. hammers.", "The U.S. is big.", "It works."],
    ),
    ("It costs 3.50 dollars. Buy it.", ["It costs 3.50 dollars.", "Buy it."]),
    # A quote ending in ! or ? ends the sentence; the closing quote stays with it.
    ('He said, "Stop!" Then he left.', ['He said, "Stop!"', "Then he left."]),
    ('He said, "I will go. You stay." Then he left.', ['He said, "I will go. You stay."', "Then he left."]),
    ("I was... thinking about it. Yes.", ["I was... thinking about it.", "Yes."]),
    ("Wait... what? No!", ["Wait... what?", "No!"]),
    ("What?! Really?! OK.", ["What?!", "Really?!", "OK."]),
    ("Hello world. no punctuation at the end", ["Hello world.", "no punctuation at the end"]),
    ("No punctuation at all", ["No punctuation at all"]),
]
JAPANESE_SENTENCES = [
    ("今日は晴れ。明日は雨！本当？うん", ["今日は晴れ。", "明日は雨！", "本当？", "うん"]),
    ("本当！？すごい。", ["本当！？", "すごい。"]),
    ("すごい！！本当に。", ["すごい！！", "本当に。"]),
    ("えっ！？\u3000本当？", ["えっ！？", "本当？"]),
    ("彼は「行きます。」と言った。それから帰った。", ["彼は「行きます。」と言った。", "それから帰った。"]),
    (
        "彼は「行きます。帰ります。」と言った。それから帰った。",
        ["彼は「行きます。帰ります。」と言った。", "それから帰った。"],
    ),
    ("『雪国。』を読んだ。面白かった。", ["『雪国。』を読んだ。", "面白かった。"]),
    ("「はい。」「いいえ。」", ["「はい。」", "「いいえ。」"]),  # two quotes in a row: two sentences
    (unicodedata.normalize("NFKC", "本当！？すごい！ありがとう？はい"), ["本当!?", "すごい!", "ありがとう?", "はい"]),
    ("文です。終わりなし", ["文です。", "終わりなし"]),
]
SPLIT_CASES = [("en", text, expected) for text, expected in ENGLISH_SENTENCES] + [
    ("ja", text, expected) for text, expected in JAPANESE_SENTENCES
]


@pytest.mark.parametrize("lang, text, expected", SPLIT_CASES)
def test_sentences_split_the_hard_cases(lang, text, expected):
    assert [sentence.strip() for sentence in sentences(text, lang)] == expected


@pytest.mark.parametrize(
    "lang, text",
    [(lang, text) for lang, text, _ in SPLIT_CASES] + [("en", "  Two  spaces.  Here.  \t"), ("ja", "\u3000前。 後。")],
)
def test_sentences_give_back_the_text_exactly(lang, text):
    """Every sentence keeps its trailing whitespace: their plain concatenation is the input, character for character."""
    assert "".join(sentences(text, lang)) == text


def test_nothing_to_split():
    assert sentences("", "en") == []


@pytest.mark.parametrize(
    "sentence, count_tokens, max_tokens, expected",
    [
        # After the last space that fits...
        ("This is a rather long sentence", len, 20, ["This is a rather ", "long sentence"]),
        ("one two three four five six seven", count_words, 3, ["one two three ", "four five six ", "seven"]),
        # ...but after a comma in the second half of what fits rather than after a later space.
        ("alpha beta gamma, delta epsilon zeta", count_words, 4, ["alpha beta gamma, ", "delta epsilon zeta"]),
        ("It costs 1,000 yen and more", len, 9, ["It costs ", "1,000 ", "yen and ", "more"]),  # no cut inside 1,000
        ("今日は天気が良いので、散歩に行きました", len, 12, ["今日は天気が良いので、", "散歩に行きました"]),
        ("右；左、上下左右前後", len, 8, ["右；左、", "上下左右前後"]),
        # Last resort: between characters; a character over the limit on its own.
        ("あいうえおかきくけこさしす", len, 5, ["あいうえお", "かきくけこ", "さしす"]),
        ("abc", lambda text: 2 * len(text), 1, ["a", "b", "c"]),
        ("fits", len, 4, ["fits"]),
    ],
)
def test_hard_split(sentence, count_tokens, max_tokens, expected):
    pieces = hard_split(sentence, count_tokens, max_tokens)
    assert pieces == expected
    assert "".join(pieces) == sentence


def test_hard_split_refuses_a_limit_below_one_token():
    with pytest.raises(ValueError, match="max_tokens is 0"):
        hard_split("text", len, 0)


ENGLISH_TEXT = (
    "First sentence here. Second one is here.\n"
    "\n"
    "A new paragraph. It has two sentences.\n"
    "Short line.\n"
    "This one sentence is far too long, so it gets cut."
)


def test_segments_of_an_english_text():
    pieces = segments(ENGLISH_TEXT, "en", count_words, max_tokens=4)
    assert pieces == [
        Segment("First sentence here.", 0),
        Segment("Second one is here.", 0),
        Segment("A new paragraph.", 2),
        Segment("It has two sentences.", 0),
        Segment("Short line.", 1),
        Segment("This one sentence is", 1),
        Segment("far too long,", 0),
        Segment("so it gets cut.", 0),
    ]
    assert all(count_words(piece.text) <= 4 for piece in pieces)


def test_every_piece_is_translated_once_and_in_order():
    pieces = segments(ENGLISH_TEXT, "en", count_words, max_tokens=4)
    assert join([piece.text.upper() for piece in pieces], pieces, "en") == ENGLISH_TEXT.upper()
    markers = join([f"<{i}>" for i in range(len(pieces))], pieces, "en")
    assert markers == "<0> <1>\n\n<2> <3>\n<4>\n<5> <6> <7>"
    assert join([f"<{i}>" for i in range(len(pieces))], pieces, "ja") == "<0><1>\n\n<2><3>\n<4>\n<5><6><7>"


def test_a_line_is_cut_into_its_sentences_even_when_it_fits(monkeypatch):
    text = "Hello there. How are you?"
    assert segments(text, "en", len, max_tokens=len(text)) == [Segment("Hello there.", 0), Segment("How are you?", 0)]
    assert segments("How are you?", "en", len, max_tokens=50) == [Segment("How are you?", 0)]
    monkeypatch.setitem(
        sys.modules, "sentencex", None
    )  # a remote-code user without sentencex: a line that fits goes whole
    assert segments(text, "en", len, max_tokens=len(text)) == [Segment(text, 0)]
    with pytest.raises(ImportError, match="pip install sentencex"):
        segments(text, "en", len, max_tokens=len(text) - 1)


def test_segments_of_a_japanese_text():
    text = "彼は「行きます。」と言った。それから帰った。\n\n今日は晴れ。明日は雨！\n\n\n短い。"
    pieces = segments(text, "ja", len, max_tokens=15)
    assert pieces == [
        Segment("彼は「行きます。」と言った。", 0),
        Segment("それから帰った。", 0),
        Segment("今日は晴れ。", 2),
        Segment("明日は雨！", 0),
        Segment("短い。", 3),
    ]
    assert join([piece.text for piece in pieces], pieces, "ja") == text
    assert (
        join(["He said.", "Then.", "Sunny.", "Rain!", "Short."], pieces, "en")
        == "He said. Then.\n\nSunny. Rain!\n\n\nShort."
    )


def test_surrounding_blank_lines_and_indentation_are_dropped():
    pieces = segments("\n\n  Hello.  \r\n\t\r\n  Bye. \n\n", "en", len, max_tokens=50)
    assert pieces == [Segment("Hello.", 0), Segment("Bye.", 2)]
    assert join(["Hallo.", "Tschüss."], pieces, "de") == "Hallo.\n\nTschüss."


@pytest.mark.parametrize("text", ["", " ", "\n", " \n\t\n\u3000 "])
def test_empty_text_gives_no_segments_and_an_empty_result(text):
    pieces = segments(text, "en", len, max_tokens=10)
    assert pieces == []
    assert join([], pieces, "en") == ""


def test_join_refuses_a_wrong_number_of_translations():
    with pytest.raises(ValueError, match="2 translations for 1 segments"):
        join(["a", "b"], [Segment("x")], "en")


@pytest.mark.parametrize(
    "text, expected",
    [
        ("i hope you will succeed.", "I hope you will succeed."),
        ("i hope you will succeed. i'm sure you will.", "I hope you will succeed. I'm sure you will."),
        ("he said i'm late, and i'd go.", "He said I'm late, and I'd go."),
        ("i've seen it and i'll go.", "I've seen it and I'll go."),
        ("i’ve seen it and i’ll go.", "I’ve seen it and I’ll go."),
        ("so do i. it is hi.", "So do I. It is hi."),
        ("use tools, e.g. hammers, i.e. things.", "Use tools, e.g. hammers, i.e. things."),
        ("e.g. this works.", "E.g. this works."),
        ("mr. smith came at 3 p.m. today. we talked.", "Mr. smith came at 3 p.m. today. We talked."),
        ("it costs 3.50 dollars. buy it.", "It costs 3.50 dollars. Buy it."),
        ('"stop!" then he left.', '"Stop!" Then he left.'),
        ("she said “no.” we agreed.", "She said “no.” We agreed."),
        ("what?! really? yes! ok.", "What?! Really? Yes! Ok."),
        ("wait... what? no!", "Wait... what? No!"),
        ("take the i-th item.", "Take the i-th item."),
        ("first line.\nsecond line\n\nthird", "First line.\nSecond line\n\nThird"),
        ("NASA is BIG. i agree.", "NASA is BIG. I agree."),
        ("élan. über.", "Élan. Über."),
        ("", ""),
    ],
)
def test_english_casing(text, expected):
    assert english_casing(text) == expected
    assert english_casing(expected) == expected
