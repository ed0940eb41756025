"""Training speed of the project's recommended mode against transformers' MarianMTModel as a user gets it by
default, on the real corpus, in source tokens a second without padding.

    python benchmarks/training_modes.py [--recipe training/recipes/ja-en.json] [--tokenizer runs/ja-en/tokenizer]
        [--max_steps 150] [--rounds 2] [--modes MODE ...] [--corpus_dir DIR]

Every run is a fresh `training/train.py` process with the recipe, less its time budget, checkpoints, averaging and
test translation, for --max_steps steps; Trainer counts the source tokens it trains on without padding
(`--include_num_input_tokens_seen non_padding`), divided by its training time. The modes take turns for --rounds
rounds; medians. --modes times some of them (the recommended mode always: the table's ratios are to it). A short
run understates bfloat16: its first steps compile oneDNN's kernels for each new batch shape, which float32 does not,
so compare precisions over several hundred steps (--max_steps 1000). The runs inherit this process's environment:
`LD_PRELOAD=libtcmalloc_minimal.so.4 python benchmarks/training_modes.py ...` times them on tcmalloc, as make runs
train.py where it is installed.
- ours, recommended: the recipe as it is (batches of --batch_tokens tokens, the fused label-smoothed loss,
  --precision auto: bfloat16 where the hardware has it and the trial finds it faster);
- ours, float32: the same with --precision fp32 (on a CPU without bfloat16 instructions, the same as the above);
- Marian, the same flags: the recommended mode with `--architecture marian`;
- Marian, Trainer's defaults: `--architecture marian`, float32, batches of 64 pairs in Trainer's random order
  (`--train_sampling_strategy random`).
Prints a table and one JSON line; writes runs/speed/training_modes.json.
"""

import argparse
import contextlib
import json
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

from hf_tiny_transformer.errors import ArgumentParser, UsageError, at_least
from hf_tiny_transformer.guards.outputs import check_output
from hf_tiny_transformer.guards.runner import run
from hf_tiny_transformer.guards.text_files import read_json_object
from hf_tiny_transformer.guards.writing import write_atomically

ROOT = Path(__file__).resolve().parents[1]
RECOMMENDED = "ours, recommended"
MODES = {  # flags replacing the recipe's (None: the flag removed)
    RECOMMENDED: {},
    "ours, float32": {"precision": "fp32"},
    "Marian, the same flags": {"architecture": "marian"},
    "Marian, Trainer's defaults": {
        "architecture": "marian",
        "batch_tokens": None,
        "per_device_train_batch_size": 64,
        "train_sampling_strategy": "random",
        "precision": "fp32",
    },
}
NOT_TIMED = {
    "average_checkpoints": None,
    "save_steps": None,
    "save_total_limit": None,
    "save_strategy": "no",
    "do_predict": False,
    "eval_strategy": "no",
    "time_budget_minutes": None,
}


def parse_args(argv=None):
    parser = ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--recipe", default=str(ROOT / "training" / "recipes" / "ja-en.json"))
    parser.add_argument(
        "--tokenizer", help="a saved tokenizer, e.g. runs/ja-en/tokenizer; default: each run trains one"
    )
    parser.add_argument("--corpus_dir", help="default: the recipe's")
    parser.add_argument("--max_steps", type=int, default=150)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument(
        "--modes", nargs="+", choices=list(MODES), default=list(MODES), help="ours, recommended is always timed"
    )
    parser.add_argument("--output", type=Path, default=ROOT / "runs" / "speed" / "training_modes.json")
    parser.add_argument("--extra", nargs=argparse.REMAINDER, default=[], help="more flags for train.py (put it last)")
    args = parser.parse_args(argv)
    at_least("--max_steps", args.max_steps, 1)
    at_least("--rounds", args.rounds, 1)
    args.modes = [mode for mode in MODES if mode == RECOMMENDED or mode in args.modes]  # the table's order
    if args.tokenizer and not (Path(args.tokenizer) / "tokenizer.json").is_file():
        raise UsageError(f"--tokenizer {args.tokenizer} holds no tokenizer.json; pass a saved tokenizer's folder")
    with contextlib.suppress(OSError):  # reports go under runs/, new in a clone; check_output names a problem
        Path(args.output).parent.mkdir(parents=True, exist_ok=True)
    check_output(args.output, kind="file", flag="--output")
    return args


def flags_file(recipe: dict, changes: dict, args, output_dir: Path) -> Path:
    """The recipe with `changes` and this benchmark's settings, as a JSON recipe for train.py."""
    flags = {
        **recipe,
        **NOT_TIMED,
        **changes,
        "max_steps": args.max_steps,
        "output_dir": str(output_dir),
        "include_num_input_tokens_seen": "non_padding",
        "disable_tqdm": True,
    }
    flags.update({"corpus_dir": args.corpus_dir} if args.corpus_dir else {})
    flags.update({"tokenizer_name": args.tokenizer} if args.tokenizer else {})
    path = output_dir.with_suffix(".json")
    path.write_text(json.dumps({key: value for key, value in flags.items() if value is not None}))
    return path


def tokens_per_second(recipe: dict, mode: str, args, folder: Path) -> tuple[float, dict]:
    """Source tokens a second of a train.py run in `mode`, and the run's metrics.json."""
    changes = MODES[mode]
    output_dir = folder / mode.replace(" ", "_").replace(",", "").replace("'", "")
    command = [
        sys.executable,
        str(ROOT / "training" / "train.py"),
        str(flags_file(recipe, changes, args, output_dir)),
        "--overwrite_output_dir",
        "true",
        *args.extra,
    ]
    result = subprocess.run(command, check=False, cwd=ROOT, capture_output=True, text=True)
    if result.returncode != 0:
        lines = result.stderr.strip().splitlines() or ["no output"]
        raise UsageError(f"train.py failed for {mode!r}: {lines[-1]}")
    metrics = json.loads((output_dir / "metrics.json").read_text())
    return metrics["num_input_tokens_seen"] / metrics["train_runtime_s"], metrics


def main(argv=None) -> None:
    args = parse_args(argv)
    recipe = read_json_object(args.recipe, "--recipe")
    speeds = {mode: [] for mode in args.modes}
    chosen = []
    with tempfile.TemporaryDirectory() as folder:
        for _ in range(args.rounds):
            for mode in args.modes:
                value, metrics = tokens_per_second(recipe, mode, args, Path(folder))
                speeds[mode].append(value)
                if mode == RECOMMENDED:
                    chosen.append(f"{metrics['precision']} ({metrics['attention']})")
    medians = {mode: statistics.median(values) for mode, values in speeds.items()}
    recommended = medians[RECOMMENDED]
    print(f"{Path(args.recipe).name}, {args.max_steps} steps a run, {args.rounds} rounds")
    print(f"{RECOMMENDED} trained in: {', '.join(chosen)} (the trial's choice in each round)")
    print("| mode | source tokens/s (no padding) | ours, recommended / this |\n|---|---:|---:|")
    for mode, value in medians.items():
        print(f"| {mode} | {value:,.0f} | {recommended / value:.2f} |")
    result = {
        "recipe": Path(args.recipe).name,
        "max_steps": args.max_steps,
        "recommended_trained_in": chosen,
        "speeds": speeds,
        "medians": medians,
    }
    write_atomically(args.output, json.dumps(result, indent=2) + "\n")
    print(json.dumps({mode: round(recommended / value, 2) for mode, value in medians.items()}))


if __name__ == "__main__":
    sys.exit(run(main))
