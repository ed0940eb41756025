"""Pictures of the model for a sentence: the positional encoding and every head's attention.

    from hf_tiny_transformer.app.visualization import plot_attention, plot_positional_encoding
    plot_positional_encoding(model.config).savefig("pe.png")
    plot_attention(model, tokenizer, "I really like green tea.", kind="cross", layer=1).savefig("cross.png")

Needs matplotlib (`pip install "hf-tiny-transformer[viz]"`); Japanese tokens are drawn with the IPAexGothic
font that the `matplotlib-fontja` package carries (without it, a warning, and Japanese shows as boxes).
The attention weights come from the eager attention path (`output_attentions=True`), which these functions
switch to for the call and back; they work on a model loaded with `trust_remote_code=True` too.
"""

import contextlib
import importlib.util
import logging
from dataclasses import dataclass
from pathlib import Path

import torch

from ..modeling_tiny_transformer import sinusoidal_table
from ..text_tiny_transformer import remove_invisible_characters

logger = logging.getLogger(__name__)

KINDS = ("encoder", "decoder", "cross")
JAPANESE_FONT = "IPAexGothic"


def matplotlib():
    """The matplotlib module, or an ImportError that says how to install it. Figures are made with
    `matplotlib.figure.Figure` directly: no pyplot, no global figure state, no display needed."""
    try:
        import matplotlib
        import matplotlib.figure
    except ImportError as error:
        raise ImportError(
            "The plots need matplotlib: pip install 'hf-tiny-transformer[viz]' (matplotlib and matplotlib-fontja)."
        ) from error
    return matplotlib


def font_family() -> list[str]:
    """Font families for the plots: IPAexGothic (from matplotlib-fontja) first, when it is installed."""
    from matplotlib import font_manager

    spec = importlib.util.find_spec("matplotlib_fontja")
    if spec is None or not spec.submodule_search_locations:
        logger.warning(
            "matplotlib-fontja is not installed: Japanese tokens will show as boxes. "
            "pip install 'hf-tiny-transformer[viz]' to get its IPAexGothic font."
        )
        return ["DejaVu Sans"]
    font_file = Path(spec.submodule_search_locations[0]) / "fonts" / "ipaexg.ttf"
    if JAPANESE_FONT not in {font.name for font in font_manager.fontManager.ttflist}:
        font_manager.fontManager.addfont(str(font_file))
    return [JAPANESE_FONT, "DejaVu Sans"]


def plot_positional_encoding(config, num_positions: int | None = None):
    """Heatmap of PE(pos, i) for positions 0..num_positions-1 (rows) and dimensions 0..d_model-1 (columns)."""
    mpl = matplotlib()
    num_positions = num_positions or min(config.max_position_embeddings, 100)
    table = sinusoidal_table(num_positions, config.d_model)  # (P, D)
    figure = mpl.figure.Figure(figsize=(8, 5), layout="constrained")
    axes = figure.subplots()
    image = axes.imshow(table.numpy(), aspect="auto", cmap="RdBu", vmin=-1, vmax=1)
    axes.set_xlabel("dimension i (even: sin, odd: cos)")
    axes.set_ylabel("position")
    axes.set_title(f"Sinusoidal positional encoding, d_model = {config.d_model}")
    figure.colorbar(image, ax=axes)
    return figure


@dataclass
class Attention:
    """The attention weights of one sentence pair, with the tokens they are between."""

    source_tokens: list[str]
    target_tokens: list[str]  # the decoder's inputs: <s> then the target, one per query row
    target_text: str  # the target as text: the model's translation, or the given target
    encoder: tuple[torch.Tensor, ...]  # per layer (H, S, S)
    decoder: tuple[torch.Tensor, ...]  # per layer (H, T, T)
    cross: tuple[torch.Tensor, ...]  # per layer (H, T, S)

    def weights(self, kind: str) -> tuple[torch.Tensor, ...]:
        return {"encoder": self.encoder, "decoder": self.decoder, "cross": self.cross}[kind]

    def labels(self, kind: str) -> tuple[list[str], list[str]]:
        """(row labels, column labels): queries and keys."""
        if kind == "encoder":
            return self.source_tokens, self.source_tokens
        if kind == "decoder":
            return self.target_tokens, self.target_tokens
        return self.target_tokens, self.source_tokens


@contextlib.contextmanager
def eager_attention(model):
    """Switch the model to the eager attention path (the one that returns weights) for a block."""
    previous = model.config._attn_implementation
    model.set_attn_implementation("eager")
    try:
        yield model
    finally:
        model.set_attn_implementation(previous)


def readable(tokens: list[str]) -> list[str]:
    return [token.replace("▁", " ").strip() or "▁" for token in tokens]


def attention_weights(model, tokenizer, source: str, target: str | None = None, num_beams: int = 4) -> Attention:
    """Run the model on (source, target) and collect every layer's attention; target defaults to the model's
    own translation of source. Invisible characters are removed first, as every front door does."""
    source = remove_invisible_characters(source)
    target = None if target is None else remove_invisible_characters(target)
    encoded = tokenizer(source, return_tensors="pt").to(model.device)
    if target is None:
        longest = min(64, model.config.max_position_embeddings - 1)
        with torch.inference_mode():
            # max_length (start token + longest), so that it replaces the saved generation config's max_length
            generated = model.generate(**encoded, num_beams=num_beams, max_length=longest + 1)  # (1, T)
        ends_with_eos = generated[0, -1] == model.config.eos_token_id
        decoder_input_ids = generated[:, :-1] if ends_with_eos else generated  # <s> t1 ... tn
    else:
        # at most the positional table: a translation made in pieces or re-tokenized can be longer than one piece
        limit = model.config.max_position_embeddings
        labels = tokenizer(text_target=target, truncation=True, max_length=limit, return_tensors="pt")["input_ids"]
        labels = labels.to(model.device)  # t1 ... </s>
        start = labels.new_full((1, 1), model.config.decoder_start_token_id)
        decoder_input_ids = torch.cat([start, labels[:, :-1]], 1)  # <s> t1 ... tn
    with eager_attention(model), torch.inference_mode():
        output = model(**encoded, decoder_input_ids=decoder_input_ids, output_attentions=True)
    return Attention(
        source_tokens=readable(tokenizer.convert_ids_to_tokens(encoded["input_ids"][0])),
        target_tokens=readable(tokenizer.convert_ids_to_tokens(decoder_input_ids[0])),
        target_text=tokenizer.decode(decoder_input_ids[0], skip_special_tokens=True),
        encoder=tuple(w[0].float().cpu() for w in output.encoder_attentions),
        decoder=tuple(w[0].float().cpu() for w in output.decoder_attentions),
        cross=tuple(w[0].float().cpu() for w in output.cross_attentions),
    )


TITLES = {"encoder": "encoder self-attention", "decoder": "decoder masked self-attention", "cross": "cross-attention"}


def draw_heads(attention: Attention, kind: str, layer: int, heads: list[int]):
    """One panel a head: rows are queries, columns keys, both labelled with their tokens."""
    mpl = matplotlib()
    weights = attention.weights(kind)[layer]  # (H, Tq, Tk)
    rows, columns = attention.labels(kind)
    grid = 1 if len(heads) == 1 else 2 if len(heads) <= 4 else 4
    height = (len(heads) + grid - 1) // grid
    width_inches, height_inches = 0.3 * len(columns) + 2, 0.3 * len(rows) + 1.5
    with mpl.rc_context({"font.family": font_family()}):
        figure = mpl.figure.Figure(figsize=(width_inches * grid, height_inches * height), layout="constrained")
        axes = figure.subplots(height, grid, squeeze=False)
        for panel, head in zip(axes.flat, heads):
            panel.imshow(weights[head].numpy(), cmap="viridis", vmin=0, vmax=1)
            panel.set_xticks(range(len(columns)), columns, rotation=90)
            panel.set_yticks(range(len(rows)), rows)
            panel.set_title(f"head {head}")
            panel.set_xlabel("source (key)" if kind != "decoder" else "decoder input (key)")
            panel.set_ylabel("decoder input (query)" if kind != "encoder" else "source (query)")
        for panel in axes.flat[len(heads) :]:
            panel.remove()
        figure.suptitle(f"Layer {layer}, {TITLES[kind]}")
    return figure


def plot_attention(
    model,
    tokenizer,
    source: str,
    target: str | None = None,
    kind: str = "cross",
    layer: int = 0,
    head: int | None = None,
):
    """Attention of one layer for one sentence pair: one head, or every head in a grid (head=None).

    Args:
        source: text in the source language.
        target: its translation; default: the model's own translation (beam search).
        kind: "encoder" (self-attention over the source), "decoder" (masked self-attention over the target,
            the causal mask visible as the zero upper triangle) or "cross" (target queries over source keys).
        layer: layer index, 0-based.
        head: head index, or None for all heads.
    """
    if kind not in KINDS:
        raise ValueError(f"kind must be one of {', '.join(KINDS)}, got {kind!r}")
    attention = attention_weights(model, tokenizer, source, target)
    layers = len(attention.weights(kind))
    if not 0 <= layer < layers:
        raise ValueError(f"layer must be in [0, {layers}) for the {kind} stack, got {layer}")
    num_heads = attention.weights(kind)[layer].shape[0]
    if head is not None and not 0 <= head < num_heads:
        raise ValueError(f"head must be in [0, {num_heads}), got {head}")
    return draw_heads(attention, kind, layer, list(range(num_heads)) if head is None else [head])


__all__ = ["plot_positional_encoding", "plot_attention", "attention_weights", "draw_heads"]
