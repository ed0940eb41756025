"""The precision a run trains in (bf16 or fp32) and the attention implementation that goes with it, measured on the
run's own model and batches where the device gives a choice.

    modes = candidate_modes(training_args.precision_choice, training_args.bf16_native, "auto", "cpu")
    trial = time_modes(model, trial_batches(train_dataset, collator, training_args), modes, training_args)
    trial.best    # Mode("bf16", "eager"); trial.seconds_per_step: {"fp32, sdpa": 0.281, "bf16, eager": 0.171}

Native bfloat16 does not always pay: which precision trains faster depends on the CPU, the model's shape and its
batches. So where the device has bfloat16 natively, `--precision auto` times a few training steps in each
precision and keeps the faster, in seconds, inside any time budget. Each step is one of Trainer's: forward (under
autocast for bf16, the outputs cast to float32 as accelerate does), the run's label-smoothed loss, backward,
gradient clipping and the run's optimizer, on a copy of the model; the random number generators are left as they
were, so that the run trains the same whether or not it measured first. Under bf16 on a CPU the attention is the
eager one (the paper's formula), since PyTorch's CPU flash attention is slow in its bfloat16 backward pass; sdpa,
the library's default, everywhere else (docs/bf16-on-cpus.md).
"""

import copy
import json
import logging
import statistics
import time
from dataclasses import dataclass, field
from pathlib import Path

import torch
from accelerate.utils import convert_outputs_to_fp32
from transformers import Trainer, TrainerCallback
from transformers.trainer_pt_utils import LengthGroupedSampler

from ..data.batching import TokenBatchSampler
from ..hardware import Choice
from .loss import label_smoothing

logger = logging.getLogger(__name__)

MODE_FILE = "training_mode.json"  # in each checkpoint: the mode a resumed run keeps


@dataclass(frozen=True)
class Mode:
    """A way to train: a precision ("bf16" or "fp32") and an attention implementation ("sdpa", "eager")."""

    precision: str
    attention: str

    def __str__(self) -> str:
        return f"{self.precision}, {self.attention}"


@dataclass
class Trial:
    """Seconds a training step took in each mode tried (medians over rounds), and the fastest."""

    seconds_per_step: dict[str, float] = field(default_factory=dict)
    best: Mode | None = None

    def describe(self) -> str:
        """'a step took 0.171 s in bf16, eager; 0.284 s in fp32, sdpa', fastest first."""
        ranked = sorted(self.seconds_per_step.items(), key=lambda item: item[1])
        return "a step took " + "; ".join(f"{seconds:.3f} s in {mode}" for mode, seconds in ranked)


def describe_mode(reason: str, attention: str) -> str:
    """The mode a run trains in, as its log and its model card say it: the precision and why, and the attention."""
    return f"{reason}; {attention} attention"


def attention_for(precision: str, device_type: str) -> str:
    """The attention implementation a precision trains with on a device (see the module)."""
    return "eager" if precision == "bf16" and device_type == "cpu" else "sdpa"


def candidate_modes(choice: Choice, native: bool, requested_precision: str, device_type: str) -> list[Mode]:
    """The modes worth timing. `choice` is the precision the hardware rule gave (hardware.choose_precision),
    `native` whether the device has bfloat16 natively, `requested_precision` the flag's value: "auto" where bfloat16
    is native times both precisions, otherwise the one chosen is the only mode."""
    fp32, bf16 = (Mode(precision, attention_for(precision, device_type)) for precision in ("fp32", "bf16"))
    if choice.precision == "fp32":
        return [fp32]
    return [fp32, bf16] if requested_precision == "auto" and native else [bf16]


def trial_batches(dataset, collator, training_args, count: int = 3) -> list[dict[str, torch.Tensor]]:
    """The first `count` batches of the run's own kind: by tokens (`--batch_tokens`, as TokenBatchSampler makes
    them), of similar lengths (Trainer's group_by_length) or in the dataset's order (a stream, or random sampling)."""
    size = training_args.per_device_train_batch_size
    if isinstance(dataset, torch.utils.data.IterableDataset):
        examples = list(dataset.take(count * size))
        groups = [examples[i : i + size] for i in range(0, len(examples), size)]
        return [collator(group) for group in groups if group]
    if training_args.batch_tokens:
        lengths = [[len(ids) for ids in dataset[column]] for column in ("input_ids", "labels")]
        order = list(TokenBatchSampler(*lengths, training_args.batch_tokens, seed=training_args.seed))[:count]
    else:
        if training_args.train_sampling_strategy == "group_by_length":
            lengths = [len(ids) for ids in dataset["input_ids"]]
            indices = list(LengthGroupedSampler(size, lengths=lengths, generator=generator(training_args.seed)))
        else:
            indices = torch.randperm(len(dataset), generator=generator(training_args.seed)).tolist()
        order = [indices[i : i + size] for i in range(0, min(len(indices), count * size), size)]
    return [collator([dataset[i] for i in batch]) for batch in order]


def generator(seed: int) -> torch.Generator:
    """A generator of its own, so that choosing the batches draws nothing from the run's random numbers."""
    return torch.Generator().manual_seed(seed)


def time_modes(model, batches: list[dict], modes: list[Mode], training_args, rounds: int = 3) -> Trial:
    """Time a training step of a copy of `model` on `batches` in each mode: one pass over the batches to warm up
    (bfloat16 kernels are made for each new shape), then `rounds` passes, the modes taking turns; medians. Under
    torchrun every process measures and the figures are averaged, so that all of them choose the same mode."""
    if len(modes) == 1:
        return Trial(best=modes[0])
    device = training_args.device
    batches = [{name: tensor.to(device) for name, tensor in batch.items()} for batch in batches]
    runs = {mode: ModeRun(model, mode, training_args, device) for mode in modes}
    passes = {mode: [] for mode in modes}
    with torch.random.fork_rng(devices=[device] if device.type == "cuda" else []):
        for mode in modes:
            runs[mode].steps(batches)  # warm-up
        for _ in range(rounds):
            for mode in modes:
                passes[mode].append(runs[mode].steps(batches) / len(batches))
    seconds = torch.tensor([statistics.median(passes[mode]) for mode in modes], dtype=torch.float64)
    if torch.distributed.is_available() and torch.distributed.is_initialized():
        seconds = seconds.to(device)
        torch.distributed.all_reduce(seconds)
        seconds = seconds.cpu() / torch.distributed.get_world_size()
    figures = {str(mode): float(value) for mode, value in zip(modes, seconds)}
    return Trial(seconds_per_step=figures, best=modes[int(seconds.argmin())])


def resumed_trial(checkpoint: Path | None, modes: list[Mode]) -> Trial | None:
    """The trial of the run a checkpoint belongs to, where it recorded one whose mode is among `modes`: a resumed
    run trains on in its own mode (a new trial could choose another)."""
    record = checkpoint / MODE_FILE if checkpoint is not None else None
    if record is None or not record.is_file():
        return None
    saved = json.loads(record.read_text())
    best = Mode(saved["precision"], saved["attention"])
    if best not in modes:
        return None
    logger.warning("resuming a run that trained in %s: it goes on in that mode", best)
    return Trial(seconds_per_step=saved["seconds_per_step"], best=best)


class RecordMode(TrainerCallback):
    """Writes the run's mode and its trial's figures into every checkpoint (`training_mode.json`)."""

    def __init__(self, trial: Trial):
        self.trial = trial

    def on_save(self, args, state, control, **kwargs):
        folder = Path(args.output_dir) / f"checkpoint-{state.global_step}"
        if state.is_world_process_zero and folder.is_dir():
            record = {
                "precision": self.trial.best.precision,
                "attention": self.trial.best.attention,
                "seconds_per_step": self.trial.seconds_per_step,
            }
            (folder / MODE_FILE).write_text(json.dumps(record, indent=2) + "\n")


def chosen(trial: Trial, choice: Choice) -> Choice:
    """The precision the run trains in and why: the hardware rule's `choice` where nothing was timed, else the
    fastest mode, with the figures."""
    if not trial.seconds_per_step:
        return choice
    evidence = choice.reason.split(": ", 1)[1]
    return Choice(
        trial.best.precision,
        f"{trial.best.precision}: the fastest on this run's batches ({trial.describe()}); {evidence}",
    )


class ModeRun:
    """A copy of the model and its own optimizer (the run's: Trainer's choice from the arguments), stepping in one
    mode."""

    def __init__(self, model, mode: Mode, training_args, device: torch.device):
        self.mode = mode
        self.model = copy.deepcopy(model).to(device).train()
        self.model.set_attn_implementation(mode.attention)
        self.forward = self.model.forward
        if mode.precision == "bf16":  # as accelerate's prepare_model does for Trainer
            self.forward = convert_outputs_to_fp32(torch.autocast(device.type, dtype=torch.bfloat16)(self.forward))
        optimizer_class, optimizer_kwargs = Trainer.get_optimizer_cls_and_kwargs(training_args, self.model)
        self.optimizer = optimizer_class(self.model.parameters(), **optimizer_kwargs)
        dtype = torch.bfloat16 if mode.precision == "bf16" else torch.float32
        epsilon = training_args.label_smoothing_factor
        self.loss = label_smoothing(self.model, epsilon, dtype) if epsilon else None  # TranslationTrainer's
        self.max_grad_norm = training_args.max_grad_norm
        self.device = device

    def step(self, batch: dict) -> torch.Tensor:
        """One training step on `batch`: the loss (TranslationTrainer's: label smoothing, from the decoder's output;
        else the model's own), backward, clipping, the optimizer. Returns the loss."""
        if self.loss:
            inputs = {name: tensor for name, tensor in batch.items() if name != "labels"}
            loss = self.loss(self.forward(**self.loss.model_inputs(inputs)), batch["labels"])
        else:
            loss = self.forward(**batch).loss
        loss.backward()
        if self.max_grad_norm:
            torch.nn.utils.clip_grad_norm_(self.model.parameters(), self.max_grad_norm)
        self.optimizer.step()
        self.optimizer.zero_grad(set_to_none=True)
        return loss.detach()

    def steps(self, batches: list[dict]) -> float:
        """Seconds to train one step on each batch."""
        start = time.perf_counter()
        for batch in batches:
            self.step(batch)
        if self.device.type == "cuda":
            torch.cuda.synchronize(self.device)
        return time.perf_counter() - start


__all__ = [
    "Mode",
    "Trial",
    "ModeRun",
    "describe_mode",
    "attention_for",
    "candidate_modes",
    "trial_batches",
    "time_modes",
    "resumed_trial",
    "RecordMode",
    "chosen",
]
