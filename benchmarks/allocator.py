"""Training speed with glibc's default allocator settings and with train.py's (`hardware.keep_freed_memory`, glibc's
mallopt called in the process), each measured in fresh processes that take turns.

    python benchmarks/allocator.py [--rounds 3]

Each process runs `speed_vs_marian.py --skip_paper_base --skip_generation` (a float32 training step of both models
at the tiny shape, label smoothing 0.1), with or without `--keep_freed_memory`; prints the median tokens/s of each
model under each setting.
"""

import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

from hf_tiny_transformer.commands.shared import run
from hf_tiny_transformer.errors import ArgumentParser, UsageError, at_least

ROOT = Path(__file__).resolve().parents[1]


def training_speed(flags: list[str]) -> dict[str, float]:
    with tempfile.TemporaryDirectory() as folder:
        output = Path(folder) / "result.json"
        command = [
            sys.executable,
            str(ROOT / "benchmarks" / "speed_vs_marian.py"),
            "--skip_paper_base",
            "--skip_generation",
            "--output",
            str(output),
            *flags,
        ]
        environment = {k: v for k, v in os.environ.items() if k != "GLIBC_TUNABLES"}
        result = subprocess.run(command, env=environment, capture_output=True, text=True)
        if result.returncode != 0:
            raise UsageError(f"speed_vs_marian.py failed: {(result.stderr.strip().splitlines() or ['no output'])[-1]}")
        return json.loads(output.read_text())["table"]["training_fp32"]


def main(argv=None) -> None:
    parser = ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args(argv)
    at_least("--rounds", args.rounds, 1)
    settings = {"glibc default": [], "train.py's setting (keep_freed_memory)": ["--keep_freed_memory"]}
    speeds = {name: {"ours": [], "marian": []} for name in settings}
    for _ in range(args.rounds):
        for name, flags in settings.items():
            for model, value in training_speed(flags).items():
                speeds[name][model].append(value)
    print("| allocator | ours, tokens/s | Marian, tokens/s |\n|---|---:|---:|")
    for name, values in speeds.items():
        print(f"| {name} | {statistics.median(values['ours']):,.0f} | {statistics.median(values['marian']):,.0f} |")
    print(json.dumps(speeds))


if __name__ == "__main__":
    sys.exit(run(main))
