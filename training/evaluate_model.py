"""Translate a file with a saved model, write the translations, and score them against references.

    python training/evaluate_model.py --model runs/en-ja/hub --source_file test.en --reference_file test.ja \\
        --target_lang ja --output_file runs/en-ja/test.hyp.ja --num_beams 4 --batch_size 32
    python training/evaluate_model.py --model runs/en-ja/hub --corpus_dir ../shared/data/small_parallel_enja \\
        --split test --source_lang en --target_lang ja

Prints BLEU (sacrebleu, with the target language's standard tokenization: ja-mecab for Japanese, 13a otherwise)
with its 95 % bootstrap confidence interval, chrF and the exact-match rate, comparing lowercased text when the
model's tokenizer lowercases (its references may be lowercase while the translations people see are cased);
--show N prints N examples; --min_exact_match P exits with 1 when the exact-match rate is below P percent;
--update_model_card writes the scores into the model card's metrics block. Every argument and file is checked
before the model is loaded: a problem is one line on stderr and exit code 2. --output_file is written whole or not
at all.
"""

import json
import sys
import time
from pathlib import Path

from hf_tiny_transformer.commands.flags import (
    decoding_arguments,
    decoding_limits,
    decoding_settings,
    engine_arguments,
    load_translator_from,
    scoring_arguments,
    sources_and_references,
)
from hf_tiny_transformer.data.tokenizer import lowercases
from hf_tiny_transformer.errors import ArgumentParser, UsageError
from hf_tiny_transformer.evaluation import bleu_tokenization, scores
from hf_tiny_transformer.guards.outputs import check_output, inputs_of
from hf_tiny_transformer.guards.runner import run
from hf_tiny_transformer.guards.writing import write_atomically
from hf_tiny_transformer.hub import with_evaluation


def parse_args(argv=None):
    parser = ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", required=True, help="saved model folder (e.g. runs/en-ja/hub) or Hub id")
    scoring_arguments(parser, "its --split is translated")
    parser.add_argument(
        "--split", default="test", help="with --corpus_dir: train, dev, test, or another split it holds (e.g. unseen)"
    )
    parser.add_argument("--output_file", help="where to write the translations, one per line")
    decoding_arguments(parser, "sentences translated together")
    parser.add_argument(
        "--update_model_card", action="store_true", help="write the scores into the model folder's README.md"
    )
    parser.add_argument("--show", type=int, default=0, help="print this many examples")
    parser.add_argument("--min_exact_match", type=float, help="fail when exact match (percent) is below this")
    engine_arguments(parser)
    args = parser.parse_args(argv)
    args.settings = decoding_settings(args)
    if args.show < 0:
        raise UsageError(f"--show is a number of examples, 0 or more; got {args.show}")
    if args.min_exact_match is not None and not 0 <= args.min_exact_match <= 100:
        raise UsageError(f"--min_exact_match is a percentage in [0, 100], got {args.min_exact_match}")
    if args.output_file:
        check_output(args.output_file, flag="--output_file", kind="file", inputs=inputs_of(args, but=["output_file"]))
    if args.update_model_card and not Path(args.model, "README.md").is_file():
        raise UsageError(f"--update_model_card: {args.model} has no README.md model card")
    if args.update_model_card:
        check_output(Path(args.model, "README.md"), flag="--update_model_card", kind="file")
    return args


def record_in_model_card(args, translator, result: dict):
    """The model card's metrics block gets the scores, with how they were measured; the rest of the card stays."""
    card_file = Path(args.model) / "README.md"
    data = (
        f"`{Path(args.corpus_dir).name}` {args.split} split" if args.corpus_dir else f"`{Path(args.source_file).name}`"
    )
    beams, penalty = translator.decoding(args.num_beams, args.length_penalty)
    how = (
        f"{result['sentences']} sentences of {data}, beam search with {beams} beams and length penalty {penalty}, "
        f"sacrebleu BLEU ({bleu_tokenization(args.target_lang)} tokenization"
        f"{', lowercased' if result['lowercase'] else ''}) "
        f"with its 95 % bootstrap confidence interval, and chrF"
    )
    metrics = {key: result[key] for key in ("bleu", "bleu_ci", "chrf", "exact_match")}
    write_atomically(card_file, with_evaluation(card_file.read_text(encoding="utf-8"), metrics, how))


def main(argv=None) -> int:
    args = parse_args(argv)
    sources, references = sources_and_references(args, args.split)
    translator = load_translator_from(args)
    start = time.perf_counter()
    with decoding_limits():
        hypotheses = translator.translate(sources, **args.settings, progress=True)
    seconds = time.perf_counter() - start
    if args.output_file:
        write_atomically(args.output_file, "\n".join(hypotheses) + "\n")

    tokenizer = translator.tokenizer
    lowercase = lowercases(tokenizer)
    normalize = tokenizer.backend_tokenizer.normalizer.normalize_str  # compare as the tokenizer sees text
    fold = (lambda text: normalize(text).lower()) if lowercase else normalize
    result = {
        **scores(hypotheses, references, args.target_lang, lowercase=lowercase, normalize=normalize),
        "lowercase": lowercase,
        "sentences_per_s": len(sources) / seconds,
        "engine": args.engine,
    }
    if args.engine != "transformers":  # the exports' engines: the weights' type they computed in
        result["compute_type"] = translator.compute_type
    for source, hypothesis, reference in list(zip(sources, hypotheses, references))[: args.show]:
        mark = "=" if fold(hypothesis) == fold(reference) else "x"
        print(f"{mark} {source}\n    -> {hypothesis}\n       {reference}")
    print(json.dumps({key: round(value, 2) if isinstance(value, float) else value for key, value in result.items()}))
    if args.update_model_card:
        record_in_model_card(args, translator, result)
    if args.min_exact_match is not None and result["exact_match"] < args.min_exact_match:
        print(
            f"evaluate_model.py: exact match {result['exact_match']:.1f}% is below {args.min_exact_match}%",
            file=sys.stderr,
        )
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(run(main))
