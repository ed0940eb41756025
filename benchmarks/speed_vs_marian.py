"""Speed of our model against transformers' MarianMTModel of identical shape, measured side by side.

    python benchmarks/speed_vs_marian.py [--repeats 7] [--device cpu] [--output runs/speed/result.json]

Our model is built with random weights at the `tiny` shape (and, for one training measurement, at the `paper-base`
shape), and Marian is the same model converted (`hf_tiny_transformer.marian.to_marian`): both compute the same
function with the same numbers, so that only the code differs. Every workload is warmed up
first, then timed `--repeats` times with the two models taking turns, and the median is reported:
- training: tokens/s (source + target tokens) of one forward + backward + AdamW step on a batch of 64 (--batch_size)
  sentence pairs, 16 source and 16 target tokens each, with label smoothing 0.1 as train.py computes it (ours
  by the fused loss TranslationTrainer hands Trainer, Marian by Trainer's LabelSmoother); in float32, and with
  --bf16 also in bfloat16 (CPU autocast, Trainer's --bf16) for both and ours in bfloat16 against Marian in
  float32 (the library's default);
- generation: new tokens/s of `generate()` with 24 new tokens forced by min_new_tokens = max_new_tokens, so
  that both models do the same work: greedy at batch 1, greedy at batch 32, beam 4 at batch 8;
- with --ctranslate2, the same generation workloads with our model exported to CTranslate2 (float32 and int8
  weights, `hf_tiny_transformer.serving.ctranslate2`), each against Marian in transformers;
- memory: the peak of tensor memory during one training step (parameters, gradients, optimizer state,
  activations and temporaries): every tensor storage alive at the start or created by an operator during
  the step is counted until it is freed.
Each speed ratio is the median of the rounds' ratios (Marian's seconds over ours), with its 95 % interval; for greedy
decoding at batch 1 the script also counts the torch operators one `generate()` dispatches, and how many of them read a
value back to Python. Prints a table and, last, one JSON line of our/Marian ratios (memory: lower is better; all
others: higher).
"""

import argparse
import contextlib
import json
import math
import statistics
import sys
import tempfile
import time
import weakref
from collections.abc import Callable
from pathlib import Path

import torch
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_leaves
from torch.utils.weak import WeakIdKeyDictionary
from transformers import GenerationConfig
from transformers.trainer_pt_utils import LabelSmoother

from hf_tiny_transformer import TinyTransformerForConditionalGeneration, load_shape
from hf_tiny_transformer.errors import ArgumentParser, at_least
from hf_tiny_transformer.guards.outputs import check_output
from hf_tiny_transformer.guards.runner import run
from hf_tiny_transformer.guards.writing import write_atomically
from hf_tiny_transformer.marian import to_marian
from hf_tiny_transformer.trainer.loss import LabelSmoothing

ROOT = Path(__file__).resolve().parents[1]

SOURCE_LENGTH, TARGET_LENGTH, NEW_TOKENS = 16, 16, 24
LABEL_SMOOTHING = 0.1  # the paper's, and train.py's default
GENERATION_WORKLOADS = {"greedy_b1": (1, 1), "greedy_b32": (32, 1), "beam4_b8": (8, 4)}  # (batch, beams)


def parse_args(argv=None) -> argparse.Namespace:
    parser = ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeats", type=int, default=7, help="timed runs of each workload and model")
    parser.add_argument("--warmup", type=int, default=2, help="untimed runs of each workload and model first")
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--vocab_size", type=int, default=8000, help="vocabulary of the tiny shape")
    parser.add_argument("--batch_size", type=int, default=64, help="sentence pairs in a training step's batch")
    parser.add_argument("--skip_paper_base", action="store_true", help="leave out the paper-base training")
    parser.add_argument("--skip_generation", action="store_true", help="measure training only")
    parser.add_argument(
        "--ctranslate2",
        action="store_true",
        help="also generate with our model exported to CTranslate2 (float32 and int8 weights), against Marian in "
        "transformers",
    )
    parser.add_argument(
        "--bf16",
        action="store_true",
        help="also train both in bfloat16 (CPU autocast): fast only where the CPU has bfloat16 instructions (AVX-512 "
        "BF16, AMX), many times slower than float32 where it has not",
    )
    parser.add_argument("--output", type=Path, default=ROOT / "runs" / "speed" / "result.json")
    return parser.parse_args(argv)


def build_models(preset: str, vocab_size: int | None, device: str) -> dict[str, torch.nn.Module]:
    """Ours with random weights and Marian converted from it (the same function), on `device`."""
    config = load_shape(preset, **({"vocab_size": vocab_size} if vocab_size else {}))
    torch.manual_seed(0)
    ours = TinyTransformerForConditionalGeneration(config)
    return {"ours": ours.to(device), "marian": to_marian(ours).to(device)}


def random_ids(vocab_size: int, batch_size: int, length: int, device: str) -> torch.Tensor:
    """(batch_size, length) token ids that are none of the special tokens (ids 0-3)."""
    return torch.randint(4, vocab_size, (batch_size, length), device=device)


def synchronize(device: str):
    if device.startswith("cuda"):
        torch.cuda.synchronize()


class TrainingStep:
    """One forward + backward + AdamW step of `model` on `batch`, as a callable, with label smoothing 0.1 computed
    from the logits as Trainer computes it under train.py (the labels kept out of the model): ours by the fused
    loss TranslationTrainer hands Trainer (`trainer.loss.LabelSmoothing`), Marian's by Trainer's own
    LabelSmoother. `bf16`: forward and loss under CPU autocast, as Trainer's --bf16 does."""

    def __init__(self, model: torch.nn.Module, batch: dict, device: str, bf16: bool):
        self.model, self.device, self.bf16 = model.train(), device, bf16
        self.optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4)
        labels = batch["labels"]
        decoder_input_ids = model.prepare_decoder_input_ids_from_labels(labels)
        self.batch = {**{k: v for k, v in batch.items() if k != "labels"}, "decoder_input_ids": decoder_input_ids}
        if isinstance(model, TinyTransformerForConditionalGeneration):
            fused = LabelSmoothing(LABEL_SMOOTHING)
            self.loss = lambda outputs: fused(outputs, labels)
        else:
            smoother = LabelSmoother(epsilon=LABEL_SMOOTHING)
            self.loss = lambda outputs: smoother(outputs, labels)

    def __call__(self):
        self.optimizer.zero_grad(set_to_none=True)
        with torch.autocast(device_type=self.device.split(":")[0], dtype=torch.bfloat16, enabled=self.bf16):
            loss = self.loss(self.model(**self.batch))
        loss.backward()
        self.optimizer.step()
        synchronize(self.device)

    def state_tensors(self) -> list[torch.Tensor]:
        """What lives between steps: parameters, buffers, optimizer state and the batch."""
        state = [value for per_parameter in self.optimizer.state.values() for value in per_parameter.values()]
        return [*self.model.parameters(), *self.model.buffers(), *state, *self.batch.values()]


class PeakTensorMemory(TorchDispatchMode):
    """Counts the bytes of live tensor storages: those given at the start, plus every storage an operator
    creates while the mode is active, until it is freed. `peak` is the most ever alive at once."""

    def __init__(self, tensors: list[torch.Tensor]):
        super().__init__()
        self.sizes = WeakIdKeyDictionary()  # storage -> bytes
        self.current = self.peak = 0
        for tensor in tensors:
            self.add(tensor)

    def add(self, tensor: torch.Tensor):
        storage = tensor.untyped_storage()
        if storage in self.sizes or storage.device.type == "meta":
            return
        self.sizes[storage] = storage.nbytes()
        self.current += storage.nbytes()
        self.peak = max(self.peak, self.current)
        weakref.finalize(storage, self.release, storage.nbytes())

    def release(self, nbytes: int):
        self.current -= nbytes

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        output = func(*args, **(kwargs or {}))
        for value in tree_leaves(output):
            if isinstance(value, torch.Tensor):
                self.add(value)
        return output


def generation_run(model: torch.nn.Module, input_ids: torch.Tensor, num_beams: int, device: str) -> Callable[[], None]:
    """A function that generates exactly NEW_TOKENS tokens for each source in `input_ids` (B, Ts)."""
    config = model.config
    attention_mask = torch.ones_like(input_ids)
    generation_config = GenerationConfig(
        max_new_tokens=NEW_TOKENS,
        min_new_tokens=NEW_TOKENS,
        num_beams=num_beams,
        do_sample=False,
        decoder_start_token_id=config.decoder_start_token_id,
        bos_token_id=config.bos_token_id,
        eos_token_id=config.eos_token_id,
        pad_token_id=config.pad_token_id,
    )
    model.eval()

    def run():
        with torch.inference_mode():
            model.generate(input_ids, attention_mask=attention_mask, generation_config=generation_config)
        synchronize(device)

    return run


def timed_rounds(runs: dict[str, Callable[[], None]], repeats: int, warmup: int) -> dict[str, list[float]]:
    """Warm up every run, then time them taking turns, the order reversed every other round (a machine that slows
    down or speeds up during a round favours no run); the seconds of each run in each round."""
    for workload in runs.values():
        for _ in range(warmup):
            workload()
    times = {name: [] for name in runs}
    for round_number in range(repeats):
        for name in list(runs)[:: -1 if round_number % 2 else 1]:
            start = time.perf_counter()
            runs[name]()
            times[name].append(time.perf_counter() - start)
    return times


def ratio_interval(ours: list[float], marian: list[float]) -> tuple[float, float, float]:
    """Marian's seconds over ours in each round (a speed ratio: above 1, ours is faster): their median and its
    distribution-free 95 % interval (order statistics of the binomial; the extremes under 6 rounds)."""
    ratios = sorted(theirs / own for own, theirs in zip(ours, marian, strict=True))
    n, below = len(ratios), 0
    while below + 1 < n and sum(math.comb(n, k) for k in range(below + 1)) / 2**n <= 0.025:
        below += 1  # ratios[below - 1]: the lowest order statistic the interval may start at
    low = max(below - 1, 0)
    return statistics.median(ratios), ratios[low], ratios[n - 1 - low]


def operations(run: Callable[[], None]) -> tuple[int, int]:
    """The torch operators one call of `run` dispatches, and how many of them read a value back to Python (a
    synchronization on an accelerator): what a model costs per call apart from its arithmetic."""
    from torch.profiler import ProfilerActivity, profile

    with profile(activities=[ProfilerActivity.CPU]) as profiler:
        run()
    counts = {event.key: event.count for event in profiler.key_averages()}
    return sum(count for key, count in counts.items() if key.startswith("aten::")), counts.get("aten::item", 0)


def peak_training_memory(step: TrainingStep) -> int:
    """Peak tensor bytes during one training step, after earlier steps have created the optimizer state."""
    step()
    with PeakTensorMemory(step.state_tensors()) as memory:
        step()
    return memory.peak


def training_batch(vocab_size: int, batch_size: int, device: str) -> dict[str, torch.Tensor]:
    input_ids = random_ids(vocab_size, batch_size, SOURCE_LENGTH, device)
    return {
        "input_ids": input_ids,
        "attention_mask": torch.ones_like(input_ids),
        "labels": random_ids(vocab_size, batch_size, TARGET_LENGTH, device),
    }


def measure_training(preset: str, vocab_size: int | None, args) -> dict[str, dict[str, float]]:
    """Training tokens/s of both models in float32 and, with --bf16, in bfloat16 and ours in bfloat16 against
    Marian in float32 (the library's default); and the peak memory of a float32 step."""
    models = build_models(preset, vocab_size, args.device)
    batch = training_batch(models["ours"].config.vocab_size, args.batch_size, args.device)
    precisions = ("fp32", "bf16") if args.bf16 else ("fp32",)
    steps = {
        f"{name}_{precision}": TrainingStep(model, batch, args.device, bf16=precision == "bf16")
        for name, model in models.items()
        for precision in precisions
    }
    times = timed_rounds(steps, args.repeats, args.warmup)
    tokens = args.batch_size * (SOURCE_LENGTH + TARGET_LENGTH)
    speed = {name: tokens / statistics.median(t) for name, t in times.items()}
    prefix = "" if preset == "tiny" else f"{preset.replace('-', '_')}_"
    pairs = {"training_fp32": ("ours_fp32", "marian_fp32")}
    if args.bf16:
        pairs |= {
            "training_bf16": ("ours_bf16", "marian_bf16"),
            "ours_bf16_vs_marian_fp32": ("ours_bf16", "marian_fp32"),
        }
    table = {
        f"{prefix}{name}": {
            "ours": speed[own],
            "marian": speed[theirs],
            "ratio": ratio_interval(times[own], times[theirs]),
        }
        for name, (own, theirs) in pairs.items()
    }
    if preset == "tiny":
        table["memory"] = {name: peak_training_memory(steps[f"{name}_fp32"]) for name in models}
    return table


def ctranslate2_runs(
    model, input_ids: torch.Tensor, num_beams: int, folders: dict[str, Path]
) -> dict[str, Callable[[], None]]:
    """Functions that generate exactly NEW_TOKENS tokens for each source with the CTranslate2 exports of `model`, run
    as CTranslate2Translator runs them on the CPU: a translator per core, each with its share of the batch."""
    import ctranslate2

    from hf_tiny_transformer.hardware import cpu_cores
    from hf_tiny_transformer.serving.ctranslate2 import share_per_translator

    vocabulary = [f"t{i}" for i in range(model.config.vocab_size)]
    sources = [[vocabulary[i] for i in row] for row in input_ids.tolist()]
    runs, cores = {}, cpu_cores()
    for name, folder in folders.items():
        threads = torch.get_num_threads()
        translator = ctranslate2.Translator(str(folder), device="cpu", inter_threads=cores, intra_threads=1)
        torch.set_num_threads(threads)  # CTranslate2 sets the OpenMP threads it shares with torch

        def run(translator=translator):
            translator.translate_batch(
                sources,
                beam_size=num_beams,
                min_decoding_length=NEW_TOKENS,
                max_decoding_length=NEW_TOKENS,
                max_batch_size=share_per_translator(len(sources), cores),
            )

        runs[name] = run
    return runs


def export_for_ctranslate2(model, folder: Path) -> dict[str, Path]:
    """`model` exported with float32 and with int8 weights, its vocabulary named t0, t1, ... (random weights)."""
    from hf_tiny_transformer.serving.ctranslate2 import convert, model_spec

    vocabulary = ["<pad>", "<s>", "</s>", "<unk>", *(f"t{i}" for i in range(4, model.config.vocab_size))]
    folders = {}
    for quantization in ("float32", "int8"):
        folders[f"ctranslate2_{quantization}"] = folder / quantization
        convert(model_spec(model, vocabulary), folder / quantization, quantization)
    return folders


def measure_generation(args) -> dict[str, dict[str, float]]:
    """New tokens/s of both models in each generation workload."""
    models = build_models("tiny", args.vocab_size, args.device)
    with tempfile.TemporaryDirectory() as folder:
        exports = export_for_ctranslate2(models["ours"], Path(folder)) if args.ctranslate2 else {}
        results = {}
        for workload, (batch_size, num_beams) in GENERATION_WORKLOADS.items():
            input_ids = random_ids(args.vocab_size, batch_size, SOURCE_LENGTH, args.device)  # the same for all
            runs = {name: generation_run(model, input_ids, num_beams, args.device) for name, model in models.items()}
            runs.update(ctranslate2_runs(models["ours"], input_ids, num_beams, exports) if exports else {})
            times = timed_rounds(runs, args.repeats, args.warmup)
            speeds = {name: batch_size * NEW_TOKENS / statistics.median(values) for name, values in times.items()}
            for name in ("ours", *exports):
                results[workload if name == "ours" else f"{workload}_{name}"] = {
                    "ours": speeds[name],
                    "marian": speeds["marian"],
                    "ratio": ratio_interval(times[name], times["marian"]),
                }
            if workload == "greedy_b1":
                results["operators_greedy_b1"] = {name: operations(runs[name]) for name in ("ours", "marian")}
    return results


def main(argv=None) -> None:
    args = parse_args(argv)
    at_least("--repeats", args.repeats, 1)
    at_least("--batch_size", args.batch_size, 1)
    with contextlib.suppress(OSError):  # reports go under runs/, new in a clone; check_output names a problem
        Path(args.output).parent.mkdir(parents=True, exist_ok=True)
    check_output(args.output, kind="file", flag="--output")
    table = {}  # measurement -> {"ours": value, "marian": value}
    table.update(measure_training("tiny", args.vocab_size, args))
    if not args.skip_generation:
        table.update(measure_generation(args))
    if not args.skip_paper_base:
        table.update(measure_training("paper-base", None, args))

    print(f"device {args.device}, {torch.get_num_threads()} threads, median of {args.repeats} rounds")
    print("| measurement | ours | Marian | ours / Marian | 95 % interval |\n|---|---:|---:|---:|---:|")
    ratios = {}
    for name, values in table.items():
        if name.startswith("operators"):
            (ours, ours_reads), (marian, marian_reads) = values["ours"], values["marian"]
            print(f"| {name}: torch operators (reads to Python) | {ours:,} ({ours_reads}) | {marian:,} "
                  f"({marian_reads}) | {ours / marian:.2f} | |")  # fmt: skip
            continue
        scale, unit = (2**20, "MiB") if name == "memory" else (1, "tokens/s")
        ratios[name] = round(values["ratio"][0] if "ratio" in values else values["ours"] / values["marian"], 2)
        interval = "" if "ratio" not in values else f"{values['ratio'][1]:.2f} to {values['ratio'][2]:.2f}"
        print(
            f"| {name} | {values['ours'] / scale:,.0f} {unit} | {values['marian'] / scale:,.0f} {unit} "
            f"| {ratios[name]:.2f} | {interval} |"
        )
    write_atomically(
        args.output, json.dumps({"device": args.device, "repeats": args.repeats, "table": table}, indent=2)
    )
    print(json.dumps(ratios))


if __name__ == "__main__":
    sys.exit(run(main))
