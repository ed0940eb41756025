"""Text around the model: what every front door (the pipeline, both engines' translators, the scripts, the demo
page) does with the texts it is given, so that they all behave the same.

- Texts are checked (a string or a list of strings) and so are the generation settings (`generation_settings`).
- Invisible characters are removed before anything else (`remove_invisible_characters`): format characters (zero-width
  space and joiners, bidi controls, byte-order marks, tags...), variation selectors, control characters other than
  tab and the line ends, the object replacement character and private-use characters show nothing (or a box), yet
  each reaches the model as byte tokens that can change the translation; blanks that are not spaces (the Braille
  blank, the Hangul fillers) become spaces. The same two patterns (`INVISIBLE_PATTERN`, `BLANK_PATTERN`) are the
  first steps of the tokenizer's normalizer (data/tokenizer.py), so that a saved tokenizer cleans text on every
  route, `generate()` and transformers.js included; the front doors clean first because they split sentences.
- A text is translated line by line and sentence by sentence, as the models were trained (given two sentences at
  once they can drop one); a sentence too long on its own is cut into pieces (`segments`); the translations are put
  back in order (`join`):

      translations = translate_in_pieces(texts, translate_pieces, count_tokens, max_tokens=64, ...)

- English output gets sentence-initial capitals and the pronoun I (`english_casing`): the models are trained on
  lowercased text. The model's generation config can switch it off (`english_casing: false`).

Sentence boundaries come from `sentencex` (Wikimedia's rule-based segmenter, English and Japanese among ~300
languages), with one fix for Japanese quotes: a sentence never ends inside 「」『』（）【】〈〉《》, nor at a closing
bracket that the sentence goes on after (「行きます。」と言った。 is one sentence).
"""

import logging
import math
import re
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass

logger = logging.getLogger(__name__)


def _character_class(code_points: str) -> str:
    """A regular-expression character class of `code_points` (hexadecimal code points and ranges: "0000-0008 00AD")
    that Python's re, the tokenizers library (Oniguruma) and JavaScript with the u flag (as transformers.js compiles
    tokenizer.json's patterns) read alike: a code point of the BMP as \\uXXXX, which all three know, and one beyond it
    as the character itself, since each spells that escape its own way (\\U, \\x{}, \\u{})."""
    items = []
    for item in code_points.split():
        ends = dict.fromkeys(int(end, 16) for end in item.split("-"))
        items.append("-".join(f"\\u{code:04x}" if code <= 0xFFFF else chr(code) for code in ends))
    return f"[{''.join(items)}]"


# What `remove_invisible_characters` removes, as of Unicode 17.0: the format characters (Unicode category Cf), the
# default-ignorable code points (the Unicode property: variation selectors, tags ...) but the blanks below, the
# control characters (Cc) other than tab, line feed, vertical tab, form feed and carriage return, the object
# replacement character (what a copy of rich text leaves for a picture) and the private-use characters (Co), which
# show as a box or not at all. Written out so that importing stays fast; the tests check the ranges against
# unicodedata and against Node's own Unicode properties. The tokenizer's normalizer holds this pattern, and the
# browser page reads it from tokenizer.json.
INVISIBLE_PATTERN = _character_class(
    "0000-0008 000E-001F 007F-009F "  # Cc
    "00AD 0600-0605 061C 06DD 070F 0890-0891 08E2 180E 200B-200F 202A-202E 2060-2064 2066-206F FEFF FFF9-FFFB "
    "110BD 110CD 13430-1343F 1BCA0-1BCA3 1D173-1D17A "  # Cf
    "034F 17B4-17B5 180B-180F 2065 FE00-FE0F FFF0-FFF8 E0000-E0FFF "  # default-ignorable: variation selectors, tags
    "FFFC E000-F8FF F0000-FFFFD 100000-10FFFD"  # object replacement, private use
)
# Blanks that are not white space (the Braille pattern blank, the Hangul fillers): a space is what a reader sees.
BLANK_PATTERN = _character_class("115F-1160 2800 3164 FFA0")
_INVISIBLE, _BLANK = re.compile(INVISIBLE_PATTERN), re.compile(BLANK_PATTERN)
_OPENING, _CLOSING = "「『（【〈《", "」』）】〉》"
# Where a too-long sentence is best cut: after a clause mark (a half-width one only before a space, so 1,000 stays
# whole), else after a space.
_CLAUSE_BREAK = re.compile(r"[,;]\s+|[，、；：。！？]\s*")
_SPACE_BREAK = re.compile(r"\s+")
_UNSPACED_LANGUAGES = {"ja", "zh"}  # written without spaces between sentences
# A sentence start: the start of a line, or . ! ? (and closing quotes) then whitespace; then opening quotes, a letter.
_SENTENCE_START = re.compile(r"""(?:^|([.!?])["'”’)\]]*\s+)[\s"'“‘(\[]*([^\W\d_])""", re.MULTILINE)
_NOT_SENTENCE_ENDS = {"e.g.", "i.e.", "mr.", "mrs.", "ms.", "dr.", "vs.", "a.m.", "p.m."}
# The pronoun I as a word ("i", "i'm", "i’d"), but not the i of "i.e." or "i-th".
_PRONOUN_I = re.compile(r"\bi\b(?![.\-]\w)")


@dataclass(frozen=True)
class Segment:
    """One piece of the source to translate on its own.

    Attributes:
        text: the piece, without surrounding whitespace.
        line_breaks: line breaks between the previous segment and this one (0: same line; 2: after a blank line).
    """

    text: str
    line_breaks: int = 0


def remove_invisible_characters(text: str) -> str:
    """`text` without the characters that show nothing (INVISIBLE_PATTERN) and with a space for each blank that is not
    one (BLANK_PATTERN), since the model reads them all the same: a zero-width space in "I like green tea." made it
    "I do not like green tea". The tokenizer's normalizer does the same (data/tokenizer.py)."""
    return _BLANK.sub(" ", _INVISIBLE.sub("", text))


def sentences(text: str, lang: str) -> list[str]:
    """Split `text` into sentences; each keeps its trailing whitespace, so `"".join(sentences(text, lang)) == text`."""
    try:  # imported here: a saved model's remote code without sentencex still translates lines that fit whole
        import sentencex
    except ImportError as error:
        raise ImportError(
            "Translating a text longer than the model takes needs sentencex: pip install sentencex"
        ) from error
    merged: list[str] = []
    for piece in sentencex.segment(lang, text):
        if merged and (_bracket_depth(merged[-1]) > 0 or _continues_after_bracket(merged[-1], piece)):
            merged[-1] += piece
        else:
            merged.append(piece)
    return merged


def _bracket_depth(text: str) -> int:
    """Japanese brackets opened in `text` and not closed yet."""
    return sum(char in _OPENING for char in text) - sum(char in _CLOSING for char in text)


def _continues_after_bracket(previous: str, piece: str) -> bool:
    """True when `previous` ends at a closing bracket and `piece` goes straight on (「行きます。」|と言った。)."""
    return previous[-1] in _CLOSING and not piece[0].isspace() and piece[0] not in _OPENING


def hard_split(sentence: str, count_tokens: Callable[[str], int], max_tokens: int) -> list[str]:
    """Cut one sentence into consecutive pieces of at most `max_tokens` tokens each; `"".join` gives it back.

    A cut goes after the last clause mark (、, ；, a comma before a space...) if it is in the second half of what
    fits, else after the last clause mark or space, and only as a last resort between characters. A single
    character over the limit becomes a piece of its own.

    Args:
        sentence: the text to cut.
        count_tokens: the number of tokens of a text, as the model will see it.
        max_tokens: the most tokens a piece may have (at least 1).
    """
    if max_tokens < 1:
        raise ValueError(f"max_tokens is {max_tokens}; pass a positive number of tokens")
    pieces, rest = [], sentence
    while rest and count_tokens(rest) > max_tokens:
        fitting = _longest_fitting_prefix(rest, count_tokens, max_tokens)
        cut = _best_cut(rest[:fitting]) if fitting else 1
        pieces.append(rest[:cut])
        rest = rest[cut:]
    return pieces + [rest] if rest else pieces


def _longest_fitting_prefix(text: str, count_tokens: Callable[[str], int], max_tokens: int) -> int:
    """The length of the longest prefix of `text` with at most `max_tokens` tokens (binary search)."""
    low, high = 0, len(text)  # text[:low] fits, text[:high + 1] does not (or is past the end)
    while low < high:
        middle = (low + high + 1) // 2
        if count_tokens(text[:middle]) <= max_tokens:
            low = middle
        else:
            high = middle - 1
    return low


def _best_cut(prefix: str) -> int:
    """Where to end a piece within `prefix` (see `hard_split`); `len(prefix)` when there is no better place."""
    clause = max((match.end() for match in _CLAUSE_BREAK.finditer(prefix)), default=0)
    space = max((match.end() for match in _SPACE_BREAK.finditer(prefix)), default=0)
    if clause > len(prefix) // 2:
        return clause
    return max(clause, space) or len(prefix)


def segments(text: str, lang: str, count_tokens: Callable[[str], int], max_tokens: int) -> list[Segment]:
    """The pieces of `text` to translate: the sentences of each line, a sentence too long cut further.

    Invisible characters are removed first (`remove_invisible_characters`). Lines keep their place
    (`Segment.line_breaks`); blank lines at the start and end, and whitespace around each line, are dropped. Empty or
    whitespace-only text gives no segments.

    Args:
        text: the source text, one paragraph per line.
        lang: its language code ("en", "ja"...), for the sentence splitter.
        count_tokens: the number of tokens of a text, as the model will see it.
        max_tokens: the most tokens the model takes in one piece.
    """
    result: list[Segment] = []
    line_breaks = 0
    text = remove_invisible_characters(text)
    for line in text.split("\n"):  # "\n" only: a lone carriage return or form feed inside a line stays in it
        for piece in _line_pieces(line.strip(), lang, count_tokens, max_tokens):
            result.append(Segment(piece, line_breaks if result else 0))
            line_breaks = 0
        line_breaks += 1
    return result


def _line_pieces(line: str, lang: str, count_tokens: Callable[[str], int], max_tokens: int) -> list[str]:
    """The pieces of one stripped line, stripped, none empty."""
    if not line:
        return []
    try:  # sentence by sentence, as the models were trained: given several at once, they can drop one
        line_sentences = sentences(line, lang)
    except ImportError:
        if count_tokens(line) <= max_tokens:  # without sentencex, a line that fits goes whole
            return [line]
        raise
    pieces = [piece for sentence in line_sentences for piece in hard_split(sentence, count_tokens, max_tokens)]
    logger.debug("split a line of %d characters into %d pieces", len(line), len(pieces))
    return [piece.strip() for piece in pieces if piece.strip()]


def join(translations: list[str], segments: list[Segment], target_lang: str) -> str:
    """Put the translations of `segments` back together: pieces of one line joined by a space (by nothing for
    Japanese and Chinese), lines by the source's line breaks (written as "\\n").

    Args:
        translations: one translation per segment, in order.
        segments: what `segments()` returned for the source.
        target_lang: the language of the translations ("en", "ja", "zh-Hans"...).
    """
    if len(translations) != len(segments):
        raise ValueError(f"{len(translations)} translations for {len(segments)} segments; translate every segment once")
    space = "" if target_lang.split("-")[0].lower() in _UNSPACED_LANGUAGES else " "
    parts: list[str] = []
    for translation, segment in zip(translations, segments):
        if parts:
            parts.append("\n" * segment.line_breaks if segment.line_breaks else space)
        parts.append(translation.strip())
    return "".join(parts)


def english_casing(text: str) -> str:
    """Capitalize lowercased English: the first letter of each sentence and of each line, and the pronoun I.

    Nothing is lowercased. A sentence ends at . ! ? (and closing quotes) before whitespace, but not at an ellipsis
    ("wait... what") nor at "e.g.", "i.e.", "mr.", "dr.", "p.m." and the like.
    """
    return _PRONOUN_I.sub("I", _SENTENCE_START.sub(_capitalize_sentence_start, text))


def _capitalize_sentence_start(match: re.Match) -> str:
    """The matched sentence start with its letter uppercased, unless the word before it does not end a sentence."""
    if match.group(1) is not None:
        word = match.string[: match.end(1)].rsplit(None, 1)[-1].lstrip("\"'“‘([").lower()
        if word in _NOT_SENTENCE_ENDS or word.endswith(".."):
            return match.group(0)
    start = match.start(2) - match.start(0)
    return match.group(0)[:start] + match.group(2).upper()


# Kana, kanji and half-width katakana: a text with any of them is taken for Japanese when no language is given.
_JAPANESE_SCRIPT = re.compile(r"[\u3040-\u30ff\u3400-\u9fff\uff66-\uff9f]")


def guess_language(text: str) -> str:
    """ "ja" for a text in Japanese script, "en" otherwise: what the model's languages are when it does not say."""
    return "ja" if _JAPANESE_SCRIPT.search(text) else "en"


def texts_of(text) -> list[str]:
    """A text or a list of texts as a list; a TypeError naming what was given otherwise."""
    texts = [text] if isinstance(text, str) else text
    if not isinstance(texts, (list, tuple)) or not all(isinstance(item, str) for item in texts):
        raise TypeError(f"text must be a string or a list of strings, got {type(text).__name__}: {text!r:.80}")
    return list(texts)


def generation_settings(**settings) -> dict:
    """The given decoding settings (None = not given) checked: a ValueError naming the setting otherwise.
    num_beams, max_new_tokens and batch_size are whole numbers of at least 1 (and at most sys.maxsize); length_penalty
    a finite number. Whether the beams fit in memory is the translators' check (they know the model)."""
    checked = {}
    for name, value in settings.items():
        if value is None:
            continue
        if name in ("num_beams", "max_new_tokens", "batch_size"):
            if isinstance(value, bool) or not isinstance(value, (int, float)) or value < 1 or value != int(value):
                raise ValueError(f"{name} must be a whole number of at least 1, got {value!r}")
            if value > sys.maxsize:  # what Python can count to in a slice
                raise ValueError(f"{name} must be at most {sys.maxsize:,}, got {value:,}")
            value = int(value)
        elif name == "length_penalty" and (
            isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value)
        ):
            raise ValueError(f"length_penalty must be a finite number, got {value!r}")
        checked[name] = value
    return checked


def translate_in_pieces(
    texts: list[str],
    translate_pieces: Callable[[list[str]], Sequence[Sequence[str]]],
    count_tokens: Callable[[str], int],
    max_tokens: int,
    *,
    source_lang: str | None = None,
    target_lang: str | None = None,
    casing: bool | None = None,
) -> list[list[str]]:
    """Translate `texts` sentence by sentence (see `segments`); one list of translations per text.

    Args:
        texts: the source texts (invisible characters are removed, as `segments` does); empty ones give "".
        translate_pieces: translates a list of pieces at once, giving one list of sequences per piece (one
            sequence, or several with num_return_sequences); sequence k of a text is made of each piece's k-th.
        count_tokens: tokens of a text as the model sees it (special tokens included).
        max_tokens: the most tokens the model takes (its max_position_embeddings).
        source_lang, target_lang: language codes; guessed from the script when None.
        casing: English casing of the output; None: when the target language is English.
    """
    texts = [remove_invisible_characters(text) for text in texts]  # here too: the warning counts their tokens
    plans = [segments(text, source_lang or guess_language(text), count_tokens, max_tokens) for text in texts]
    split = sum(any(count_tokens(line) > max_tokens for line in text.split("\n")) for text in texts)
    if split:
        logger.warning(
            "%d of %d texts are longer than the model takes at once (%d tokens): translated sentence by sentence",
            split,
            len(texts),
            max_tokens,
        )
    results = iter(translate_pieces([segment.text for plan in plans for segment in plan]) if any(plans) else [])
    translations = []
    for plan in plans:
        per_piece = [list(next(results)) for _ in plan]  # each piece's sequences
        count = max((len(sequences) for sequences in per_piece), default=1)
        translations.append(
            [put_together([s[min(k, len(s) - 1)] for s in per_piece], plan, target_lang, casing) for k in range(count)]
        )
    return translations


def put_together(translations: list[str], plan: list[Segment], target_lang: str | None, casing: bool | None) -> str:
    """One text's translated pieces joined (`join`) and cased (`cased`)."""
    target_lang = target_lang or guess_language("".join(translations))
    return cased(join(translations, plan, target_lang), target_lang, casing)


def cased(text: str, target_lang: str, casing: bool | None) -> str:
    """`english_casing(text)` when `casing` is True, or when it is None and `target_lang` is English."""
    if casing is None:
        casing = target_lang == "en"
    return english_casing(text) if casing else text
