"""What a training run leaves behind: `{output_dir}/hub` (the model ready for the Hub, with a model card that states
the recipe that really ran), `{output_dir}/metrics.json`; whether a run has left them; and the check that a
checkpoint may be resumed.

    save_run(model, tokenizer, model_args, data_args, training_args, metrics)
"""

import json
from pathlib import Path

from ..errors import UsageError
from ..guards.writing import staged_folder, write_atomically
from ..hub import model_card, save_for_hub, with_evaluation
from .checkpoints import shape_differences, vocabulary
from .precision import describe_mode


def check_resumable(checkpoint: Path, config, tokenizer):
    """The checkpoint must have been trained with this tokenizer and a model of this shape."""
    saved_tokenizer = checkpoint / "tokenizer.json"
    if saved_tokenizer.is_file() and vocabulary(saved_tokenizer.read_text()) != vocabulary(
        tokenizer.backend_tokenizer.to_str()
    ):
        raise UsageError(
            f"--resume_from_checkpoint: {checkpoint.name} was trained with another tokenizer than this run's; resume "
            "with its tokenizer (--tokenizer_name), or start anew with --overwrite_output_dir"
        )
    differences = shape_differences(json.loads((checkpoint / "config.json").read_text()), config.to_dict())
    if differences:
        listed = "; ".join(f"{key} {saved} there, {ours} here" for key, saved, ours in differences)
        raise UsageError(
            f"--resume_from_checkpoint: {checkpoint.name} is a different model ({listed}); resume with the flags it "
            "was trained with, or start anew with --overwrite_output_dir"
        )


def is_recorded(output_dir: str | Path, with_test_scores: bool) -> bool:
    """Whether the run in `output_dir` saved its final model (`hub`) and its metrics.json, with its test scores where
    it evaluates on a test split: a run killed after its last checkpoint has them still to write."""
    output_dir = Path(output_dir)
    try:
        metrics = json.loads((output_dir / "metrics.json").read_text())
    except (OSError, ValueError):
        return False
    scored = any(key.startswith("test_") for key in metrics)
    return (output_dir / "hub").is_dir() and (scored or not with_test_scores)


def training_procedure(model, data_args, training_args, metrics: dict) -> str:
    """The model card's account of the run, one line per part of the recipe, from the values that ran."""
    args = training_args
    processes = f" x {args.world_size} processes" if args.world_size > 1 else ""
    if args.batch_tokens:
        batches = (
            f"sentence pairs of similar length, at most {args.batch_tokens} source + target tokens a batch "
            f"(padding included) x {args.gradient_accumulation_steps} accumulation{processes}"
        )
    else:
        batches = (
            f"{args.per_device_train_batch_size} pairs x {args.gradient_accumulation_steps} accumulation{processes}"
        )
    averaging = (
        f"the last {args.average_checkpoints} checkpoints (every {args.save_steps} steps) averaged"
        if args.average_checkpoints
        else "none (the last step's weights)"
    )
    config = model.config
    lines = {
        "Steps": f"{metrics['train_steps']} in {metrics['train_runtime_s'] / 60:.1f} minutes on {metrics['machine']}",
        "Batches": batches,
        "Optimizer": f"Adam (beta1 {args.adam_beta1}, beta2 {args.adam_beta2}, epsilon {args.adam_epsilon}), peak "
        f"learning rate {args.learning_rate}, {getattr(args.lr_scheduler_type, 'value', args.lr_scheduler_type)} "
        f"schedule, {args.get_warmup_steps(metrics['train_steps'])} warmup steps",
        "Label smoothing": f"{args.label_smoothing_factor} (in the training loss; the saved model's loss is plain "
        "cross-entropy)",
        "Dropout": f"{getattr(config, 'dropout', None)} (attention {getattr(config, 'attention_dropout', None)}, "
        f"activation {getattr(config, 'activation_dropout', None)})",
        "Precision": describe_mode(metrics["precision_reason"], metrics["attention"]),
        "Checkpoint averaging": averaging,
    }
    if metrics.get("time_budget_minutes"):
        repeat = f"--max_steps {metrics['train_steps']} --precision {metrics['precision']}"
        lines["Time budget"] = (
            f"{metrics['time_budget_minutes']} minutes for the whole run; {metrics['train_steps']} "
            f"steps fitted at {metrics['seconds_per_step']:.2f} s a step (repeat with {repeat})"
        )
    return "Trained with `training/train.py`:\n\n" + "\n".join(f"- {name}: {value}" for name, value in lines.items())


def describe_data(data_args) -> str:
    """The training data as a model card names it: folder and file names, never a local absolute path."""
    if data_args.corpus_dir:
        return f"`{Path(data_args.corpus_dir).name}` ({data_args.source_lang}-{data_args.target_lang} sentence pairs)"
    if data_args.dataset_name:
        return f"the `{Path(data_args.dataset_name).name}` dataset"
    files = [data_args.train_source_file, data_args.train_target_file, data_args.train_file]
    return "local files: " + ", ".join(f"`{Path(name).name}`" for name in files if name)


def save_run(model, tokenizer, model_args, data_args, training_args, metrics: dict, card_only: bool = False):
    """`{output_dir}/hub` and then `{output_dir}/metrics.json` (a kill between the two leaves the earlier run's pair,
    or the new model with the earlier metrics, never the new metrics beside the earlier model); with card_only, the
    test scores into the card written before (its metrics block only)."""
    output_dir = Path(training_args.output_dir)
    save_hub(model, tokenizer, model_args, data_args, training_args, metrics, card_only)
    write_atomically(output_dir / "metrics.json", json.dumps(metrics, indent=2) + "\n")


def save_hub(model, tokenizer, model_args, data_args, training_args, metrics: dict, card_only: bool):
    """The run's `hub` folder: the model with its card, or the card's metrics block only."""
    folder = Path(training_args.output_dir) / "hub"
    test_scores = {key.removeprefix("test_"): value for key, value in metrics.items() if key.startswith("test_")}
    if card_only:
        if (folder / "README.md").is_file():
            how = "the test split, with the generation config of training"
            write_atomically(
                folder / "README.md", with_evaluation((folder / "README.md").read_text(), test_scores, how)
            )
        return
    generation = model.generation_config
    generation.max_length = training_args.generation_max_length
    generation.source_lang, generation.target_lang = data_args.source_lang, data_args.target_lang
    generation._from_model_config = False  # else loading drops the attributes it does not know (the languages)
    if model_args.architecture == "marian":  # a comparison model: no card of ours
        with staged_folder(folder) as staging:
            model.save_pretrained(staging)
            tokenizer.save_pretrained(staging)
        return
    card = model_card(
        model,
        source_lang=data_args.source_lang,
        target_lang=data_args.target_lang,
        training_data=describe_data(data_args),
        metrics=test_scores,
        training_procedure=training_procedure(model, data_args, training_args, metrics),
    )
    save_for_hub(model, tokenizer, folder, card)


__all__ = ["check_resumable", "is_recorded", "save_run", "training_procedure", "describe_data"]
