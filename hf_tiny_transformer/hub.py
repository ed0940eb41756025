"""Everything a Hub repository needs, in one folder: model, code, tokenizer, and a model card (README.md).

    save_for_hub(model, tokenizer, "runs/en-ja/hub", model_card(model, source_lang="en", ...))

Beyond what `model.save_pretrained` writes (config, weights, the code files: configuration, modeling, the
translation pipeline and the text handling it imports), the folder has the tokenizer, `AutoModel` in config.json's
`auto_map` beside the head's own entry, and the card. It is written all or nothing and replaces what the folder
held, except the `.git` folder and `.gitattributes` of a clone of the Hub repository (as for the Space folder).
"""

import json
import re
import shutil
from pathlib import Path

from huggingface_hub import ModelCard, ModelCardData

from . import modeling_tiny_transformer
from .configuration_tiny_transformer import base_model_in_auto_map
from .guards.writing import staged_folder
from .modeling_tiny_transformer import TinyTransformerForConditionalGeneration

DIFFERENCES_HEADING = "Differences from the paper"
# What a save into a clone of the user's Hub repository keeps: its history (commits not yet pushed) and its LFS rules
GIT_CLONE = (".git", ".gitattributes")


def differences_from_the_paper() -> str:
    """The numbered list at the top of the modeling file, as Markdown."""
    text = modeling_tiny_transformer.__doc__.split(DIFFERENCES_HEADING, 1)[1].split(":", 1)[1]
    return re.sub(r"\n\s+(?!\d+\.)", " ", text.strip())  # one line per item


def metrics_table(metrics: dict[str, float]) -> str:
    """{"bleu": 12.3, "bleu_ci": 1.9, ...} -> a Markdown table; a score's `_ci` (the half-width of its 95 %
    bootstrap confidence interval) is shown beside it."""
    rows = []
    for name, value in metrics.items():
        interval = metrics.get(f"{name}_ci")
        if not name.endswith("_ci"):
            rows.append(f"| {name} | {value:.2f}{f' ± {interval:.2f}' if interval is not None else ''} |")
    header = "value (± the 95 % confidence interval)" if any(name.endswith("_ci") for name in metrics) else "value"
    return f"| metric | {header} |\n|---|---:|\n" + "\n".join(rows)


EVALUATION_HEADING = "## Evaluation"
# The block the tools write and rewrite (evaluate_model.py --update_model_card); the rest of a card is a person's.
BEGIN_METRICS, END_METRICS = "<!-- metrics: written by hf-tiny-transformer -->", "<!-- end of metrics -->"


def metrics_block(metrics: dict[str, float], how: str = "") -> str:
    """The marked block of measured scores: how they were measured, then their table."""
    return "\n\n".join(part for part in (BEGIN_METRICS, how, metrics_table(metrics), END_METRICS) if part)


def with_evaluation(card_text: str, metrics: dict[str, float], how: str) -> str:
    """A model card's text with the tools' marked metrics block replaced, or, where there is none, added at the
    end of its Evaluation section (made before the differences from the paper when there is none). Nothing else in
    the card changes: what a person wrote stays."""
    block = metrics_block(metrics, how)
    if BEGIN_METRICS in card_text and END_METRICS in card_text:
        before, rest = card_text.split(BEGIN_METRICS, 1)
        return before + block + rest.split(END_METRICS, 1)[1]
    if EVALUATION_HEADING in card_text:
        before, rest = card_text.split(EVALUATION_HEADING, 1)
        end = rest.find("\n## ")
        section, after = (rest, "") if end < 0 else (rest[:end], rest[end:])
        return f"{before}{EVALUATION_HEADING}{section.rstrip()}\n\n{block}\n{after}"
    heading = f"## {DIFFERENCES_HEADING}"
    section = f"{EVALUATION_HEADING}\n\n{block}\n\n"
    return (
        card_text.replace(heading, section + heading, 1)
        if heading in card_text
        else card_text.rstrip() + "\n\n" + section
    )


def model_card(
    model: TinyTransformerForConditionalGeneration,
    *,
    source_lang: str,
    target_lang: str,
    training_data: str,
    metrics: dict[str, float] | None = None,
    training_procedure: str = "",
    datasets: list[str] | None = None,
    license: str = "apache-2.0",
    repo_id: str | None = None,
) -> ModelCard:
    """A model card with the Hub's metadata header, for a translation model from `source_lang` to `target_lang`."""
    config = model.config
    data = ModelCardData(
        language=[source_lang, target_lang],
        license=license,
        library_name="transformers",
        pipeline_tag="translation",
        tags=["translation", "transformer", "encoder-decoder", "attention-is-all-you-need", "custom_code"],
        datasets=datasets or [],
        metrics=["bleu", "chrf"],
    )
    shape = (
        f"d_model {config.d_model}, {config.encoder_layers}+{config.decoder_layers} layers, "
        f"{config.encoder_attention_heads} heads, feed-forward {config.encoder_ffn_dim}, "
        f"shared vocabulary of {config.vocab_size}, {model.num_parameters():,} parameters"
    )
    sections = [
        f"# Transformer ({source_lang} -> {target_lang})",
        "The encoder-decoder Transformer of *Attention Is All You Need* (Vaswani et al., 2017), "
        f"trained from scratch to translate {source_lang} into {target_lang}. Shape: {shape}.",
        "## Usage\n\n```python\nfrom transformers import pipeline\n\n"
        f'translate = pipeline("translation", model="{repo_id or "path/to/this/folder"}", trust_remote_code=True)\n'
        'print(translate("...", num_beams=4))\n```',
        f"## Training data\n\n{training_data}",
    ]
    if training_procedure:
        sections.append(f"## Training procedure\n\n{training_procedure}")
    if metrics:
        sections.append(f"{EVALUATION_HEADING}\n\n{metrics_block(metrics)}")
    sections.append(f"## {DIFFERENCES_HEADING}\n\n{differences_from_the_paper()}")
    content = f"---\n{data.to_yaml()}\n---\n\n" + "\n\n".join(sections) + "\n"
    return ModelCard(content)


def save_for_hub(
    model: TinyTransformerForConditionalGeneration,
    tokenizer,
    folder: str | Path,
    card: ModelCard,
    space_folder: str | Path | None = None,
    weights_dtype=None,
) -> Path:
    """Save model, code files, tokenizer and model card into `folder`, ready to upload as it is; with
    `space_folder`, also a Hub Space there: the app (`hf_tiny_transformer.app.page`) with this model. With
    `weights_dtype` (torch.float16), the weights are stored in it, and config.json keeps the model's own dtype, which
    loading gives."""
    folder = Path(folder)
    with staged_folder(folder, keep=GIT_CLONE) as staging:  # nothing in `folder` changes until every file is written
        save_model_and_tokenizer(model, tokenizer, staging)
        if weights_dtype is not None:
            from safetensors.torch import load_file, save_file

            weights = load_file(staging / "model.safetensors")
            save_file({name: tensor.to(weights_dtype) for name, tensor in weights.items()},
                      staging / "model.safetensors", metadata={"format": "pt"})  # fmt: skip
        card.save(staging / "README.md")
    if space_folder is not None:
        save_space(model, tokenizer, space_folder, card)
    return folder


def save_model_and_tokenizer(model, tokenizer, folder: Path):
    """model.save_pretrained and tokenizer.save_pretrained into `folder`, with `AutoModel` in config.json's
    `auto_map` also for a config loaded from a folder saved before the config carried it."""
    model.config.auto_map = {**base_model_in_auto_map(), **(getattr(model.config, "auto_map", None) or {})}
    model.save_pretrained(folder)
    tokenizer.save_pretrained(folder)


SPACE_APP = '''"""The app of the model in this folder: `tiny-transformer app`."""

import sys

from hf_tiny_transformer.commands import main

sys.exit(main(["app", "--model", "."]))
'''
# What the Space installs: the package's own code travels in the Space (hf_tiny_transformer/), its needs do not.
SPACE_REQUIREMENTS = [
    "torch>=2.4",
    "transformers>=5.24,<6,!=5.25.0",
    "tokenizers>=0.22",
    "safetensors>=0.4",
    "huggingface_hub",
    "sentencex>=1.0.26",
    "matplotlib>=3.7",
    "matplotlib-fontja>=1.0",
]


def save_space(model, tokenizer, folder: str | Path, card: ModelCard) -> Path:
    """A folder to upload as a Hub Space (Gradio SDK): app.py, requirements.txt, a copy of this package, the model
    and its tokenizer, and README.md with the Space's metadata followed by the model card."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        gradio_version = version("gradio")
    except PackageNotFoundError:
        gradio_version = "5.0.0"
    package = Path(__file__).parent
    header = {
        "title": card.data.to_dict().get("model_name") or "hf-tiny-transformer demo",
        "emoji": "🔤",
        "colorFrom": "blue",
        "colorTo": "green",
        "sdk": "gradio",
        "sdk_version": gradio_version,
        "app_file": "app.py",
        "pinned": False,
        "license": card.data.license,
    }
    folder = Path(folder)
    with staged_folder(folder, keep=GIT_CLONE) as staging:
        save_model_and_tokenizer(model, tokenizer, staging)
        (staging / "app.py").write_text(SPACE_APP)
        (staging / "requirements.txt").write_text("\n".join(SPACE_REQUIREMENTS + [f"gradio=={gradio_version}"]) + "\n")
        for source in [*package.rglob("*.py"), *package.rglob("*.json")]:
            target = staging / "hf_tiny_transformer" / source.relative_to(package)
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy(source, target)
        metadata = "\n".join(f"{key}: {json.dumps(value, ensure_ascii=False)}" for key, value in header.items())
        (staging / "README.md").write_text(f"---\n{metadata}\n---\n\n{card.text.lstrip()}", encoding="utf-8")
    return folder


__all__ = ["model_card", "save_for_hub", "save_space", "differences_from_the_paper", "with_evaluation"]
