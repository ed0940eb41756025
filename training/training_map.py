"""The training map of docs/training-map.md: the points `training/map_point.sh` trained, as one table and one plot of
test BLEU against training minutes, a line for each shape and schedule, a panel for each direction.

    python training/training_map.py [--runs runs/map] [--plot docs/training-map.png]

A point is a folder under --runs named DIRECTION-SETTING[-MINUTESmin][-sSEED] (en-ja-tiny-linear, a 34-minute run;
ja-en-wide-linear-90min-s1), holding
the run's metrics.json and hub/, and the test, test_far and unseen scores (*.score: evaluate_model.py's output). Points
not finished yet are left out, by name. Prints the Markdown table.
"""

import argparse
import importlib.util
import json
import re
import sys
from pathlib import Path

from hf_tiny_transformer.errors import ArgumentParser, UsageError
from hf_tiny_transformer.guards.outputs import check_output
from hf_tiny_transformer.guards.runner import command_output, run
from hf_tiny_transformer.guards.writing import replaced_file

POINT = re.compile(r"(?P<direction>en-ja|ja-en)-(?P<setting>.+?)(-(?P<budget>\d+)min)?(-s(?P<seed>\d+))?")
SPLITS = ("test", "test_far", "unseen")  # the test split, its part that is not a near-copy of training, unseen words


def parse_args(argv=None) -> argparse.Namespace:
    parser = ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=Path, default=Path("runs/map"), help="the folder of the map's points")
    parser.add_argument("--plot", type=Path, help="write the plot here (a .png); needs matplotlib")
    args = parser.parse_args(argv)
    if not args.runs.is_dir():
        raise UsageError(f"--runs {args.runs} is not a folder; train points with training/map_point.sh first")
    if args.plot and importlib.util.find_spec("matplotlib") is None:
        raise UsageError("--plot needs matplotlib; pip install 'hf-tiny-transformer[viz]'")
    if args.plot:
        check_output(args.plot, flag="--plot", kind="file", inputs=[args.runs])
    return args


def json_object(path: Path) -> dict:
    """The JSON object a file holds (a run's metrics.json) or ends with (evaluate_model.py's scores, after its
    examples); one line naming the file otherwise."""
    text = path.read_text(encoding="utf-8", errors="replace").strip()
    for candidate in (text, text.splitlines()[-1] if text else ""):
        try:
            if isinstance(value := json.loads(candidate), dict):
                return value
        except ValueError:
            continue
    raise UsageError(f"{path} holds no JSON object; train or score that point again")


def read_point(folder: Path) -> dict | None:
    """One point's numbers, or None where its name is not a point's or its run has not finished."""
    name = POINT.fullmatch(folder.name)
    files = [folder / "metrics.json", folder / "hub" / "config.json", *(folder / f"{s}.score" for s in SPLITS)]
    if not name or not all(file.is_file() and file.stat().st_size for file in files):
        return None
    metrics, config = json_object(files[0]), json_object(files[1])
    shape = f"{config['encoder_layers']}+{config['decoder_layers']} x {config['d_model']}"
    return {
        "point": folder.name,
        **name.groupdict(),
        "shape": shape,
        "minutes": metrics["train_runtime_s"] / 60,
        "steps": metrics["train_steps"],
        **{split: json_object(folder / f"{split}.score") for split in SPLITS},
    }


def table(points: list[dict]) -> str:
    rows = [
        "| point | shape | minutes | steps | test BLEU | test chrF | the others' BLEU | unseen BLEU |",
        "|---|---|---:|---:|---:|---:|---:|---:|",
    ]
    for point in points:
        bleu = {split: f"{point[split]['bleu']:.2f} ± {point[split]['bleu_ci']:.2f}" for split in SPLITS}
        rows.append(
            f"| {point['point']} | {point['shape']} | {point['minutes']:.0f} | {point['steps']:,} | {bleu['test']} "
            f"| {point['test']['chrf']:.2f} | {bleu['test_far']} | {bleu['unseen']} |"
        )
    return "\n".join(rows)


def plot(points: list[dict], path: Path):
    """Test BLEU (with its interval) against minutes: a panel per direction, a line per setting."""
    import matplotlib

    matplotlib.use("Agg")
    from matplotlib import pyplot

    figure, panels = pyplot.subplots(1, 2, figsize=(10, 4), sharex=True, sharey=True)
    settings = sorted({p["setting"] for p in points})  # one colour a setting in both panels
    for panel, direction in zip(panels, ("en-ja", "ja-en"), strict=True):
        lines = sorted({(p["setting"], p["seed"] or "0") for p in points if p["direction"] == direction})
        for setting, seed in lines:  # a line joins the budgets of one setting and seed
            key = (direction, setting, seed)
            line = sorted((p for p in points if (p["direction"], p["setting"], p["seed"] or "0") == key),
                          key=lambda p: p["minutes"])  # fmt: skip
            panel.errorbar(
                [p["minutes"] for p in line],
                [p["test"]["bleu"] for p in line],
                yerr=[p["test"]["bleu_ci"] for p in line],
                marker="o" if seed == "0" else "s",
                capsize=3,
                color=f"C{settings.index(setting)}",
                label=f"{setting} ({line[0]['shape']}){f', seed {seed}' if seed != '0' else ''}",
            )
        panel.set(title=direction.replace("-", " -> "), xlabel="training minutes (one core)", ylabel="test BLEU")
        panel.grid(alpha=0.3)
        if lines:
            panel.legend(fontsize=8)
    figure.tight_layout()
    with replaced_file(path) as temporary:
        figure.savefig(temporary, format="png", dpi=100)


def main(argv=None) -> int:
    args = parse_args(argv)
    points = [point for folder in sorted(args.runs.iterdir()) if folder.is_dir() and (point := read_point(folder))]
    if not points:
        raise UsageError(f"--runs {args.runs} holds no finished point; train one with training/map_point.sh")
    if args.plot:
        plot(points, args.plot)
    with command_output(sys.stdout) as output:
        output.info(table(points))
    return 0


if __name__ == "__main__":
    sys.exit(run(main))
