"""How long a person waits for a command: wall time from a cold process to its exit, for the translate command on
the shipped models (its default path, CTranslate2 int8, and the transformers engine) beside `--help` and importing
torch and transformers.

    python benchmarks/start_up.py [--runs 5] [--warm_up 1]

Each command runs --runs times in a fresh process, the commands taking turns, after --warm_up runs of each to warm
the disk cache; the table gives each command's median and range. Writes runs/speed/start_up.json.
"""

import json
import statistics
import subprocess
import sys
import time
from pathlib import Path

from hf_tiny_transformer.errors import ArgumentParser, at_least
from hf_tiny_transformer.guards.outputs import check_output
from hf_tiny_transformer.guards.runner import run
from hf_tiny_transformer.guards.writing import write_atomically
from hf_tiny_transformer.hardware import describe

ROOT = Path(__file__).resolve().parents[1]
COMMAND = str(Path(sys.executable).with_name("tiny-transformer"))
TEXT = "Where is the station?"
COMMANDS = {
    "tiny-transformer --help": [COMMAND, "--help"],
    'python -c "import torch, transformers"': [sys.executable, "-c", "import torch, transformers"],
    f'tiny-transformer translate "{TEXT}"': [COMMAND, "translate", TEXT],
    f'tiny-transformer translate --engine transformers "{TEXT}"': [
        COMMAND,
        "translate",
        "--engine",
        "transformers",
        TEXT,
    ],
}


def parse_args(argv=None):
    parser = ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--warm_up", type=int, default=1, help="runs of each command first, not counted")
    parser.add_argument("--output", type=Path, default=ROOT / "runs" / "speed" / "start_up.json")
    args = parser.parse_args(argv)
    at_least("--runs", args.runs, 1)
    check_output(args.output, flag="--output", kind="file")
    return args


def wall_time(command: list[str]) -> float:
    start = time.perf_counter()
    subprocess.run(command, cwd=ROOT, capture_output=True, check=True)
    return time.perf_counter() - start


def main(argv=None) -> None:
    args = parse_args(argv)
    for command in [*COMMANDS.values()] * args.warm_up:  # the disk cache warm, as for a person's second command
        wall_time(command)
    times = {name: [] for name in COMMANDS}
    for _ in range(args.runs):
        for name, command in COMMANDS.items():
            times[name].append(wall_time(command))
    result = {"machine": describe(), "runs": args.runs, "seconds": times}
    print("| command | median | range |\n|---|---:|---:|")
    for name, values in times.items():
        print(f"| `{name}` | {statistics.median(values):.2f} s | {min(values):.2f}-{max(values):.2f} s |")
    write_atomically(args.output, json.dumps(result, indent=2) + "\n")


if __name__ == "__main__":
    sys.exit(run(main))
