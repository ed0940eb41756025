"""The encoder-decoder Transformer of "Attention Is All You Need" as a Hugging Face transformers model.

What a saved model carries (the files `save_pretrained` copies into its folder, loaded there as remote code) sits at
the top of the package, named `*_tiny_transformer.py`: the configuration, the model, and the translation pipeline
with the text handling it uses (config.json names the pipeline: transformers 5 has no translation task of its own).
The rest, in layers that import only the ones below:

- the error contract: `errors` (UsageError: one line naming the problem and the fix);
- the library: the model files; `shapes/` (tiny, paper-base); `data/` (corpora, the tokenizer trainer, batches by
  tokens); `training/` (Trainer pieces: arguments, label smoothing, precision, time budget, checkpoints, the run's
  record); `serving/` (the translators of every engine, the CTranslate2 export); `demo/` (the demo page, the
  attention pictures); `evaluation`, `hub`, `marian`, `upgrade`, `hardware`, `loading` (the one model-folder
  loader), `saving` (all-or-nothing writes);
- the commands: `commands/`, the installed `tiny-transformer` and its subcommands;
- the training scripts: `training/` at the top of a clone (train.py and its recipes), never imported.

Importing the package registers the config and models with the Auto classes (safe to repeat).
"""

from transformers import AutoConfig, AutoModel, AutoModelForSeq2SeqLM

from .configuration_tiny_transformer import TinyTransformerConfig
from .data.corpus import detokenize_english, read_parallel, unsegment_japanese
from .data.tokenizer import train_tokenizer
from .hub import model_card, save_for_hub
from .marian import from_marian, to_marian
from .modeling_tiny_transformer import (
    TinyTransformerForConditionalGeneration,
    TinyTransformerModel,
    TinyTransformerPreTrainedModel,
)
from .pipeline_tiny_transformer import TranslationPipeline
from .shapes import load_shape, shape_names

AutoConfig.register(TinyTransformerConfig.model_type, TinyTransformerConfig, exist_ok=True)
AutoModel.register(TinyTransformerConfig, TinyTransformerModel, exist_ok=True)
AutoModelForSeq2SeqLM.register(TinyTransformerConfig, TinyTransformerForConditionalGeneration, exist_ok=True)
# For the Hub: save_pretrained copies the code files into the folder and writes `auto_map` into config.json.
TinyTransformerConfig.register_for_auto_class()
TinyTransformerModel.register_for_auto_class("AutoModel")
TinyTransformerForConditionalGeneration.register_for_auto_class("AutoModelForSeq2SeqLM")

__all__ = [
    "TinyTransformerConfig",
    "TinyTransformerPreTrainedModel",
    "TinyTransformerModel",
    "TinyTransformerForConditionalGeneration",
    "TranslationPipeline",
    "train_tokenizer",
    "load_shape",
    "shape_names",
    "model_card",
    "save_for_hub",
    "read_parallel",
    "unsegment_japanese",
    "detokenize_english",
    "to_marian",
    "from_marian",
]
