"""The page that translates in the browser, measured in headless Chromium on this machine: the export's size, the
model's loading time, the first translation's time and the page's tokens/s, in float32 and in int8.

    python benchmarks/browser_page.py --model runs/demo/hub [--rounds 3] [--screenshot docs/browser_page.png]

--model is a saved model folder, exported to ONNX with int8 weights first, or such an export.

For each dtype a fresh browser opens the page (written by `write_browser_page` for an `export_onnx` folder of the
model, served on this machine, every other address unreachable), waits for the model, and translates the same
three sentences --rounds times; the first translation is timed apart (it includes the WebAssembly's warm-up). The
page decodes greedily, one sentence after another, on one thread. Writes runs/speed/browser_page.json.
"""

import contextlib
import json
import statistics
import sys
import tempfile
from pathlib import Path

from hf_tiny_transformer.commands.browser_page import check_servable, is_model_folder
from hf_tiny_transformer.errors import ArgumentParser, UsageError, at_least
from hf_tiny_transformer.guards.loading import load_model_folder
from hf_tiny_transformer.guards.outputs import check_output
from hf_tiny_transformer.guards.runner import run
from hf_tiny_transformer.guards.writing import write_atomically
from hf_tiny_transformer.hardware import describe
from hf_tiny_transformer.serving.browser import served, use_page, write_browser_page
from hf_tiny_transformer.serving.files import DECODER, QUANTIZED
from hf_tiny_transformer.serving.onnx import export_onnx

ROOT = Path(__file__).resolve().parents[1]
TEXT = "My mother really likes green tea. I didn't eat bread. She reads books."


def parse_args(argv=None):
    parser = ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--model", default="runs/demo/hub", help="a saved model folder (exported to ONNX int8 first), or an int8 export"
    )
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--screenshot", type=Path, help="a PNG of the page after its first translation (int8)")
    parser.add_argument("--output", type=Path, default=ROOT / "runs" / "speed" / "browser_page.json")
    args = parser.parse_args(argv)
    at_least("--rounds", args.rounds, 1)
    with contextlib.suppress(OSError):  # reports go under runs/, new in a clone; check_output names a problem
        Path(args.output).parent.mkdir(parents=True, exist_ok=True)
    check_output(args.output, kind="file", flag="--output")
    return args


def int8_export(model: str, scratch: Path) -> Path:
    """The ONNX export to time, with its int8 graphs beside the float32 ones: `model` where it is one, else `model`
    exported into `scratch`."""
    if is_model_folder(Path(model)):
        return export_onnx(*load_model_folder(model), scratch / "onnx", quantization="int8")
    check_servable(Path(model))
    if not (Path(model) / f"{DECODER}{QUANTIZED}.onnx").is_file():
        raise UsageError(f"--model {model} has no int8 graphs; export it with --quantization int8, or pass the model")
    return Path(model)


def main(argv=None) -> None:
    args = parse_args(argv)
    result = {"machine": describe(), "model": args.model, "text": TEXT}
    with tempfile.TemporaryDirectory() as folder:
        export = int8_export(args.model, Path(folder))
        files = list((export / "onnx").glob("*.onnx*"))  # the graphs and the embedding table they share
        sizes = {"float32": sum(p.stat().st_size for p in files if "_quantized" not in p.name),
                 "int8": sum(p.stat().st_size for p in files if "_quantized" in p.name)}  # fmt: skip
        # what a second copy of the table, in each graph as before it was shared, would add
        shared = {kind: (export / "onnx" / f"embeddings{suffix}.onnx_data").stat().st_size
                  for kind, suffix in (("float32", ""), ("int8", "_quantized"))}  # fmt: skip
        with served(write_browser_page(export, Path(folder) / "page")) as url:
            for dtype in ("fp32", "q8"):
                runs = [use_page(f"{url}?dtype={dtype}", TEXT, screenshot=args.screenshot if dtype == "q8" else None)]
                runs += [use_page(f"{url}?dtype={dtype}", TEXT) for _ in range(args.rounds - 1)]
                result[dtype] = {
                    "load_seconds": statistics.median(r["load_seconds"] for r in runs),
                    "first_translation_seconds": statistics.median(r["seconds"] for r in runs),
                    "tokens_per_s": statistics.median(r["tokens"] / r["seconds"] for r in runs),
                    "translation": runs[0]["translation"],
                }
    result["export_bytes"], result["one_table_saves_bytes"] = sizes, shared
    print(f"{describe()}\n{args.model}: the page downloads {sizes['float32'] / 1e6:.2f} MB (float32) or "
          f"{sizes['int8'] / 1e6:.2f} MB (int8); with the embedding table in each graph it would be "
          f"{(sizes['float32'] + shared['float32']) / 1e6:.2f} and "
          f"{(sizes['int8'] + shared['int8']) / 1e6:.2f} MB")  # fmt: skip
    print("| dtype | model loaded in | first translation | tokens/s |\n|---|---:|---:|---:|")
    for dtype in ("fp32", "q8"):
        r = result[dtype]
        timing = f"{r['load_seconds']:.2f} s | {r['first_translation_seconds']:.2f} s"
        print(f"| {dtype} | {timing} | {r['tokens_per_s']:.0f} |")
    write_atomically(args.output, json.dumps(result, indent=2, ensure_ascii=False) + "\n")


if __name__ == "__main__":
    sys.exit(run(main))
