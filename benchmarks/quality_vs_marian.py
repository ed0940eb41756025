"""Translation quality of our model against transformers' MarianMTModel of identical shape, trained alike.

    python benchmarks/quality_vs_marian.py --direction en-ja [--max_steps 2000] [--corpus_dir DIR]

Both models are trained by training/train.py with the direction's preset (training/presets/en-ja.json or
ja-en.json): the same tokenizer (trained once, for ours, then reused), data, recipe, seed and number of steps;
only `--architecture` differs. Both are then scored on the test set with beam search (4 beams) by
training/evaluate_model.py. Prints a side-by-side table and a JSON line; writes them to
runs/quality/{direction}/result.json.
"""

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def parse_args(argv=None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--direction", required=True, choices=["en-ja", "ja-en"])
    parser.add_argument("--max_steps", type=int, default=2000, help="optimizer steps for each model")
    parser.add_argument("--corpus_dir", default=str(ROOT.parent / "shared" / "data" / "small_parallel_enja"))
    parser.add_argument("--output_dir", type=Path, default=ROOT / "runs" / "quality")
    parser.add_argument("--num_beams", type=int, default=4)
    parser.add_argument("--extra", nargs=argparse.REMAINDER, default=[], help="more flags for train.py")
    return parser.parse_args(argv)


def run(command: list[str]) -> str:
    print("$", " ".join(command), flush=True)
    result = subprocess.run(command, cwd=ROOT, capture_output=True, text=True)
    if result.returncode != 0:
        sys.exit(f"failed ({result.returncode}):\n{result.stderr[-3000:]}")
    return result.stdout


def train_and_score(args, architecture: str, output_dir: Path, tokenizer: Path | None) -> dict:
    source, target = args.direction.split("-")
    command = [
        sys.executable, "training/train.py", f"training/presets/{args.direction}.json",
        "--corpus_dir", args.corpus_dir, "--output_dir", str(output_dir), "--overwrite_output_dir", "true",
        "--max_steps", str(args.max_steps), "--architecture", architecture, "--save_strategy", "no",
        "--eval_strategy", "no", *(["--tokenizer_name", str(tokenizer)] if tokenizer else []), *args.extra,
    ]
    start = time.perf_counter()
    run(command)
    minutes = (time.perf_counter() - start) / 60
    scores = run([
        sys.executable, "training/evaluate_model.py", "--model", str(output_dir / "hub"),
        "--corpus_dir", args.corpus_dir, "--split", "test", "--source_lang", source, "--target_lang", target,
        "--num_beams", str(args.num_beams), "--output_file", str(output_dir / "test.hyp"),
    ])
    return {**json.loads(scores.strip().splitlines()[-1]), "train_minutes": round(minutes, 1)}


def main(argv=None) -> None:
    args = parse_args(argv)
    folder = args.output_dir / args.direction
    ours = train_and_score(args, "tiny_transformer", folder / "ours", None)
    marian = train_and_score(args, "marian", folder / "marian", folder / "ours" / "tokenizer")
    result = {"direction": args.direction, "max_steps": args.max_steps, "ours": ours, "marian": marian}
    print(f"\n{args.direction}, {args.max_steps} steps each, test set, beam {args.num_beams}")
    print(f"| model | BLEU | chrF | training minutes |\n|---|---:|---:|---:|")
    for name, scores in (("hf-tiny-transformer", ours), ("MarianMTModel", marian)):
        print(f"| {name} | {scores['bleu']:.2f} | {scores['chrf']:.2f} | {scores['train_minutes']} |")
    print(json.dumps(result))
    (folder / "result.json").write_text(json.dumps(result, indent=2) + "\n")


if __name__ == "__main__":
    main()
