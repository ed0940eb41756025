"""Batches by tokens, as the paper's (section 5.1: "each training batch contained a set of sentence pairs
containing approximately 25000 source tokens and 25000 target tokens").

    from hf_tiny_transformer.data.batching import TokenBatchSampler
    sampler = TokenBatchSampler(source_lengths, target_lengths, max_tokens=4096, seed=0)
    loader = DataLoader(dataset, batch_sampler=sampler, collate_fn=collator)   # accelerate's prepare() shards it

The pairs are sorted by length once and cut into batches whose padded size, (longest source + longest target) x
pairs, stays within `max_tokens`: short sentences make big batches, long ones small batches, and little is
padding. Each epoch shuffles the order of the batches (`set_epoch`, which Trainer calls), so every pair is seen
once an epoch. Under torchrun, accelerate hands each process every n-th batch.
"""

import torch
from torch.utils.data import Sampler


class TokenBatchSampler(Sampler[list[int]]):
    """Batches of pair indices, each of at most `max_tokens` source + target tokens once padded.

    Args:
        source_lengths, target_lengths: the token count of each pair's source and target.
        max_tokens: the budget of a batch, padding included.
        seed: the batches' order in epoch e is a permutation drawn with seed + e.
    """

    def __init__(self, source_lengths: list[int], target_lengths: list[int], max_tokens: int, seed: int = 0):
        if len(source_lengths) != len(target_lengths):
            raise ValueError(f"{len(source_lengths)} source lengths but {len(target_lengths)} target lengths")
        longest_pair = max(s + t for s, t in zip(source_lengths, target_lengths))
        if max_tokens < longest_pair:
            raise ValueError(
                f"max_tokens {max_tokens} is smaller than the longest pair ({longest_pair} source + target tokens); "
                f"raise it to at least {longest_pair}"
            )
        self.max_tokens = max_tokens
        self.seed = seed
        self.epoch = 0
        self.batches = self.make_batches(source_lengths, target_lengths)

    def make_batches(self, source_lengths: list[int], target_lengths: list[int]) -> list[list[int]]:
        order = sorted(range(len(source_lengths)), key=lambda i: (source_lengths[i], target_lengths[i], i))
        batches, batch, longest_source, longest_target = [], [], 0, 0
        for index in order:
            source = max(longest_source, source_lengths[index])
            target = max(longest_target, target_lengths[index])
            if batch and (len(batch) + 1) * (source + target) > self.max_tokens:
                batches.append(batch)
                batch, source, target = [], source_lengths[index], target_lengths[index]
            batch.append(index)
            longest_source, longest_target = source, target
        return batches + [batch]

    def set_epoch(self, epoch: int):
        self.epoch = epoch

    def __iter__(self):
        generator = torch.Generator().manual_seed(self.seed + self.epoch)
        for position in torch.randperm(len(self.batches), generator=generator).tolist():
            yield self.batches[position]

    def __len__(self) -> int:
        return len(self.batches)


def padding_fraction(batches: list[list[int]], source_lengths: list[int], target_lengths: list[int]) -> float:
    """The share of the padded source and target positions of `batches` that are padding."""
    padded = sum(len(b) * (max(source_lengths[i] for i in b) + max(target_lengths[i] for i in b)) for b in batches)
    real = sum(source_lengths[i] + target_lengths[i] for b in batches for i in b)
    return 1 - real / padded


def batch_shapes(batches: list[list[int]], source_lengths: list[int], target_lengths: list[int]) -> set[tuple]:
    """The distinct (pairs, longest source, longest target) of `batches`: the shapes a training epoch brings. Under
    bfloat16 on a CPU each new shape has its oneDNN kernels compiled the first time it is seen."""
    return {(len(b), max(source_lengths[i] for i in b), max(target_lengths[i] for i in b)) for b in batches}


__all__ = ["TokenBatchSampler", "padding_fraction", "batch_shapes"]
