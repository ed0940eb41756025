"""Train a Transformer translation model from scratch, or fine-tune a saved one, with Seq2SeqTrainer.

    python training/train.py --preset tiny --corpus_dir ../shared/data/small_parallel_enja \\
        --source_lang en --target_lang ja --output_dir runs/en-ja --max_steps 4000
    python training/train.py training/presets/en-ja.json                  # all flags from a JSON file
    python training/train.py training/presets/en-ja.json --max_steps 100  # ... and overrides after it

Every Seq2SeqTrainingArguments flag works (--per_device_train_batch_size, --gradient_accumulation_steps,
--bf16, --resume_from_checkpoint, --report_to tensorboard, ...); the defaults follow the paper where it
applies: Adam beta2 0.98 and epsilon 1e-9, inverse square root schedule after a linear warmup, label
smoothing 0.1 (dropout 0.1 is the model's default), and batches of examples of similar length.

Data, one of: --corpus_dir (small_parallel_enja's layout, read as natural text); parallel text files
(--train_source_file/--train_target_file, likewise validation_ and test_); JSON lines (--train_file, ...);
or a `datasets` dataset with a `translation` column (--dataset_name/--dataset_config_name).
Without --tokenizer_name, a tokenizer is trained on the training data first (or, when fine-tuning with
--model_name_or_path, taken from the model's folder). At the end, `{output_dir}/hub` holds the model ready
for the Hub, with the test metrics in its model card.
"""

import os
import sys

# glibc's allocator keeps the memory a training step frees for the next step instead of returning it to the system
# and faulting it in again (15-20 % faster here; benchmarks/README.md, "The allocator"). The script restarts itself
# with these settings before anything heavy is imported, unless GLIBC_TUNABLES is set already.
MALLOC_SETTINGS = "glibc.malloc.mmap_threshold=4294967296:glibc.malloc.trim_threshold=4294967296"


def restart_with_allocator_settings(argv: list[str], environment: dict, execve=os.execve):
    """Replace this process by the same command with MALLOC_SETTINGS (Linux), unless GLIBC_TUNABLES is set."""
    if sys.platform == "linux" and "GLIBC_TUNABLES" not in environment:
        execve(sys.executable, [sys.executable, *argv], {**environment, "GLIBC_TUNABLES": MALLOC_SETTINGS})


if __name__ == "__main__":
    restart_with_allocator_settings(sys.argv, dict(os.environ))

import dataclasses
import difflib
import json
import logging
import math
import shutil
import time
from dataclasses import dataclass, field
from pathlib import Path

import datasets
import numpy as np
import transformers
from datasets import Dataset, DatasetDict, load_dataset
from safetensors import safe_open
from torch.utils.data import DataLoader
from transformers import (
    AutoConfig,
    AutoModelForSeq2SeqLM,
    AutoTokenizer,
    DataCollatorForSeq2Seq,
    HfArgumentParser,
    Seq2SeqTrainer,
    Seq2SeqTrainingArguments,
    TrainerCallback,
    set_seed,
)
from transformers.trainer_utils import PREFIX_CHECKPOINT_DIR

from hf_tiny_transformer import (
    TinyTransformerConfig,
    TinyTransformerForConditionalGeneration,
    load_preset,
    model_card,
    read_parallel,
    save_for_hub,
    train_tokenizer,
)
from hf_tiny_transformer.averaging import average_checkpoints, last_checkpoints
from hf_tiny_transformer.batching import TokenBatchSampler
from hf_tiny_transformer.cli import (
    OneLineErrors,
    UsageError,
    at_least,
    check_output_folder,
    first_line,
    load_pretrained,
    read_json_object,
    read_lines,
    run,
    write_text_atomically,
)
from hf_tiny_transformer.evaluation import bleu_and_chrf
from hf_tiny_transformer.marian import marian_of_the_same_shape
from hf_tiny_transformer.modeling_tiny_transformer import staged_folder
from hf_tiny_transformer.tokenization_tiny_transformer import SMALLEST_VOCAB_SIZE

logger = logging.getLogger("train")

# ISO 639-1 codes: a language code outside this list is a typo, caught before any work.
LANGUAGE_CODES = set(
    "aa ab ae af ak am an ar as av ay az ba be bg bh bi bm bn bo br bs ca ce ch co cr cs cu cv cy da de dv dz "
    "ee el en eo es et eu fa ff fi fj fo fr fy ga gd gl gn gu gv ha he hi ho hr ht hu hy hz ia id ie ig ii ik io "
    "is it iu ja jv ka kg ki kj kk kl km kn ko kr ks ku kv kw ky la lb lg li ln lo lt lu lv mg mh mi mk ml mn mr "
    "ms mt my na nb nd ne ng nl nn no nr nv ny oc oj om or os pa pi pl ps pt qu rm rn ro ru rw sa sc sd se sg si "
    "sk sl sm sn so sq sr ss st su sv sw ta te tg th ti tk tl tn to tr ts tt tw ty ug uk ur uz ve vi vo wa wo xh "
    "yi yo za zh zu".split()
)

@dataclass
class ModelArguments:
    model_name_or_path: str | None = field(default=None, metadata={"help": "saved model (folder or Hub id) to fine-tune"})
    preset: str | None = field(default=None, metadata={"help": "train from scratch with a preset: tiny or paper-base"})
    config_name: str | None = field(default=None, metadata={"help": "train from scratch with this config (folder or JSON file)"})
    config_overrides: str | None = field(
        default=None, metadata={"help": "comma-separated config changes, e.g. 'd_model=128,encoder_layers=2'"}
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
        metadata={
            "help": "run the Python files of a model, config or tokenizer folder that is not this package's own "
            "(this package's folders load without it)"
        },
    )


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
    train_file: str | None = field(default=None, metadata={"help": "JSON lines: {'translation': {src: ..., tgt: ...}}"})
    validation_file: str | None = None
    test_file: str | None = None
    dataset_name: str | None = field(default=None, metadata={"help": "a datasets dataset with a translation column"})
    dataset_config_name: str | None = None
    max_source_length: int | None = field(
        default=None, metadata={"help": "longer sources are truncated; default: the model's max_position_embeddings"}
    )
    max_target_length: int | None = field(
        default=None, metadata={"help": "longer targets are truncated; default: the model's max_position_embeddings"}
    )
    max_train_samples: int | None = None
    max_eval_samples: int | None = None


@dataclass
class TrainingArguments(Seq2SeqTrainingArguments):
    """Seq2SeqTrainingArguments with the paper's recipe as defaults."""

    learning_rate: float = field(default=7e-4, metadata={"help": "peak learning rate, reached after the warmup"})
    adam_beta2: float = field(default=0.98, metadata={"help": "Adam beta2 (paper: 0.98)"})
    adam_epsilon: float = field(default=1e-9, metadata={"help": "Adam epsilon (paper: 1e-9)"})
    lr_scheduler_type: str = field(default="inverse_sqrt", metadata={"help": "paper: inverse square root decay"})
    warmup_steps: float = field(default=4000, metadata={"help": "linear warmup steps (paper: 4000)"})
    label_smoothing_factor: float = field(default=0.1, metadata={"help": "paper: 0.1"})
    train_sampling_strategy: str = field(default="group_by_length", metadata={"help": "batch similar lengths"})
    predict_with_generate: bool = field(default=True, metadata={"help": "evaluate BLEU/chrF on generated text"})
    include_num_input_tokens_seen: str = field(  # a str, so that non_padding parses (as `str | bool` it cannot)
        default="no", metadata={"help": "Trainer counts the source tokens it trains on: no, all, or non_padding"}
    )
    generation_max_length: int | None = field(
        default=None, metadata={"help": "longest generated sequence, start token included; default: max_target_length + 1"}
    )
    overwrite_output_dir: bool = field(
        default=False, metadata={"help": "train into an output_dir that holds a model or checkpoints (removes the checkpoints)"}
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
        metadata={
            "help": "the final model is the average of the last N checkpoints, saved every --save_steps (the paper "
            "averages the last 5)"
        },
    )


class Parser(OneLineErrors, HfArgumentParser):
    """HfArgumentParser whose errors are one line."""


def parse_arguments(argv: list[str]) -> tuple[ModelArguments, DataArguments, TrainingArguments]:
    """Flags, optionally after a JSON file holding flags (`train.py preset.json --max_steps 10`)."""
    if argv and argv[0].endswith(".json"):
        argv = json_to_flags(read_json_object(argv[0], "flags file")) + argv[1:]
    parser = Parser((ModelArguments, DataArguments, TrainingArguments))
    try:
        return parser.parse_args_into_dataclasses(args=argv)
    except (ValueError, TypeError) as error:  # Trainer's own checks of its arguments, unknown flags
        raise UsageError(first_line(error)) from None


def json_to_flags(values: dict) -> list[str]:
    flags = []
    for key, value in values.items():
        flags += [f"--{key}", *(map(str, value) if isinstance(value, list) else [str(value)])]
    return flags


# ---------------------------------------------------------------------------------------------------------------
# Checks before any work: every problem found here is reported in one clear line.
# ---------------------------------------------------------------------------------------------------------------


def check_arguments(model_args: ModelArguments, data_args: DataArguments, training_args: TrainingArguments):
    for name in ("source_lang", "target_lang"):
        code = getattr(data_args, name)
        if code not in LANGUAGE_CODES:
            raise UsageError(f"--{name} {code!r} is not an ISO 639-1 language code (such as en, ja, de)")
    if data_args.source_lang == data_args.target_lang:
        raise UsageError("--source_lang and --target_lang are the same language")
    sources = [model_args.model_name_or_path, model_args.preset, model_args.config_name]
    if sum(source is not None for source in sources) != 1:
        raise UsageError("pass exactly one of --model_name_or_path (fine-tune), --preset or --config_name (from scratch)")
    check_numbers(model_args, data_args, training_args)
    check_output_dir(training_args)


def check_numbers(model_args: ModelArguments, data_args: DataArguments, training_args: TrainingArguments):
    """Sizes, lengths and counts that cannot work: a batch of 0, a vocabulary too small to hold the bytes, ..."""
    for flag, value, lowest in (
        ("--per_device_train_batch_size", training_args.per_device_train_batch_size, 1),
        ("--per_device_eval_batch_size", training_args.per_device_eval_batch_size, 1),
        ("--gradient_accumulation_steps", training_args.gradient_accumulation_steps, 1),
        ("--max_source_length", data_args.max_source_length, 1),
        ("--max_target_length", data_args.max_target_length, 1),
        ("--generation_max_length", training_args.generation_max_length, 2),
        ("--generation_num_beams", training_args.generation_num_beams, 1),
        ("--max_train_samples", data_args.max_train_samples, 1),
        ("--max_eval_samples", data_args.max_eval_samples, 1),
        ("--warmup_steps", training_args.warmup_steps, 0),
        ("--vocab_size", model_args.vocab_size, SMALLEST_VOCAB_SIZE),
    ):
        at_least(flag, value, lowest)
    if training_args.max_steps == 0 or training_args.max_steps < -1:
        raise UsageError(f"--max_steps must be positive, or -1 to train --num_train_epochs; got {training_args.max_steps}")
    if training_args.max_steps == -1 and training_args.num_train_epochs <= 0:
        raise UsageError(f"--num_train_epochs must be positive, got {training_args.num_train_epochs}; or pass --max_steps")
    if training_args.learning_rate <= 0:
        raise UsageError(f"--learning_rate must be positive, got {training_args.learning_rate}")
    at_least("--batch_tokens", training_args.batch_tokens, 2)
    check_averaging(training_args)


def check_averaging(training_args: TrainingArguments):
    """--average_checkpoints N needs N checkpoints at evenly spaced steps at the end of the run."""
    count = training_args.average_checkpoints
    if count is None:
        return
    at_least("--average_checkpoints", count, 2)
    if training_args.save_strategy != "steps" or training_args.max_steps <= 0:
        raise UsageError("--average_checkpoints needs --save_strategy steps, --save_steps and --max_steps")
    if training_args.max_steps % training_args.save_steps or training_args.max_steps < count * training_args.save_steps:
        raise UsageError(
            f"--average_checkpoints {count}: --max_steps ({training_args.max_steps}) must be a multiple of --save_steps "
            f"({training_args.save_steps}), at least {count} of them, so that the last {count} checkpoints are evenly spaced"
        )
    if training_args.save_total_limit is not None and training_args.save_total_limit < count:
        raise UsageError(f"--average_checkpoints {count} needs --save_total_limit {count} or more (or none)")


def checkpoints_in(output_dir: Path) -> list[Path]:
    """The checkpoint folders Trainer wrote in output_dir, oldest first."""
    if not output_dir.is_dir():
        return []
    folders = [path for path in output_dir.glob(f"{PREFIX_CHECKPOINT_DIR}-*") if path.is_dir()]
    return sorted((path for path in folders if path.name.split("-")[-1].isdigit()), key=lambda p: int(p.name.split("-")[-1]))


def check_output_dir(training_args: TrainingArguments):
    """An output_dir that holds a model or checkpoints is used only when asked: resume or overwrite."""
    output_dir = check_output_folder(training_args.output_dir, "--output_dir")
    if training_args.overwrite_output_dir and training_args.resume_from_checkpoint:
        raise UsageError("pass --overwrite_output_dir (start anew) or --resume_from_checkpoint (continue), not both")
    holds_model = output_dir.is_dir() and any(
        (output_dir / name).exists() for name in ("hub", "config.json", "model.safetensors")
    )
    checkpoints = checkpoints_in(output_dir)
    if (holds_model or checkpoints) and not training_args.overwrite_output_dir and not training_args.resume_from_checkpoint:
        what = f"checkpoints ({checkpoints[-1].name} the newest)" if checkpoints else "a model"
        raise UsageError(
            f"--output_dir {output_dir} already holds {what}; pass --resume_from_checkpoint true to continue that "
            "run, --overwrite_output_dir to start anew (its checkpoints are removed), or choose another --output_dir"
        )


def is_complete_checkpoint(folder: Path) -> bool:
    """Trainer writes trainer_state.json last: a checkpoint whose state parses and whose weights open is complete."""
    try:
        state = json.loads((folder / "trainer_state.json").read_text())
        with safe_open(folder / "model.safetensors", framework="pt"):
            pass
    except (OSError, ValueError, RuntimeError):
        return False
    return isinstance(state, dict) and "global_step" in state


def resolve_checkpoint(training_args: TrainingArguments) -> str | None:
    """--resume_from_checkpoint PATH, or true/last: the newest complete checkpoint in --output_dir (a checkpoint
    left half-written by a kill is skipped, with a warning)."""
    value = training_args.resume_from_checkpoint
    if value is None or value.lower() == "false":
        return None
    if value.lower() not in ("true", "last"):
        if not is_complete_checkpoint(Path(value)):
            raise UsageError(f"--resume_from_checkpoint {value} is not a complete checkpoint (no readable "
                             "trainer_state.json and model.safetensors); pass true to take the newest complete one")
        return value
    for folder in reversed(checkpoints_in(Path(training_args.output_dir))):
        if is_complete_checkpoint(folder):
            return str(folder)
        logger.warning("skipping %s: it is incomplete (a save was interrupted)", folder)
    raise UsageError(f"--resume_from_checkpoint {value}: no complete checkpoint in {training_args.output_dir}")


def remove_checkpoints(training_args: TrainingArguments):
    """--overwrite_output_dir: an earlier run's checkpoints would otherwise be taken for this run's."""
    if training_args.overwrite_output_dir and training_args.should_save:
        for folder in checkpoints_in(Path(training_args.output_dir)):
            logger.warning("--overwrite_output_dir: removing %s of the earlier run", folder)
            shutil.rmtree(folder)


# ---------------------------------------------------------------------------------------------------------------
# Data
# ---------------------------------------------------------------------------------------------------------------


def read_parallel_files(source_file: str, target_file: str, split: str) -> tuple[list[str], list[str]]:
    sources = read_lines(source_file, f"--{split}_source_file")
    targets = read_lines(target_file, f"--{split}_target_file")
    if len(sources) != len(targets):
        raise UsageError(f"{source_file} has {len(sources)} lines but {target_file} has {len(targets)}; pass line-aligned files")
    return sources, targets


def read_json_lines(path: str, source_lang: str, target_lang: str) -> tuple[list[str], list[str]]:
    sources, targets = [], []
    expected = f'{{"translation": {{"{source_lang}": "...", "{target_lang}": "..."}}}}'
    for number, line in enumerate(read_lines(path, "JSON lines file"), 1):
        if not line.strip():
            continue
        try:
            record = json.loads(line)
        except json.JSONDecodeError as error:
            raise UsageError(f"{path}:{number} is not valid JSON ({error.msg}); each line must be {expected}") from None
        pair = record.get("translation", record) if isinstance(record, dict) else None
        texts = [pair.get(lang) for lang in (source_lang, target_lang)] if isinstance(pair, dict) else [None]
        if not all(isinstance(text, str) for text in texts):
            raise UsageError(f"{path}:{number} is not {expected}: {line[:80]}")
        sources.append(texts[0])
        targets.append(texts[1])
    return sources, targets


def read_dataset(data_args: DataArguments) -> dict[str, tuple[list[str], list[str]]]:
    try:
        dataset = load_dataset(data_args.dataset_name, data_args.dataset_config_name)
    except Exception as error:  # the datasets library raises many kinds; each is one line for the user
        raise UsageError(f"--dataset_name {data_args.dataset_name} cannot be loaded: {first_line(error)}") from None
    splits = {}
    for split in ("train", "validation", "test"):
        if split not in dataset:
            continue
        if "translation" not in dataset[split].column_names:
            raise UsageError(f"{data_args.dataset_name} [{split}] has no 'translation' column")
        pairs = dataset[split]["translation"]
        missing = {data_args.source_lang, data_args.target_lang} - set(pairs[0] if pairs else {})
        if missing:
            raise UsageError(f"{data_args.dataset_name} has no {', '.join(sorted(missing))} texts in 'translation'")
        splits[split] = ([p[data_args.source_lang] for p in pairs], [p[data_args.target_lang] for p in pairs])
    return splits


def check_one_data_source(data_args: DataArguments):
    """Two sources for one split would leave one of them silently unused."""
    for split in ("train", "validation", "test"):
        given = [
            flag
            for flag, value in (
                ("--corpus_dir", data_args.corpus_dir),
                ("--dataset_name", data_args.dataset_name),
                (f"--{split}_source_file", getattr(data_args, f"{split}_source_file")),
                (f"--{split}_file", getattr(data_args, f"{split}_file")),
            )
            if value
        ]
        if len(given) > 1:
            raise UsageError(f"pass one source of {split} data, not {' and '.join(given)}")


def read_splits(data_args: DataArguments) -> dict[str, tuple[list[str], list[str]]]:
    """{"train": (sources, targets), "validation": ..., "test": ...} from whichever data source was given."""
    src, tgt = data_args.source_lang, data_args.target_lang
    check_one_data_source(data_args)
    if data_args.corpus_dir:
        names = {"train": "train", "validation": "dev", "test": "test"}
        try:
            return {split: read_parallel(data_args.corpus_dir, name, src, tgt) for split, name in names.items()}
        except (OSError, ValueError) as error:
            raise UsageError(first_line(error)) from None
    if data_args.dataset_name:
        return read_dataset(data_args)
    splits = {}
    for split in ("train", "validation", "test"):
        source_file = getattr(data_args, f"{split}_source_file")
        target_file = getattr(data_args, f"{split}_target_file")
        json_file = getattr(data_args, f"{split}_file")
        if source_file or target_file:
            if not (source_file and target_file):
                raise UsageError(f"pass both --{split}_source_file and --{split}_target_file")
            splits[split] = read_parallel_files(source_file, target_file, split)
        elif json_file:
            splits[split] = read_json_lines(json_file, src, tgt)
    return splits


def load_splits(data_args: DataArguments) -> dict[str, tuple[list[str], list[str]]]:
    splits = read_splits(data_args)
    if "train" not in splits:
        raise UsageError("no training data: pass --corpus_dir, --train_source_file/--train_target_file, --train_file or --dataset_name")
    for split, (sources, targets) in splits.items():
        if not any(s.strip() and t.strip() for s, t in zip(sources, targets)):
            raise UsageError(f"the {split} corpus is empty")
    if data_args.max_train_samples:
        splits["train"] = tuple(side[: data_args.max_train_samples] for side in splits["train"])
    if data_args.max_eval_samples:
        for split in ("validation", "test"):
            if split in splits:
                splits[split] = tuple(side[: data_args.max_eval_samples] for side in splits[split])
    return splits


def tokenize_splits(splits, tokenizer, data_args: DataArguments) -> DatasetDict:
    def tokenize(batch):
        encoded = tokenizer(batch["source"], max_length=data_args.max_source_length, truncation=True)
        labels = tokenizer(text_target=batch["target"], max_length=data_args.max_target_length, truncation=True)
        return {**encoded, "labels": labels["input_ids"]}

    texts = DatasetDict({split: Dataset.from_dict({"source": s, "target": t}) for split, (s, t) in splits.items()})
    return texts.map(tokenize, batched=True, remove_columns=["source", "target"])


# ---------------------------------------------------------------------------------------------------------------
# Config, tokenizer and model
# ---------------------------------------------------------------------------------------------------------------


def parse_value(text: str):
    """A JSON value (128, 0.3, true) when it parses as one, else the text itself (gelu)."""
    try:
        return json.loads(text)
    except json.JSONDecodeError:
        return text


CONFIG_FIELDS = sorted(field.name for field in dataclasses.fields(TinyTransformerConfig))


def parse_overrides(text: str | None) -> dict:
    """'d_model=128,activation_function=gelu' -> {"d_model": 128, "activation_function": "gelu"}; a key that is
    not a config field (a typo would otherwise be stored and ignored) is a UsageError."""
    overrides = {}
    for item in filter(None, (text or "").split(",")):
        key, equals, value = (part.strip() for part in item.partition("="))
        if not equals or not key:
            raise UsageError(f"--config_overrides: {item!r} is not key=value, e.g. 'd_model=128,encoder_layers=2'")
        if key not in CONFIG_FIELDS:
            close = difflib.get_close_matches(key, CONFIG_FIELDS, n=1)
            hint = f"did you mean {close[0]}?" if close else f"the fields are {', '.join(CONFIG_FIELDS)}"
            raise UsageError(f"--config_overrides: {key} is not a config field; {hint}")
        overrides[key] = parse_value(value)
    return overrides


def make_config(model_args: ModelArguments):
    """The model's config, before the tokenizer exists (the vocabulary size comes from the tokenizer later)."""
    if model_args.model_name_or_path:
        return load_pretrained(AutoConfig, model_args.model_name_or_path, "--model_name_or_path", model_args.trust_remote_code)
    overrides = parse_overrides(model_args.config_overrides)
    try:
        if model_args.preset:
            return load_preset(model_args.preset, **overrides)
        return TinyTransformerConfig.from_pretrained(model_args.config_name, **overrides)
    except (OSError, ValueError, TypeError) as error:
        source = f"--preset {model_args.preset}" if model_args.preset else f"--config_name {model_args.config_name}"
        raise UsageError(f"{source} with --config_overrides: {first_line(error)}") from None


def check_lengths(config, data_args: DataArguments, training_args: TrainingArguments):
    """Every length must fit the positional table, or the run dies after training, in its evaluation. Lengths not
    given are the longest the model takes (generation: the target's, plus the start token)."""
    longest = config.max_position_embeddings
    data_args.max_source_length = data_args.max_source_length or longest
    data_args.max_target_length = data_args.max_target_length or longest
    training_args.generation_max_length = training_args.generation_max_length or data_args.max_target_length + 1
    for flag, value, limit in (
        ("--max_source_length", data_args.max_source_length, longest),
        ("--max_target_length", data_args.max_target_length, longest),
        # the decoder is fed the start token and all generated tokens but the last
        ("--generation_max_length", training_args.generation_max_length, longest + 1),
    ):
        if value > limit:
            raise UsageError(
                f"{flag} {value} is longer than the model can take ({limit}: max_position_embeddings "
                f"{longest}); lower {flag}, or raise max_position_embeddings with --config_overrides"
            )


def make_tokenizer(model_args: ModelArguments, splits, training_args: TrainingArguments, checkpoint: str | None, max_length: int):
    """The given tokenizer, the fine-tuned model's, the one of the run being resumed, or a new one."""
    saved = Path(training_args.output_dir) / "tokenizer"
    name = model_args.tokenizer_name or model_args.model_name_or_path
    flag = "--tokenizer_name" if model_args.tokenizer_name else "--model_name_or_path"
    if name is None and checkpoint is not None:
        name, flag = (str(saved), "--output_dir") if saved.is_dir() else (checkpoint, "--resume_from_checkpoint")
    if name is not None:
        return load_pretrained(AutoTokenizer, name, flag, model_args.trust_remote_code)
    sources, targets = splits["train"]
    tokenizer = train_tokenizer(
        sources + targets, model_args.vocab_size, lowercase=model_args.lowercase, model_max_length=max_length
    )
    if training_args.should_save:
        tokenizer.save_pretrained(saved)
    return tokenizer


def vocabulary(tokenizer_json: str) -> dict:
    return json.loads(tokenizer_json)["model"]["vocab"]


# Fields that decide the parameters' shapes and meaning: a checkpoint resumed under other values is another model.
SHAPE_FIELDS = (
    "model_type vocab_size d_model encoder_layers decoder_layers encoder_attention_heads decoder_attention_heads "
    "encoder_ffn_dim decoder_ffn_dim max_position_embeddings activation_function normalize_before scale_embedding "
    "tie_word_embeddings"
).split()


def check_checkpoint_matches(checkpoint: str, config, tokenizer):
    """The checkpoint must have been trained with this tokenizer and a model of this shape."""
    folder = Path(checkpoint)
    saved_tokenizer = folder / "tokenizer.json"
    if saved_tokenizer.is_file() and vocabulary(saved_tokenizer.read_text()) != vocabulary(tokenizer.backend_tokenizer.to_str()):
        raise UsageError(
            f"--resume_from_checkpoint: {folder.name} was trained with another tokenizer than this run's; resume "
            "with its tokenizer (--tokenizer_name), or start anew with --overwrite_output_dir"
        )
    saved_config = json.loads((folder / "config.json").read_text())
    ours = config.to_dict()
    differences = [f"{key} {saved_config.get(key)} there, {ours.get(key)} here" for key in SHAPE_FIELDS if saved_config.get(key) != ours.get(key)]
    if differences:
        raise UsageError(
            f"--resume_from_checkpoint: {folder.name} is a different model ({'; '.join(differences)}); resume with "
            "the flags it was trained with, or start anew with --overwrite_output_dir"
        )


def make_model(model_args: ModelArguments, config, tokenizer):
    if model_args.model_name_or_path:
        return load_pretrained(
            AutoModelForSeq2SeqLM, model_args.model_name_or_path, "--model_name_or_path", model_args.trust_remote_code
        )
    ids = (tokenizer.pad_token_id, tokenizer.eos_token_id, tokenizer.bos_token_id)
    if ids != (config.pad_token_id, config.eos_token_id, config.bos_token_id):
        raise UsageError(f"the tokenizer's pad/eos/bos ids {ids} differ from the model config's")
    if model_args.architecture == "marian":
        return marian_of_the_same_shape(config)
    return TinyTransformerForConditionalGeneration(config)


# ---------------------------------------------------------------------------------------------------------------
# Metrics
# ---------------------------------------------------------------------------------------------------------------


def metrics_function(tokenizer, target_lang: str):
    def compute_metrics(prediction):
        predictions, labels = prediction.predictions, prediction.label_ids
        predictions = np.where(predictions < 0, tokenizer.pad_token_id, predictions)
        labels = np.where(labels < 0, tokenizer.pad_token_id, labels)
        hypotheses = tokenizer.batch_decode(predictions, skip_special_tokens=True)
        references = tokenizer.batch_decode(labels, skip_special_tokens=True)
        return bleu_and_chrf(hypotheses, references, target_lang)

    return compute_metrics


# ---------------------------------------------------------------------------------------------------------------
# Main
# ---------------------------------------------------------------------------------------------------------------


def prepare(model_args: ModelArguments, data_args: DataArguments, training_args: TrainingArguments):
    """Every check, then the data, tokenizer and model: (checkpoint, splits, tokenizer, model)."""
    check_arguments(model_args, data_args, training_args)
    checkpoint = resolve_checkpoint(training_args)
    splits = load_splits(data_args)
    config = make_config(model_args)
    check_lengths(config, data_args, training_args)
    remove_checkpoints(training_args)
    set_seed(training_args.seed)
    max_length = max(data_args.max_source_length, data_args.max_target_length)
    tokenizer = make_tokenizer(model_args, splits, training_args, checkpoint, max_length)
    if not model_args.model_name_or_path:
        try:
            config.update({"vocab_size": len(tokenizer)})
        except ValueError as error:
            raise UsageError(f"the tokenizer's {len(tokenizer)} tokens do not fit the config: {first_line(error)}") from None
    if checkpoint is not None:
        check_checkpoint_matches(checkpoint, config, tokenizer)
    return checkpoint, splits, tokenizer, make_model(model_args, config, tokenizer)


class ProgressLog(TrainerCallback):
    """Where no progress bar is drawn (output to a file, CI): at every logging step, one line with the step, the
    time elapsed and an estimate of the time left."""

    def on_train_begin(self, args, state, control, **kwargs):
        self.start, self.first_step = time.monotonic(), state.global_step

    def on_log(self, args, state, control, logs=None, **kwargs):
        done, elapsed = state.global_step - self.first_step, time.monotonic() - self.start
        if done <= 0 or not state.max_steps:
            return
        left = elapsed / done * (state.max_steps - state.global_step)
        loss = f", loss {logs['loss']:.4g}" if logs and "loss" in logs else ""
        logger.info(
            "step %d/%d (%d%%), %s elapsed, about %s left%s",
            state.global_step,
            state.max_steps,
            100 * state.global_step // state.max_steps,
            clock(elapsed),
            clock(left),
            loss,
        )


def clock(seconds: float) -> str:
    """1:02:03 or 2:03."""
    minutes, seconds = divmod(round(seconds), 60)
    hours, minutes = divmod(minutes, 60)
    return f"{hours}:{minutes:02d}:{seconds:02d}" if hours else f"{minutes}:{seconds:02d}"


def progress_output(training_args: TrainingArguments) -> list[TrainerCallback]:
    """Progress bars (Trainer's, with elapsed time and ETA) on a terminal; elsewhere (a log file, CI) no bars, whose
    carriage returns would fill the file, but a ProgressLog line at every logging step (cli.run already turned
    transformers' own bars off there)."""
    if sys.stderr.isatty():
        return []
    training_args.disable_tqdm = True
    datasets.disable_progress_bars()
    return [ProgressLog()]


class TranslationTrainer(Seq2SeqTrainer):
    """Seq2SeqTrainer that, with --batch_tokens, batches sentence pairs by tokens (TokenBatchSampler); the DataLoader
    goes through accelerate's prepare() as Trainer's own does, which shards the batches under torchrun."""

    def get_train_dataloader(self) -> DataLoader:
        if not self.args.batch_tokens:
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
            pin_memory=self.args.dataloader_pin_memory,
        )
        return self.accelerator.prepare(loader)


def use_the_models_label_smoothing(model, training_args: TrainingArguments):
    """This package's model computes the label-smoothed loss itself (exact under gradient accumulation, one
    logits-sized buffer); Trainer's own smoother, which recomputes the loss from the logits, is then not used.
    transformers' Marian has no such loss and keeps Trainer's."""
    if isinstance(model, TinyTransformerForConditionalGeneration) and training_args.label_smoothing_factor:
        model.config.label_smoothing = training_args.label_smoothing_factor
        training_args.label_smoothing_factor = 0.0
        logger.info("label smoothing %s: in the model's loss", model.config.label_smoothing)


def average_last_checkpoints(trainer: Seq2SeqTrainer, training_args: TrainingArguments):
    """--average_checkpoints N: the model takes the mean of the weights of the run's last N checkpoints."""
    trainer.accelerator.wait_for_everyone()
    folders = last_checkpoints(training_args.output_dir, training_args.average_checkpoints)
    # strict=False: a checkpoint holds one copy of tied weights, and no positional table
    unexpected = trainer.model.load_state_dict(average_checkpoints(folders), strict=False).unexpected_keys
    if unexpected:
        raise RuntimeError(f"the checkpoints hold weights this model does not have: {unexpected}")
    logger.warning("the final model is the average of %s", ", ".join(folder.name for folder in folders))


def train(model_args: ModelArguments, data_args: DataArguments, training_args: TrainingArguments) -> dict:
    transformers.utils.logging.set_verbosity(training_args.get_process_log_level())
    callbacks = progress_output(training_args)
    checkpoint, splits, tokenizer, model = prepare(model_args, data_args, training_args)
    tokenized = tokenize_splits(splits, tokenizer, data_args)
    logger.info("model: %s parameters; data: %s", f"{model.num_parameters():,}", {k: len(v) for k, v in tokenized.items()})

    use_the_models_label_smoothing(model, training_args)
    trainer = TranslationTrainer(
        callbacks=callbacks,
        model=model,
        args=training_args,
        train_dataset=tokenized["train"],
        eval_dataset=tokenized.get("validation"),
        data_collator=DataCollatorForSeq2Seq(tokenizer, model=model),
        processing_class=tokenizer,
        compute_metrics=metrics_function(tokenizer, data_args.target_lang),
    )
    result = trainer.train(resume_from_checkpoint=checkpoint)
    logger.warning(
        "process %d of %d: %d optimizer steps, training loss %.4f",
        training_args.process_index,
        training_args.world_size,
        trainer.state.global_step,
        result.training_loss,
    )
    metrics = {"train_runtime_s": result.metrics["train_runtime"], "train_steps": trainer.state.global_step}
    if training_args.include_num_input_tokens_seen != "no":  # Trainer's count of source tokens (padding or not)
        metrics["num_input_tokens_seen"] = trainer.state.num_input_tokens_seen
    if training_args.average_checkpoints:
        average_last_checkpoints(trainer, training_args)
    # The trained model is saved before anything else can fail; the test metrics are added to its card after.
    if trainer.is_world_process_zero():
        save_hub_folder(trainer.model, tokenizer, model_args, data_args, training_args, metrics)
    if "test" in tokenized and training_args.do_predict:
        test = trainer.predict(tokenized["test"], metric_key_prefix="test")
        metrics.update({key: value for key, value in test.metrics.items() if key in ("test_bleu", "test_chrf")})
        if trainer.is_world_process_zero():
            save_hub_folder(trainer.model, tokenizer, model_args, data_args, training_args, metrics, card_only=True)
    if trainer.is_world_process_zero():
        write_text_atomically(Path(training_args.output_dir) / "metrics.json", json.dumps(metrics, indent=2) + "\n")
    return metrics


def describe_data(data_args: DataArguments) -> str:
    """The training data as a model card names it: folder and file names, never a local absolute path."""
    if data_args.corpus_dir:
        return f"`{Path(data_args.corpus_dir).name}` ({data_args.source_lang}-{data_args.target_lang} sentence pairs)"
    if data_args.dataset_name:
        return f"the `{Path(data_args.dataset_name).name}` dataset"
    files = [data_args.train_source_file, data_args.train_target_file, data_args.train_file]
    return "local files: " + ", ".join(f"`{Path(name).name}`" for name in files if name)


def save_hub_folder(model, tokenizer, model_args, data_args, training_args, metrics: dict, card_only: bool = False):
    """`{output_dir}/hub`: the model, its code, the tokenizer and a model card with the metrics known so far."""
    folder = Path(training_args.output_dir) / "hub"
    if model_args.architecture == "marian":  # a comparison model: no card of ours
        if not card_only:
            with staged_folder(folder) as staging:
                model.save_pretrained(staging)
                tokenizer.save_pretrained(staging)
        return
    procedure = (
        f"Trained with `training/train.py` for {metrics['train_steps']} steps "
        f"({metrics['train_runtime_s'] / 60:.1f} minutes): batch {training_args.per_device_train_batch_size} x "
        f"{training_args.gradient_accumulation_steps} accumulation x {training_args.world_size} processes, "
        f"Adam (beta2 {training_args.adam_beta2}, epsilon {training_args.adam_epsilon}), peak learning rate "
        f"{training_args.learning_rate}, {training_args.lr_scheduler_type} schedule with {training_args.warmup_steps} "
        f"warmup steps, label smoothing {training_args.label_smoothing_factor}, dropout {model.config.dropout}."
    )
    card = model_card(
        model,
        source_lang=data_args.source_lang,
        target_lang=data_args.target_lang,
        training_data=describe_data(data_args),
        metrics={k: v for k, v in metrics.items() if k.startswith("test_")},
        training_procedure=procedure,
    )
    if card_only:
        write_text_atomically(folder / "README.md", str(card))
        return
    model.generation_config.max_length = training_args.generation_max_length
    save_for_hub(model, tokenizer, folder, card)


def main(argv: list[str] | None = None) -> int:
    logging.basicConfig(format="%(asctime)s %(levelname)s %(name)s: %(message)s", level=logging.INFO)
    model_args, data_args, training_args = parse_arguments(sys.argv[1:] if argv is None else argv)
    metrics = train(model_args, data_args, training_args)
    logger.info("metrics: %s", {k: round(v, 4) if isinstance(v, float) and math.isfinite(v) else v for k, v in metrics.items()})
    return 0


if __name__ == "__main__":
    sys.exit(run(main))
