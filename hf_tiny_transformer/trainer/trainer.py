"""Seq2SeqTrainer with the paper's recipe, and the progress line written where no bar is drawn.

    trainer = TranslationTrainer(model=model, args=training_args, train_dataset=..., data_collator=...)

- Batches by tokens (`--batch_tokens`): `TokenBatchSampler`, through accelerate's prepare() as Trainer's own
  DataLoader, which shards the batches under torchrun.
- Label smoothing (`--label_smoothing_factor`, the paper's 0.1) by the fused loss of `trainer.loss`, handed to
  Trainer as its `compute_loss_func`: the model itself, saved or loaded, always computes plain cross-entropy. In a
  training step the model is asked for no logits where the loss can make them from the decoder's output
  (`LabelSmoothing.model_inputs`, in `compute_loss`); evaluation gets them.
"""

import logging
import sys
import time

import datasets
import torch
from torch.utils.data import DataLoader
from transformers import Seq2SeqTrainer, TrainerCallback

from ..data.batching import TokenBatchSampler
from ..data.tokenizer import lowercases
from ..evaluation import scores
from .loss import LabelSmoothing, label_smoothing

logger = logging.getLogger(__name__)


def run_dtype(training_args) -> torch.dtype:
    """The dtype a run's matrix multiplies take: bfloat16 under bf16, float16 under fp16, else float32."""
    if training_args.bf16:
        return torch.bfloat16
    return torch.float16 if training_args.fp16 else torch.float32


class TranslationTrainer(Seq2SeqTrainer):
    """Seq2SeqTrainer with batches by tokens and label smoothing applied by the training run (see the module)."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        if self.args.label_smoothing_factor and self.compute_loss_func is None:
            self.compute_loss_func = label_smoothing(self.model, self.args.label_smoothing_factor, run_dtype(self.args))

    def compute_loss(self, model, inputs, return_outputs=False, num_items_in_batch=None):
        if isinstance(self.compute_loss_func, LabelSmoothing) and model.training and not return_outputs:
            inputs = self.compute_loss_func.model_inputs(inputs)
        return super().compute_loss(model, inputs, return_outputs, num_items_in_batch)

    def get_train_dataloader(self) -> DataLoader:
        if not getattr(self.args, "batch_tokens", None):
            return super().get_train_dataloader()
        dataset = self.train_dataset
        sampler = TokenBatchSampler(
            [len(ids) for ids in dataset["input_ids"]],
            [len(ids) for ids in dataset["labels"]],
            self.args.batch_tokens,
            seed=self.args.seed,
        )
        loader = DataLoader(
            dataset,
            batch_sampler=sampler,
            collate_fn=self.data_collator,
            num_workers=self.args.dataloader_num_workers,
            pin_memory=self.args.dataloader_pin_memory and self.args.device.type == "cuda",
        )
        return self.accelerator.prepare(loader)


def bleu_and_chrf(tokenizer, target_lang: str):
    """Trainer's compute_metrics: BLEU and chrF of the generated text against the references."""
    lowercase = lowercases(tokenizer)

    def compute_metrics(prediction):
        predictions, labels = (
            [[token if token >= 0 else tokenizer.pad_token_id for token in row] for row in array]
            for array in (prediction.predictions, prediction.label_ids)
        )
        hypotheses = tokenizer.batch_decode(predictions, skip_special_tokens=True)
        references = tokenizer.batch_decode(labels, skip_special_tokens=True)
        result = scores(hypotheses, references, target_lang, lowercase=lowercase)
        return {key: value for key, value in result.items() if key.startswith(("bleu", "chrf"))}

    return compute_metrics


class ProgressLog(TrainerCallback):
    """Where no progress bar is drawn (output to a file, CI): at every logging step, one line with the step, the
    time elapsed and an estimate of the time left: `step 800/2200 (36%), 9:37 elapsed, about 16:51 left, loss 3.4`."""

    def on_train_begin(self, args, state, control, **kwargs):
        self.start, self.first_step = time.monotonic(), state.global_step

    def on_log(self, args, state, control, logs=None, **kwargs):
        done, elapsed = state.global_step - self.first_step, time.monotonic() - self.start
        if done <= 0 or not state.max_steps:
            return
        loss = f", loss {logs['loss']:.4g}" if logs and "loss" in logs else ""
        if getattr(args, "time_budget_minutes", None) and state.max_steps == args.max_steps:  # not fixed yet
            logger.info(
                "step %d (measuring the speed for the time budget), %s elapsed%s",
                state.global_step,
                clock(elapsed),
                loss,
            )
            return
        left = elapsed / done * (state.max_steps - state.global_step)
        percent = 100 * state.global_step // state.max_steps
        logger.info(
            "step %d/%d (%d%%), %s elapsed, about %s left%s",
            state.global_step,
            state.max_steps,
            percent,
            clock(elapsed),
            clock(left),
            loss,
        )


def clock(seconds: float) -> str:
    """1:02:03 or 2:03."""
    minutes, seconds = divmod(round(seconds), 60)
    hours, minutes = divmod(minutes, 60)
    return f"{hours}:{minutes:02d}:{seconds:02d}" if hours else f"{minutes}:{seconds:02d}"


def progress_callbacks(training_args) -> list[TrainerCallback]:
    """Trainer's progress bar (elapsed time and ETA) at a terminal; elsewhere (a log file, CI) no bars, whose
    carriage returns would fill the file, but a ProgressLog line at every logging step."""
    if sys.stderr.isatty():
        return []
    training_args.disable_tqdm = True
    datasets.disable_progress_bars()
    return [ProgressLog()]


__all__ = ["TranslationTrainer", "bleu_and_chrf", "ProgressLog", "progress_callbacks"]
