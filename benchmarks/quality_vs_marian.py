"""Translation quality of our model against transformers' MarianMTModel of identical shape, trained alike.

    python benchmarks/quality_vs_marian.py --direction en-ja [--max_steps 2000] [--corpus_dir DIR]

Both models are trained by training/train.py with the direction's recipe (training/recipes/en-ja.json or ja-en.json,
its time budget replaced by --max_steps): the same tokenizer (trained once, for ours, then reused), data, recipe,
seed and number of steps; only `--architecture` differs. train.py ends by translating the test set with beam search
(4 beams, from the recipe) and scoring it with BLEU (and its 95 % bootstrap confidence interval) and chrF. Prints a
side-by-side table and a JSON line, and writes the result to runs/quality/{direction}/result.json.
"""

import argparse
import contextlib
import json
import subprocess
import sys
import time
from pathlib import Path

from hf_tiny_transformer.errors import ArgumentParser, UsageError, at_least
from hf_tiny_transformer.guards.outputs import check_output
from hf_tiny_transformer.guards.runner import run
from hf_tiny_transformer.guards.writing import write_atomically

ROOT = Path(__file__).resolve().parents[1]


def parse_args(argv=None) -> argparse.Namespace:
    parser = ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--direction", required=True, choices=["en-ja", "ja-en"])
    parser.add_argument("--max_steps", type=int, default=2000, help="optimizer steps for each model")
    parser.add_argument(
        "--corpus_dir", default=str(ROOT / "data" / "small_parallel_enja"), help="(make data fetches it)"
    )
    parser.add_argument("--output_dir", type=Path, default=ROOT / "runs" / "quality")
    parser.add_argument("--extra", nargs=argparse.REMAINDER, default=[], help="more flags for train.py")
    args = parser.parse_args(argv)
    at_least("--max_steps", args.max_steps, 1)
    if not (Path(args.corpus_dir) / "train.en").is_file():
        raise UsageError(f"--corpus_dir {args.corpus_dir} holds no train.en; run make data, or pass a corpus folder")
    with contextlib.suppress(OSError):  # reports go under runs/, new in a clone; check_output names a problem
        (args.output_dir / args.direction).mkdir(parents=True, exist_ok=True)
    check_output(args.output_dir / args.direction / "result.json", kind="file", flag="--output_dir")
    return args


def run_step(command: list[str]) -> str:
    """Run one training; its failure is one line with the last line it wrote (its whole log is in its folder)."""
    print("$", " ".join(command), flush=True)
    result = subprocess.run(command, cwd=ROOT, capture_output=True, text=True)
    if result.returncode != 0:
        last = (result.stderr.strip().splitlines() or ["no output"])[-1]
        raise UsageError(f"train.py failed with exit status {result.returncode}: {last}")
    return result.stdout


def train_and_score(args, architecture: str, output_dir: Path, tokenizer: Path | None) -> dict:
    """Train with train.py (the recipe, checkpoint averaging included), which ends by translating the test set (the
    recipe's beams, the same for both models) and scoring it."""
    command = [
        sys.executable,
        "training/train.py",
        f"training/recipes/{args.direction}.json",
        "--corpus_dir",
        args.corpus_dir,
        "--output_dir",
        str(output_dir),
        "--overwrite_output_dir",
        "true",
        "--max_steps",
        str(args.max_steps),
        "--architecture",
        architecture,
        "--do_predict",
        "true",
        *(["--tokenizer_name", str(tokenizer)] if tokenizer else []),
        *args.extra,
    ]
    start = time.perf_counter()
    run_step(command)
    metrics = json.loads((output_dir / "metrics.json").read_text())
    return {
        "bleu": round(metrics["test_bleu"], 2),
        "bleu_ci": round(metrics["test_bleu_ci"], 2),
        "chrf": round(metrics["test_chrf"], 2),
        "train_minutes": round(metrics["train_runtime_s"] / 60, 1),
        "total_minutes": round((time.perf_counter() - start) / 60, 1),
    }


def main(argv=None) -> None:
    args = parse_args(argv)
    folder = args.output_dir / args.direction
    ours = train_and_score(args, "tiny_transformer", folder / "ours", None)
    marian = train_and_score(args, "marian", folder / "marian", folder / "ours" / "tokenizer")
    result = {"direction": args.direction, "max_steps": args.max_steps, "ours": ours, "marian": marian}
    beams = json.loads((ROOT / "training" / "recipes" / f"{args.direction}.json").read_text())["generation_num_beams"]
    print(f"\n{args.direction}, {args.max_steps} steps each, test set, beam {beams}")
    print("| model | BLEU | chrF | training minutes |\n|---|---:|---:|---:|")
    for name, scores in (("hf-tiny-transformer", ours), ("MarianMTModel", marian)):
        print(
            f"| {name} | {scores['bleu']:.2f} ± {scores['bleu_ci']:.2f} | {scores['chrf']:.2f} "
            f"| {scores['train_minutes']} |"
        )
    print(json.dumps(result))
    write_atomically(folder / "result.json", json.dumps(result, indent=2) + "\n")


if __name__ == "__main__":
    sys.exit(run(main))
