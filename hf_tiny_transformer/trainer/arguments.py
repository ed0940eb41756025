"""What training/train.py takes: model, data and training arguments, parsed by transformers' HfArgumentParser.

    model_args, data_args, training_args = parse_arguments(["recipes/en-ja.json", "--max_steps", "100"])

A JSON file first on the command line gives the defaults (a recipe); flags after it override them. Each dataclass
checks its own values when it is made, so that a bad flag is one line (a `UsageError`) before any work.
"""

import argparse
import json
import math
import os
from dataclasses import dataclass, field, fields

from transformers import HfArgumentParser, Seq2SeqTrainingArguments

from ..data.tokenizer import SMALLEST_VOCAB_SIZE
from ..errors import OneLineErrors, UsageError, at_least, first_line
from ..guards.text_files import read_json_object

SPLITS = ("train", "validation", "test")


@dataclass
class ModelArguments:
    model_name_or_path: str | None = field(
        default=None, metadata={"help": "saved model (folder or Hub id) to fine-tune"}
    )
    shape: str | None = field(
        default=None, metadata={"help": "train from scratch with a model shape: tiny or paper-base"}
    )
    config_name: str | None = field(
        default=None, metadata={"help": "train from scratch with this config (folder or JSON file)"}
    )
    config_overrides: str | None = field(
        default=None,
        metadata={"help": "changes to the config, as transformers' update_from_string: 'd_model=128,encoder_layers=2'"},
    )
    architecture: str = field(
        default="tiny_transformer",
        metadata={
            "help": "tiny_transformer (this package), or marian: transformers' MarianMTModel of the same shape, "
            "for side-by-side comparisons (benchmarks/quality_vs_marian.py)",
            "choices": ["tiny_transformer", "marian"],
        },
    )
    tokenizer_name: str | None = field(default=None, metadata={"help": "saved tokenizer; default: train one"})
    vocab_size: int = field(default=8000, metadata={"help": "vocabulary size of a tokenizer trained here"})
    lowercase: bool = field(default=False, metadata={"help": "lowercase all text in a tokenizer trained here"})
    trust_remote_code: bool = field(
        default=False,
        metadata={"help": "run the Python files of a model, config or tokenizer that is not this package's own"},
    )

    def __post_init__(self):
        if sum(source is not None for source in (self.model_name_or_path, self.shape, self.config_name)) != 1:
            raise UsageError(
                "pass exactly one of --model_name_or_path (fine-tune), --shape or --config_name (from scratch)"
            )
        at_least("--vocab_size", self.vocab_size, SMALLEST_VOCAB_SIZE)


@dataclass
class DataArguments:
    source_lang: str = field(default="en", metadata={"help": "language code of the source, e.g. en"})
    target_lang: str = field(default="ja", metadata={"help": "language code of the target, e.g. ja"})
    corpus_dir: str | None = field(
        default=None, metadata={"help": "folder with {train,dev,test}.{lang} in small_parallel_enja's layout"}
    )
    train_source_file: str | None = None
    train_target_file: str | None = None
    validation_source_file: str | None = None
    validation_target_file: str | None = None
    test_source_file: str | None = None
    test_target_file: str | None = None
    train_file: str | None = field(
        default=None, metadata={"help": 'JSON lines: {"translation": {"en": ..., "ja": ...}}'}
    )
    validation_file: str | None = None
    test_file: str | None = None
    dataset_name: str | None = field(default=None, metadata={"help": "a datasets dataset with a translation column"})
    dataset_config_name: str | None = None
    streaming: bool = field(
        default=False, metadata={"help": "read --dataset_name or --train_file as a stream (for data too large to hold)"}
    )
    max_source_length: int | None = field(
        default=None, metadata={"help": "longer sources are truncated; default: the model's max_position_embeddings"}
    )
    max_target_length: int | None = field(
        default=None, metadata={"help": "longer targets are truncated; default: the model's max_position_embeddings"}
    )
    max_train_samples: int | None = None
    max_eval_samples: int | None = None

    def __post_init__(self):
        if self.source_lang == self.target_lang:
            raise UsageError(f"--source_lang and --target_lang are both {self.source_lang}; pass two languages")
        for name in ("max_source_length", "max_target_length", "max_train_samples", "max_eval_samples"):
            at_least(f"--{name}", getattr(self, name), 1)
        for split in SPLITS:
            self.check_one_source(split)
        if self.streaming and not (self.dataset_name or self.train_file):
            raise UsageError("--streaming reads --dataset_name or --train_file; pass one of them")

    def check_one_source(self, split: str):
        """One source per split (two would leave one silently unused), and both files of a pair."""
        source_file, target_file = getattr(self, f"{split}_source_file"), getattr(self, f"{split}_target_file")
        if bool(source_file) != bool(target_file):
            raise UsageError(f"pass both --{split}_source_file and --{split}_target_file")
        given = [
            flag
            for flag, value in (
                ("--corpus_dir", self.corpus_dir),
                ("--dataset_name", self.dataset_name),
                (f"--{split}_source_file", source_file),
                (f"--{split}_file", getattr(self, f"{split}_file")),
            )
            if value
        ]
        if len(given) > 1:
            raise UsageError(f"pass one source of {split} data, not {' and '.join(given)}")


@dataclass
class TranslationTrainingArguments(Seq2SeqTrainingArguments):
    """Seq2SeqTrainingArguments with the paper's recipe as defaults, and the recipe's own flags."""

    learning_rate: float = field(default=7e-4, metadata={"help": "peak learning rate, reached after the warmup"})
    adam_beta2: float = field(default=0.98, metadata={"help": "Adam beta2 (paper: 0.98)"})
    adam_epsilon: float = field(default=1e-9, metadata={"help": "Adam epsilon (paper: 1e-9)"})
    lr_scheduler_type: str = field(default="inverse_sqrt", metadata={"help": "paper: inverse square root decay"})
    warmup_steps: float = field(default=4000, metadata={"help": "linear warmup steps (paper: 4000)"})
    label_smoothing_factor: float = field(default=0.1, metadata={"help": "paper: 0.1; applied by the Trainer's loss"})
    train_sampling_strategy: str = field(default="group_by_length", metadata={"help": "batch similar lengths"})
    predict_with_generate: bool = field(default=True, metadata={"help": "evaluate BLEU/chrF on generated text"})
    include_num_input_tokens_seen: str = field(  # a str, so that non_padding parses (as `str | bool` it cannot)
        default="no", metadata={"help": "Trainer counts the source tokens it trains on: no, all, or non_padding"}
    )
    generation_max_length: int | None = field(
        default=None,
        metadata={"help": "longest generated sequence, start token included; default: max_target_length + 1"},
    )
    overwrite_output_dir: bool = field(
        default=False, metadata={"help": "train into an output_dir that holds a model or checkpoints (removes them)"}
    )
    batch_tokens: int | None = field(
        default=None,
        metadata={
            "help": "batches of sentence pairs of similar length holding at most this many source + target tokens, "
            "padding included, per process (the paper's batching); replaces --per_device_train_batch_size"
        },
    )
    average_checkpoints: int | None = field(
        default=None,
        metadata={"help": "the final model is the average of the last N checkpoints (the paper averages the last 5)"},
    )
    precision: str = field(
        default="auto",
        metadata={
            "help": "the one speed setting: auto, where the hardware has bfloat16 natively (a CPU with AMX or AVX-512 "
            "BF16, a CUDA GPU), the faster of float32 and bfloat16 autocast on this run's batches, timed at the start "
            "(seconds), else float32; or bf16, fp32. The attention implementation goes with it",
            "choices": ["auto", "bf16", "fp32"],
        },
    )
    bf16: bool = field(default=False, metadata={"help": argparse.SUPPRESS})  # Trainer's spelling of --precision bf16
    time_budget_minutes: float | None = field(
        default=None,
        metadata={
            "help": "train.py's wall-clock budget: it measures its own speed over the first steps, then fixes "
            "--max_steps to end (model saved) within the budget, and records the number to repeat the run"
        },
    )

    def __post_init__(self):
        from ..hardware import best_device, bf16_support, choose_precision

        device = "cpu" if self.use_cpu else best_device()
        self.requested_precision = "bf16" if self.bf16 else self.precision
        self.precision_choice = choose_precision(self.requested_precision, device)
        self.bf16_native = bf16_support(device)[0] if self.precision_choice.precision == "bf16" else False
        self.bf16 = self.precision_choice.precision == "bf16"
        if device == "cpu" and (self.bf16 or "LOCAL_RANK" in os.environ):
            # unless told that the run is on the CPU, the library refuses bf16 without a GPU, and torchrun's processes
            # train apart (no DDP: each on its share of the batches, and process 0 saves its own weights)
            self.use_cpu = True
        super().__post_init__()
        self.check_numbers()
        self.check_averaging()

    def train_in(self, choice):
        """Train in `choice`'s precision, measured after the arguments were made: bf16 and what the library derives
        from it when it makes them (accelerate's mixed precision)."""
        self.precision_choice = choice
        self.bf16 = choice.precision == "bf16"
        self.mixed_precision = "bf16" if self.bf16 else "no"

    def check_numbers(self):
        for flag, value, lowest in (
            ("--per_device_train_batch_size", self.per_device_train_batch_size, 1),
            ("--per_device_eval_batch_size", self.per_device_eval_batch_size, 1),
            ("--gradient_accumulation_steps", self.gradient_accumulation_steps, 1),
            ("--generation_max_length", self.generation_max_length, 2),
            ("--generation_num_beams", self.generation_num_beams, 1),
            ("--batch_tokens", self.batch_tokens, 2),
        ):
            at_least(flag, value, lowest)
        if self.max_steps == 0 or self.max_steps < -1:
            raise UsageError(f"--max_steps must be positive, or -1 to train --num_train_epochs; got {self.max_steps}")
        if self.max_steps == -1 and self.num_train_epochs <= 0 and not self.time_budget_minutes:
            raise UsageError(f"--num_train_epochs must be positive, got {self.num_train_epochs}; or pass --max_steps")
        if not 0 < self.learning_rate < math.inf:
            raise UsageError(f"--learning_rate must be a positive number, got {self.learning_rate}")
        if self.time_budget_minutes is not None and not (0 < self.time_budget_minutes < math.inf):
            raise UsageError(f"--time_budget_minutes must be a positive number, got {self.time_budget_minutes}")
        if self.time_budget_minutes and 0 < self.warmup_steps < 1:
            raise UsageError(
                "--time_budget_minutes needs --warmup_steps in steps (at least 1), not a fraction of steps not yet "
                "known"
            )

    def check_averaging(self):
        """--average_checkpoints N needs N checkpoints at evenly spaced steps at the end of the run."""
        count = self.average_checkpoints
        if count is None:
            return
        at_least("--average_checkpoints", count, 2)
        if self.save_strategy != "steps" or (self.max_steps <= 0 and not self.time_budget_minutes):
            raise UsageError(
                "--average_checkpoints needs --save_strategy steps, --save_steps and --max_steps (or a time budget)"
            )
        if self.max_steps > 0 and (self.max_steps % self.save_steps or self.max_steps < count * self.save_steps):
            raise UsageError(
                f"--average_checkpoints {count}: --max_steps ({self.max_steps}) must be a multiple of --save_steps "
                f"({self.save_steps}), at least {count} of them, so that the last {count} checkpoints are evenly spaced"
            )
        if self.save_total_limit is not None and self.save_total_limit < count:
            raise UsageError(f"--average_checkpoints {count} needs --save_total_limit {count} or more (or none)")


class Parser(OneLineErrors, HfArgumentParser):
    """HfArgumentParser whose errors are one line."""


def typed(parser: argparse.ArgumentParser, recipe: str, key: str, value):
    """A recipe's value as its flag would give it (argparse's type and choices), so that a list where a number
    belongs is one line naming the recipe, not a failure deep in training."""
    action = parser._option_string_actions[f"--{key}"]
    several = action.nargs in ("+", "*")
    if (
        value is None
        or isinstance(value, dict)
        or action.type is None
        or (action.type is str and isinstance(value, list))
    ):
        return value  # what the dataclass takes as it is (a list of --report_to integrations, a dict of settings)
    try:
        if isinstance(value, list) != several:
            raise ValueError(f"{'a list' if several else 'one value'} expected")
        converted = [action.type(str(item)) for item in (value if several else [value])]
        if action.choices and any(item not in action.choices for item in converted):
            raise ValueError(f"one of {', '.join(map(str, action.choices))} expected")
    except (ValueError, TypeError, argparse.ArgumentTypeError) as error:
        raise UsageError(f"recipe {recipe}: {key} {json.dumps(value)} is not a value of --{key} ({error})") from None
    return converted if several else converted[0]


def parse_arguments(argv: list[str]) -> tuple[ModelArguments, DataArguments, TranslationTrainingArguments]:
    """Flags, after an optional JSON file of flags whose values become the defaults (`recipe.json --max_steps 10`)."""
    parser = Parser((ModelArguments, DataArguments, TranslationTrainingArguments))
    if argv and argv[0].endswith(".json"):
        recipe = read_json_object(argv[0], "recipe")
        flags = {
            field.name
            for kind in (ModelArguments, DataArguments, TranslationTrainingArguments)
            for field in fields(kind)
        }
        unknown = sorted(recipe.keys() - flags)
        if unknown:
            raise UsageError(
                f"recipe {argv[0]}: {', '.join(unknown)} {'is not a flag' if len(unknown) == 1 else 'are not flags'} "
                "of train.py (see --help)"
            )
        parser.set_defaults(**{key: typed(parser, argv[0], key, value) for key, value in recipe.items()})
        argv = argv[1:]
    try:
        return parser.parse_args_into_dataclasses(args=argv)
    except (ValueError, TypeError) as error:  # Trainer's own checks of its arguments
        raise UsageError(first_line(error)) from None


__all__ = ["ModelArguments", "DataArguments", "TranslationTrainingArguments", "parse_arguments"]
