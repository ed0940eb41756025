"""Train a Transformer translation model from scratch, or fine-tune a saved one, with Seq2SeqTrainer.

    python training/train.py training/recipes/en-ja.json                        # a recipe: all flags from a JSON file
    python training/train.py training/recipes/en-ja.json --max_steps 100         # ... and overrides after it
    python training/train.py --shape tiny --corpus_dir data/small_parallel_enja \\
        --source_lang en --target_lang ja --output_dir runs/en-ja --max_steps 4000

Every Seq2SeqTrainingArguments flag works (--per_device_train_batch_size, --gradient_accumulation_steps,
--resume_from_checkpoint, --report_to tensorboard, ...); the defaults follow the paper: Adam beta2 0.98 and epsilon
1e-9, inverse square root schedule after a linear warmup, label smoothing 0.1, batches of similar lengths. The
recipe's own flags: --batch_tokens (the paper's batches by tokens), --average_checkpoints N, --precision
auto|bf16|fp32 (the one speed setting; auto: bfloat16 where the hardware has it and a trial finds it faster),
--time_budget_minutes (steps fitted to the budget).

The run reads top to bottom: arguments, output folder (held while the run lasts: a second run into it is refused),
data, tokenizer, model, Trainer, training, the saved model (`{output_dir}/hub`, ready for the Hub, with a model card
of the recipe that ran), the test set.
"""

import sys
import time

STARTED = time.monotonic()  # a time budget counts from here, before the heavy imports

import json
import logging
import shutil
from pathlib import Path

import transformers
from transformers import DataCollatorForSeq2Seq, set_seed
from transformers.trainer_callback import ProgressCallback
from transformers.trainer_utils import sort_checkpoints

from hf_tiny_transformer.data.sources import load_pairs
from hf_tiny_transformer.errors import UsageError, about
from hf_tiny_transformer.guards.loading import load_model_folder
from hf_tiny_transformer.guards.lock import hold_output_dir
from hf_tiny_transformer.guards.outputs import check_output, inputs_of
from hf_tiny_transformer.guards.runner import run
from hf_tiny_transformer.hardware import describe, flush_denormals, keep_compiled_kernels
from hf_tiny_transformer.trainer.arguments import parse_arguments
from hf_tiny_transformer.trainer.budget import time_budget
from hf_tiny_transformer.trainer.checkpoints import (
    average_into,
    restore_finished_run,
    resume_checkpoint,
    trained_steps,
)
from hf_tiny_transformer.trainer.precision import (
    RecordMode,
    candidate_modes,
    chosen,
    describe_mode,
    resumed_trial,
    time_modes,
    trial_batches,
)
from hf_tiny_transformer.trainer.record import check_resumable, is_recorded, save_run
from hf_tiny_transformer.trainer.setup import fit_lengths, make_config, make_model, make_tokenizer, tokenize
from hf_tiny_transformer.trainer.trainer import TranslationTrainer, bleu_and_chrf, progress_callbacks

logger = logging.getLogger("train")
# What a run writes in its --output_dir (Trainer's checkpoints among them); the rest of the folder is left alone.
WRITES = ("hub", "tokenizer", "checkpoint-*", "metrics.json", "runs")


def main(argv: list[str] | None = None) -> int:
    logging.basicConfig(format="%(asctime)s %(levelname)s %(name)s: %(message)s", level=logging.INFO)
    keep_compiled_kernels()  # oneDNN keeps the bfloat16 kernels of every batch shape, instead of making them again
    flush_denormals()  # before torch starts its threads, which inherit it
    model_args, data_args, training_args = parse_arguments(sys.argv[1:] if argv is None else argv)
    transformers.utils.logging.set_verbosity(training_args.get_process_log_level())

    # The output folder: held by this run while it runs (a second run into it is refused), and a new one, or one whose
    # run is resumed or overwritten, as asked.
    output_dir = Path(training_args.output_dir)
    resume = bool(training_args.resume_from_checkpoint) and training_args.resume_from_checkpoint.lower() != "false"
    if resume and training_args.overwrite_output_dir:
        raise UsageError("pass --overwrite_output_dir (start anew) or --resume_from_checkpoint (continue), not both")
    fix = (
        "pass --resume_from_checkpoint true to continue that run, --overwrite_output_dir to start anew (its "
        "checkpoints are removed), or choose another --output_dir"
    )
    overwrite = resume or training_args.overwrite_output_dir
    with hold_output_dir(output_dir, hold=training_args.should_save):  # under torchrun: by the process that saves
        check_output(
            output_dir,
            flag="--output_dir",
            kind="folder",
            inputs=inputs_of(model_args, data_args),
            writes=WRITES,
            overwrite=overwrite,
            overwrite_fix=fix,
        )
        checkpoint = resume_checkpoint(training_args.resume_from_checkpoint, output_dir) if resume else None

        # Data, then the tokenizer (trained on the training data unless one is given), then the model.
        splits = load_pairs(data_args)
        fine_tuned = None  # (model, tokenizer) of the model to fine-tune
        if model_args.model_name_or_path:
            with about("--model_name_or_path"):
                fine_tuned = load_model_folder(model_args.model_name_or_path, model_args.trust_remote_code)
        config = fine_tuned[0].config if fine_tuned else make_config(model_args)
        fit_lengths(config, data_args, training_args)
        if training_args.overwrite_output_dir and training_args.should_save:
            for folder in sort_checkpoints(str(output_dir)) if output_dir.is_dir() else []:
                logger.warning("--overwrite_output_dir: removing %s of the earlier run", folder)
                shutil.rmtree(folder)
        set_seed(training_args.seed)
        tokenizer = (
            fine_tuned[1] if fine_tuned else make_tokenizer(model_args, data_args, splits, training_args, checkpoint)
        )
        model = fine_tuned[0] if fine_tuned else make_model(model_args, config, tokenizer)
        if checkpoint is not None:
            check_resumable(checkpoint, model.config, tokenizer)
        tokenized = {
            split: pairs.map(tokenize(tokenizer, data_args), batched=True, remove_columns=["source", "target"])
            for split, pairs in splits.items()
        }
        sizes = {split: getattr(pairs, "num_rows", "a stream") for split, pairs in tokenized.items()}
        logger.info("model: %s parameters; data: %s", f"{model.num_parameters():,}", sizes)

        # A time budget fixes the steps (a resumed run keeps the number it fixed). A run resumed at its end trains
        # nothing: it only writes its final model, metrics and test scores where a kill came before they were saved.
        budget = time_budget(training_args, checkpoint, STARTED)
        finished = checkpoint is not None and 0 < training_args.max_steps <= trained_steps(checkpoint)["global_step"]
        if finished:
            if is_recorded(output_dir, with_test_scores="test" in tokenized and training_args.do_predict):
                logger.warning(
                    "%s has trained all %d steps of the run: nothing to train (%s is left as it is); pass a larger "
                    "--max_steps to train on", checkpoint.name, training_args.max_steps, output_dir / "hub",
                )  # fmt: skip
                return 0
            logger.warning("%s has trained all steps of the run: writing what the run did not save", checkpoint.name)

        # The precision and attention to train in: timed on this run's batches where the device gives a choice (a
        # resumed run keeps its own).
        collator = DataCollatorForSeq2Seq(tokenizer, model=model)
        native, requested = training_args.bf16_native, training_args.requested_precision
        modes = candidate_modes(training_args.precision_choice, native, requested, training_args.device.type)
        trial = resumed_trial(checkpoint, modes) or time_modes(
            model, trial_batches(tokenized["train"], collator, training_args), modes, training_args
        )
        training_args.train_in(chosen(trial, training_args.precision_choice))
        model.set_attn_implementation(trial.best.attention)
        mode = describe_mode(training_args.precision_choice.reason, trial.best.attention)
        logger.info("machine: %s; precision %s", describe(), mode)

        # Training, to the time budget when the recipe has one.
        trainer = TranslationTrainer(
            model=model,
            args=training_args,
            train_dataset=tokenized["train"],
            eval_dataset=tokenized.get("validation"),
            data_collator=collator,
            processing_class=tokenizer,
            compute_metrics=bleu_and_chrf(tokenizer, data_args.target_lang),
            callbacks=progress_callbacks(training_args) + [RecordMode(trial)] + ([budget] if budget else []),
        )
        if budget:
            budget.progress = next(
                (c for c in trainer.callback_handler.callbacks if isinstance(c, ProgressCallback)), None
            )
        if finished:
            result = restore_finished_run(trainer, checkpoint)
        else:
            result = trainer.train(resume_from_checkpoint=str(checkpoint) if checkpoint else None)
        metrics = {
            "train_runtime_s": result.metrics["train_runtime"],
            "train_steps": trainer.state.global_step,
            "precision": training_args.precision_choice.precision,
            "precision_reason": training_args.precision_choice.reason,
            "attention": trial.best.attention,
            "precision_trial_seconds_per_step": trial.seconds_per_step,
            "machine": describe(),
        }
        if budget:
            metrics.update(
                time_budget_minutes=training_args.time_budget_minutes, seconds_per_step=budget.seconds_per_step
            )
        if training_args.include_num_input_tokens_seen != "no":  # Trainer's count of source tokens (padding or not)
            metrics["num_input_tokens_seen"] = trainer.state.num_input_tokens_seen
        logger.warning(
            "process %d of %d: %d optimizer steps, training loss %.4f",
            training_args.process_index,
            training_args.world_size,
            trainer.state.global_step,
            result.training_loss,
        )
        if training_args.average_checkpoints:
            trainer.accelerator.wait_for_everyone()
            folders = average_into(trainer.model, output_dir, training_args.average_checkpoints)
            logger.warning("the final model is the average of %s", ", ".join(folder.name for folder in folders))

        # The trained model is saved before anything else can fail; the test scores are added to its card after.
        if trainer.is_world_process_zero():
            save_run(trainer.model, tokenizer, model_args, data_args, training_args, metrics)
        if "test" in tokenized and training_args.do_predict:
            test = trainer.predict(tokenized["test"], metric_key_prefix="test")
            metrics.update(
                {key: value for key, value in test.metrics.items() if key.startswith(("test_bleu", "test_chrf"))}
            )
            if trainer.is_world_process_zero():
                save_run(trainer.model, tokenizer, model_args, data_args, training_args, metrics, card_only=True)
        logger.info("metrics: %s", json.dumps(metrics))
        # Under torchrun: the process group closed while Python still runs (gloo's threads left to the interpreter's
        # exit can abort a process that has finished its work: pytorch/pytorch#190489), and only after the DDP wrapper
        # that holds it is freed. Freed last by that wrapper, the group is destroyed with the GIL held, and a gloo
        # thread that needs the GIL to free a tensor deadlocks the process (seen once in CI); destroy_process_group
        # releases it.
        trainer.accelerator.wait_for_everyone()  # all processes close it together
        trainer.model_wrapped = trainer.model
        trainer.accelerator.free_memory()  # the wrapper's last references
        trainer.accelerator.end_training()
        return 0


if __name__ == "__main__":
    sys.exit(run(main))
