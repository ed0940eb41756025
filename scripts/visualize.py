"""Pictures of a trained model for one sentence: positional encoding and every layer's attention heads.

    python scripts/visualize.py --model runs/demo/hub --source "I really like green tea." --out runs/pictures
    python scripts/visualize.py --model runs/en-ja/hub --source "..." --target "..." --out DIR

Writes positional_encoding.png, and per layer encoder_layer{N}.png (self-attention over the source),
decoder_layer{N}.png (masked self-attention: the causal mask is the zero upper triangle) and
cross_layer{N}.png (target queries over source keys), each a grid of all heads. Without --target, the
target is the model's own translation; a source or target longer than the model takes is refused (pictures are
of one sentence). Needs the [viz] extra (matplotlib, matplotlib-fontja). Each picture is written whole or not at
all.
"""

import sys

from pathlib import Path

from hf_tiny_transformer.cli import (
    ArgumentParser,
    UsageError,
    check_output,
    load_model_folder,
    run,
    trust_remote_code_argument,
)
from hf_tiny_transformer.demo.visualization import (
    KINDS,
    attention_weights,
    draw_heads,
    matplotlib,
    plot_positional_encoding,
)
from hf_tiny_transformer.saving_tiny_transformer import replaced_file


def parse_args(argv=None):
    parser = ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", required=True, help="saved model folder or Hub id")
    parser.add_argument("--source", required=True, help="a sentence in the source language")
    parser.add_argument("--target", help="its translation; default: the model's own")
    parser.add_argument("--out", required=True, help="folder for the PNG files")
    trust_remote_code_argument(parser)
    args = parser.parse_args(argv)
    for flag in ("source", "target"):
        if getattr(args, flag) is not None and not getattr(args, flag).strip():
            raise UsageError(f"--{flag} is empty; pass a sentence")
    args.out = check_output(
        args.out,
        kind="folder",
        flag="--out",
        inputs=(args.model,),
        overwrite_fix="choose another --out for the pictures",
    )
    try:
        matplotlib()
    except ImportError as error:
        raise UsageError(str(error)) from None
    return args


def save(figure, path: Path):
    with replaced_file(path) as temporary:
        figure.savefig(temporary, dpi=100, format="png")


def main(argv=None) -> int:
    args = parse_args(argv)
    model, tokenizer = load_model_folder(args.model, "--model", args.trust_remote_code)
    longest = model.config.max_position_embeddings
    for flag in ("source", "target"):
        text = getattr(args, flag)
        if text is not None and len(tokenizer(text)["input_ids"]) > longest:
            raise UsageError(
                f"--{flag} has {len(tokenizer(text)['input_ids'])} tokens but the model takes at most {longest}; pass one sentence"
            )
    model.eval()
    args.out.mkdir(parents=True, exist_ok=True)
    save(plot_positional_encoding(model.config), args.out / "positional_encoding.png")
    attention = attention_weights(model, tokenizer, args.source, args.target)
    print(f"source: {' | '.join(attention.source_tokens)}\ntarget: {' | '.join(attention.target_tokens)}")
    for kind in KINDS:
        for layer, weights in enumerate(attention.weights(kind)):
            save(
                draw_heads(attention, kind, layer, list(range(weights.shape[0]))), args.out / f"{kind}_layer{layer}.png"
            )
    print(f"wrote {len(list(args.out.glob('*.png')))} pictures to {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(run(main))
