"""The label-smoothed loss on the CPU: as training.loss computed it before (logsumexp in the forward pass,
exp(z - logsumexp) again in the backward pass) against now (one softmax pass forward, logsumexp taken from its largest
entry, the gradient written over it in one pass), forward and backward.

    python benchmarks/label_smoothing.py [--rows 1070] [--vocab 8000] [--repeats 20] [--rounds 5] [--compiled]

Each round times --repeats forward and backward passes of each on (rows, vocab) logits in float32 (what the loss
reads in a float32 run and after accelerate's cast under bf16 autocast) and in bfloat16 (the two take turns, in one
process, after a warm-up, with train.py's allocator and denormal settings); prints the milliseconds a pass (medians
over the rounds) and the largest difference of the two losses' gradients, and one JSON line; writes
runs/speed/label_smoothing.json. 1,070 x 8,000 are the logits of an average batch of the recipes (2,048 source +
target tokens by --batch_tokens, padding included; vocabulary 8,000): a training step computes the loss once.
--compiled times a third: the loss's formula as plain torch operations, compiled by torch.compile (inductor, dynamic
shapes: one compilation for every batch's rows), which fuses its passes over the logits (a C++ compiler is needed).
"""

import json
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path

import torch

from hf_tiny_transformer.commands.shared import check_report, run
from hf_tiny_transformer.errors import ArgumentParser, at_least
from hf_tiny_transformer.hardware import describe, flush_denormals, keep_freed_memory
from hf_tiny_transformer.saving import write_atomically
from hf_tiny_transformer.training.loss import label_smoothed_cross_entropy

ROOT = Path(__file__).resolve().parents[1]


class LogsumexpLoss(torch.autograd.Function):
    """The label-smoothed loss as training.loss computed it before this change (in one piece: the recipes' batches
    fit its 1,024-row chunks in one or two)."""

    @staticmethod
    def forward(ctx, logits, labels, epsilon):
        active, targets = labels != -100, labels.clamp(min=0)
        z = logits.float()  # (N, V)
        log_normalizers = torch.logsumexp(z, dim=-1)  # (N,)
        target_logit = z.gather(-1, targets[:, None]).squeeze(-1)  # (N,)
        row_loss = log_normalizers - (1 - epsilon) * target_logit - epsilon * z.mean(-1)
        ctx.save_for_backward(logits, targets, active, log_normalizers)
        ctx.epsilon = epsilon
        return row_loss.masked_fill(~active, 0.0).sum()

    @staticmethod
    def backward(ctx, grad_total):
        logits, targets, active, log_normalizers = ctx.saved_tensors
        grad = torch.sub(logits, log_normalizers[:, None]).exp_().sub_(ctx.epsilon / logits.shape[-1])  # (N, V)
        grad.scatter_add_(-1, targets[:, None], grad.new_full((grad.shape[0], 1), -(1 - ctx.epsilon)))
        return grad.mul_((grad_total * active).unsqueeze(-1)).to(logits.dtype), None, None


def logsumexp_loss(logits: torch.Tensor, labels: torch.Tensor, epsilon: float, num_items_in_batch=None):
    """label_smoothed_cross_entropy as it was: logits (B, T, V), labels (B, T) -> the mean token loss."""
    labels = labels.to(logits.device)
    total = LogsumexpLoss.apply(logits.flatten(0, 1), labels.flatten(), epsilon)
    divisor = num_items_in_batch if num_items_in_batch is not None else (labels != -100).sum()
    return total / divisor


def formula_loss(logits: torch.Tensor, labels: torch.Tensor, epsilon: float, num_items_in_batch=None):
    """The same loss as plain operations, autograd's gradient: logits (B, T, V), labels (B, T) -> the mean token
    loss (what torch.compile is given)."""
    z, labels = logits.flatten(0, 1).float(), labels.flatten()  # (N, V), (N,)
    active, targets = labels != -100, labels.clamp(min=0)
    target_logit = z.gather(-1, targets[:, None]).squeeze(-1)  # (N,)
    row_loss = torch.logsumexp(z, dim=-1) - (1 - epsilon) * target_logit - epsilon * z.mean(-1)
    divisor = num_items_in_batch if num_items_in_batch is not None else active.sum()
    return row_loss.masked_fill(~active, 0.0).sum() / divisor


KINDS = {"before (logsumexp, exp again)": logsumexp_loss, "now (one softmax)": label_smoothed_cross_entropy}
COMPILED = "compiled (torch.compile of the formula)"


def parse_args(argv=None):
    parser = ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rows", type=int, default=1070, help="labelled and padded target positions of a batch")
    parser.add_argument("--vocab", type=int, default=8000)
    parser.add_argument("--repeats", type=int, default=20)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--compiled", action="store_true", help="also the loss compiled by torch.compile")
    parser.add_argument("--output", type=Path, default=ROOT / "runs" / "speed" / "label_smoothing.json")
    args = parser.parse_args(argv)
    for flag in ("--rows", "--vocab", "--repeats", "--rounds"):
        at_least(flag, getattr(args, flag[2:]), 1)
    check_report(args.output)
    return args


def gradient(loss: Callable, logits: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
    """The gradient of `loss` (label smoothing 0.1) with respect to `logits` (1, N, V)."""
    return torch.autograd.grad(loss(logits, labels, 0.1), logits)[0]


def milliseconds(loss: Callable, logits: torch.Tensor, labels: torch.Tensor, repeats: int) -> float:
    """Milliseconds a forward and backward pass of `loss` takes."""
    start = time.perf_counter()
    for _ in range(repeats):
        gradient(loss, logits, labels)
    return 1000 * (time.perf_counter() - start) / repeats


def main(argv=None) -> None:
    args = parse_args(argv)
    keep_freed_memory()
    flush_denormals()
    generator = torch.Generator().manual_seed(0)
    labels = torch.randint(0, args.vocab, (1, args.rows), generator=generator)
    labels[:, ::10] = -100  # padding
    losses = {**KINDS, COMPILED: torch.compile(formula_loss, dynamic=True)} if args.compiled else KINDS
    results = {}
    for dtype in (torch.float32, torch.bfloat16):
        logits = (3 * torch.randn(1, args.rows, args.vocab, generator=generator)).to(dtype).requires_grad_()
        for loss in losses.values():
            milliseconds(loss, logits, labels, 2)  # warm-up
        times = {kind: [] for kind in losses}
        for _ in range(args.rounds):
            for kind, loss in losses.items():
                times[kind].append(milliseconds(loss, logits, labels, args.repeats))
        before, *others = (gradient(loss, logits, labels).float() for loss in losses.values())
        results[str(dtype).removeprefix("torch.")] = {
            "ms": {kind: statistics.median(values) for kind, values in times.items()},
            "rounds": times,
            "largest_gradient_difference": {
                kind: (before - other).abs().max().item() for kind, other in zip(list(losses)[1:], others)
            },
        }
    print(f"{describe()}\nlogits ({args.rows}, {args.vocab}), {args.repeats} passes x {args.rounds} rounds")
    print("| logits | loss | ms forward + backward | before / this |\n|---|---|---:|---:|")
    for dtype, measured in results.items():
        before = measured["ms"][next(iter(KINDS))]
        for kind, ms in measured["ms"].items():
            print(f"| {dtype} | {kind} | {ms:.2f} | {before / ms:.2f} |")
    for dtype, measured in results.items():
        for kind, difference in measured["largest_gradient_difference"].items():
            print(f"{dtype}: {kind}'s gradient differs from the one before by at most {difference:.3g}")
    result = {"machine": describe(), "shape": [args.rows, args.vocab], "results": results}
    write_atomically(args.output, json.dumps(result, indent=2) + "\n")
    print(json.dumps({dtype: {k: round(v, 3) for k, v in m["ms"].items()} for dtype, m in results.items()}))


if __name__ == "__main__":
    sys.exit(run(main))
