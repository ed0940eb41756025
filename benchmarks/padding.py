"""How much of a training batch is padding: batches of 64 pairs (random, or Trainer's group_by_length, the earlier
recipes) against batches by tokens (TokenBatchSampler, the recipes now), on small_parallel_enja.

    python benchmarks/padding.py --tokenizer runs/en-ja/tokenizer [--batch_tokens 4096]

Counts source + target positions of one epoch's batches (each batch padded to its longest source and target), and
the distinct batch shapes (pairs, longest source, longest target) an epoch brings: bfloat16 kernels are compiled for
each new one.
"""

import argparse
import statistics
import sys

import torch
from transformers import AutoTokenizer
from transformers.trainer_pt_utils import LengthGroupedSampler

from hf_tiny_transformer.commands.shared import check_saved_tokenizer, corpus_split, run
from hf_tiny_transformer.data.batching import TokenBatchSampler, batch_shapes, padding_fraction
from hf_tiny_transformer.errors import ArgumentParser, UsageError, at_least, first_line


def parse_args(argv=None) -> argparse.Namespace:
    parser = ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tokenizer", required=True, help="a saved tokenizer, e.g. runs/en-ja/tokenizer")
    parser.add_argument("--corpus_dir", default="../shared/data/small_parallel_enja")
    parser.add_argument("--source_lang", default="en", choices=["en", "ja"])
    parser.add_argument("--target_lang", default="ja", choices=["en", "ja"])
    parser.add_argument("--batch_size", type=int, default=64, help="pairs a batch, for the batches by count")
    parser.add_argument("--batch_tokens", type=int, nargs="+", default=[2048, 4096, 8192])
    args = parser.parse_args(argv)
    at_least("--batch_size", args.batch_size, 1)
    for budget in args.batch_tokens:
        at_least("--batch_tokens", budget, 1)
    check_saved_tokenizer(args.tokenizer)
    return args


def main(argv=None) -> None:
    args = parse_args(argv)
    sources, targets = corpus_split(args.corpus_dir, "train", args.source_lang, args.target_lang)
    tokenizer = AutoTokenizer.from_pretrained(args.tokenizer)
    source_lengths = [len(ids) for ids in tokenizer(sources)["input_ids"]]
    target_lengths = [len(ids) for ids in tokenizer(text_target=targets)["input_ids"]]
    count = len(sources)

    rows = {}
    random_order = torch.randperm(count, generator=torch.Generator().manual_seed(0)).tolist()
    rows[f"random, {args.batch_size} pairs"] = [
        random_order[i : i + args.batch_size] for i in range(0, count, args.batch_size)
    ]
    grouped = list(
        LengthGroupedSampler(args.batch_size, lengths=source_lengths, generator=torch.Generator().manual_seed(0))
    )
    rows[f"group_by_length, {args.batch_size} pairs"] = [
        grouped[i : i + args.batch_size] for i in range(0, count, args.batch_size)
    ]
    for budget in args.batch_tokens:
        try:
            rows[f"by tokens, at most {budget}"] = TokenBatchSampler(source_lengths, target_lengths, budget).batches
        except ValueError as error:  # a budget below the longest pair
            raise UsageError(f"--batch_tokens {budget}: {first_line(error)}") from None

    print(f"{count} pairs, {sum(source_lengths) + sum(target_lengths):,} source + target tokens")
    print("| batches | padding | batches an epoch | pairs a batch (median) | shapes an epoch |")
    print("|---|---:|---:|---:|---:|")
    for name, batches in rows.items():
        fraction = padding_fraction(batches, source_lengths, target_lengths)
        pairs = statistics.median(len(b) for b in batches)
        shapes = len(batch_shapes(batches, source_lengths, target_lengths))
        print(f"| {name} | {fraction:.1%} | {len(batches):,} | {pairs:.0f} | {shapes:,} |")


if __name__ == "__main__":
    sys.exit(run(main))
