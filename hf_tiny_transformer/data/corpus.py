"""From the small_parallel_enja corpus (tokenized, segmented) to natural text, as people type it.

The corpus has Japanese segmented into words with spaces (`誰 が 一番 に 着 く か`) and English lowercased and
tokenized (`i can 't tell who will arrive first .`). Training on natural text lets the model take what a
person types: Japanese without spaces, English with normal spacing and punctuation.

- `unsegment_japanese` removes every space except one between two Latin letters or digits (`CD を` -> `CDを`,
  `New York` stays).
- `detokenize_english` re-attaches punctuation and clitics (`can 't` -> `can't`, `tell .` -> `tell.`,
  `o 'clock` -> `o'clock`) and turns the corpus's quote marks (`''`) into `"`. The text stays lowercase: the
  corpus has lost its capitals, and the tokenizer lowercases what people type (see the tokenizer).
"""

import re
from pathlib import Path

from ..guards.text_files import decoded, text_lines

LATIN_OR_DIGIT = re.compile(r"[A-Za-z0-9]")
ATTACH_LEFT = {".", ",", "!", "?", ";", ":", "...", ")", "%"}
CLITIC = re.compile(r"^'(t|s|m|ll|ve|d|re|clock)$")


def unsegment_japanese(line: str) -> str:
    """Remove the word-segmentation spaces of a Japanese line, keeping spaces between Latin words or numbers."""
    tokens = line.split()
    if not tokens:
        return ""
    text = tokens[0]
    for token in tokens[1:]:
        if LATIN_OR_DIGIT.match(text[-1]) and LATIN_OR_DIGIT.match(token[0]):
            text += " "
        text += token
    return text


def quote_roles(tokens: list[str]) -> list[str | None]:
    """For each token: "open" or "close" for paired quote marks (`''` or `'`), else None.

    A lone `'` that has no partner is a possessive (`ten minutes ' walk`) and attaches to the left.
    """
    roles: list[str | None] = [None] * len(tokens)
    for mark in ("''", "'"):
        positions = [i for i, token in enumerate(tokens) if token == mark]
        pairs = len(positions) // 2 * 2
        for k, i in enumerate(positions[:pairs]):
            roles[i] = "open" if k % 2 == 0 else "close"
        for i in positions[pairs:]:
            roles[i] = "close"
    return roles


def detokenize_english(line: str) -> str:
    """Turn a tokenized English line back into normally spaced text: `i can 't tell .` -> `i can't tell.`"""
    tokens = line.split()
    roles = quote_roles(tokens)
    text = ""
    attach_next = False  # after an opening quote or bracket
    for token, role in zip(tokens, roles):
        shown = '"' if token == "''" else token
        attach_left = token in ATTACH_LEFT or CLITIC.match(token) is not None or role == "close"
        text += shown if (attach_left or attach_next or not text) else " " + shown
        attach_next = role == "open" or token == "("
    return text


def read_parallel(directory: str | Path, split: str, source_lang: str, target_lang: str) -> tuple[list[str], list[str]]:
    """Read `{split}.{lang}` for both languages from a small_parallel_enja-style folder, as natural text."""
    prepare = {"en": detokenize_english, "ja": unsegment_japanese}
    sides = []
    for lang in (source_lang, target_lang):
        if lang not in prepare:
            raise ValueError(f"Unknown language code {lang!r}; this corpus has {', '.join(prepare)}.")
        path = Path(directory) / f"{split}.{lang}"
        if not path.is_file():
            raise FileNotFoundError(
                f"{path} does not exist; pass the folder that holds the corpus (make data fetches small_parallel_enja)"
            )
        sides.append([prepare[lang](line) for line in text_lines(decoded(path.read_bytes(), str(path)))])
    if len(sides[0]) != len(sides[1]):
        raise ValueError(
            f"{split}.{source_lang} has {len(sides[0])} lines but {split}.{target_lang} has {len(sides[1])}."
        )
    return sides[0], sides[1]


__all__ = ["unsegment_japanese", "detokenize_english", "read_parallel"]
