"""Where a training step's time goes, in float32 and under bfloat16 autocast: torch.profiler's operators by kind.

    python benchmarks/profile_training.py [--recipe training/recipes/ja-en.json] [--steps 20] [--batch_tokens 2048]
        [--shape tiny] [--precision fp32 bf16] [--threads N]

One step is train.py's (trainer.precision.ModeRun, as the precision trial times it: forward, under autocast for bf16
with its outputs cast to float32 as accelerate does, with the attention that goes with the precision; the recipe's
label-smoothed loss, backward, gradient clipping and the run's optimizer from the recipe's flags), on one batch by
tokens of the recipes' size (pairs of 9 + 9 tokens, the corpus's average, random ids; no data loading), with
train.py's CPU settings (oneDNN's kernel cache, denormals flushed). Each precision is warmed up, timed without the
profiler (the truer step time: the profiler adds a cost to every operator, which inflates the small ones), then
profiled over --steps steps. Prints, per precision, the step time with and without the profiler, the share and the
milliseconds a step of each kind of operator (matrix multiplies, attention, softmax and the loss, LayerNorm, casts
between dtypes, the optimizer, dropout, the rest) and the slowest operators, and one JSON line; writes
runs/speed/profile_training.json. On a CPU without bfloat16 instructions the bf16 rows show the emulation's cost.
--threads N profiles on N of torch's threads: run it with 1 and with 2 to see which kinds gain from a second core.
With --batch_tokens 36 (two pairs) what is left is a step's fixed cost.
"""

import contextlib
import json
import sys
import tempfile
from collections import defaultdict
from pathlib import Path

import torch
from torch.profiler import ProfilerActivity, profile

from hf_tiny_transformer import TinyTransformerForConditionalGeneration, load_shape, shape_names
from hf_tiny_transformer.errors import ArgumentParser, at_least
from hf_tiny_transformer.guards.outputs import check_output
from hf_tiny_transformer.guards.runner import run
from hf_tiny_transformer.guards.text_files import read_json_object
from hf_tiny_transformer.guards.writing import write_atomically
from hf_tiny_transformer.hardware import describe, flush_denormals, keep_compiled_kernels
from hf_tiny_transformer.trainer.arguments import parse_arguments
from hf_tiny_transformer.trainer.precision import Mode, ModeRun, attention_for

ROOT = Path(__file__).resolve().parents[1]
PAIR_LENGTH = 9  # source and target tokens of each pair in the batch: the corpus's average
# Operator name fragments -> kind (the first that matches).
KINDS = (
    ("dropout", ("bernoulli", "dropout", "random_")),
    ("matrix multiplies", ("mm", "matmul", "linear", "addmm", "bmm", "baddbmm")),
    ("attention", ("scaled_dot_product", "flash_attention", "_efficient_attention")),
    ("softmax and loss", ("softmax", "logsumexp", "LabelSmoothed", "scatter", "gather", "exp", "log")),
    ("LayerNorm", ("layer_norm",)),
    ("casts", ("aten::to", "_to_copy", "copy_", "_autocast")),
    ("optimizer", ("Optimizer", "adam", "_foreach", "lerp", "addcdiv", "addcmul", "sqrt")),
)


def kind_of(name: str) -> str:
    return next((kind for kind, fragments in KINDS if any(fragment in name for fragment in fragments)), "other")


def batch(model, batch_tokens: int) -> dict[str, torch.Tensor]:
    """A batch of the size --batch_tokens makes for pairs of PAIR_LENGTH source and target tokens, with the
    decoder's inputs made from the labels as the run's collator makes them."""
    pairs = batch_tokens // (2 * PAIR_LENGTH)
    generator = torch.Generator().manual_seed(0)
    ids = torch.randint(4, model.config.vocab_size, (2, pairs, PAIR_LENGTH), generator=generator)
    return {
        "input_ids": ids[0],
        "attention_mask": torch.ones_like(ids[0]),
        "labels": ids[1],
        "decoder_input_ids": model.prepare_decoder_input_ids_from_labels(ids[1]),
    }


def profile_precision(precision: str, training_args, args) -> dict:
    """train.py's step in this precision (trainer.precision.ModeRun: the run's optimizer, loss and clipping) on one
    batch, warmed up, timed, then profiled."""
    torch.manual_seed(0)
    model = TinyTransformerForConditionalGeneration(load_shape(args.shape))
    attention = attention_for(precision, "cpu")
    runner = ModeRun(model, Mode(precision, attention), training_args, torch.device("cpu"))
    inputs = batch(model, args.batch_tokens)
    runner.steps([inputs] * args.warmup)
    unprofiled = runner.steps([inputs] * args.steps) / args.steps
    with profile(activities=[ProfilerActivity.CPU]) as profiler:
        seconds = runner.steps([inputs] * args.steps) / args.steps
    events = [event for event in profiler.key_averages() if event.self_cpu_time_total > 0]
    total = sum(event.self_cpu_time_total for event in events)
    shares = defaultdict(float)
    for event in events:
        shares[kind_of(event.key)] += event.self_cpu_time_total / total
    shares = dict(sorted(shares.items(), key=lambda item: -item[1]))
    slowest = sorted(events, key=lambda event: -event.self_cpu_time_total)[: args.top]
    tokens = inputs["input_ids"].numel() + inputs["labels"].numel()
    return {
        "attention": attention,
        "seconds_per_step": seconds,
        "tokens_per_second": tokens / seconds,
        "seconds_per_step_unprofiled": unprofiled,
        "shares": shares,
        "milliseconds": {kind: share * total / 1000 / args.steps for kind, share in shares.items()},
        "slowest": [(event.key, event.self_cpu_time_total / total) for event in slowest],
    }


def main(argv=None) -> None:
    parser = ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--recipe", default=str(ROOT / "training" / "recipes" / "ja-en.json"))
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--warmup", type=int, default=3)
    parser.add_argument("--batch_tokens", type=int, default=2048)
    parser.add_argument("--shape", default="tiny", choices=shape_names())
    parser.add_argument("--precision", nargs="+", default=["fp32", "bf16"], choices=["fp32", "bf16"])
    parser.add_argument("--top", type=int, default=8)
    parser.add_argument("--threads", type=int, help="torch's threads; default: torch's choice")
    parser.add_argument("--output", type=Path, default=ROOT / "runs" / "speed" / "profile_training.json")
    args = parser.parse_args(argv)
    for flag in ("--steps", "--warmup", "--threads"):  # --threads: None when not given
        at_least(flag, getattr(args, flag[2:]), 1)
    at_least("--batch_tokens", args.batch_tokens, 2 * PAIR_LENGTH)  # one pair
    read_json_object(args.recipe, "--recipe")
    with contextlib.suppress(OSError):  # reports go under runs/, new in a clone; check_output names a problem
        Path(args.output).parent.mkdir(parents=True, exist_ok=True)
    check_output(args.output, kind="file", flag="--output")
    keep_compiled_kernels()  # before oneDNN's first kernel and torch's first parallel operation, as train.py
    flush_denormals()
    if args.threads:
        torch.set_num_threads(args.threads)
    _, _, training_args = parse_arguments([args.recipe, "--output_dir", tempfile.mkdtemp(), "--precision", "fp32"])
    results = {precision: profile_precision(precision, training_args, args) for precision in args.precision}
    print(describe())
    for precision, result in results.items():
        print(
            f"\n{precision} ({result['attention']}): {result['seconds_per_step'] * 1000:.0f} ms a step, "
            f"{result['tokens_per_second']:,.0f} tokens/s; without the profiler "
            f"{result['seconds_per_step_unprofiled'] * 1000:.0f} ms a step"
        )
        print("| kind | share of operator time | ms a step |\n|---|---:|---:|")
        for kind, share in result["shares"].items():
            print(f"| {kind} | {share:.1%} | {result['milliseconds'][kind]:.1f} |")
        print("slowest: " + ", ".join(f"{name} {share:.1%}" for name, share in result["slowest"]))
    write_atomically(args.output, json.dumps({"machine": describe(), **results}, indent=2) + "\n")
    print(json.dumps({p: {"tokens_per_second": round(r["tokens_per_second"])} for p, r in results.items()}))


if __name__ == "__main__":
    sys.exit(run(main))
