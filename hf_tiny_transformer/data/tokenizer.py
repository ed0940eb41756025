"""A tokenizer for the model, trained with the `tokenizers` library: one BPE vocabulary for both languages.

Text is normalized before it is split (and the same normalization is saved in tokenizer.json, so text typed by
a person goes through it too, whichever library reads the file): invisible characters are removed and blanks that
are not spaces become spaces (text_tiny_transformer's patterns, the ones the front doors clean with), then Unicode
NFKC (full-width Latin letters, digits and punctuation such as `！？` become `!?`; `。、` stay), runs of white space
become one space, leading and trailing space is removed, and with `lowercase=True` everything is lowercased.
`decode(encode(x))` gives back that normalized text. `with_current_normalizer` gives this normalizer to a tokenizer
trained with an older one (a model saved before the normalizer cleaned text).

Words are split at spaces (Metaspace, `▁` marks a space) and punctuation is split off (`first.` -> `first`, `.`), so
Japanese, written without spaces, is segmented by the byte-pair merges learned from the raw text: no morphological
analyzer is needed. BPE training is deterministic (the same texts give the same vocabulary), which the `tokenizers`
Unigram trainer is not. Decoding turns `▁` back into spaces, which gives Japanese without spaces and English
normally spaced.

Characters never seen in training are not lost: they fall back to their UTF-8 bytes, one token each
(`<0xE7>`...), and decode back to the same character. The alphabet is capped at half the learned pieces, so
the rarest characters of the training texts take this path too. `<unk>` exists but byte fallback leaves nothing
for it.
"""

import copy
import json
from collections import Counter
from collections.abc import Iterable

from tokenizers import Regex, Tokenizer, decoders, models, normalizers, pre_tokenizers, processors, trainers
from transformers import PreTrainedTokenizerFast

from ..text_tiny_transformer import BLANK_PATTERN, INVISIBLE_PATTERN

SPECIAL_TOKENS = ["<pad>", "<s>", "</s>", "<unk>"]  # ids 0, 1, 2, 3: the model config's pad/bos/eos ids and unk
BYTE_TOKENS = [f"<0x{byte:02X}>" for byte in range(256)]
SPACE = "▁"
# The smallest vocabulary: the special tokens and the byte pieces come first, then at least one learned piece.
SMALLEST_VOCAB_SIZE = len(SPECIAL_TOKENS) + len(BYTE_TOKENS) + 1


def normalizer(lowercase: bool) -> normalizers.Normalizer:
    """Invisible characters removed and blanks that are not white space made spaces (as `remove_invisible_characters`
    does), NFKC, white space collapsed and stripped, optionally lowercased."""
    steps = [
        normalizers.Replace(Regex(INVISIBLE_PATTERN), ""),
        normalizers.Replace(Regex(BLANK_PATTERN), " "),
        normalizers.NFKC(),
        normalizers.Replace(Regex(r"\s+"), " "),
        normalizers.Strip(),
    ]
    return normalizers.Sequence(steps + [normalizers.Lowercase()] if lowercase else steps)


def most_frequent_characters(texts: list[str], normalize, limit: int) -> list[str]:
    """The `limit` most frequent characters after normalization, ties broken by the character itself (so that
    the alphabet, and with it the whole vocabulary, does not depend on hash order)."""
    counts = Counter(char for text in texts for char in normalize(text).replace(" ", SPACE))
    return sorted(counts, key=lambda char: (-counts[char], char))[:limit]


def with_byte_fallback(tokenizer: Tokenizer) -> Tokenizer:
    """Append the 256 byte pieces to a trained BPE vocabulary and turn byte fallback on."""
    state = json.loads(tokenizer.to_str())
    vocab = state["model"]["vocab"]
    vocab.update({piece: len(vocab) + i for i, piece in enumerate(BYTE_TOKENS)})
    state["model"]["byte_fallback"] = True
    return Tokenizer.from_str(json.dumps(state))


def train_tokenizer(
    texts: Iterable[str],
    vocab_size: int,
    *,
    lowercase: bool = False,
    model_max_length: int = 512,
    max_piece_length: int = 16,
) -> PreTrainedTokenizerFast:
    """Train a BPE tokenizer on `texts` (source and target sentences together) and wrap it for transformers.

    Args:
        texts: sentences of both languages, as people write them (Japanese without spaces).
        vocab_size: size of the shared vocabulary, special tokens and the 256 byte pieces included.
            A small corpus can yield fewer pieces; `len(tokenizer)` is the real size.
        lowercase: lowercase all text, in training and whenever the tokenizer is used.
        model_max_length: the longest sequence the model takes (its max_position_embeddings).
        max_piece_length: the longest piece, in characters.

    Returns:
        A `PreTrainedTokenizerFast` with `<pad>`=0, `<s>`=1, `</s>`=2, `<unk>`=3, which appends `</s>` to every
        sequence. `tokenizer(source, text_target=target)` also returns `labels`.
    """
    if vocab_size < SMALLEST_VOCAB_SIZE:
        raise ValueError(
            f"vocab_size ({vocab_size}) must be at least {SMALLEST_VOCAB_SIZE}: the {len(SPECIAL_TOKENS)} special "
            "tokens and "
            f"the {len(BYTE_TOKENS)} byte pieces come first, then at least one learned piece."
        )
    tokenizer = Tokenizer(models.BPE(unk_token="<unk>"))
    tokenizer.normalizer = normalizer(lowercase)
    tokenizer.pre_tokenizer = pre_tokenizers.Sequence(
        [pre_tokenizers.Metaspace(replacement=SPACE, prepend_scheme="always"), pre_tokenizers.Punctuation()]
    )
    texts = list(texts)
    learned = vocab_size - len(BYTE_TOKENS)
    alphabet = most_frequent_characters(texts, tokenizer.normalizer.normalize_str, learned // 2)
    trainer = trainers.BpeTrainer(
        vocab_size=learned,
        special_tokens=SPECIAL_TOKENS,
        initial_alphabet=alphabet,
        limit_alphabet=len(alphabet),  # rarer characters are left to the byte pieces
        max_token_length=max_piece_length,
        show_progress=False,
    )
    tokenizer.train_from_iterator(texts, trainer)
    if tokenizer.get_vocab_size() <= len(SPECIAL_TOKENS):
        raise ValueError("The tokenizer learned no pieces: the training texts are empty.")
    tokenizer = with_byte_fallback(tokenizer)
    tokenizer.decoder = decoders.Sequence(
        [decoders.ByteFallback(), decoders.Metaspace(replacement=SPACE, prepend_scheme="always")]
    )
    tokenizer.post_processor = processors.TemplateProcessing(
        single="$A </s>", pair="$A </s> $B </s>", special_tokens=[("</s>", SPECIAL_TOKENS.index("</s>"))]
    )
    return PreTrainedTokenizerFast(
        tokenizer_object=tokenizer,
        pad_token="<pad>",
        bos_token="<s>",
        eos_token="</s>",
        unk_token="<unk>",
        model_max_length=model_max_length,
    )


def lowercases(tokenizer) -> bool:
    """Whether a fast tokenizer's normalizer lowercases text (a model trained with it produces lowercase only)."""
    normalizer = tokenizer.backend_tokenizer.normalizer
    return normalizer is not None and normalizer.normalize_str("A") == "a"


def with_current_normalizer(tokenizer: PreTrainedTokenizerFast) -> PreTrainedTokenizerFast:
    """A copy of `tokenizer` (one `train_tokenizer` made, maybe with an older normalizer) with the current normalizer,
    lowercasing as it did. Nothing else changes, nor do the ids of a text without invisible characters or blanks.
    A saved model's tokenizer, refreshed in place:

        with_current_normalizer(AutoTokenizer.from_pretrained(folder)).save_pretrained(folder)
    """
    refreshed = copy.deepcopy(tokenizer)
    refreshed.backend_tokenizer.normalizer = normalizer(lowercases(tokenizer))
    return refreshed


__all__ = ["train_tokenizer", "lowercases", "with_current_normalizer", "SMALLEST_VOCAB_SIZE"]
