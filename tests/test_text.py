"""Text around the model (text_tiny_transformer.py and data/files.py): sentence splitting, hard splits, segments
and join, English casing; a text longer than the model takes, translated sentence by sentence the same way at every
front door (the pipeline, every engine's translator, the translate command, evaluate_model.py, the app); invisible
characters, which no front door lets change a translation; the encodings text files are read in."""

import json
import logging
import sys
import unicodedata

import pytest
from transformers import AutoModelForSeq2SeqLM, AutoTokenizer

from conftest import tiny_model
from hf_tiny_transformer import TranslationPipeline
from hf_tiny_transformer.errors import UsageError
from hf_tiny_transformer.guards.text_files import read_lines
from hf_tiny_transformer.serving.translator import TransformersTranslator
from hf_tiny_transformer.text_tiny_transformer import (
    Segment,
    english_casing,
    hard_split,
    join,
    remove_invisible_characters,
    segments,
    sentences,
    translate_in_pieces,
)
from running import run_tool


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


# A text longer than the model takes, at every front door: each sentence translated once and in order, paragraphs kept,
# English output cased; empty text gives empty text.


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
def short_model(tokenizer):
    """A random model of the test tokenizer's vocabulary and a short positional table, whose output is joined with
    spaces and left uncased."""
    model = tiny_model(vocab_size=len(tokenizer), max_position_embeddings=MAX_POSITIONS)
    model.generation_config.target_lang, model.generation_config.english_casing = "en", False
    model.generation_config._from_model_config = False  # kept in a saved folder
    return model


@pytest.fixture
def short_model_folder(short_model, tokenizer, tmp_path):
    short_model.save_pretrained(tmp_path / "model")
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
def test_the_pipeline_translates_a_long_document_sentence_by_sentence(short_model, tokenizer, lang, caplog):
    document = DOCUMENTS[lang]
    assert_too_long(tokenizer, document)
    translate = TranslationPipeline(model=short_model, tokenizer=tokenizer)
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
def test_the_transformers_translator_translates_a_long_document_sentence_by_sentence(short_model, tokenizer, lang):
    translator = TransformersTranslator(short_model, tokenizer)
    document = DOCUMENTS[lang]
    expected = expected_document(document, lang, lambda sentence: translator.translate([sentence], batch_size=1)[0])
    assert translator.translate([document], batch_size=1) == [expected]
    assert (
        translator([document, "", "  \n "], batch_size=1)
        == [{"translation_text": expected}] + [{"translation_text": ""}] * 2
    )


@pytest.mark.parametrize("lang", ["en", "ja"])
def test_the_ctranslate2_translator_translates_a_long_document_sentence_by_sentence(
    short_model, tokenizer, tmp_path, lang
):
    from hf_tiny_transformer.serving.ctranslate2 import CTranslate2Translator, export_ctranslate2

    export_ctranslate2(short_model, tokenizer, tmp_path / "ct2")
    translator = CTranslate2Translator(tmp_path / "ct2", compute_type="float32")
    document = DOCUMENTS[lang]
    expected = expected_document(document, lang, lambda sentence: translator.translate([sentence], batch_size=1)[0])
    assert translator.translate([document, ""], batch_size=1) == [expected, ""]


def test_the_ctranslate2_engine_of_the_command_translates_a_long_document_without_the_tokenizers_warning(
    short_model, tokenizer, tmp_path
):
    from hf_tiny_transformer.serving.ctranslate2 import export_ctranslate2

    export_ctranslate2(short_model, tokenizer, tmp_path / "ct2")
    result = run_ok("translate", "--engine", "ctranslate2", "--model", str(tmp_path / "ct2"), DOCUMENTS["en"])
    assert result.stdout.strip() and "translated sentence by sentence" in result.stderr
    assert "Token indices sequence length" not in result.stderr


def run_ok(tool: str, *arguments: str):
    """A training script (`evaluate_model.py`) or a command (`translate`) run as a user runs it (a forked child),
    which must succeed."""
    result = run_tool(tool, *arguments, timeout=300)
    assert result.returncode == 0, result.stderr[-3000:]
    return result


def test_translate_and_evaluate_model_py_translate_long_documents_whole(
    short_model, tokenizer, short_model_folder, tmp_path
):
    """The translate command: a document given as an argument comes back whole; evaluate_model.py: a file line that
    holds a paragraph longer than the model takes is translated sentence by sentence, one output line for it."""
    translator = TransformersTranslator(short_model, tokenizer)
    expected = {
        lang: expected_document(DOCUMENTS[lang], lang, lambda s: translator.translate([s], batch_size=1)[0])
        for lang in DOCUMENTS
    }
    result = run_ok(
        "translate", "--model", str(short_model_folder), "--batch_size", "1", DOCUMENTS["en"], DOCUMENTS["ja"]
    )
    assert result.stdout == f"{expected['en']}\n{expected['ja']}\n"
    assert "translated sentence by sentence" in result.stderr
    assert "Token indices sequence length" not in result.stderr  # the tokenizer's warning: the text is split first

    (tmp_path / "source.txt").write_text("\n".join(ENGLISH_PARAGRAPHS + JAPANESE_PARAGRAPHS) + "\n", encoding="utf-8")
    (tmp_path / "reference.txt").write_text("a\nb\nc\nd\n")
    scores = run_ok(
        "evaluate_model.py",
        "--model",
        str(short_model_folder),
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


def test_the_demo_page_translates_a_long_text_whole_and_says_so(short_model, tokenizer):
    pytest.importorskip("gradio")
    from hf_tiny_transformer.app.page import TranslationApp

    demo = TranslationApp(short_model, tokenizer)
    *growing, (translation, picture, note) = demo.translate_and_draw(DOCUMENTS["en"], "cross", 1)
    assert growing and all(picture is None for _, picture, _ in growing)  # the translation grew, then the picture
    assert translation == TransformersTranslator(short_model, tokenizer).translate([DOCUMENTS["en"]])[0]
    assert "translated in 12 pieces, sentence by sentence" in note and picture.size[0] > 100
    assert list(demo.translate_and_draw("  ", "cross", 1)) == [("", None, "")]


def test_english_output_is_cased_unless_the_generation_config_says_no(short_model, tokenizer):
    """The models are trained on lowercased text: English output gets capitals at sentence starts and for I."""
    front_doors = {
        "translator": lambda: TransformersTranslator(short_model, tokenizer).translate(ENGLISH_PARAGRAPHS[:1])[0],
        "pipeline": lambda: TranslationPipeline(model=short_model, tokenizer=tokenizer)(ENGLISH_PARAGRAPHS[0])[0][
            "translation_text"
        ],
    }
    for name, translate in front_doors.items():
        short_model.generation_config.english_casing = False
        raw = translate()
        short_model.generation_config.english_casing = None  # the default: cased where the target is English
        cased = translate()
        assert cased == english_casing(raw) and cased != raw, name
        short_model.generation_config.target_lang = "ja"  # another target language: left as generated
        assert translate().replace(" ", "") == raw.replace(" ", ""), name  # uncased; pieces joined without spaces
        short_model.generation_config.target_lang = "en"


# Invisible characters: one of each kind; each, put into "I like green tea.", changed the demo model's translation.
INVISIBLE = {
    "zero-width space": "\u200b",
    "zero-width non-joiner": "\u200c",
    "zero-width joiner": "\u200d",
    "word joiner": "\u2060",
    "Mongolian vowel separator": "\u180e",
    "variation selector": "\ufe0f",
    "supplementary variation selector": "\U000e0100",
    "tag characters": "\U000e0001\U000e0020\U000e0041\U000e007f",
    "bidi embeddings and overrides": "\u202a\u202b\u202c\u202d\u202e",
    "bidi marks": "\u200e\u200f\u061c",
    "bidi isolates": "\u2066\u2067\u2068\u2069",
    "byte-order mark inside a line": "\ufeff",
    "soft hyphen": "\u00ad",
    "NUL": "\0",
    "other control characters": "\x01\x1b\x7f\x9b",
    "object replacement character": "\ufffc",
    "private-use characters": "\ue000\uf8ff\U000f0000\U0010fffd",
}
# Blanks that are not white space, which become spaces: each changed the translation as the characters above did.
BLANKS = {
    "Braille pattern blank": "\u2800",
    "Hangul fillers": "\u115f\u1160\u3164\uffa0",
}
HOSTILE = INVISIBLE | BLANKS


PLAIN = "I like green tea."


def with_invisible(characters: str) -> str:
    return f"I{characters} like green tea.{characters}{characters}"


# Other_Default_Ignorable_Code_Point, from the Unicode Character Database's PropList.txt (Python's unicodedata does
# not hold the property): fillers, unassigned code points kept ignorable, the tag block's unassigned rest.
OTHER_DEFAULT_IGNORABLE = [(0x034F, 0x034F), (0x115F, 0x1160), (0x17B4, 0x17B5), (0x2065, 0x2065), (0x3164, 0x3164),
                           (0xFFA0, 0xFFA0), (0xFFF0, 0xFFF8), (0xE0000, 0xE0000), (0xE0002, 0xE001F),
                           (0xE0080, 0xE00FF), (0xE01F0, 0xE0FFF)]  # fmt: skip
VARIATION_SELECTORS = [(0x180B, 0x180D), (0x180F, 0x180F), (0xFE00, 0xFE0F), (0xE0100, 0xE01EF)]


def invisible_by_the_rule(char: str) -> bool:
    """The rule, from the Unicode database: a format character (Cf), a default-ignorable code point (Unicode's
    derivation: Cf, the variation selectors and Other_Default_Ignorable_Code_Point), a control character (Cc)
    other than tab, line feed, vertical tab, form feed and carriage return, a private-use character (Co), or the
    object replacement character."""
    category, code = unicodedata.category(char), ord(char)
    ignorable = any(first <= code <= last for first, last in OTHER_DEFAULT_IGNORABLE + VARIATION_SELECTORS)
    control = category == "Cc" and char not in "\t\n\v\f\r"
    return category in ("Cf", "Co") or ignorable or control or char == "\ufffc"


def blank_by_the_rule(char: str) -> bool:
    """A blank that is not white space: the Braille pattern blank and the Hangul fillers."""
    name = unicodedata.name(char, "")
    return name == "BRAILLE PATTERN BLANK" or (name.startswith(("HANGUL", "HALFWIDTH HANGUL")) and "FILLER" in name)


def test_the_invisible_characters_are_exactly_those_of_the_rule():
    """The written-out ranges against this Python's Unicode database, every code point: the blanks become spaces, the
    other invisible characters go, the rest stays. The code points it does not assign yet that the ranges hold are
    the Egyptian hieroglyph format controls a newer Unicode added."""
    every = "".join(map(chr, range(sys.maxunicode + 1)))
    blanks = "".join(filter(blank_by_the_rule, every))
    assert len(blanks) == 5 and remove_invisible_characters(blanks) == " " * len(blanks)
    kept = set(remove_invisible_characters(every))
    removed = {char for char in every if char not in kept}
    newer = {chr(code) for code in range(0x13439, 0x13440) if unicodedata.category(chr(code)) == "Cn"}
    assert removed == {char for char in every if invisible_by_the_rule(char)} | set(blanks) | newer


def test_whitespace_and_visible_text_are_kept():
    text = "\tI like\u00a0green tea.\v\f\r\n私は緑茶が好きです。\u3000👍🏽 e\u0301 \U0001f469\u200d\U0001f4bb"
    assert remove_invisible_characters(text) == text.replace("\u200d", "")
    assert remove_invisible_characters(with_invisible("".join(INVISIBLE.values()))) == PLAIN
    assert remove_invisible_characters(with_invisible("\u2800\u3164")) == "I   like green tea.    "


@pytest.mark.parametrize("route", ["trained", "saved and loaded with AutoTokenizer"])
def test_the_tokenizer_reads_a_text_with_invisible_characters_as_the_text_without(tokenizer, tmp_path, route):
    """The cleaning is the tokenizer's own, so that tokenizer + generate() (the README's route) and every engine
    share it: each kind gives the plain sentence's ids."""
    if route != "trained":
        tokenizer.save_pretrained(tmp_path)
        tokenizer = AutoTokenizer.from_pretrained(tmp_path)
    ids = {kind: tokenizer(with_invisible(characters))["input_ids"] for kind, characters in HOSTILE.items()}
    assert ids == dict.fromkeys(HOSTILE, tokenizer(PLAIN)["input_ids"])


def test_segments_and_translations_in_pieces_ignore_invisible_characters(caplog):
    """Whole lines that fit without their invisible characters are translated whole and without a warning."""
    hostile = "\ufeffI\u200b like green tea.\u202e She reads\u2060 books.\0\0\n\u200b\n\x00Bye.\ufe0f"
    clean = "I like green tea. She reads books.\n\nBye."
    assert segments(hostile, "en", count_words, 4) == segments(clean, "en", count_words, 4)

    def echo(pieces):
        return [[piece.upper()] for piece in pieces]

    with caplog.at_level(logging.WARNING):
        translated = translate_in_pieces([hostile], echo, len, max_tokens=len("I like green tea. She reads books."))
    assert translated == [[clean.upper()]] and not caplog.records


ENGINES = ["pipeline", "transformers", "transformers, streamed", "ctranslate2", "onnx"]


@pytest.fixture(scope="module", params=ENGINES)
def hostile_translations(request, trained_demo_model) -> dict[str, str]:
    """The translations of "I like green tea." and of it with each kind of invisible character or blank, by one
    engine of the trained demo model (the exports in float32); one batch an engine."""
    texts = [PLAIN] + [with_invisible(characters) for characters in HOSTILE.values()]
    if request.param in ("ctranslate2", "onnx"):
        export = request.getfixturevalue("demo_ct2" if request.param == "ctranslate2" else "demo_onnx")
        if request.param == "ctranslate2":
            from hf_tiny_transformer.serving.ctranslate2 import CTranslate2Translator

            translations = CTranslate2Translator(export["float32"], compute_type="float32").translate(texts)
        else:
            from hf_tiny_transformer.serving.onnx import OnnxTranslator

            translations = OnnxTranslator(export, compute_type="float32").translate(texts)
        return dict(zip(["plain", *HOSTILE], translations, strict=True))
    model = AutoModelForSeq2SeqLM.from_pretrained(trained_demo_model).eval()
    tokenizer = AutoTokenizer.from_pretrained(trained_demo_model)
    if request.param == "pipeline":
        translations = [
            result["translation_text"] for result in TranslationPipeline(model=model, tokenizer=tokenizer)(texts)
        ]
    elif request.param == "transformers":
        translations = TransformersTranslator(model, tokenizer).translate(texts)
    else:
        translator = TransformersTranslator(model, tokenizer)
        translations = [list(translator.stream(text))[-1] for text in texts]
    return dict(zip(["plain", *HOSTILE], translations, strict=True))


@pytest.mark.parametrize("kind", HOSTILE)
def test_invisible_characters_do_not_change_a_translation(hostile_translations, kind):
    assert hostile_translations["plain"]  # a real translation
    assert hostile_translations[kind] == hostile_translations["plain"]


# Files: UTF-8 (a byte-order mark at the start is not text); UTF-16 and UTF-32 are refused, naming the iconv fix.
LINES = ["I eat cake.", "She reads books.", "私は緑茶が好きです。"]


def test_a_utf8_file_with_a_byte_order_mark_reads_as_without_one(tmp_path):
    path = tmp_path / "sources.en"
    path.write_bytes(b"\xef\xbb\xbf" + "\n".join(LINES).encode())
    assert read_lines(path) == LINES


@pytest.mark.parametrize(
    "encoding, name",
    [("utf-16", "UTF-16LE"), ("utf-16-le", "UTF-16LE"), ("utf-16-be", "UTF-16BE"), ("utf-32", "UTF-32LE"),
     ("utf-32-be", "UTF-32BE")],
)  # fmt: skip
def test_a_utf16_or_utf32_file_is_refused_with_the_fix(tmp_path, encoding, name):
    """With a byte-order mark ("utf-16", "utf-32") or without: ASCII in them is valid UTF-8 with NULs between the
    letters, and was read as other lines and words."""
    path = tmp_path / "sources.en"
    path.write_bytes("\n".join(LINES[:2]).encode(encoding))
    with pytest.raises(UsageError) as error:
        read_lines(path, "--source_file")
    fix = f"convert it with iconv -f {name} -t UTF-8"
    assert str(error.value) == f"--source_file {path} is {name} text, not UTF-8; {fix}"


def test_a_stray_nul_in_a_file_is_no_reason_to_refuse_it(tmp_path):
    """A NUL is an invisible character, which translating removes; only text of NULs between letters is refused."""
    path = tmp_path / "sources.en"
    path.write_bytes(b"I eat\0 cake.\nShe reads books.\n")
    assert read_lines(path) == ["I eat\0 cake.", "She reads books."]


@pytest.mark.parametrize("mark", [b"", b"\xef\xbb\xbf"])
def test_a_file_not_in_utf8_names_its_line(tmp_path, mark):
    path = tmp_path / "sources.ja"
    path.write_bytes(mark + b"I eat cake.\n" + "私は緑茶が好きです。\n".encode("shift_jis"))
    with pytest.raises(UsageError) as error:
        read_lines(path, "--source_file")
    assert str(error.value) == (
        f"--source_file {path} is not UTF-8 text (line 2); convert it with iconv -f ITS-ENCODING -t UTF-8 (e.g. "
        "SHIFT_JIS)"
    )
