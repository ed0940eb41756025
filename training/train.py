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

import json
import logging
import math
import sys
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import sacrebleu
import transformers
from datasets import Dataset, DatasetDict, load_dataset
from transformers import (
    AutoModelForSeq2SeqLM,
    AutoTokenizer,
    DataCollatorForSeq2Seq,
    HfArgumentParser,
    MarianConfig,
    MarianMTModel,
    Seq2SeqTrainer,
    Seq2SeqTrainingArguments,
    set_seed,
)
from transformers.trainer_utils import get_last_checkpoint

from hf_tiny_transformer import (
    TinyTransformerConfig,
    TinyTransformerForConditionalGeneration,
    load_preset,
    model_card,
    read_parallel,
    save_for_hub,
    train_tokenizer,
)

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
# sacrebleu's standard tokenization per target language; 13a (the default) for the rest.
BLEU_TOKENIZE = {"ja": "ja-mecab", "zh": "zh", "ko": "ko-mecab"}


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
    max_source_length: int = field(default=128, metadata={"help": "longer sources are truncated"})
    max_target_length: int = field(default=128, metadata={"help": "longer targets are truncated"})
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
    generation_max_length: int | None = field(default=128, metadata={"help": "longest generated sequence"})
    overwrite_output_dir: bool = field(default=False, metadata={"help": "train into an output_dir that holds a model"})


class UsageError(ValueError):
    """A problem with the arguments or the data, found before training starts."""


def parse_arguments(argv: list[str]) -> tuple[ModelArguments, DataArguments, TrainingArguments]:
    """Flags, optionally after a JSON file holding flags (`train.py preset.json --max_steps 10`)."""
    if argv and argv[0].endswith(".json"):
        argv = json_to_flags(json.loads(Path(argv[0]).read_text())) + argv[1:]
    parser = HfArgumentParser((ModelArguments, DataArguments, TrainingArguments))
    return parser.parse_args_into_dataclasses(args=argv)


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
    output_dir = Path(training_args.output_dir)
    holds_model = output_dir.is_dir() and any(
        (output_dir / name).exists() for name in ("hub", "config.json", "model.safetensors")
    )
    if holds_model and not training_args.overwrite_output_dir and not training_args.resume_from_checkpoint:
        raise UsageError(
            f"--output_dir {output_dir} already holds a model; pass --overwrite_output_dir to train over it, "
            "--resume_from_checkpoint to continue it, or choose another --output_dir"
        )


def resolve_checkpoint(training_args: TrainingArguments) -> str | None:
    """--resume_from_checkpoint PATH, or true/last for the newest checkpoint in --output_dir."""
    value = training_args.resume_from_checkpoint
    if value is None or value.lower() not in ("true", "last"):
        return value
    checkpoint = get_last_checkpoint(training_args.output_dir) if Path(training_args.output_dir).is_dir() else None
    if checkpoint is None:
        raise UsageError(f"--resume_from_checkpoint {value}: no checkpoint in {training_args.output_dir}")
    return checkpoint


# ---------------------------------------------------------------------------------------------------------------
# Data
# ---------------------------------------------------------------------------------------------------------------


def read_lines(path: str) -> list[str]:
    if not Path(path).is_file():
        raise UsageError(f"data file {path} does not exist")
    return Path(path).read_text(encoding="utf-8").splitlines()


def read_parallel_files(source_file: str, target_file: str) -> tuple[list[str], list[str]]:
    sources, targets = read_lines(source_file), read_lines(target_file)
    if len(sources) != len(targets):
        raise UsageError(f"{source_file} has {len(sources)} lines but {target_file} has {len(targets)}")
    return sources, targets


def read_json_lines(path: str, source_lang: str, target_lang: str) -> tuple[list[str], list[str]]:
    sources, targets = [], []
    for number, line in enumerate(read_lines(path), 1):
        if not line.strip():
            continue
        record = json.loads(line)
        pair = record.get("translation", record)
        if source_lang not in pair or target_lang not in pair:
            raise UsageError(f"{path}:{number} has no {source_lang!r} and {target_lang!r} texts: {line[:80]}")
        sources.append(pair[source_lang])
        targets.append(pair[target_lang])
    return sources, targets


def read_dataset(data_args: DataArguments) -> dict[str, tuple[list[str], list[str]]]:
    dataset = load_dataset(data_args.dataset_name, data_args.dataset_config_name)
    splits = {}
    for split, name in (("train", "train"), ("validation", "validation"), ("test", "test")):
        if name not in dataset:
            continue
        if "translation" not in dataset[name].column_names:
            raise UsageError(f"{data_args.dataset_name} [{name}] has no 'translation' column")
        pairs = dataset[name]["translation"]
        missing = {data_args.source_lang, data_args.target_lang} - set(pairs[0] if pairs else {})
        if missing:
            raise UsageError(f"{data_args.dataset_name} has no {', '.join(sorted(missing))} texts in 'translation'")
        splits[split] = ([p[data_args.source_lang] for p in pairs], [p[data_args.target_lang] for p in pairs])
    return splits


def read_splits(data_args: DataArguments) -> dict[str, tuple[list[str], list[str]]]:
    """{"train": (sources, targets), "validation": ..., "test": ...} from whichever data source was given."""
    src, tgt = data_args.source_lang, data_args.target_lang
    if data_args.corpus_dir:
        names = {"train": "train", "validation": "dev", "test": "test"}
        try:
            return {split: read_parallel(data_args.corpus_dir, name, src, tgt) for split, name in names.items()}
        except (FileNotFoundError, ValueError) as error:
            raise UsageError(str(error)) from error
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
            splits[split] = read_parallel_files(source_file, target_file)
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

    datasets = DatasetDict(
        {split: Dataset.from_dict({"source": s, "target": t}) for split, (s, t) in splits.items()}
    )
    return datasets.map(tokenize, batched=True, remove_columns=["source", "target"])


# ---------------------------------------------------------------------------------------------------------------
# Tokenizer and model
# ---------------------------------------------------------------------------------------------------------------


def make_tokenizer(model_args: ModelArguments, splits, training_args: TrainingArguments, max_length: int):
    """The given tokenizer, the fine-tuned model's, the one saved by an interrupted run, or a new one."""
    saved = Path(training_args.output_dir) / "tokenizer"
    name = model_args.tokenizer_name or model_args.model_name_or_path
    if name is None and training_args.resume_from_checkpoint and saved.is_dir():
        name = str(saved)
    if name is not None:
        return AutoTokenizer.from_pretrained(name, trust_remote_code=True)
    sources, targets = splits["train"]
    tokenizer = train_tokenizer(
        sources + targets, model_args.vocab_size, lowercase=model_args.lowercase, model_max_length=max_length
    )
    if training_args.should_save:
        tokenizer.save_pretrained(saved)
    return tokenizer


def parse_value(text: str):
    """A JSON value (128, 0.3, true) when it parses as one, else the text itself (gelu)."""
    try:
        return json.loads(text)
    except json.JSONDecodeError:
        return text


def parse_overrides(text: str | None) -> dict:
    """'d_model=128,activation_function=gelu' -> {"d_model": 128, "activation_function": "gelu"}."""
    overrides = {}
    for item in filter(None, (text or "").split(",")):
        key, _, value = item.partition("=")
        overrides[key.strip()] = parse_value(value.strip())
    return overrides


# Fields that mean the same in MarianConfig and TinyTransformerConfig.
MARIAN_FIELDS = (
    "vocab_size d_model encoder_layers decoder_layers encoder_attention_heads decoder_attention_heads "
    "encoder_ffn_dim decoder_ffn_dim dropout attention_dropout activation_dropout activation_function "
    "max_position_embeddings scale_embedding tie_word_embeddings init_std pad_token_id bos_token_id eos_token_id "
    "decoder_start_token_id"
).split()


def marian_of_the_same_shape(config: TinyTransformerConfig) -> MarianMTModel:
    """transformers' own implementation of the architecture, with every size, id and option set like ours."""
    values = {name: getattr(config, name) for name in MARIAN_FIELDS}
    return MarianMTModel(MarianConfig(**values, share_encoder_decoder_embeddings=True, forced_eos_token_id=None))


def make_model(model_args: ModelArguments, tokenizer):
    if model_args.model_name_or_path:
        return AutoModelForSeq2SeqLM.from_pretrained(model_args.model_name_or_path, trust_remote_code=True)
    overrides = {**parse_overrides(model_args.config_overrides), "vocab_size": len(tokenizer)}
    if model_args.preset:
        config = load_preset(model_args.preset, **overrides)
    else:
        config = TinyTransformerConfig.from_pretrained(model_args.config_name, **overrides)
    ids = (tokenizer.pad_token_id, tokenizer.eos_token_id, tokenizer.bos_token_id)
    if ids != (config.pad_token_id, config.eos_token_id, config.bos_token_id):
        raise UsageError(f"the tokenizer's pad/eos/bos ids {ids} differ from the model config's")
    if model_args.architecture == "marian":
        return marian_of_the_same_shape(config)
    return TinyTransformerForConditionalGeneration(config)


# ---------------------------------------------------------------------------------------------------------------
# Metrics
# ---------------------------------------------------------------------------------------------------------------


def bleu_and_chrf(hypotheses: list[str], references: list[str], target_lang: str) -> dict[str, float]:
    """Corpus BLEU with sacrebleu's standard tokenization for the target language, and chrF."""
    tokenize = BLEU_TOKENIZE.get(target_lang, "13a")
    bleu = sacrebleu.corpus_bleu(hypotheses, [references], tokenize=tokenize)
    chrf = sacrebleu.corpus_chrf(hypotheses, [references])
    return {"bleu": bleu.score, "chrf": chrf.score}


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


def train(model_args: ModelArguments, data_args: DataArguments, training_args: TrainingArguments) -> dict:
    transformers.utils.logging.set_verbosity(training_args.get_process_log_level())
    check_arguments(model_args, data_args, training_args)
    checkpoint = resolve_checkpoint(training_args)
    splits = load_splits(data_args)
    set_seed(training_args.seed)
    max_length = max(data_args.max_source_length, data_args.max_target_length)
    tokenizer = make_tokenizer(model_args, splits, training_args, max_length)
    model = make_model(model_args, tokenizer)
    datasets = tokenize_splits(splits, tokenizer, data_args)
    logger.info("model: %s parameters; data: %s", f"{model.num_parameters():,}", {k: len(v) for k, v in datasets.items()})

    trainer = Seq2SeqTrainer(
        model=model,
        args=training_args,
        train_dataset=datasets["train"],
        eval_dataset=datasets.get("validation"),
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
    if "test" in datasets:
        test = trainer.predict(datasets["test"], metric_key_prefix="test")
        metrics.update({key: value for key, value in test.metrics.items() if key in ("test_bleu", "test_chrf")})
    if trainer.is_world_process_zero():
        save_hub_folder(trainer.model, tokenizer, model_args, data_args, training_args, metrics)
        (Path(training_args.output_dir) / "metrics.json").write_text(json.dumps(metrics, indent=2) + "\n")
    return metrics


def save_hub_folder(model, tokenizer, model_args, data_args, training_args, metrics: dict):
    """`{output_dir}/hub`: the model, its code, the tokenizer and a model card with the test metrics."""
    folder = Path(training_args.output_dir) / "hub"
    if model_args.architecture == "marian":  # a comparison model: no card of ours
        model.save_pretrained(folder)
        tokenizer.save_pretrained(folder)
        return
    data = data_args.corpus_dir or data_args.dataset_name or data_args.train_source_file or data_args.train_file
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
        training_data=f"`{data}`",
        metrics={k: v for k, v in metrics.items() if k.startswith("test_")},
        training_procedure=procedure,
    )
    model.generation_config.max_length = training_args.generation_max_length
    save_for_hub(model, tokenizer, folder, card)


def main(argv: list[str] | None = None) -> int:
    logging.basicConfig(format="%(asctime)s %(levelname)s %(name)s: %(message)s", level=logging.INFO)
    model_args, data_args, training_args = parse_arguments(sys.argv[1:] if argv is None else argv)
    try:
        metrics = train(model_args, data_args, training_args)
    except UsageError as error:
        print(f"train.py: {error}", file=sys.stderr)
        return 2
    logger.info("metrics: %s", {k: round(v, 4) if isinstance(v, float) and math.isfinite(v) else v for k, v in metrics.items()})
    return 0


if __name__ == "__main__":
    sys.exit(main())
