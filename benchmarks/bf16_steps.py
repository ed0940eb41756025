"""Each step of what makes bfloat16 training pay on a CPU with bfloat16 instructions, one change at a time, in
fresh processes taking turns.

    python benchmarks/bf16_steps.py [--recipe recipes/ja-en.json] [--tokenizer runs/ja-en/tokenizer]
        [--batches 150] [--rounds 2] [--corpus_dir DIR]

A step is the one train.py runs (training.precision.ModeRun: forward, under bfloat16 autocast with the outputs cast
to float32 as accelerate does, the label-smoothed loss, backward, gradient clipping, the run's fused AdamW) of the
recipe's model on --batches real batches by tokens of the recipe's corpus: a pass over them to warm up, then a timed
pass, as a long run sees its batches again every epoch. The configurations, each adding one change to the one
before it:
- fp32 before: float32 with torch's dropout (the float32 reference of the last session);
- bf16 before: bfloat16 autocast with sdpa attention, oneDNN's default kernel cache (1,024) and torch's dropout, what
  `--precision auto` trained in on such a CPU until now;
- + eager attention: the model's own attention instead of PyTorch's CPU flash attention (sdpa);
- + kernel cache: oneDNN keeps 65,536 compiled kernels (hardware.keep_compiled_kernels, as train.py sets it);
- + dropout masks: the modeling file's masks from 15 random bits an element (apply_dropout): the code as it is;
- fp32 now: float32 as it is now (sdpa, the kernel cache, the new masks).
Prints the table (seconds a step, medians over rounds, and the gain over fp32 before and fp32 now) and one JSON
line; writes runs/speed/bf16_steps.json.
"""

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

from hf_tiny_transformer.cli import ArgumentParser, UsageError, at_least, run
from hf_tiny_transformer.data.files import read_json_object
from hf_tiny_transformer.saving_tiny_transformer import write_atomically

ROOT = Path(__file__).resolve().parents[1]
# name -> (precision, attention, oneDNN kernel cache, torch's dropout)
STEPS = {
    "fp32 before": ("fp32", "sdpa", 1024, True),
    "bf16 before": ("bf16", "sdpa", 1024, True),
    "+ eager attention": ("bf16", "eager", 1024, True),
    "+ kernel cache": ("bf16", "eager", 65536, True),
    "+ dropout masks": ("bf16", "eager", 65536, False),
    "fp32 now": ("fp32", "sdpa", 65536, False),
}


def parse_args(argv=None):
    parser = ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--recipe", default=str(ROOT / "recipes" / "ja-en.json"))
    parser.add_argument("--tokenizer", help="a saved tokenizer, e.g. runs/ja-en/tokenizer; default: one is trained")
    parser.add_argument("--corpus_dir", help="default: the recipe's")
    parser.add_argument("--batches", type=int, default=150)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--output", type=Path, default=ROOT / "runs" / "speed" / "bf16_steps.json")
    parser.add_argument("--worker", choices=list(STEPS), help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    at_least("--batches", args.batches, 1)
    at_least("--rounds", args.rounds, 1)
    if args.tokenizer and not (Path(args.tokenizer) / "tokenizer.json").is_file():
        raise UsageError(f"--tokenizer {args.tokenizer} holds no tokenizer.json; pass a saved tokenizer's folder")
    return args


def worker(args) -> None:
    """One configuration in this process: prints the seconds a step took over the timed pass."""
    precision, attention, capacity, torch_dropout = STEPS[args.worker]
    os.environ["ONEDNN_PRIMITIVE_CACHE_CAPACITY"] = str(capacity)  # before oneDNN makes its first kernel
    import torch
    from transformers import AutoTokenizer, DataCollatorForSeq2Seq

    from hf_tiny_transformer import TinyTransformerForConditionalGeneration, load_shape
    from hf_tiny_transformer import modeling_tiny_transformer as modeling
    from hf_tiny_transformer.hardware import flush_denormals, keep_freed_memory
    from hf_tiny_transformer.training.arguments import parse_arguments
    from hf_tiny_transformer.training.precision import Mode, ModeRun, trial_batches
    from hf_tiny_transformer.data.sources import load_pairs

    keep_freed_memory()
    flush_denormals()
    if torch_dropout:  # the dropout of the last session: torch's own
        modeling.apply_dropout = lambda x, p, training: torch.nn.functional.dropout(x, p, True) if training and p else x
    flags = [args.recipe, "--output_dir", tempfile.mkdtemp(), "--precision", "fp32"]
    _, data_args, training_args = parse_arguments(flags + (["--corpus_dir", args.corpus_dir] if args.corpus_dir else []))
    tokenizer = AutoTokenizer.from_pretrained(args.tokenizer)
    train = load_pairs(data_args)["train"]
    train = train.map(lambda batch: {**tokenizer(batch["source"], max_length=data_args.max_source_length, truncation=True),
                                     "labels": tokenizer(text_target=batch["target"], max_length=data_args.max_target_length, truncation=True)["input_ids"]},
                      batched=True, remove_columns=["source", "target"])  # fmt: skip
    torch.manual_seed(0)
    model = TinyTransformerForConditionalGeneration(load_shape("tiny", vocab_size=len(tokenizer)))
    batches = trial_batches(train, DataCollatorForSeq2Seq(tokenizer, model=model), training_args, count=args.batches)
    runner = ModeRun(model, Mode(precision, attention), training_args, torch.device("cpu"))
    runner.steps(batches)  # the first epoch: every shape's kernels made
    print(json.dumps({"seconds_per_step": runner.steps(batches) / len(batches)}))


def main(argv=None) -> None:
    args = parse_args(argv)
    if args.worker:
        return worker(args)
    read_json_object(args.recipe, "--recipe")
    seconds = {name: [] for name in STEPS}
    with tempfile.TemporaryDirectory() as folder:
        tokenizer = args.tokenizer or make_tokenizer(args, Path(folder) / "tokenizer")
        for _ in range(args.rounds):
            for name in STEPS:
                command = [sys.executable, __file__, "--worker", name, "--recipe", args.recipe, "--tokenizer", tokenizer,
                           "--batches", str(args.batches)] + (["--corpus_dir", args.corpus_dir] if args.corpus_dir else [])  # fmt: skip
                result = subprocess.run(command, capture_output=True, text=True, cwd=ROOT, env={**os.environ, "HF_DATASETS_DISABLE_PROGRESS_BARS": "1"})
                if result.returncode != 0:
                    raise UsageError(f"{name!r} failed: {(result.stderr.strip().splitlines() or ['no output'])[-1]}")
                seconds[name].append(json.loads(result.stdout.strip().splitlines()[-1])["seconds_per_step"])
    medians = {name: statistics.median(values) for name, values in seconds.items()}
    from hf_tiny_transformer.hardware import describe

    print(f"{describe()}\n{Path(args.recipe).name}, {args.batches} batches, {args.rounds} rounds")
    print("| configuration | seconds a step | fp32 before / this | fp32 now / this |\n|---|---:|---:|---:|")
    for name, value in medians.items():
        print(f"| {name} | {value:.3f} | {medians['fp32 before'] / value:.2f} | {medians['fp32 now'] / value:.2f} |")
    result = {"machine": describe(), "recipe": Path(args.recipe).name, "batches": args.batches, "seconds": seconds, "medians": medians}
    args.output.parent.mkdir(parents=True, exist_ok=True)
    write_atomically(args.output, json.dumps(result, indent=2) + "\n")
    print(json.dumps({name: round(value, 4) for name, value in medians.items()}))


def make_tokenizer(args, folder: Path) -> str:
    """The recipe's tokenizer, trained on its corpus as train.py would (once, for every configuration)."""
    from hf_tiny_transformer.data.sources import load_pairs
    from hf_tiny_transformer.data.tokenizer import train_tokenizer
    from hf_tiny_transformer.training.arguments import parse_arguments

    flags = [args.recipe, "--output_dir", str(folder.parent / "run")] + (["--corpus_dir", args.corpus_dir] if args.corpus_dir else [])
    model_args, data_args, _ = parse_arguments(flags)
    train = load_pairs(data_args)["train"]
    texts = [text for pair in train for text in (pair["source"], pair["target"])]
    tokenizer = train_tokenizer(texts, model_args.vocab_size, lowercase=model_args.lowercase, model_max_length=64)
    tokenizer.save_pretrained(folder)
    return str(folder)


if __name__ == "__main__":
    sys.exit(run(main))
