"""The quality cost of a training mode: pairs of translations of the same test set (a baseline and a system, e.g.
float32 and bf16 runs of one seed at equal steps) scored against the same references, each pair's BLEU difference
with sacreBLEU's paired bootstrap p-value, then the mean difference over the pairs and its standard error.

    python benchmarks/paired_bleu.py --corpus_dir ../shared/data/small_parallel_enja --split test \\
        --source_lang ja --target_lang en --lowercase \\
        --pair runs/eq-ja-en-fp32/test.hyp runs/eq-ja-en-bf16/test.hyp \\
        --pair runs/eq1-ja-en-fp32/test.hyp runs/eq1-ja-en-bf16/test.hyp

Each --pair is BASELINE SYSTEM: translation files of one line per reference, as `training/evaluate_model.py
--output_file` writes them. BLEU is scored as evaluate_model.py scores it (the target language's tokenization;
--lowercase for models whose tokenizer lowercases, as the recipes' do). The paired bootstrap
(`sacrebleu.significance.PairedTest`, 1,000 resamples of the sentences, sacreBLEU's fixed seed) gives the p-value of
each pair's difference: the chance of a difference this large with no real one. Seeds differ by more than the
sentences' resampling shows, so several pairs (seeds) and their mean say more than one pair's p-value. Prints a table
and one JSON line; writes runs/speed/paired_bleu.json (--output).
"""

import json
import sys
from pathlib import Path

from sacrebleu.significance import PairedTest

from hf_tiny_transformer.commands.shared import (
    check_report,
    pair_arguments,
    paired_summary,
    run,
    sources_and_references,
)
from hf_tiny_transformer.data.files import read_lines
from hf_tiny_transformer.errors import ArgumentParser, UsageError
from hf_tiny_transformer.evaluation import BOOTSTRAP_SAMPLES, bleu_metric
from hf_tiny_transformer.saving import write_atomically

ROOT = Path(__file__).resolve().parents[1]


def parse_args(argv=None):
    parser = ArgumentParser(description=__doc__.split("\n\n")[0])
    pair_arguments(
        parser,
        "its --split holds the references",
        "two translation files of the references' sentences; repeat for more pairs (seeds)",
    )
    parser.add_argument("--lowercase", action="store_true", help="compare lowercased text (lowercasing tokenizers)")
    parser.add_argument("--output", type=Path, default=ROOT / "runs" / "speed" / "paired_bleu.json")
    args = parser.parse_args(argv)
    check_report(args.output)
    return args


def read_translations(path: str, count: int) -> list[str]:
    """A translation file's lines, one per reference."""
    lines = read_lines(path, "--pair file")
    if len(lines) != count:
        raise UsageError(f"--pair file {path} has {len(lines)} lines for {count} references; pass one per reference")
    return lines


def compare(baseline: list[str], system: list[str], references: list[str], bleu) -> dict:
    """BLEU of both, the difference and its paired-bootstrap p-value."""
    test = PairedTest(
        [("baseline", baseline), ("system", system)],
        {"BLEU": bleu},
        references=[references],
        test_type="bs",
        n_samples=BOOTSTRAP_SAMPLES,
    )
    base, other = test()[1]["BLEU"]
    return {"baseline": base.score, "system": other.score, "difference": other.score - base.score, "p": other.p_value}


def main(argv=None) -> None:
    args = parse_args(argv)
    references = sources_and_references(args, args.split)[1]
    pairs = [[read_translations(path, len(references)) for path in pair] for pair in args.pair]
    bleu = bleu_metric(args.target_lang, args.lowercase)
    results = [{"files": paths, **compare(*pair, references, bleu)} for paths, pair in zip(args.pair, pairs)]
    print("| baseline | system | BLEU baseline | BLEU system | system - baseline | p |\n|---|---|---:|---:|---:|---:|")
    for result in results:
        baseline_file, system_file = result["files"]
        print(
            f"| {baseline_file} | {system_file} | {result['baseline']:.2f} | {result['system']:.2f} "
            f"| {result['difference']:+.2f} | {result['p']:.3f} |"
        )
    summary, mean = paired_summary([result["difference"] for result in results], "BLEU", 2)
    print(mean)
    report = {"target_lang": args.target_lang, "lowercase": args.lowercase, "results": results, **summary}
    write_atomically(args.output, json.dumps(report, indent=2) + "\n")
    print(json.dumps(summary))


if __name__ == "__main__":
    sys.exit(run(main))
