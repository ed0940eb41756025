"""The encoder-decoder Transformer of "Attention Is All You Need" as a Hugging Face transformers model.

    from hf_tiny_transformer import TinyTransformerConfig, TinyTransformerForConditionalGeneration

What a saved model carries (the files `save_pretrained` copies into its folder, loaded there as remote code) sits at
the top of the package, named `*_tiny_transformer.py`: the configuration, the model, and the translation pipeline
with the text handling it uses (config.json names the pipeline: transformers 5 has no translation task of its own).
The rest, in layers that import only the ones below:

- the error contract: `errors` (UsageError: one line naming the problem and the fix);
- the model: the files above, `auto_classes` and `shapes/` (tiny, paper-base);
- the guards: `guards/` (the runner of every command, the output guard, all-or-nothing writes, the training run's
  lock, the one model-folder loader, the text files a command reads);
- the library, by job: `data/` (corpora, the tokenizer trainer, batches by tokens); `trainer/` (Trainer pieces:
  arguments, label smoothing, precision, time budget, checkpoints, the run's record); `serving/` (the translators of
  every engine, the CTranslate2 and ONNX exports, the browser page); `app/` (the page of `tiny-transformer app`, the
  attention pictures); `evaluation`, `hub`, `marian`, `hardware`;
- the commands: `commands/`, the installed `tiny-transformer` and its subcommands;
- the training scripts: `training/` at the top of a clone (train.py and its recipes), never imported.

Importing the package imports nothing heavy, so that `tiny-transformer --help` answers at once: each name below is
imported when first used. The config and models are registered with the Auto classes (safe to repeat;
`register_auto_classes`) at import where transformers is imported already, else at the first use of a name here, so
that `AutoModelForSeq2SeqLM.from_pretrained(folder)` loads this package's folders with its classes.
"""

import importlib
import sys

# name -> the module that defines it
EXPORTS = {
    "TinyTransformerConfig": "configuration_tiny_transformer",
    "TinyTransformerPreTrainedModel": "modeling_tiny_transformer",
    "TinyTransformerModel": "modeling_tiny_transformer",
    "TinyTransformerForConditionalGeneration": "modeling_tiny_transformer",
    "TranslationPipeline": "pipeline_tiny_transformer",
    "train_tokenizer": "data.tokenizer",
    "load_shape": "shapes",
    "shape_names": "shapes",
    "model_card": "hub",
    "save_for_hub": "hub",
    "read_parallel": "data.corpus",
    "unsegment_japanese": "data.corpus",
    "detokenize_english": "data.corpus",
    "to_marian": "marian",
    "from_marian": "marian",
    "register_auto_classes": "auto_classes",
}


if "transformers" in sys.modules:  # cheap now; README-style code imports transformers first
    importlib.import_module(".auto_classes", __name__).register_auto_classes()


def __getattr__(name: str):
    if name not in EXPORTS:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    from .auto_classes import register_auto_classes

    register_auto_classes()
    value = getattr(importlib.import_module(f".{EXPORTS[name]}", __name__), name)
    globals()[name] = value  # later uses find it without this function
    return value


def __dir__() -> list[str]:
    return sorted([*globals(), *EXPORTS])


__all__ = list(EXPORTS)
