"""Translation speed of every engine of the translator interface, and of transformers' MarianMTModel, on a saved
model's test sentences: the path users get (`load_translator(...).translate(...)`, greedy), and each engine's own call
on the same token ids (what the translator adds: sentence splitting, batches by length, casing).

    python benchmarks/engines.py --model runs/demo/hub --source_file runs/demo/data/test.en [--rounds 5] [--engines ...]

The engines: transformers (the model as it is), onnxruntime float32 and int8 (an `export_onnx` folder), CTranslate2
float32 and int8 (an `export_ctranslate2` folder), and MarianMTModel in transformers (the exact conversion,
hf_tiny_transformer.marian.to_marian). Workloads: batch 1 (the first 32 sentences, one call each) and batch 32
(every sentence in one call). The bare calls: transformers' and onnxruntime's generate() (OnnxSeq2SeqLM) and
CTranslate2's translate_batch on the sentences' token ids, in their order, as many at once as the workload's batch,
each allowed as many new tokens as the translator allows. Each engine runs in a fresh process of its own, one after
the other (in one process the engines' thread pools meet), a warm-up round then the rounds. The table gives the mean
sentences/s and new tokens/s over the rounds with the 95 % confidence interval of the mean (Student's t), each
engine's translations against the model's own (how many sentences differ), and translator / bare call. Tokens are
those of the translations, re-tokenized. Writes runs/speed/engines.json.
"""

import contextlib
import json
import math
import multiprocessing
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

import torch

from hf_tiny_transformer.errors import ArgumentParser, UsageError, at_least
from hf_tiny_transformer.guards.loading import load_model_folder
from hf_tiny_transformer.guards.outputs import check_output
from hf_tiny_transformer.guards.runner import run
from hf_tiny_transformer.guards.text_files import read_lines
from hf_tiny_transformer.guards.writing import write_atomically
from hf_tiny_transformer.hardware import describe
from hf_tiny_transformer.marian import to_marian
from hf_tiny_transformer.serving.ctranslate2 import export_ctranslate2, share_per_translator
from hf_tiny_transformer.serving.engines import load_translator
from hf_tiny_transformer.serving.onnx import export_onnx
from hf_tiny_transformer.serving.translator import TransformersTranslator, generation_limit

ROOT = Path(__file__).resolve().parents[1]
# Each engine: the kind of translator and its compute type.
ENGINES = {
    "transformers": ("transformers", None),
    "onnxruntime float32": ("onnx", "float32"),
    "onnxruntime int8": ("onnx", "int8"),
    "ctranslate2 float32": ("ctranslate2", "float32"),
    "ctranslate2 int8": ("ctranslate2", "int8"),
    "Marian (transformers)": ("marian", None),
}
T_975 = {2: 12.71, 3: 4.30, 4: 3.18, 5: 2.78, 6: 2.57, 7: 2.45, 8: 2.36, 9: 2.31, 10: 2.26}  # by sample size


def parse_args(argv=None):
    parser = ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--model", default="runs/demo/hub", help="a saved model folder (make demo writes runs/demo/hub)"
    )
    parser.add_argument("--source_file", default="runs/demo/data/test.en", help="sentences to translate, one a line")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--engines", nargs="+", choices=list(ENGINES), default=list(ENGINES),
                        help="the engines to time (default: all); transformers always, whose translations the others' "
                        "are compared to")  # fmt: skip
    parser.add_argument("--output", type=Path, default=ROOT / "runs" / "speed" / "engines.json")
    args = parser.parse_args(argv)
    args.engines = {"transformers", *args.engines}
    at_least("--rounds", args.rounds, 2)
    if not Path(args.source_file).exists():
        raise UsageError(f"--source_file {args.source_file} does not exist; run make demo, or pass a file")
    args.sentences = read_lines(args.source_file, "--source_file")
    with contextlib.suppress(OSError):  # reports go under runs/, new in a clone; check_output names a problem
        Path(args.output).parent.mkdir(parents=True, exist_ok=True)
    check_output(args.output, kind="file", flag="--output")
    return args


def interval(values: list[float]) -> tuple[float, float]:
    """The mean and the half-width of its 95 % confidence interval."""
    mean = statistics.mean(values)
    return mean, T_975.get(len(values), 1.96) * statistics.stdev(values) / math.sqrt(len(values))


def bare_call(translator, ids: list[list[int]], batch_size: int):
    """The engine's own call on `ids` in batches of `batch_size`, in their order, greedy: generate() for
    transformers and onnxruntime, translate_batch for CTranslate2 (each batch shared by its translators, as the
    translator shares it)."""
    if hasattr(translator, "translator"):  # CTranslate2
        tokens = [[translator.tokens[i] for i in row] for row in ids]

        def call():
            for start in range(0, len(tokens), batch_size):
                batch = tokens[start : start + batch_size]
                limit = generation_limit(max(map(len, batch)), translator.max_positions, None)
                share = share_per_translator(len(batch), translator.inter_threads)
                translator.translator.translate_batch(
                    batch, beam_size=1, max_decoding_length=limit, max_input_length=0, max_batch_size=share
                )

        return call

    def call():
        for start in range(0, len(ids), batch_size):
            inputs = translator.tokenizer.pad({"input_ids": ids[start : start + batch_size]}, return_tensors="pt")
            limit = generation_limit(inputs["input_ids"].shape[1], translator.max_positions, None)
            with torch.inference_mode():
                translator.model.generate(**inputs, max_length=limit + 1, num_beams=1)

    return call


def engine_translator(engine: str, model_folder: str, exports: Path):
    """The translator of `engine` (a key of ENGINES) for the model and its exports."""
    kind, compute_type = ENGINES[engine]
    if kind in ("transformers", "marian"):
        model, tokenizer = load_model_folder(model_folder)
        return TransformersTranslator(to_marian(model).eval() if kind == "marian" else model, tokenizer)
    folder = exports / ("onnx" if kind == "onnx" else f"ct2-{compute_type}")
    return load_translator(folder, kind, compute_type=compute_type)


def translate(translator, texts: list[str], batch_size: int) -> list[str]:
    """The translator on `texts`, greedy: at batch 1 one call a sentence, as a user typing waits for each (given a
    list, an engine that queues batches would translate several sentences at once)."""
    if batch_size == 1:
        return [translator.translate([text], num_beams=1)[0] for text in texts]
    return translator.translate(texts, batch_size=batch_size, num_beams=1)


def time_engine(engine: str, model_folder: str, exports: Path, workloads: dict, rounds: int) -> dict:
    """One engine timed in this process: each round the translator and the bare call (none for Marian) on every
    workload, which of the two goes first alternating from round to round (the one after a batch-32 run starts with
    cold caches), after a warm-up round. Returns {"seconds": ..., "bare_seconds": ..., "outputs": ...}, each by
    workload, torch's threads and this process's id."""
    translator = engine_translator(engine, model_folder, exports)
    seconds = {workload: [] for workload in workloads}
    bare = {workload: [] for workload in workloads} if ENGINES[engine][0] != "marian" else {}
    outputs = {}
    for round_ in range(rounds + 1):  # the first round warms up
        for workload, (texts, batch_size) in workloads.items():
            call = bare_call(translator, translator.tokenizer(texts)["input_ids"], batch_size)
            for which in ("translator", "bare") if round_ % 2 else ("bare", "translator"):
                if which == "bare" and workload not in bare:
                    continue
                start = time.perf_counter()
                if which == "translator":
                    outputs[workload] = translate(translator, texts, batch_size)
                else:
                    call()
                if round_:
                    (seconds if which == "translator" else bare)[workload].append(time.perf_counter() - start)
    threads = torch.get_num_threads()
    return {"seconds": seconds, "bare_seconds": bare, "outputs": outputs, "threads": threads, "process": os.getpid()}


def in_own_process(function, *args):
    """`function(*args)` in a fresh interpreter: engines timed in one process meet in its thread pools (onnxruntime's
    beside torch's OpenMP threads ran at half its speed)."""
    with multiprocessing.get_context("spawn").Pool(1) as pool:
        return pool.apply(function, args)


def main(argv=None) -> None:
    args = parse_args(argv)
    model, tokenizer = load_model_folder(args.model)
    sentences = args.sentences
    workloads = {"batch 1": (sentences[:32], 1), "batch 32": (sentences, 32)}
    with tempfile.TemporaryDirectory() as folder:
        exports = Path(folder)
        chosen = [ENGINES[engine] for engine in args.engines]
        if any(kind == "onnx" for kind, _ in chosen):  # one export holds both quantizations
            export_onnx(model, tokenizer, exports / "onnx", quantization="int8")
        for kind, quantization in chosen:
            if kind == "ctranslate2":
                export_ctranslate2(model, tokenizer, exports / f"ct2-{quantization}", quantization=quantization)
        timed = {engine: in_own_process(time_engine, engine, args.model, exports, workloads, args.rounds)
                 for engine in ENGINES if engine in args.engines}  # fmt: skip
    outputs = {(engine, w): output for engine, timing in timed.items() for w, output in timing["outputs"].items()}
    new_tokens = {key: sum(len(tokenizer(text)["input_ids"]) for text in output) for key, output in outputs.items()}
    threads = timed["transformers"]["threads"]
    result = {"machine": describe(), "threads": threads, "model": args.model, "rounds": args.rounds, "engines": {}}
    result["processes"] = {"benchmark": os.getpid(), **{engine: timing["process"] for engine, timing in timed.items()}}
    print(f"{describe()}\n{args.model}, {len(sentences)} sentences, {args.rounds} rounds, greedy")
    print(f"each engine in its own process; torch on {threads} threads")
    print("| engine | workload | sentences/s | tokens/s | sentences not as transformers | translator / bare call |")
    print("|---|---|---:|---:|---:|---:|")
    for engine, timing in timed.items():
        for workload, times in timing["seconds"].items():
            texts = workloads[workload][0]
            sentences_per_s = interval([len(texts) / t for t in times])
            tokens_per_s = interval([new_tokens[engine, workload] / t for t in times])
            differ = sum(a != b for a, b in zip(outputs[engine, workload], outputs["transformers", workload]))
            bare = timing["bare_seconds"].get(workload)
            # the translator's time over the bare call's (above 1: what the translator adds)
            overhead = statistics.median(times) / statistics.median(bare) if bare else None
            result["engines"][f"{engine}, {workload}"] = {"sentences_per_s": sentences_per_s,
                                                          "tokens_per_s": tokens_per_s, "seconds": times,
                                                          "bare_seconds": bare, "translator_over_bare": overhead,
                                                          "differ": differ}  # fmt: skip
            shown = f"{overhead:.2f}" if overhead else "-"
            speeds = f"{sentences_per_s[0]:.1f} ± {sentences_per_s[1]:.1f} | "
            speeds += f"{tokens_per_s[0]:,.0f} ± {tokens_per_s[1]:,.0f}"
            print(f"| {engine} | {workload} | {speeds} | {differ} of {len(texts)} | {shown} |")
    write_atomically(args.output, json.dumps(result, indent=2) + "\n")


if __name__ == "__main__":
    sys.exit(run(main))
