"""Scoring translations with sacrebleu: BLEU with its 95 % bootstrap confidence interval, chrF, exact match.

from hf_tiny_transformer.evaluation import scores
scores(hypotheses, references, target_lang="ja", lowercase=True)
# {"bleu": 31.6, "bleu_ci": 1.9, "chrf": 34.2, "exact_match": 12.4, "sentences": 500}
"""

from collections.abc import Callable

from sacrebleu.metrics import BLEU, CHRF

# sacrebleu's standard tokenization per target language; 13a (the default) for the rest.
BLEU_TOKENIZE = {"ja": "ja-mecab", "zh": "zh", "ko": "ko-mecab"}
BOOTSTRAP_SAMPLES = 1000


def scores(
    hypotheses: list[str],
    references: list[str],
    target_lang: str,
    *,
    lowercase: bool = False,
    normalize: Callable[[str], str] = str,
) -> dict:
    """Corpus BLEU with the target language's standard tokenization (ja-mecab for Japanese, which has no spaces
    between words; 13a otherwise) and the half-width of its 95 % bootstrap confidence interval (sacrebleu's paired
    resampling, 1,000 samples, fixed seed), chrF (on characters), and the percentage of exact matches.

    Args:
        lowercase: compare lowercased text (sacrebleu's lowercase option): for references that are lowercase, as
            small_parallel_enja's are, while the translations people see are cased.
        normalize: applied to both sides before the exact-match comparison (the tokenizer's normalizer: compare
            as the model sees text).
    """
    if len(hypotheses) != len(references):
        raise ValueError(f"{len(hypotheses)} translations for {len(references)} references; pass one per reference")
    score = bleu_metric(target_lang, lowercase).corpus_score(
        hypotheses, [references], n_bootstrap=BOOTSTRAP_SAMPLES if len(references) > 1 else 1
    )
    chrf = CHRF(lowercase=lowercase).corpus_score(hypotheses, [references])
    fold = (lambda text: normalize(text).lower()) if lowercase else normalize
    same = sum(fold(hypothesis) == fold(reference) for hypothesis, reference in zip(hypotheses, references))
    return {
        "bleu": score.score,
        "bleu_ci": max(score._ci, 0.0),  # sacrebleu keeps it as _ci; -1 when not estimated (one sentence)
        "chrf": chrf.score,
        "exact_match": 100 * same / max(len(references), 1),
        "sentences": len(references),
    }


def bleu_metric(target_lang: str, lowercase: bool = False) -> BLEU:
    """sacrebleu's BLEU as this package scores `target_lang`: its standard tokenization, lowercased or not."""
    return BLEU(tokenize=bleu_tokenization(target_lang), lowercase=lowercase)


def bleu_tokenization(target_lang: str) -> str:
    """sacrebleu's tokenization for BLEU in `target_lang`."""
    return BLEU_TOKENIZE.get(target_lang, "13a")


__all__ = ["scores", "bleu_metric", "bleu_tokenization", "BLEU_TOKENIZE"]
