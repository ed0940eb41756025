"""Pictures of a trained model for one sentence: positional encoding and every layer's attention heads.

    python training/visualize.py --model runs/demo/hub --source "I really like green tea." --out runs/pictures
    python training/visualize.py --model runs/en-ja/hub --source "..." --target "..." --out DIR

Writes positional_encoding.png, and per layer encoder_layer{N}.png (self-attention over the source),
decoder_layer{N}.png (masked self-attention: the causal mask is the zero upper triangle) and
cross_layer{N}.png (target queries over source keys), each a grid of all heads. Without --target, the
target is the model's own translation. Needs the [viz] extra (matplotlib, matplotlib-fontja).
"""

import argparse
from pathlib import Path

from transformers import AutoModelForSeq2SeqLM, AutoTokenizer

from hf_tiny_transformer.visualization import KINDS, attention_weights, draw_heads, plot_positional_encoding


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", required=True, help="saved model folder or Hub id")
    parser.add_argument("--source", required=True, help="a sentence in the source language")
    parser.add_argument("--target", help="its translation; default: the model's own")
    parser.add_argument("--out", required=True, type=Path, help="folder for the PNG files")
    args = parser.parse_args(argv)

    tokenizer = AutoTokenizer.from_pretrained(args.model, trust_remote_code=True)
    model = AutoModelForSeq2SeqLM.from_pretrained(args.model, trust_remote_code=True).eval()
    args.out.mkdir(parents=True, exist_ok=True)
    plot_positional_encoding(model.config).savefig(args.out / "positional_encoding.png", dpi=100)
    attention = attention_weights(model, tokenizer, args.source, args.target)
    print(f"source: {' | '.join(attention.source_tokens)}\ntarget: {' | '.join(attention.target_tokens)}")
    for kind in KINDS:
        for layer, weights in enumerate(attention.weights(kind)):
            figure = draw_heads(attention, kind, layer, list(range(weights.shape[0])))
            figure.savefig(args.out / f"{kind}_layer{layer}.png", dpi=100)
    print(f"wrote {len(list(args.out.glob('*.png')))} pictures to {args.out}")


if __name__ == "__main__":
    main()
