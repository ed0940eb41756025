"""Translating many sentences with a model, and scoring translations: sacrebleu's BLEU and chrF.

    from hf_tiny_transformer.evaluation import bleu_and_chrf, translate_texts
    hypotheses = translate_texts(model, tokenizer, sources, num_beams=4, batch_size=32, max_new_tokens=64)
    bleu_and_chrf(hypotheses, references, target_lang="ja")    # {"bleu": ..., "chrf": ...}
"""

import sacrebleu
import torch

# sacrebleu's standard tokenization per target language; 13a (the default) for the rest.
BLEU_TOKENIZE = {"ja": "ja-mecab", "zh": "zh", "ko": "ko-mecab"}


def bleu_and_chrf(hypotheses: list[str], references: list[str], target_lang: str) -> dict[str, float]:
    """Corpus BLEU with sacrebleu's standard tokenization for the target language (ja-mecab for Japanese, which
    has no spaces between words; 13a otherwise), and chrF, which works on characters."""
    tokenize = BLEU_TOKENIZE.get(target_lang, "13a")
    bleu = sacrebleu.corpus_bleu(hypotheses, [references], tokenize=tokenize)
    chrf = sacrebleu.corpus_chrf(hypotheses, [references])
    return {"bleu": bleu.score, "chrf": chrf.score}


def translate_texts(
    model, tokenizer, texts: list[str], num_beams: int, batch_size: int, max_new_tokens: int
) -> list[str]:
    """Translate `texts` in batches of `batch_size` with greedy search (num_beams=1) or beam search.

    Sources longer than the model's positional table are cut to it; at most `max_new_tokens` tokens are generated.
    """
    translations = []
    for start in range(0, len(texts), batch_size):
        batch = tokenizer(
            texts[start : start + batch_size],
            return_tensors="pt",
            padding=True,
            truncation=True,
            max_length=model.config.max_position_embeddings,
        )
        with torch.inference_mode():
            # an encoder-decoder's output starts with the one start token: max_length = max_new_tokens + 1, said
            # as max_length so that it replaces the saved generation config's max_length instead of clashing
            output = model.generate(**batch.to(model.device), num_beams=num_beams, max_length=max_new_tokens + 1)
        translations += tokenizer.batch_decode(output, skip_special_tokens=True)
    return translations


__all__ = ["BLEU_TOKENIZE", "bleu_and_chrf", "translate_texts"]
