"""Translate a file with a saved model, write the translations, and score them against references.

    python training/evaluate_model.py --model runs/en-ja/hub --source_file test.en --reference_file test.ja \\
        --target_lang ja --output_file runs/en-ja/test.hyp.ja --num_beams 4 --batch_size 32
    python training/evaluate_model.py --model runs/en-ja/hub --corpus_dir ../shared/data/small_parallel_enja \\
        --split test --source_lang en --target_lang ja --num_beams 4

Prints BLEU (sacrebleu, with the target language's standard tokenization: ja-mecab for Japanese, 13a
otherwise), chrF and the exact-match rate; --show N prints N examples; --min_exact_match P exits with 1
when the exact-match rate is below P percent. Every argument and file is checked before the model is loaded:
a problem is one line on stderr and exit code 2. --output_file is written only when complete.
"""

import json
import sys
import time
from pathlib import Path

from hf_tiny_transformer import read_parallel
from hf_tiny_transformer.cli import (
    ArgumentParser,
    UsageError,
    at_least,
    check_generation_length,
    check_output_file,
    engine_arguments,
    load_translator,
    read_lines,
    run,
    trust_remote_code_argument,
    write_text_atomically,
)
from hf_tiny_transformer.evaluation import BLEU_TOKENIZE, bleu_and_chrf
from hf_tiny_transformer.hub import with_evaluation


def parse_args(argv=None):
    parser = ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", required=True, help="saved model folder (e.g. runs/en-ja/hub) or Hub id")
    parser.add_argument("--source_file", help="one source sentence per line")
    parser.add_argument("--reference_file", help="one reference translation per line")
    parser.add_argument("--corpus_dir", help="instead of files: a small_parallel_enja-style folder, as natural text")
    parser.add_argument("--split", default="test", choices=["train", "dev", "test"], help="with --corpus_dir")
    parser.add_argument("--source_lang", default="en")
    parser.add_argument("--target_lang", default="ja")
    parser.add_argument("--output_file", help="where to write the translations, one per line")
    parser.add_argument("--num_beams", type=int, help="beam size; default: the model's generation config")
    parser.add_argument("--length_penalty", type=float, help="beam search's length penalty; default: the generation config")
    parser.add_argument("--batch_size", type=int, default=32)
    parser.add_argument(
        "--max_new_tokens", type=int, help="longest translation in tokens; default: twice the source's, plus 10"
    )
    parser.add_argument(
        "--update_model_card", action="store_true", help="write the scores into the model folder's README.md"
    )
    parser.add_argument("--show", type=int, default=0, help="print this many examples")
    parser.add_argument("--min_exact_match", type=float, help="fail when exact match (percent) is below this")
    engine_arguments(parser)
    trust_remote_code_argument(parser)
    args = parser.parse_args(argv)
    if not args.corpus_dir and not (args.source_file and args.reference_file):
        raise UsageError("pass --source_file and --reference_file, or --corpus_dir")
    for flag, lowest in (("num_beams", 1), ("batch_size", 1), ("max_new_tokens", 1), ("show", 0)):
        at_least(f"--{flag}", getattr(args, flag), lowest)
    if args.min_exact_match is not None and not 0 <= args.min_exact_match <= 100:
        raise UsageError(f"--min_exact_match is a percentage in [0, 100], got {args.min_exact_match}")
    return args


def read_sources_and_references(args) -> tuple[list[str], list[str]]:
    if args.corpus_dir:
        try:
            return read_parallel(args.corpus_dir, args.split, args.source_lang, args.target_lang)
        except (OSError, ValueError) as error:
            raise UsageError(str(error)) from None
    sources = read_lines(args.source_file, "--source_file")
    references = read_lines(args.reference_file, "--reference_file")
    if len(sources) != len(references):
        raise UsageError(
            f"--source_file has {len(sources)} lines but --reference_file has {len(references)}; "
            "pass line-aligned files"
        )
    return sources, references


def record_in_model_card(args, generation_config, scores: dict[str, float]):
    """The folder's model card gets the scores in its Evaluation section, with how they were measured."""
    card_file = Path(args.model) / "README.md"
    if not card_file.is_file():
        raise UsageError(f"--update_model_card: {args.model} has no README.md model card")
    data = f"`{Path(args.corpus_dir).name}` {args.split} split" if args.corpus_dir else f"`{Path(args.source_file).name}`"
    beams = generation_config.num_beams if args.num_beams is None else args.num_beams
    penalty = generation_config.length_penalty if args.length_penalty is None else args.length_penalty
    how = (
        f"{scores['sentences']} sentences of {data}, beam search with {beams} beams and length penalty {penalty}, "
        f"sacrebleu BLEU ({BLEU_TOKENIZE.get(args.target_lang, '13a')} tokenization) and chrF"
    )
    metrics = {"bleu": scores["bleu"], "chrf": scores["chrf"], "exact_match": scores["exact_match"]}
    write_text_atomically(card_file, with_evaluation(card_file.read_text(encoding="utf-8"), metrics, how))


def main(argv=None) -> int:
    args = parse_args(argv)
    sources, references = read_sources_and_references(args)
    if args.output_file:
        check_output_file(args.output_file, "--output_file", (args.source_file, args.reference_file))
    translator = load_translator(args.model, args.engine, args.trust_remote_code, args.device)
    if args.max_new_tokens:
        check_generation_length(translator.max_positions, args.max_new_tokens, "--max_new_tokens")
    start = time.perf_counter()
    hypotheses = translator.translate(
        sources,
        batch_size=args.batch_size,
        num_beams=args.num_beams,
        length_penalty=args.length_penalty,
        max_new_tokens=args.max_new_tokens,
        progress=True,
    )
    seconds = time.perf_counter() - start
    tokenizer, generation_config = translator.tokenizer, translator.generation_config
    if args.output_file:
        write_text_atomically(args.output_file, "\n".join(hypotheses) + "\n")

    normalize = tokenizer.backend_tokenizer.normalizer.normalize_str  # compare as the tokenizer sees text
    exact = sum(normalize(h) == normalize(r) for h, r in zip(hypotheses, references)) / len(references) * 100
    scores = {
        **bleu_and_chrf(hypotheses, references, args.target_lang),
        "exact_match": exact,
        "sentences": len(sources),
        "sentences_per_s": len(sources) / seconds,
    }
    for source, hypothesis, reference in list(zip(sources, hypotheses, references))[: args.show]:
        mark = "=" if normalize(hypothesis) == normalize(reference) else "x"
        print(f"{mark} {source}\n    -> {hypothesis}\n       {reference}")
    print(json.dumps({key: round(value, 2) for key, value in scores.items()}))
    if args.update_model_card:
        record_in_model_card(args, generation_config, scores)
    if args.min_exact_match is not None and exact < args.min_exact_match:
        print(f"evaluate_model.py: exact match {exact:.1f}% is below {args.min_exact_match}%", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(run(main))
