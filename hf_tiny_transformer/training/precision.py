"""The precision (bf16 or fp32) and attention implementation a run trains in, measured on the run's own model and
batches wherever the device gives a choice.

    modes = candidate_modes(training_args.precision_choice, training_args.bf16_native, model_args.attn_implementation)
    trial = time_modes(model, trial_batches(train_dataset, collator, training_args), modes, training_args)
    trial.best    # Mode("bf16", "eager"); trial.seconds_per_step: {"fp32, sdpa": 0.281, "bf16, sdpa": 0.312, ...}

Native bfloat16 does not always pay. On this project's AMX CPU the matrix multiplies run several times faster in
bfloat16, but PyTorch's CPU flash attention (sdpa) takes longer in its bfloat16 backward pass than the whole float32
step, so that bf16 with sdpa trained no faster than float32, and bf16 with the model's eager attention 1.3-1.6x
faster (benchmarks/README.md). Which wins depends on the CPU, the model's shape and its batches, so a run that may
choose (`--precision auto` where bfloat16 is native, `--attn_implementation auto` under bfloat16) times a few
training steps of each candidate and keeps the fastest: seconds, inside any time budget. Each step is one of
Trainer's: forward (under autocast for bf16, the outputs cast to float32 as accelerate does), the loss (label
smoothed as the run's), backward, gradient clipping and the run's optimizer, on a copy of the model; the random
number generators are left as they were, so that the run trains the same whether or not it measured first.

bf16 comes in two ways. Under autocast (accelerate's mixed precision) the model keeps float32 weights, each matrix
multiply casts its inputs to bfloat16, and LayerNorm, softmax and the residual stream stay in float32, with casts
between them at every step. With `--bf16_weights` the forward and backward passes run on a bfloat16 copy of the
model (`BFloat16Weights`), with no casts between operations, while the optimizer updates float32 master weights.
Which is faster depends on the CPU (bfloat16 weights 4-9 % faster on AMX through train.py; a first version of them
11 % slower on the AMD CPU): `--bf16_weights auto` has the trial time both. Autocast is the default: bfloat16 weights
cost nothing at 1,500 equal steps over seven seeds; after 5,700 equal steps en -> ja four seeds put them -0.15 ± 0.68
BLEU and +0.014 ± 0.016 nats a token from float32 (README.md, "Same minutes"): no cost shown, none ruled out.
"""

import copy
import json
import logging
import statistics
import time
from collections.abc import Callable
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

ATTENTION = ("sdpa", "eager")  # the implementations tried under bf16; sdpa is the library's default
MODE_FILE = "training_mode.json"  # in each checkpoint: the mode a resumed run keeps


@dataclass(frozen=True)
class Mode:
    """A way to train: a precision ("bf16" or "fp32"), an attention implementation ("sdpa", "eager"), and for bf16
    where the forward and backward passes take their weights: "fp32" (autocast casts them at every step) or "bf16"
    (a bfloat16 copy of the model: `BFloat16Weights`)."""

    precision: str
    attention: str
    weights: str = "fp32"

    def __str__(self) -> str:
        weights = " weights" if self.precision == "bf16" and self.weights == "bf16" else ""
        return f"{self.precision}{weights}, {self.attention}"


@dataclass
class Trial:
    """Seconds a training step took in each mode tried (medians over rounds), and the fastest."""

    seconds_per_step: dict[str, float] = field(default_factory=dict)
    best: Mode | None = None

    def describe(self) -> str:
        """'a step took 0.171 s in bf16, eager; 0.284 s in fp32, sdpa; 0.312 s in bf16, sdpa', fastest first."""
        ranked = sorted(self.seconds_per_step.items(), key=lambda item: item[1])
        return "a step took " + "; ".join(f"{seconds:.3f} s in {mode}" for mode, seconds in ranked)


def describe_mode(reason: str, attention: str, bf16_weights: bool) -> str:
    """The mode a run trains in, as its log and its model card say it: the precision and why, the attention, and
    where --bf16_weights ran, the weights."""
    return f"{reason}; {attention} attention" + ("; bfloat16 weights, float32 master weights" if bf16_weights else "")


def candidate_modes(
    choice: Choice, native: bool, requested_precision: str, attention: str, bf16_weights: str = "false"
) -> list[Mode]:
    """The modes worth timing. `choice` is the precision the hardware rule gave (hardware.choose_precision),
    `native` whether the device has bfloat16 natively, `attention` "auto" or an implementation, `bf16_weights`
    (`--bf16_weights`) "true" where bf16 runs on a bfloat16 copy of the weights, "false" under autocast, "auto" both.

    fp32 keeps the library's default attention (sdpa) unless one is named. Under bf16 both implementations are
    candidates, unless one is named; "auto" precision where bfloat16 is native adds fp32 as a candidate.
    """
    attentions = ATTENTION if attention == "auto" else (attention,)
    fp32 = [Mode("fp32", "sdpa" if attention == "auto" else attention)]
    if choice.precision == "fp32":
        return fp32
    weights = {"auto": ("fp32", "bf16"), "true": ("bf16",), "false": ("fp32",)}[bf16_weights]
    bf16 = [Mode("bf16", name, kind) for kind in weights for name in attentions]
    return (fp32 + bf16) if requested_precision == "auto" and native else bf16


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
    best = Mode(saved["precision"], saved["attention"], saved.get("weights", "fp32"))  # runs before --bf16_weights
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
                "weights": self.trial.best.weights,
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


class BFloat16Weights:
    """A bfloat16 copy of a float32 model for the forward and backward passes of training: no autocast, so no casts
    between operations, and the residual stream, LayerNorm and softmax run in bfloat16 as well. The float32 model
    keeps the weights: the gradients are added to its own, which Trainer clips and the optimizer applies to the
    float32 weights (the master weights), and it is what is saved, averaged and evaluated. The outputs are cast to
    float32, so that the loss is computed in float32, as under autocast.

        weights = BFloat16Weights(model)
        loss = loss_of(weights.load(model, step))  # the float32 weights copied in (once an optimizer step)
        loss.backward()
        weights.add_gradients_to(model)
    """

    def __init__(self, model: torch.nn.Module, compile: Callable[[torch.nn.Module], torch.nn.Module] | None = None):
        """`compile`: what makes the module that runs from the copy (the run's torch.compile), where one is given."""
        self.copy = copy.deepcopy(model).to(torch.bfloat16)
        self.copy.forward = convert_outputs_to_fp32(self.copy.forward)
        self.runs = compile(self.copy) if compile else self.copy
        self.loaded_step = None

    def load(self, model: torch.nn.Module, step: int | None = None) -> torch.nn.Module:
        """The copy (compiled where asked), holding `model`'s weights rounded to bfloat16, in its training or
        evaluation mode. `step`: the optimizer steps taken so far, where the caller counts them; the weights are
        copied again only when it has changed (the micro-batches of gradient accumulation train on one copy, as on
        one float32 model)."""
        self.copy.train(model.training)
        if step is None or step != self.loaded_step:
            with torch.no_grad():
                for low, weight in zip(self.copy.parameters(), model.parameters(), strict=True):
                    low.copy_(weight)
        self.loaded_step = step
        return self.runs

    def add_gradients_to(self, model: torch.nn.Module):
        """The copy's gradients added to `model`'s (accumulated in float32), and cleared from the copy."""
        for low, weight in zip(self.copy.parameters(), model.parameters(), strict=True):
            if low.grad is None:
                continue
            if weight.grad is None:
                weight.grad = low.grad.float()
            else:
                weight.grad += low.grad
            low.grad = None


class ModeRun:
    """A copy of the model and its own optimizer (the run's: Trainer's choice from the arguments), stepping in one
    mode."""

    def __init__(self, model, mode: Mode, training_args, device: torch.device):
        self.mode = mode
        self.model = copy.deepcopy(model).to(device).train()
        self.model.set_attn_implementation(mode.attention)
        self.forward = self.model.forward
        self.bf16_weights = None
        if mode.precision == "bf16" and mode.weights == "bf16":
            self.bf16_weights = BFloat16Weights(self.model)
        elif mode.precision == "bf16":  # as accelerate's prepare_model does for Trainer
            self.forward = convert_outputs_to_fp32(torch.autocast(device.type, dtype=torch.bfloat16)(self.forward))
        optimizer_class, optimizer_kwargs = Trainer.get_optimizer_cls_and_kwargs(training_args, self.model)
        self.optimizer = optimizer_class(self.model.parameters(), **optimizer_kwargs)
        dtype = torch.bfloat16 if mode.precision == "bf16" else torch.float32
        epsilon = training_args.label_smoothing_factor
        self.loss = label_smoothing(self.model, epsilon, dtype) if epsilon else None  # TranslationTrainer's
        self.max_grad_norm = training_args.max_grad_norm
        self.device = device

    def steps(self, batches: list[dict], phase_ended: Callable[[str], None] | None = None) -> float:
        """Seconds to train one step on each batch. `phase_ended`, where given, is called with each phase's name as
        it ends ("weights in", "forward", "loss", "backward", "gradients out", "clipping", "optimizer"; without label
        smoothing the model computes its loss in its forward pass, one phase: "loss"), for a benchmark to time them
        on the CPU (benchmarks/profile_training.py)."""
        phase_ended = phase_ended or (lambda phase: None)
        start = time.perf_counter()
        for batch in batches:
            forward = self.bf16_weights.load(self.model) if self.bf16_weights else self.forward
            phase_ended("weights in")
            if self.loss:  # TranslationTrainer's loss: label smoothing, from the decoder's output
                inputs = {name: tensor for name, tensor in batch.items() if name != "labels"}
                outputs = forward(**self.loss.model_inputs(inputs))
                phase_ended("forward")
                loss = self.loss(outputs, batch["labels"])
            else:
                loss = forward(**batch).loss
            phase_ended("loss")
            loss.backward()
            phase_ended("backward")
            if self.bf16_weights:
                self.bf16_weights.add_gradients_to(self.model)
            phase_ended("gradients out")
            if self.max_grad_norm:
                torch.nn.utils.clip_grad_norm_(self.model.parameters(), self.max_grad_norm)
            phase_ended("clipping")
            self.optimizer.step()
            self.optimizer.zero_grad(set_to_none=True)
            phase_ended("optimizer")
        if self.device.type == "cuda":
            torch.cuda.synchronize(self.device)
        return time.perf_counter() - start


__all__ = [
    "Mode",
    "Trial",
    "BFloat16Weights",
    "describe_mode",
    "candidate_modes",
    "trial_batches",
    "time_modes",
    "resumed_trial",
    "RecordMode",
    "chosen",
]
