"""Train a Transformer translation model from scratch, or fine-tune a saved one, with Seq2SeqTrainer.

    python training/train.py training/recipes/en-ja.json                        # a recipe: all flags from a JSON file
    python training/train.py training/recipes/en-ja.json --max_steps 100         # ... and overrides after it
    python training/train.py --shape tiny --corpus_dir ../shared/data/small_parallel_enja \\
        --source_lang en --target_lang ja --output_dir runs/en-ja --max_steps 4000

Every Seq2SeqTrainingArguments flag works (--per_device_train_batch_size, --gradient_accumulation_steps,
--resume_from_checkpoint, --report_to tensorboard, ...); the defaults follow the paper: Adam beta2 0.98 and epsilon
1e-9, inverse square root schedule after a linear warmup, label smoothing 0.1, batches of similar lengths. The
recipe's own flags: --batch_tokens (the paper's batches by tokens), --average_checkpoints N, --precision
auto|bf16|fp32 (auto: bfloat16 where the hardware has it), --time_budget_minutes (steps fitted to the budget).

The run reads top to bottom: arguments, output folder (held while the run lasts: a second run into it is refused),
data, tokenizer, model, Trainer, training, the saved model (`{output_dir}/hub`, ready for the Hub, with a model card
of the recipe that ran), the test set.
"""

import signal
import sys
import time

STARTED = time.monotonic()  # a time budget counts from here, before the heavy imports

# Ctrl-C while the libraries below import: exit status 130 without a traceback (run() reports a later one in a line)
if __name__ == "__main__" and signal.getsignal(signal.SIGINT) is signal.default_int_handler:
    signal.signal(signal.SIGINT, lambda signal_number, frame: sys.exit(130))

import json  # noqa: E402
import logging  # noqa: E402
import shutil  # noqa: E402
from pathlib import Path  # noqa: E402

import transformers  # noqa: E402
from transformers import AutoTokenizer, DataCollatorForSeq2Seq, set_seed  # noqa: E402
from transformers.trainer_callback import ProgressCallback  # noqa: E402
from transformers.trainer_utils import sort_checkpoints  # noqa: E402

from hf_tiny_transformer import TinyTransformerConfig, TinyTransformerForConditionalGeneration, load_shape  # noqa: E402
from hf_tiny_transformer.commands.shared import check_output, run  # noqa: E402
from hf_tiny_transformer.data.sources import load_pairs  # noqa: E402
from hf_tiny_transformer.data.tokenizer import lowercases, train_tokenizer  # noqa: E402
from hf_tiny_transformer.errors import UsageError, about, first_line  # noqa: E402
from hf_tiny_transformer.evaluation import scores  # noqa: E402
from hf_tiny_transformer.hardware import (  # noqa: E402
    allocator_advice,
    describe,
    flush_denormals,
    keep_compiled_kernels,
    keep_freed_memory,
    memory_allocator,
    tcmalloc_library,
)
from hf_tiny_transformer.loading import load_model_folder  # noqa: E402
from hf_tiny_transformer.marian import marian_of_the_same_shape  # noqa: E402
from hf_tiny_transformer.training.arguments import parse_arguments  # noqa: E402
from hf_tiny_transformer.training.budget import TimeBudget, provisional_max_steps  # noqa: E402
from hf_tiny_transformer.training.checkpoints import (  # noqa: E402
    average_into,
    is_complete_checkpoint,
    last_complete_checkpoint,
    restore_finished_run,
    trained_steps,
)
from hf_tiny_transformer.training.output_lock import hold_output_dir  # noqa: E402
from hf_tiny_transformer.training.precision import (  # noqa: E402
    RecordMode,
    candidate_modes,
    chosen,
    describe_mode,
    resumed_trial,
    time_modes,
    trial_batches,
)
from hf_tiny_transformer.training.record import check_resumable, is_recorded, save_run  # noqa: E402
from hf_tiny_transformer.training.trainer import TranslationTrainer, progress_callbacks  # noqa: E402

logger = logging.getLogger("train")


def main(argv: list[str] | None = None) -> int:
    logging.basicConfig(format="%(asctime)s %(levelname)s %(name)s: %(message)s", level=logging.INFO)
    keep_freed_memory()  # glibc keeps freed memory for the next step instead of faulting it in again (+4-11 %)
    keep_compiled_kernels()  # oneDNN keeps the bfloat16 kernels of every batch shape (+25 % in bf16 on AMX)
    model_args, data_args, training_args = parse_arguments(sys.argv[1:] if argv is None else argv)
    if training_args.flush_denormal:
        flush_denormals()  # before torch starts its threads, which inherit it
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
        check_output(output_dir, kind="folder", flag="--output_dir", overwrite=overwrite, overwrite_fix=fix)
        checkpoint = resume_checkpoint(training_args) if resume else None

        # Data, then the tokenizer (trained on the training data unless one is given), then the model.
        splits = load_pairs(data_args)
        fine_tuned = None  # (model, tokenizer) of the model to fine-tune
        if model_args.model_name_or_path:
            with about("--model_name_or_path"):
                fine_tuned = load_model_folder(model_args.model_name_or_path, model_args.trust_remote_code)
        config = fine_tuned[0].config if fine_tuned else make_config(model_args)
        longest = config.max_position_embeddings
        data_args.max_source_length = data_args.max_source_length or longest
        data_args.max_target_length = data_args.max_target_length or longest
        training_args.generation_max_length = training_args.generation_max_length or data_args.max_target_length + 1
        check_lengths(longest, data_args, training_args)
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
        budget = time_budget(training_args, checkpoint)
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
        modes = candidate_modes(
            training_args.precision_choice,
            training_args.bf16_native,
            training_args.requested_precision,
            model_args.attn_implementation,
            training_args.requested_bf16_weights,
        )
        trial = resumed_trial(checkpoint, modes) or time_modes(
            model, trial_batches(tokenized["train"], collator, training_args), modes, training_args
        )
        training_args.train_in(chosen(trial, training_args.precision_choice), trial.best.weights)
        model.set_attn_implementation(trial.best.attention)
        allocator = memory_allocator()
        logger.info(
            "machine: %s; precision %s; memory allocator: %s",
            describe(),
            describe_mode(training_args.precision_choice.reason, trial.best.attention, training_args.bf16_weights),
            allocator,
        )
        advice = allocator_advice(
            training_args.precision_choice.precision,
            training_args.bf16_native,
            training_args.device.type,
            allocator,
            tcmalloc_library(),
        )
        if advice:
            logger.warning(advice)

        # Training, to the time budget when the recipe has one.
        trainer = TranslationTrainer(
            model=model,
            args=training_args,
            train_dataset=tokenized["train"],
            eval_dataset=tokenized.get("validation"),
            data_collator=collator,
            processing_class=tokenizer,
            compute_metrics=metrics_function(tokenizer, data_args.target_lang),
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
            "bf16_weights": training_args.bf16_weights,
            "precision_trial_seconds_per_step": trial.seconds_per_step,
            "flush_denormal": training_args.flush_denormal,
            "machine": describe(),
            "memory_allocator": allocator,
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


def resume_checkpoint(training_args) -> Path:
    """--resume_from_checkpoint PATH, or true / last: the newest complete checkpoint of --output_dir."""
    value = training_args.resume_from_checkpoint
    if value.lower() in ("true", "last"):
        checkpoint = last_complete_checkpoint(training_args.output_dir)
        if checkpoint is None:
            raise UsageError(f"--resume_from_checkpoint {value}: no complete checkpoint in {training_args.output_dir}")
        return checkpoint
    if not is_complete_checkpoint(value):
        raise UsageError(
            f"--resume_from_checkpoint {value} is not a complete checkpoint; pass true to take the newest complete one"
        )
    return Path(value)


def make_config(model_args):
    """A new model's config: a shape or config file, with --config_overrides."""
    try:
        if model_args.shape:
            config = load_shape(model_args.shape)
        else:
            config = TinyTransformerConfig.from_pretrained(model_args.config_name)
        if model_args.config_overrides:
            config.update_from_string(model_args.config_overrides)
            config.validate()  # the checks across fields, which setting one field does not run
    except Exception as error:  # an unknown shape or field, a value of the wrong type or out of range
        source = f"--shape {model_args.shape}" if model_args.shape else f"--config_name {model_args.config_name}"
        raise UsageError(
            f"{source} --config_overrides {model_args.config_overrides}: {first_line(error)}; write "
            "key=value pairs separated by commas, e.g. d_model=128,encoder_layers=2"
        ) from None
    return config


def check_lengths(longest: int, data_args, training_args):
    """Every length must fit the positional table, or the run dies after training, in its evaluation."""
    for flag, value, limit in (
        ("--max_source_length", data_args.max_source_length, longest),
        ("--max_target_length", data_args.max_target_length, longest),
        ("--generation_max_length", training_args.generation_max_length, longest + 1),  # + the start token
    ):
        if value > limit:
            raise UsageError(
                f"{flag} {value} is longer than the model can take ({limit}: max_position_embeddings "
                f"{longest}); lower {flag}, or raise max_position_embeddings with --config_overrides"
            )


def make_tokenizer(model_args, data_args, splits, training_args, checkpoint: Path | None):
    """The given tokenizer, the resumed run's, or a new one trained on the training data."""
    saved = Path(training_args.output_dir) / "tokenizer"
    name = model_args.tokenizer_name or (checkpoint and (saved if saved.is_dir() else checkpoint))  # resuming: its own
    if name:
        try:
            return AutoTokenizer.from_pretrained(name, trust_remote_code=model_args.trust_remote_code)
        except Exception as error:
            raise UsageError(f"tokenizer {name} cannot be loaded: {first_line(error)}") from None
    train = splits["train"].take(100_000) if data_args.streaming else splits["train"]  # a stream: its first pairs
    texts = [text for pair in train for text in (pair["source"], pair["target"])]
    longest = max(data_args.max_source_length, data_args.max_target_length)
    tokenizer = train_tokenizer(texts, model_args.vocab_size, lowercase=model_args.lowercase, model_max_length=longest)
    if training_args.should_save:
        tokenizer.save_pretrained(saved)
    return tokenizer


def make_model(model_args, config, tokenizer):
    """A new model of the config's shape with the tokenizer's vocabulary."""
    ids = (tokenizer.pad_token_id, tokenizer.eos_token_id, tokenizer.bos_token_id)
    if ids != (config.pad_token_id, config.eos_token_id, config.bos_token_id):
        raise UsageError(f"the tokenizer's pad/eos/bos ids {ids} differ from the model config's")
    try:
        config.vocab_size = len(tokenizer)
        config.validate()
    except Exception as error:
        raise UsageError(
            f"the tokenizer's {len(tokenizer)} tokens do not fit the config: {first_line(error)}"
        ) from None
    if model_args.architecture == "marian":
        return marian_of_the_same_shape(config)
    return TinyTransformerForConditionalGeneration(config)


def tokenize(tokenizer, data_args):
    def encode(batch):
        sources = tokenizer(batch["source"], max_length=data_args.max_source_length, truncation=True)
        targets = tokenizer(text_target=batch["target"], max_length=data_args.max_target_length, truncation=True)
        return {**sources, "labels": targets["input_ids"]}

    return encode


def time_budget(training_args, checkpoint: Path | None) -> TimeBudget | None:
    """The budget callback when the run has a budget and no --max_steps (which repeats a budgeted run exactly);
    a resumed budgeted run keeps the step count it fixed."""
    if training_args.time_budget_minutes and training_args.max_steps > 0:
        logger.info("--max_steps %d given: the time budget is not used", training_args.max_steps)
        training_args.time_budget_minutes = None
    if not training_args.time_budget_minutes:
        return None
    if checkpoint is not None and trained_steps(checkpoint)["max_steps"]:
        training_args.max_steps = trained_steps(checkpoint)["max_steps"]
        logger.warning(
            "resuming a run with a time budget: its %d steps, fixed before the kill", training_args.max_steps
        )
        return None
    deadline = STARTED + 60 * training_args.time_budget_minutes
    training_args.max_steps = provisional_max_steps(deadline - time.monotonic())
    return TimeBudget(
        deadline,
        reserve_s=max(20.0, 0.02 * 60 * training_args.time_budget_minutes),
        save_steps=training_args.save_steps if training_args.save_strategy == "steps" else None,
        min_checkpoints=training_args.average_checkpoints or 1,
    )


def metrics_function(tokenizer, target_lang: str):
    """BLEU and chrF of generated text against the references, for Trainer's evaluation."""
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


if __name__ == "__main__":
    sys.exit(run(main))
