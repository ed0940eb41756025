"""Translate a file with a saved model, write the translations, and score them against references.

    python training/evaluate_model.py --model runs/en-ja/hub --source_file test.en --reference_file test.ja \\
        --target_lang ja --output_file runs/en-ja/test.hyp.ja --num_beams 4 --batch_size 32
    python training/evaluate_model.py --model runs/en-ja/hub --corpus_dir ../shared/data/small_parallel_enja \\
        --split test --source_lang en --target_lang ja --num_beams 4

Prints BLEU (sacrebleu, with the target language's standard tokenization: ja-mecab for Japanese, 13a
otherwise), chrF and the exact-match rate; --show N prints N examples; --min_exact_match P exits with 1
when the exact-match rate is below P percent.
"""

import argparse
import json
import sys
from pathlib import Path

import torch
from transformers import AutoModelForSeq2SeqLM, AutoTokenizer

from hf_tiny_transformer import read_parallel

sys.path.insert(0, str(Path(__file__).parent))
from train import bleu_and_chrf  # noqa: E402  (the same metric as during training)


def parse_args(argv=None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", required=True, help="saved model folder (e.g. runs/en-ja/hub) or Hub id")
    parser.add_argument("--source_file", help="one source sentence per line")
    parser.add_argument("--reference_file", help="one reference translation per line")
    parser.add_argument("--corpus_dir", help="instead of files: a small_parallel_enja-style folder, as natural text")
    parser.add_argument("--split", default="test", help="with --corpus_dir: train, dev or test")
    parser.add_argument("--source_lang", default="en")
    parser.add_argument("--target_lang", default="ja")
    parser.add_argument("--output_file", help="where to write the translations, one per line")
    parser.add_argument("--num_beams", type=int, default=4)
    parser.add_argument("--batch_size", type=int, default=32)
    parser.add_argument("--max_new_tokens", type=int, default=128)
    parser.add_argument("--show", type=int, default=0, help="print this many examples")
    parser.add_argument("--min_exact_match", type=float, help="fail when exact match (percent) is below this")
    args = parser.parse_args(argv)
    if not args.corpus_dir and not (args.source_file and args.reference_file):
        parser.error("pass --source_file and --reference_file, or --corpus_dir")
    return args


def translate(model, tokenizer, sources: list[str], num_beams: int, batch_size: int, max_new_tokens: int) -> list[str]:
    translations = []
    for start in range(0, len(sources), batch_size):
        batch = tokenizer(sources[start : start + batch_size], return_tensors="pt", padding=True, truncation=True)
        with torch.inference_mode():
            # an encoder-decoder's output starts with the one start token: max_length = max_new_tokens + 1, said
            # as max_length so that it replaces the saved generation config's max_length instead of clashing
            output = model.generate(**batch.to(model.device), num_beams=num_beams, max_length=max_new_tokens + 1)
        translations += tokenizer.batch_decode(output, skip_special_tokens=True)
    return translations


def main(argv=None) -> int:
    args = parse_args(argv)
    if args.corpus_dir:
        sources, references = read_parallel(args.corpus_dir, args.split, args.source_lang, args.target_lang)
    else:
        sources = Path(args.source_file).read_text(encoding="utf-8").splitlines()
        references = Path(args.reference_file).read_text(encoding="utf-8").splitlines()
    if len(sources) != len(references):
        sys.exit(f"evaluate_model.py: {len(sources)} sources but {len(references)} references")
    tokenizer = AutoTokenizer.from_pretrained(args.model, trust_remote_code=True)
    model = AutoModelForSeq2SeqLM.from_pretrained(args.model, trust_remote_code=True).eval()
    hypotheses = translate(model, tokenizer, sources, args.num_beams, args.batch_size, args.max_new_tokens)
    if args.output_file:
        Path(args.output_file).write_text("\n".join(hypotheses) + "\n", encoding="utf-8")

    normalize = tokenizer.backend_tokenizer.normalizer.normalize_str  # compare as the tokenizer sees text
    exact = sum(normalize(h) == normalize(r) for h, r in zip(hypotheses, references)) / len(references) * 100
    scores = {**bleu_and_chrf(hypotheses, references, args.target_lang), "exact_match": exact, "sentences": len(sources)}
    for source, hypothesis, reference in list(zip(sources, hypotheses, references))[: args.show]:
        mark = "=" if normalize(hypothesis) == normalize(reference) else "x"
        print(f"{mark} {source}\n    -> {hypothesis}\n       {reference}")
    print(json.dumps({key: round(value, 2) for key, value in scores.items()}))
    if args.min_exact_match is not None and exact < args.min_exact_match:
        print(f"evaluate_model.py: exact match {exact:.1f}% is below {args.min_exact_match}%", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
