"""Dropout on the CPU: torch's (a bernoulli_ draw an element) against the model's (16 random bits an element, four
to a 64-bit draw: modeling_tiny_transformer.apply_dropout), forward and backward.

    python benchmarks/dropout.py [--rows 1024] [--width 256] [--p 0.1] [--repeats 200] [--rounds 5]

Each round times --repeats forward and backward passes of each on a (rows, width) activation in float32 and in
bfloat16 (the two take turns, in one process, after a warm-up); prints the milliseconds a pass (medians over the
rounds) and the share of elements each kept, and one JSON line; writes runs/speed/dropout.json. 1,024 x 256 is an
activation of the `tiny` shape at the recipes' batches of 2,048 source + target tokens; a training step of that
model draws 17 masks (profile_training.py).
"""

import json
import statistics
import sys
import time
from pathlib import Path

import torch

from hf_tiny_transformer.commands.shared import check_report, run
from hf_tiny_transformer.errors import ArgumentParser, UsageError, at_least
from hf_tiny_transformer.hardware import describe
from hf_tiny_transformer.modeling_tiny_transformer import apply_dropout
from hf_tiny_transformer.saving import write_atomically

ROOT = Path(__file__).resolve().parents[1]
KINDS = {
    "torch (bernoulli_)": lambda x, p: torch.nn.functional.dropout(x, p=p, training=True),
    "the model's (64-bit draws)": lambda x, p: apply_dropout(x, p, True),
}


def parse_args(argv=None):
    parser = ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rows", type=int, default=1024)
    parser.add_argument("--width", type=int, default=256)
    parser.add_argument("--p", type=float, default=0.1, help="the dropout probability (the paper's: 0.1)")
    parser.add_argument("--repeats", type=int, default=200)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--output", type=Path, default=ROOT / "runs" / "speed" / "dropout.json")
    args = parser.parse_args(argv)
    for flag in ("--rows", "--width", "--repeats", "--rounds"):
        at_least(flag, getattr(args, flag[2:]), 1)
    if not 0 < args.p < 1:
        raise UsageError(f"--p must lie between 0 and 1 (exclusive), got {args.p}")
    check_report(args.output)
    return args


def milliseconds(kind, x: torch.Tensor, p: float, repeats: int) -> float:
    """Milliseconds a forward and backward pass of dropout `kind` on `x` takes."""
    start = time.perf_counter()
    for _ in range(repeats):
        torch.autograd.grad(KINDS[kind](x, p).sum(), x)
    return 1000 * (time.perf_counter() - start) / repeats


def main(argv=None) -> None:
    args = parse_args(argv)
    results = {}
    for dtype in (torch.float32, torch.bfloat16):
        x = torch.randn(args.rows, args.width, dtype=dtype, requires_grad=True)
        for kind in KINDS:
            milliseconds(kind, x, args.p, 5)  # warm-up
        times = {kind: [] for kind in KINDS}
        for _ in range(args.rounds):
            for kind in KINDS:
                times[kind].append(milliseconds(kind, x, args.p, args.repeats))
        kept = {kind: (KINDS[kind](x.detach(), args.p) != 0).float().mean().item() for kind in KINDS}
        results[str(dtype).removeprefix("torch.")] = {
            kind: {"ms": statistics.median(times[kind]), "rounds": times[kind], "kept": kept[kind]} for kind in KINDS
        }
    print(f"{describe()}\n({args.rows}, {args.width}), p {args.p}, {args.repeats} passes x {args.rounds} rounds")
    print("| dtype | dropout | ms forward + backward | torch's / this | share kept |\n|---|---|---:|---:|---:|")
    for dtype, kinds in results.items():
        torch_ms = kinds["torch (bernoulli_)"]["ms"]
        for kind, measured in kinds.items():
            ratio = torch_ms / measured["ms"]
            print(f"| {dtype} | {kind} | {measured['ms']:.3f} | {ratio:.2f} | {measured['kept']:.4f} |")
    result = {"machine": describe(), "shape": [args.rows, args.width], "p": args.p, "results": results}
    write_atomically(args.output, json.dumps(result, indent=2) + "\n")
    medians = {dtype: {kind: round(m["ms"], 4) for kind, m in kinds.items()} for dtype, kinds in results.items()}
    print(json.dumps(medians))


if __name__ == "__main__":
    sys.exit(run(main))
