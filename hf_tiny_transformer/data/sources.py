"""Where the sentence pairs of a training run come from, as `datasets` splits with "source" and "target" columns.

    splits = load_pairs(data_args)     # {"train": Dataset, "validation": ..., "test": ...}

One of: a folder in small_parallel_enja's layout (`--corpus_dir`, read as natural text), line-aligned text files
(`--train_source_file/--train_target_file`), JSON lines (`--train_file`, `{"translation": {"en": ..., "ja": ...}}`,
read by `datasets.load_dataset("json")`), or a `datasets` dataset with a `translation` column (`--dataset_name`).
With `--streaming`, JSON lines and datasets are read as they are used (`IterableDataset`), never held whole.
"""

import contextlib

import datasets
from datasets import Dataset, IterableDataset, load_dataset

from ..errors import UsageError, first_line
from .corpus import read_parallel
from ..guards.text_files import read_aligned

SPLITS = ("train", "validation", "test")
CORPUS_SPLITS = {"train": "train", "validation": "dev", "test": "test"}


def load_pairs(data_args) -> dict[str, Dataset | IterableDataset]:
    """The splits the data arguments name (a `DataArguments` of trainer.arguments), "train" always among them."""
    src, tgt = data_args.source_lang, data_args.target_lang
    if data_args.corpus_dir:
        try:
            pairs = {
                split: read_parallel(data_args.corpus_dir, name, src, tgt) for split, name in CORPUS_SPLITS.items()
            }
        except (OSError, ValueError) as error:
            raise UsageError(f"--corpus_dir {data_args.corpus_dir}: {first_line(error)}") from None
        splits = {split: Dataset.from_dict({"source": s, "target": t}) for split, (s, t) in pairs.items()}
    elif data_args.dataset_name:
        splits = translation_splits(data_args.dataset_name, data_args.dataset_config_name, data_args)
    else:
        splits = {split: read_split(split, data_args) for split in SPLITS}
        splits = {split: pairs for split, pairs in splits.items() if pairs is not None}
    if "train" not in splits:
        raise UsageError(
            "no training data: pass --corpus_dir, --train_source_file/--train_target_file, --train_file or "
            "--dataset_name"
        )
    return {split: first_samples(pairs, split, data_args) for split, pairs in splits.items()}


def read_split(split: str, data_args) -> Dataset | IterableDataset | None:
    """One split from text files or JSON lines, or None when neither is given."""
    source_file, json_file = getattr(data_args, f"{split}_source_file"), getattr(data_args, f"{split}_file")
    if source_file:
        flags = (f"--{split}_source_file", f"--{split}_target_file")
        sources, targets = read_aligned(source_file, getattr(data_args, f"{split}_target_file"), flags)
        return Dataset.from_dict({"source": sources, "target": targets})
    if json_file:
        return translation_splits(
            "json", None, data_args, data_files={split: json_file}, flag=f"--{split}_file {json_file}"
        )[split]
    return None


def translation_splits(name: str, config_name: str | None, data_args, flag: str = "--dataset_name", **kwargs) -> dict:
    """`datasets.load_dataset` splits whose `translation` column holds both languages, as source/target columns."""
    src, tgt = data_args.source_lang, data_args.target_lang
    expected = f'{{"translation": {{"{src}": "...", "{tgt}": "..."}}}}'
    try:
        with quiet_datasets():
            loaded = load_dataset(name, config_name, streaming=data_args.streaming, **kwargs)
    except Exception as error:  # datasets raises many kinds (missing file, bad JSON, no such dataset)
        cause = error.__cause__ or error
        raise UsageError(f"{flag} cannot be read ({first_line(cause)}); each record must be {expected}") from None
    splits = {}
    for split in SPLITS:
        if split not in loaded:
            continue
        columns = loaded[split].column_names or ["translation"]  # a stream may not know them before reading
        if "translation" not in columns:
            raise UsageError(
                f"{flag}: the {split} split has no 'translation' column (it has {', '.join(columns)}); each record "
                f"must be {expected}"
            )
        splits[split] = loaded[split].map(
            lambda row: pair(row, src, tgt, flag), remove_columns=list(loaded[split].column_names or [])
        )
    return splits


@contextlib.contextmanager
def quiet_datasets():
    """datasets' own error log lines silenced while it loads: the command reports the problem in one line."""
    level = datasets.logging.get_verbosity()
    datasets.logging.set_verbosity(datasets.logging.CRITICAL)
    try:
        yield
    finally:
        datasets.logging.set_verbosity(level)


def pair(row: dict, src: str, tgt: str, flag: str) -> dict:
    """{"translation": {src: ..., tgt: ...}} -> {"source": ..., "target": ...}."""
    translation = row.get("translation")
    if not isinstance(translation, dict) or not all(isinstance(translation.get(lang), str) for lang in (src, tgt)):
        expected = f'{{"translation": {{"{src}": "...", "{tgt}": "..."}}}}'
        raise UsageError(f"{flag}: a record is not {expected}: {str(row)[:80]}")
    return {"source": translation[src], "target": translation[tgt]}


def first_samples(pairs: Dataset | IterableDataset, split: str, data_args) -> Dataset | IterableDataset:
    """--max_train_samples / --max_eval_samples; an empty split (nothing but blank lines) is an error."""
    limit = data_args.max_train_samples if split == "train" else data_args.max_eval_samples
    if isinstance(pairs, IterableDataset):
        return pairs.take(limit) if limit else pairs
    pairs = pairs.select(range(min(limit, len(pairs)))) if limit else pairs
    if not any(s.strip() and t.strip() for s, t in zip(pairs["source"], pairs["target"])):
        raise UsageError(f"the {split} data is empty: no pair with both sides")
    return pairs


__all__ = ["load_pairs", "SPLITS"]
