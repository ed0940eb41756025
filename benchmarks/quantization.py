"""Dynamic int8 quantization of a trained model (torchao: int8 weights, activations quantized to int8 as they come):
size, tokens, BLEU, speed.

    python benchmarks/quantization.py --model runs/demo/hub --source_file runs/demo/data/test.en \
        --reference_file runs/demo/data/test.ja --target_lang ja [--repeats 5]

Needs the [quantize] extra (torchao). Every nn.Linear (the four projections of every attention, fc1, fc2 and lm_head)
is quantized with torchao's `quantize_(model, Int8DynamicActivationInt8WeightConfig())`, the successor of the
deprecated `torch.ao.quantization.quantize_dynamic`. Reports:
- the state-dict size (the bytes torch.save writes) of the float32 and of the int8 model;
- how many sentences the int8 model translates (greedy) into other tokens than the float32 model, and the BLEU
  (with its 95 % confidence interval) of both against --reference_file;
- greedy speed at batch 1 (the first 32 sentences one at a time) and at batch 32 (every sentence), medians of
  --repeats runs with the two models taking turns: sentences/s and new tokens/s.
Prints a table and one JSON line; writes runs/quantization/result.json.
"""

import argparse
import copy
import io
import json
import statistics
import sys
import time
from pathlib import Path

import torch
from torch import nn

from hf_tiny_transformer.commands.shared import check_report, run
from hf_tiny_transformer.data.files import read_aligned
from hf_tiny_transformer.data.tokenizer import lowercases
from hf_tiny_transformer.errors import ArgumentParser, UsageError, at_least, first_line
from hf_tiny_transformer.evaluation import scores
from hf_tiny_transformer.loading import load_model_folder
from hf_tiny_transformer.saving import write_atomically
from hf_tiny_transformer.serving.quantization import int8_linear_layers, quantize_int8, torchao

ROOT = Path(__file__).resolve().parents[1]


def parse_args(argv=None) -> argparse.Namespace:
    parser = ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--model", default="runs/demo/hub", help="a saved model folder (make demo writes runs/demo/hub)"
    )
    parser.add_argument("--source_file", default="runs/demo/data/test.en", help="sentences to translate, one per line")
    parser.add_argument("--reference_file", default="runs/demo/data/test.ja", help="their reference translations")
    parser.add_argument("--target_lang", default="ja")
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--max_new_tokens", type=int, default=40)
    parser.add_argument("--output", type=Path, default=ROOT / "runs" / "quantization" / "result.json")
    args = parser.parse_args(argv)
    for flag in ("--repeats", "--max_new_tokens"):
        at_least(flag, getattr(args, flag[2:]), 1)
    check_report(args.output)
    return args


def state_dict_bytes(model: nn.Module) -> int:
    buffer = io.BytesIO()
    torch.save(model.state_dict(), buffer)
    return buffer.tell()


def translate(
    model, tokenizer, sources: list[str], batch_size: int, max_new_tokens: int
) -> tuple[list[list[int]], int]:
    """Greedy token ids per sentence (padding removed), and the number of new tokens."""
    results, new_tokens = [], 0
    for start in range(0, len(sources), batch_size):
        batch = tokenizer(sources[start : start + batch_size], return_tensors="pt", padding=True)
        with torch.inference_mode():
            output = model.generate(**batch, num_beams=1, max_length=max_new_tokens + 1)
        for row in output[:, 1:].tolist():
            tokens = [t for t in row if t != tokenizer.pad_token_id]
            results.append(tokens)
            new_tokens += len(tokens)
    return results, new_tokens


def timed(models: dict, tokenizer, sources: list[str], batch_size: int, args) -> dict[str, dict[str, float]]:
    """Median sentences/s and new tokens/s of each model, taking turns."""
    seconds = {name: [] for name in models}
    tokens = {}
    for _ in range(args.repeats):
        for name, model in models.items():
            start = time.perf_counter()
            _, tokens[name] = translate(model, tokenizer, sources, batch_size, args.max_new_tokens)
            seconds[name].append(time.perf_counter() - start)
    return {
        name: {
            "sentences_per_s": len(sources) / statistics.median(times),
            "tokens_per_s": tokens[name] / statistics.median(times),
        }
        for name, times in seconds.items()
    }


def main(argv=None) -> None:
    args = parse_args(argv)
    sources, references = read_aligned(args.source_file, args.reference_file, ("--source_file", "--reference_file"))
    try:
        torchao()
    except ImportError as error:  # torchao, the [quantize] extra, is not installed
        raise UsageError(first_line(error)) from None
    float32, tokenizer = load_model_folder(args.model)
    float32.eval()
    int8 = quantize_int8(copy.deepcopy(float32))

    quantized = int8_linear_layers(int8)
    reference, _ = translate(float32, tokenizer, sources, 32, args.max_new_tokens)
    candidate, _ = translate(int8, tokenizer, sources, 32, args.max_new_tokens)
    models = {"float32": float32, "int8": int8}
    bleu = {}
    for name, tokens in (("float32", reference), ("int8", candidate)):
        hypotheses = tokenizer.batch_decode(tokens, skip_special_tokens=True)
        normalize = tokenizer.backend_tokenizer.normalizer.normalize_str
        result = scores(hypotheses, references, args.target_lang, lowercase=lowercases(tokenizer), normalize=normalize)
        bleu[name] = {"bleu": result["bleu"], "bleu_ci": result["bleu_ci"]}
    result = {
        "model": args.model,
        "sentences": len(sources),
        "quantized_linear_layers": quantized,
        "state_dict_bytes": {name: state_dict_bytes(model) for name, model in models.items()},
        "sentences_with_other_tokens": sum(a != b for a, b in zip(reference, candidate)),
        "bleu": bleu,
        "greedy_b1": timed(models, tokenizer, sources[:32], 1, args),
        "greedy_b32": timed(models, tokenizer, sources, 32, args),
    }
    print(
        f"{quantized} nn.Linear layers quantized; {result['sentences_with_other_tokens']} of {len(sources)} "
        f"sentences translated into other tokens than float32; BLEU float32 {bleu['float32']['bleu']:.2f} ± "
        f"{bleu['float32']['bleu_ci']:.2f}, int8 {bleu['int8']['bleu']:.2f} ± {bleu['int8']['bleu_ci']:.2f}"
    )
    print(
        "| model | state dict | greedy b1 sentences/s | greedy b1 tokens/s | greedy b32 sentences/s "
        "| greedy b32 tokens/s |"
    )
    print("|---|---:|---:|---:|---:|---:|")
    for name in models:
        b1, b32 = result["greedy_b1"][name], result["greedy_b32"][name]
        print(
            f"| {name} | {result['state_dict_bytes'][name] / 1e6:.2f} MB | {b1['sentences_per_s']:.1f} | "
            f"{b1['tokens_per_s']:.0f} | {b32['sentences_per_s']:.1f} | {b32['tokens_per_s']:.0f} |"
        )
    write_atomically(args.output, json.dumps(result, indent=2) + "\n")
    print(json.dumps(result))


if __name__ == "__main__":
    sys.exit(run(main))
