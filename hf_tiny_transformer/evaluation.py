"""Translating many sentences with a model, and scoring translations: sacrebleu's BLEU and chrF.

    from hf_tiny_transformer.evaluation import bleu_and_chrf, translate_texts
    hypotheses = translate_texts(model, tokenizer, sources, num_beams=4, batch_size=32)
    bleu_and_chrf(hypotheses, references, target_lang="ja")    # {"bleu": ..., "chrf": ...}
"""

import math

import sacrebleu
import torch
from tqdm.auto import tqdm

# sacrebleu's standard tokenization per target language; 13a (the default) for the rest.
BLEU_TOKENIZE = {"ja": "ja-mecab", "zh": "zh", "ko": "ko-mecab"}


def bleu_and_chrf(hypotheses: list[str], references: list[str], target_lang: str) -> dict[str, float]:
    """Corpus BLEU with sacrebleu's standard tokenization for the target language (ja-mecab for Japanese, which
    has no spaces between words; 13a otherwise), and chrF, which works on characters."""
    tokenize = BLEU_TOKENIZE.get(target_lang, "13a")
    bleu = sacrebleu.corpus_bleu(hypotheses, [references], tokenize=tokenize)
    chrf = sacrebleu.corpus_chrf(hypotheses, [references])
    return {"bleu": bleu.score, "chrf": chrf.score}


# The longest translation generated for a source of n tokens: LENGTH_RATIO n + LENGTH_OFFSET (fairseq's max_len_a and
# max_len_b), capped by the positional table.
LENGTH_RATIO, LENGTH_OFFSET = 2.0, 10


def translation_length_limit(source_length: int, max_positions: int) -> int:
    """How many new tokens a source of `source_length` tokens may get: LENGTH_RATIO x + LENGTH_OFFSET, at most
    what the model's positional table (`max_positions` rows) holds."""
    return min(max_positions, math.ceil(LENGTH_RATIO * source_length + LENGTH_OFFSET))


def translate_texts(
    model,
    tokenizer,
    texts: list[str],
    *,
    batch_size: int = 32,
    num_beams: int | None = None,
    length_penalty: float | None = None,
    max_new_tokens: int | None = None,
    progress: bool = False,
) -> list[str]:
    """Translate `texts`, in the given order, in batches of `batch_size` sentences of similar length.

    Decoding settings not given come from the model's generation config (`tune_decoding.py` chooses them on
    dev data). Each batch may generate `translation_length_limit` of its longest source, or `max_new_tokens`
    when that is lower; sources longer than the positional table are cut to it. `progress`: a bar over the
    sentences on a terminal (none when stderr is a file).
    """
    encoded = tokenizer(texts, truncation=True, max_length=model.config.max_position_embeddings)["input_ids"]
    settings = {name: value for name, value in (("num_beams", num_beams), ("length_penalty", length_penalty)) if value is not None}

    def translate_batch(indices: list[int]) -> list[str]:
        batch = tokenizer.pad({"input_ids": [encoded[i] for i in indices]}, return_tensors="pt").to(model.device)
        limit = generation_limit(batch["input_ids"].shape[1], model.config.max_position_embeddings, max_new_tokens)
        with torch.inference_mode():
            # an encoder-decoder's output starts with the one start token: max_length = limit + 1, said as
            # max_length so that it replaces the saved generation config's max_length instead of clashing
            output = model.generate(**batch, max_length=limit + 1, **settings)
        return tokenizer.batch_decode(output, skip_special_tokens=True)

    return in_length_batches([len(ids) for ids in encoded], batch_size, translate_batch, progress)


def generation_limit(longest_source: int, max_positions: int, max_new_tokens: int | None) -> int:
    """New tokens a batch whose longest source has `longest_source` tokens may get: translation_length_limit, or
    `max_new_tokens` when that is lower."""
    limit = translation_length_limit(longest_source, max_positions)
    return min(limit, max_new_tokens) if max_new_tokens else limit


def in_length_batches(lengths: list[int], batch_size: int, translate_batch, progress: bool) -> list[str]:
    """Translations of inputs of the given lengths, in the inputs' order, made in batches of `batch_size` inputs of
    similar length (the least padding): `translate_batch(indices)` returns the translations of those inputs."""
    order = sorted(range(len(lengths)), key=lengths.__getitem__)
    translations = [""] * len(lengths)
    with progress_bar(len(lengths), progress) as bar:
        for start in range(0, len(order), batch_size):
            indices = order[start : start + batch_size]
            for index, text in zip(indices, translate_batch(indices)):
                translations[index] = text
            bar.update(len(indices))
    return translations


def progress_bar(total: int, shown: bool) -> tqdm:
    """A bar over `total` sentences on stderr when `shown` and stderr is a terminal (tqdm's disable=None)."""
    return tqdm(total=total, unit=" sentences", desc="translating", disable=None if shown else True, leave=False)


class TransformersTranslator:
    """A transformers model and its tokenizer, translating lists of texts (the CTranslate2Translator's shape)."""

    def __init__(self, model, tokenizer):
        self.model, self.tokenizer = model.eval(), tokenizer
        self.generation_config = model.generation_config
        self.max_positions = model.config.max_position_embeddings

    def translate(self, texts: list[str], **settings) -> list[str]:
        """`translate_texts` with this model; settings: batch_size, num_beams, length_penalty, max_new_tokens, progress."""
        return translate_texts(self.model, self.tokenizer, texts, **settings)


__all__ = [
    "BLEU_TOKENIZE",
    "bleu_and_chrf",
    "translate_texts",
    "translation_length_limit",
    "generation_limit",
    "in_length_batches",
    "TransformersTranslator",
]
