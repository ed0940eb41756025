"""Each step of what makes bfloat16 training pay on a CPU with bfloat16 instructions, one change at a time, in
fresh processes taking turns.

    python benchmarks/bf16_steps.py [--recipe training/recipes/ja-en.json] [--tokenizer runs/ja-en/tokenizer]
        [--batches 150] [--rounds 2] [--corpus_dir DIR] [--threads N] [--tried]

A step is the one train.py runs (training.precision.ModeRun: forward, under bfloat16 autocast with the outputs cast
to float32 as accelerate does, the label-smoothed loss, backward, gradient clipping, the run's fused AdamW) of the
recipe's model on --batches real batches by tokens of the recipe's corpus: a pass over them to warm up, then a timed
pass, as a long run sees its batches again every epoch. The configurations, each bf16 row adding one change to the
one before it:
- fp32 before: float32 with sdpa attention and torch's dropout (bernoulli_, a random number an element drawn one at
  a time): the reference until now;
- bf16 before: bfloat16 autocast with sdpa attention and oneDNN's default kernel cache (1,024 kernels);
- + eager attention: the model's own attention instead of PyTorch's CPU flash attention (sdpa);
- + kernel cache: oneDNN keeps 65,536 compiled kernels (hardware.keep_compiled_kernels, as train.py sets it);
- + dropout masks from 64-bit draws: the model's CPU dropout (16 random bits an element, four to a draw);
- + the loss from one softmax: the label-smoothed loss's forward pass writes the softmax (one fused pass) and takes
  logsumexp from it, and its backward pass turns that into the gradient in one pass, where it computed logsumexp
  and then exp(z - logsumexp) again (training.loss);
- + the loss with the output projection: the loss makes the logits itself from the decoder's output, 128 rows at a
  time, and takes each block's softmax, loss and gradient while it is in the cache (training.loss's
  OutputLayerLabelSmoothedCrossEntropy; the model makes no logits): what `--precision auto` trains in where the
  trial finds it fastest (bf16 autocast, `--bf16_weights false`, the default);
- + bf16 weights: forward and backward on a bfloat16 copy of the model (no autocast), float32 master weights in the
  optimizer (training.precision.BFloat16Weights): `--bf16_weights true` (`auto` has the trial choose between them);
- fp32 now: float32 with the same kernel cache, dropout and loss: the reference the gain is measured against.
--threads N runs every configuration on N of torch's threads (default: torch's own choice, one a core): how the
gain changes with the threads. With --tried, also what was tried on top of the bf16 row and not kept:
- fp32 with bf16 matmul math: float32 everywhere, oneDNN computing the matrix multiplies from bfloat16 inputs
  (torch.backends.mkldnn.matmul.fp32_precision = "bf16"), eager attention;
- torch.compile of each encoder and decoder layer (dynamic shapes; compiling once, before the warm-up pass).
Each process also reads the share of the machine's CPU time the hypervisor took while it was timed (steal, from
/proc/stat): on a shared virtual machine a step's time moves with it. Prints the table (seconds a step, medians over
rounds, the gain over fp32 now and the largest steal share seen) and one JSON line; writes
runs/speed/bf16_steps.json.
"""

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from dataclasses import dataclass, replace
from pathlib import Path

from hf_tiny_transformer.commands.shared import check_report, check_saved_tokenizer, run
from hf_tiny_transformer.data.files import read_json_object
from hf_tiny_transformer.errors import ArgumentParser, UsageError, at_least
from hf_tiny_transformer.saving import write_atomically

ROOT = Path(__file__).resolve().parents[1]


@dataclass(frozen=True)
class Setting:
    """What a configuration trains with: precision, attention, the weights the bf16 passes take ("fp32": autocast;
    "bf16": `--bf16_weights`), oneDNN's kernel cache, the dropout masks ("bernoulli" or "64-bit draws"), the loss
    ("logsumexp", "softmax" or "output layer") and anything tried on top (None: nothing)."""

    precision: str = "fp32"
    attention: str = "sdpa"
    weights: str = "fp32"
    kernels: int = 1024
    dropout: str = "bernoulli"
    loss: str = "logsumexp"
    tried: str | None = None


BEFORE = Setting()
KERNELS = replace(BEFORE, precision="bf16", attention="eager", kernels=65536)
DROPOUT = replace(KERNELS, dropout="64-bit draws")
SOFTMAX = replace(DROPOUT, loss="softmax")
NOW = replace(SOFTMAX, loss="output layer")
STEPS = {
    "fp32 before": BEFORE,
    "bf16 before": replace(BEFORE, precision="bf16"),
    "+ eager attention": replace(BEFORE, precision="bf16", attention="eager"),
    "+ kernel cache": KERNELS,
    "+ dropout masks from 64-bit draws": DROPOUT,
    "+ the loss from one softmax": SOFTMAX,
    "+ the loss with the output projection": NOW,
    "+ bf16 weights": replace(NOW, weights="bf16"),
    "fp32 now": replace(NOW, precision="fp32", attention="sdpa"),
}
TRIED = {
    "fp32 with bf16 matmul math": replace(NOW, precision="fp32", tried="matmul"),
    "+ torch.compile of the layers": replace(NOW, tried="compile"),
}


def parse_args(argv=None):
    parser = ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--recipe", default=str(ROOT / "training" / "recipes" / "ja-en.json"))
    parser.add_argument("--tokenizer", help="a saved tokenizer, e.g. runs/ja-en/tokenizer; default: one is trained")
    parser.add_argument("--corpus_dir", help="default: the recipe's")
    parser.add_argument("--batches", type=int, default=150)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--output", type=Path, default=ROOT / "runs" / "speed" / "bf16_steps.json")
    parser.add_argument("--threads", type=int, help="torch's threads in every configuration; default: torch's choice")
    parser.add_argument("--tried", action="store_true", help="also what was tried and not kept")
    parser.add_argument("--worker", choices=[*STEPS, *TRIED], help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    for flag, value in (("--batches", args.batches), ("--rounds", args.rounds), ("--threads", args.threads)):
        at_least(flag, value, 1)
    check_saved_tokenizer(args.tokenizer)
    if not args.worker:  # a worker only measures; its parent writes the report
        check_report(args.output)
    return args


def worker(args) -> None:
    """One configuration in this process: prints the seconds a step took over the timed pass and the share of the
    machine's CPU time stolen meanwhile."""
    setting = {**STEPS, **TRIED}[args.worker]
    os.environ["ONEDNN_PRIMITIVE_CACHE_CAPACITY"] = str(setting.kernels)  # before oneDNN makes its first kernel
    import torch
    from transformers import AutoTokenizer, DataCollatorForSeq2Seq

    if args.threads:
        torch.set_num_threads(args.threads)

    from hf_tiny_transformer import TinyTransformerForConditionalGeneration, load_shape
    from hf_tiny_transformer import modeling_tiny_transformer as modeling
    from hf_tiny_transformer.data.sources import load_pairs
    from hf_tiny_transformer.hardware import flush_denormals, keep_freed_memory
    from hf_tiny_transformer.training import precision
    from hf_tiny_transformer.training.arguments import parse_arguments
    from hf_tiny_transformer.training.precision import Mode, ModeRun, trial_batches

    keep_freed_memory()
    flush_denormals()
    if setting.dropout == "bernoulli":
        modeling.apply_dropout = bernoulli_dropout
    if setting.loss != "output layer":  # the loss from the model's logits, as it was
        from hf_tiny_transformer.training import loss

        precision.label_smoothing = lambda model, epsilon, dtype: loss.LabelSmoothing(epsilon, None, dtype)
    if setting.loss == "logsumexp":
        from label_smoothing import logsumexp_loss  # benchmarks/label_smoothing.py: the loss as it was

        loss.label_smoothed_cross_entropy = logsumexp_loss
    if setting.tried == "matmul":
        torch.backends.mkldnn.matmul.fp32_precision = "bf16"
    flags = [args.recipe, "--output_dir", tempfile.mkdtemp(), "--precision", "fp32"]
    _, data_args, training_args = parse_arguments(
        flags + (["--corpus_dir", args.corpus_dir] if args.corpus_dir else [])
    )
    tokenizer = AutoTokenizer.from_pretrained(args.tokenizer)
    train = load_pairs(data_args)["train"]
    train = train.map(
        lambda batch: {
            **tokenizer(batch["source"], max_length=data_args.max_source_length, truncation=True),
            "labels": tokenizer(text_target=batch["target"], max_length=data_args.max_target_length, truncation=True)[
                "input_ids"
            ],
        },
        batched=True,
        remove_columns=["source", "target"],
    )
    torch.manual_seed(0)
    model = TinyTransformerForConditionalGeneration(load_shape("tiny", vocab_size=len(tokenizer)))
    batches = trial_batches(train, DataCollatorForSeq2Seq(tokenizer, model=model), training_args, count=args.batches)
    runner = ModeRun(
        model, Mode(setting.precision, setting.attention, setting.weights), training_args, torch.device("cpu")
    )
    if setting.tried == "compile":
        for layer in (*runner.model.model.encoder.layers, *runner.model.model.decoder.layers):
            layer.compile(dynamic=True)
        runner.steps(batches[:2])  # compiled here, not timed
    runner.steps(batches)  # the first epoch: every shape's kernels made
    before = cpu_times()
    seconds = runner.steps(batches) / len(batches)
    print(json.dumps({"seconds_per_step": seconds, "steal": stolen_share(before, cpu_times())}))


def cpu_times() -> list[int]:
    """The machine's CPU time so far by kind, in clock ticks (/proc/stat's first line: user, nice, system, idle,
    iowait, irq, softirq, steal, ...); empty where there is no /proc/stat."""
    try:
        with open("/proc/stat", encoding="ascii") as lines:
            return [int(value) for value in lines.readline().split()[1:9]]
    except OSError:
        return []


def stolen_share(before: list[int], after: list[int]) -> float | None:
    """The share of the CPU time between two cpu_times() that the hypervisor took (steal); None where unknown."""
    spent = [b - a for a, b in zip(before, after)]
    return spent[7] / sum(spent) if len(spent) == 8 and sum(spent) else None


def bernoulli_dropout(x, p: float, training: bool):
    """torch's dropout, which the model used on the CPU before (a bernoulli_ draw an element)."""
    import torch

    return torch.nn.functional.dropout(x, p=p, training=True) if training and p > 0 else x


def main(argv=None) -> None:
    args = parse_args(argv)
    if args.worker:
        return worker(args)
    read_json_object(args.recipe, "--recipe")
    configurations = {**STEPS, **(TRIED if args.tried else {})}
    seconds = {name: [] for name in configurations}
    steal = {name: [] for name in configurations}
    with tempfile.TemporaryDirectory() as folder:
        tokenizer = args.tokenizer or make_tokenizer(args, Path(folder) / "tokenizer")
        for _ in range(args.rounds):
            for name in configurations:
                command = [
                    sys.executable,
                    __file__,
                    "--worker",
                    name,
                    "--recipe",
                    args.recipe,
                    "--tokenizer",
                    tokenizer,
                    "--batches",
                    str(args.batches),
                ] + (["--corpus_dir", args.corpus_dir] if args.corpus_dir else [])
                command += ["--threads", str(args.threads)] if args.threads else []
                result = subprocess.run(
                    command,
                    capture_output=True,
                    text=True,
                    cwd=ROOT,
                    env={**os.environ, "HF_DATASETS_DISABLE_PROGRESS_BARS": "1"},
                )
                if result.returncode != 0:
                    raise UsageError(f"{name!r} failed: {(result.stderr.strip().splitlines() or ['no output'])[-1]}")
                measured = json.loads(result.stdout.strip().splitlines()[-1])
                seconds[name].append(measured["seconds_per_step"])
                steal[name].append(measured["steal"])
    medians = {name: statistics.median(values) for name, values in seconds.items()}
    from hf_tiny_transformer.hardware import describe

    threads = f", torch's threads: {args.threads} in every configuration" if args.threads else ""
    print(f"{describe()}\n{Path(args.recipe).name}, {args.batches} batches, {args.rounds} rounds{threads}")
    print("| configuration | seconds a step | fp32 now / this | CPU time stolen, at most |\n|---|---:|---:|---:|")
    for name, value in medians.items():
        shares = [share for share in steal[name] if share is not None]
        stolen = f"{max(shares):.1%}" if shares else "unknown"
        print(f"| {name} | {value:.3f} | {medians['fp32 now'] / value:.2f} | {stolen} |")
    result = {
        "machine": describe(),
        "recipe": Path(args.recipe).name,
        "batches": args.batches,
        "threads": args.threads,
        "seconds": seconds,
        "steal": steal,
        "medians": medians,
    }
    write_atomically(args.output, json.dumps(result, indent=2) + "\n")
    print(json.dumps({name: round(value, 4) for name, value in medians.items()}))


def make_tokenizer(args, folder: Path) -> str:
    """The recipe's tokenizer, trained on its corpus as train.py would (once, for every configuration)."""
    from hf_tiny_transformer.data.sources import load_pairs
    from hf_tiny_transformer.data.tokenizer import train_tokenizer
    from hf_tiny_transformer.training.arguments import parse_arguments

    flags = [args.recipe, "--output_dir", str(folder.parent / "run")] + (
        ["--corpus_dir", args.corpus_dir] if args.corpus_dir else []
    )
    model_args, data_args, _ = parse_arguments(flags)
    train = load_pairs(data_args)["train"]
    texts = [text for pair in train for text in (pair["source"], pair["target"])]
    tokenizer = train_tokenizer(texts, model_args.vocab_size, lowercase=model_args.lowercase, model_max_length=64)
    tokenizer.save_pretrained(folder)
    return str(folder)


if __name__ == "__main__":
    sys.exit(run(main))
