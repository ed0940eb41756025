"""Compare pairs of saved models on one test set: each pair's BLEU difference with its paired-bootstrap p-value, and
its difference in cross-entropy, a measure with less noise; then the mean difference over the pairs (seeds).

    python training/compare_models.py --corpus_dir data/small_parallel_enja --source_lang ja --target_lang en \\
        --pair runs/fp32-s0/hub runs/bf16-s0/hub --pair runs/fp32-s1/hub runs/bf16-s1/hub

Each --pair is BASELINE SYSTEM, two saved model folders. Each model translates the split (--num_beams, or its
generation config's) and is scored as evaluate_model.py scores it (BLEU with the target language's tokenization,
lowercased for models whose tokenizer lowercases). The paired bootstrap (sacreBLEU's PairedTest, 1,000 resamples of
the sentences) gives the chance of a BLEU difference this large with no real one. The cross-entropy is each model's
plain loss on the references given their sources (teacher forcing, no label smoothing, nats a reference token,
float32): it weighs every reference token's probability, so a small real difference shows in fewer seeds; lower is
better. Seeds differ by more than one test set's resampling shows: several pairs and their mean say more than one
p-value. Prints a table and the means; --output_file writes them as JSON.
"""

import json
import statistics
import sys

import torch
from sacrebleu.significance import PairedTest

from hf_tiny_transformer.commands.flags import (
    decoding_arguments,
    decoding_limits,
    decoding_settings,
    scoring_arguments,
    sources_and_references,
)
from hf_tiny_transformer.data.tokenizer import lowercases
from hf_tiny_transformer.errors import ArgumentParser, about
from hf_tiny_transformer.evaluation import BOOTSTRAP_SAMPLES, bleu_metric
from hf_tiny_transformer.guards.loading import load_model_folder
from hf_tiny_transformer.guards.outputs import check_output, inputs_of
from hf_tiny_transformer.guards.runner import run
from hf_tiny_transformer.guards.writing import write_atomically
from hf_tiny_transformer.serving.translator import TransformersTranslator


def parse_args(argv=None):
    parser = ArgumentParser(description=__doc__.split("\n\n")[0])
    scoring_arguments(parser, "its --split holds the sources and references")
    parser.add_argument(
        "--split", default="test", help="with --corpus_dir: train, dev, test, or another split it holds (e.g. unseen)"
    )
    parser.add_argument(
        "--pair", nargs=2, action="append", required=True, metavar=("BASELINE", "SYSTEM"),
        help="two saved model folders (e.g. runs/x/hub); repeat for more pairs (seeds)",
    )  # fmt: skip
    decoding_arguments(parser, "sentences translated together")
    parser.add_argument("--output_file", help="where to write the results as JSON")
    args = parser.parse_args(argv)
    args.settings = decoding_settings(args)
    if args.output_file:
        check_output(args.output_file, flag="--output_file", kind="file", inputs=inputs_of(args, but=["output_file"]))
    return args


def cross_entropy(model, tokenizer, sources: list[str], references: list[str], batch_size: int) -> float:
    """Nats a reference token: the references' summed cross-entropy given their sources, over their tokens."""
    model.float().eval()
    total, tokens = 0.0, 0
    with torch.inference_mode():
        for start in range(0, len(sources), batch_size):
            batch = tokenizer(
                sources[start : start + batch_size],
                text_target=references[start : start + batch_size],
                padding=True,
                truncation=True,
                return_tensors="pt",
            )
            labels = batch.pop("labels")  # (B, T), padded with the padding token
            labels = labels.masked_fill(labels == tokenizer.pad_token_id, -100)
            logits = model(**batch, labels=labels).logits  # (B, T, V)
            total += torch.nn.functional.cross_entropy(logits.flatten(0, 1), labels.flatten(), reduction="sum").item()
            tokens += int((labels != -100).sum())
    return total / tokens


def score_model(folder: str, sources: list[str], references: list[str], settings: dict) -> dict:
    """A model's translations of the sources, whether its tokenizer lowercases, and its cross-entropy."""
    with about("--pair"):
        model, tokenizer = load_model_folder(folder)
    with decoding_limits():
        translations = TransformersTranslator(model, tokenizer).translate(sources, **settings)
    nats = cross_entropy(model, tokenizer, sources, references, settings["batch_size"])
    return {"translations": translations, "lowercase": lowercases(tokenizer), "nats": nats}


def paired_bleu(baseline: dict, system: dict, references: list[str], target_lang: str) -> dict:
    """Both models' BLEU, the difference and its paired-bootstrap p-value."""
    test = PairedTest(
        [("baseline", baseline["translations"]), ("system", system["translations"])],
        {"BLEU": bleu_metric(target_lang, baseline["lowercase"] or system["lowercase"])},
        references=[references],
        test_type="bs",
        n_samples=BOOTSTRAP_SAMPLES,
    )
    base, other = test()[1]["BLEU"]
    return {"bleu": [base.score, other.score], "bleu_difference": other.score - base.score, "p": other.p_value}


def mean_difference(differences: list[float]) -> dict:
    """The mean of the pairs' differences and, from two pairs, its standard error."""
    summary = {"mean": statistics.fmean(differences)}
    if len(differences) > 1:
        summary["standard_error"] = statistics.stdev(differences) / len(differences) ** 0.5
    return summary


def said(summary: dict, decimals: int) -> str:
    spread = f" ± {summary['standard_error']:.{decimals}f}" if "standard_error" in summary else ""
    return f"{summary['mean']:+.{decimals}f}{spread}"


def main(argv=None) -> int:
    args = parse_args(argv)
    sources, references = sources_and_references(args, args.split)
    folders = sorted({folder for pair in args.pair for folder in pair})
    scored = {folder: score_model(folder, sources, references, args.settings) for folder in folders}
    results = []
    print("| baseline | system | BLEU | system - baseline | p | nats a token | system - baseline |")
    print("|---|---|---|---:|---:|---|---:|")
    for base, other in args.pair:
        result = {"pair": [base, other], **paired_bleu(scored[base], scored[other], references, args.target_lang)}
        result["nats"] = [scored[base]["nats"], scored[other]["nats"]]
        result["nats_difference"] = result["nats"][1] - result["nats"][0]
        results.append(result)
        bleu, nats = "{:.2f} / {:.2f}".format(*result["bleu"]), "{:.4f} / {:.4f}".format(*result["nats"])
        print(
            f"| {base} | {other} | {bleu} | {result['bleu_difference']:+.2f} | {result['p']:.3f} | {nats} "
            f"| {result['nats_difference']:+.4f} |"
        )
    bleu = mean_difference([result["bleu_difference"] for result in results])
    nats = mean_difference([result["nats_difference"] for result in results])
    print(f"mean over {len(results)} pair(s), system - baseline: {said(bleu, 2)} BLEU, {said(nats, 4)} nats a token")
    if args.output_file:
        report = {"split": args.split, "target_lang": args.target_lang, "pairs": results, "bleu": bleu, "nats": nats}
        write_atomically(args.output_file, json.dumps(report, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(run(main))
