"""The quality cost of a training mode by a measure with less noise than BLEU: pairs of saved models (a baseline and a
system, e.g. float32 and bf16 runs of one seed at equal steps), each model's cross-entropy on the references of a
test set given their sources, each pair's difference, then the mean difference over the pairs and its standard error.

    python benchmarks/paired_loss.py --corpus_dir ../shared/data/small_parallel_enja --split test \\
        --source_lang ja --target_lang en \\
        --pair runs/eq-ja-en-fp32/hub runs/eq-ja-en-bf16/hub \\
        --pair runs/eq1-ja-en-fp32/hub runs/eq1-ja-en-bf16/hub

The cross-entropy is the model's plain loss under teacher forcing (no label smoothing), in nats a reference token,
end-of-sentence included: the sources and references read by each model's own tokenizer (lowercasing where it
does, truncated to its maximum length), --batch_size sentences at a time, in float32 on the CPU. BLEU scores one
decoded translation a sentence, so two runs of nearly the same quality can differ by a point; the cross-entropy
weighs every reference token's probability, so a small real difference shows in fewer seeds (lower is better:
a negative system - baseline means the system predicts the references better). Prints a table and one JSON line;
writes runs/speed/paired_loss.json (--output).
"""

import json
import sys
from pathlib import Path

import torch

from hf_tiny_transformer.commands.shared import (
    check_report,
    pair_arguments,
    paired_summary,
    run,
    sources_and_references,
)
from hf_tiny_transformer.errors import ArgumentParser, about, at_least
from hf_tiny_transformer.loading import load_model_folder
from hf_tiny_transformer.saving import write_atomically

ROOT = Path(__file__).resolve().parents[1]


def parse_args(argv=None):
    parser = ArgumentParser(description=__doc__.split("\n\n")[0])
    pair_arguments(
        parser,
        "its --split holds the sources and references",
        "two saved model folders (e.g. runs/x/hub); repeat for more pairs (seeds)",
    )
    parser.add_argument("--batch_size", type=int, default=100)
    parser.add_argument("--output", type=Path, default=ROOT / "runs" / "speed" / "paired_loss.json")
    args = parser.parse_args(argv)
    at_least("--batch_size", args.batch_size, 1)
    check_report(args.output)
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


def main(argv=None) -> None:
    args = parse_args(argv)
    sources, references = sources_and_references(args, args.split)
    with about("--pair"):  # every folder checked before the first is scored
        models = {folder: load_model_folder(folder) for folder in sorted({f for pair in args.pair for f in pair})}
    losses = {folder: cross_entropy(*model, sources, references, args.batch_size) for folder, model in models.items()}
    results = [
        {
            "models": [base, other],
            "baseline": losses[base],
            "system": losses[other],
            "difference": losses[other] - losses[base],
        }
        for base, other in args.pair
    ]
    print("| baseline | system | nats a token, baseline | system | system - baseline |\n|---|---|---:|---:|---:|")
    for result in results:
        baseline, system = result["models"]
        print(
            f"| {baseline} | {system} | {result['baseline']:.4f} | {result['system']:.4f} "
            f"| {result['difference']:+.4f} |"
        )
    summary, mean = paired_summary([result["difference"] for result in results], "nats a token", 4)
    print(mean)
    report = {"split": args.split, "target_lang": args.target_lang, "results": results, **summary}
    write_atomically(args.output, json.dumps(report, indent=2) + "\n")
    print(json.dumps(summary))


if __name__ == "__main__":
    sys.exit(run(main))
