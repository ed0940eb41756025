"""What a training run starts from: the config of a new model, the lengths it can take, the tokenizer (given,
resumed or trained on the run's data), the model, and the tokenized pairs.

    config = make_config(model_args)
    tokenizer = make_tokenizer(model_args, data_args, splits, training_args, checkpoint)
    model = make_model(model_args, config, tokenizer)
    tokenized = {split: pairs.map(tokenize(tokenizer, data_args), ...) for split, pairs in splits.items()}

Every problem with the flags is a UsageError in one line, before any training.
"""

from pathlib import Path

from transformers import AutoTokenizer

from ..auto_classes import register_auto_classes
from ..configuration_tiny_transformer import TinyTransformerConfig
from ..data.tokenizer import train_tokenizer
from ..errors import UsageError, first_line
from ..marian import marian_of_the_same_shape
from ..modeling_tiny_transformer import TinyTransformerForConditionalGeneration
from ..shapes import load_shape


def make_config(model_args) -> TinyTransformerConfig:
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


def fit_lengths(config, data_args, training_args):
    """The lengths the run takes, by default the positional table's; each checked against it, or the run dies after
    training, in its evaluation."""
    longest = config.max_position_embeddings
    data_args.max_source_length = data_args.max_source_length or longest
    data_args.max_target_length = data_args.max_target_length or longest
    training_args.generation_max_length = training_args.generation_max_length or data_args.max_target_length + 1
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
    """The given tokenizer, the resumed run's, or a new one trained on the training data (saved in
    `{output_dir}/tokenizer`)."""
    saved = Path(training_args.output_dir) / "tokenizer"
    name = model_args.tokenizer_name or (checkpoint and (saved if saved.is_dir() else checkpoint))  # resuming: its own
    if name:
        register_auto_classes()  # a checkpoint's config.json names this package's model, whose code it holds
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
    """A new model of the config's shape with the tokenizer's vocabulary (MarianMTModel with --architecture
    marian)."""
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
    """The function datasets' map() applies to batches of pairs: source ids, attention mask and target labels."""

    def encode(batch):
        sources = tokenizer(batch["source"], max_length=data_args.max_source_length, truncation=True)
        targets = tokenizer(text_target=batch["target"], max_length=data_args.max_target_length, truncation=True)
        return {**sources, "labels": targets["input_ids"]}

    return encode


__all__ = ["make_config", "fit_lengths", "make_tokenizer", "make_model", "tokenize"]
