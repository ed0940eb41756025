"""Everything a Hub repository needs, in one folder: model, code, tokenizer, and a model card (README.md)."""

import re
from pathlib import Path

from huggingface_hub import ModelCard, ModelCardData

from . import modeling_tiny_transformer
from .modeling_tiny_transformer import TinyTransformerForConditionalGeneration, staged_folder

DIFFERENCES_HEADING = "Differences from the paper"


def differences_from_the_paper() -> str:
    """The numbered list at the top of the modeling file, as Markdown."""
    text = modeling_tiny_transformer.__doc__.split(DIFFERENCES_HEADING, 1)[1].split(":", 1)[1]
    return re.sub(r"\n\s+(?!\d+\.)", " ", text.strip())  # one line per item


def metrics_table(metrics: dict[str, float]) -> str:
    """{"test_bleu": 12.3, ...} -> a Markdown table."""
    rows = "\n".join(f"| {name} | {value:.2f} |" for name, value in metrics.items())
    return f"| metric | value |\n|---|---:|\n{rows}"


EVALUATION_HEADING = "## Evaluation"


def with_evaluation(card_text: str, metrics: dict[str, float], how: str) -> str:
    """A model card's text with its Evaluation section replaced (or added before the differences from the paper)."""
    section = f"{EVALUATION_HEADING}\n\n{how}\n\n{metrics_table(metrics)}\n\n"
    if EVALUATION_HEADING in card_text:
        before, rest = card_text.split(EVALUATION_HEADING, 1)
        after = rest[rest.index("\n## "):].lstrip("\n") if "\n## " in rest else ""
        return before + section + after
    heading = f"## {DIFFERENCES_HEADING}"
    return card_text.replace(heading, section + heading, 1) if heading in card_text else card_text + "\n" + section


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
        sections.append(f"{EVALUATION_HEADING}\n\n{metrics_table(metrics)}")
    sections.append(f"## {DIFFERENCES_HEADING}\n\n{differences_from_the_paper()}")
    content = f"---\n{data.to_yaml()}\n---\n\n" + "\n\n".join(sections) + "\n"
    return ModelCard(content)


def save_for_hub(model: TinyTransformerForConditionalGeneration, tokenizer, folder: str | Path, card: ModelCard) -> Path:
    """Save model, code files, tokenizer and model card into `folder`, ready to upload as it is."""
    folder = Path(folder)
    with staged_folder(folder) as staging:  # nothing in `folder` changes until every file is written
        model.save_pretrained(staging)
        tokenizer.save_pretrained(staging)
        card.save(staging / "README.md")
    return folder


__all__ = ["model_card", "save_for_hub", "differences_from_the_paper", "with_evaluation"]
