"""Pictures of a trained model for one sentence: positional encoding and every layer's attention heads.

    tiny-transformer visualize --model runs/demo/hub --source "I really like green tea." --output_dir runs/pictures
    tiny-transformer visualize --model runs/en-ja/hub --source "..." --target "..." --output_dir DIR

Writes positional_encoding.png, and per layer encoder_layer{N}.png (self-attention over the source),
decoder_layer{N}.png (masked self-attention: the causal mask is the zero upper triangle) and
cross_layer{N}.png (target queries over source keys), each a grid of all heads. Without --target, the
target is the model's own translation; a source or target longer than the model takes is refused (pictures are
of one sentence). Needs the [viz] extra (matplotlib, matplotlib-fontja). Each picture is written whole or not at
all.
"""

from pathlib import Path

from ..errors import ArgumentParser, UsageError, about
from ..guards.loading import load_model_folder
from ..guards.outputs import check_output, inputs_of
from ..guards.writing import replaced_file
from ..text_tiny_transformer import remove_invisible_characters
from .flags import trust_remote_code_argument


def parse_args(argv=None):
    parser = ArgumentParser(prog="tiny-transformer visualize", description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", required=True, help="saved model folder or Hub id")
    parser.add_argument("--source", required=True, help="a sentence in the source language")
    parser.add_argument("--target", help="its translation; default: the model's own")
    parser.add_argument("--output_dir", "--out", required=True, help="folder for the PNG files")
    trust_remote_code_argument(parser)
    args = parser.parse_args(argv)
    for flag in ("source", "target"):
        if getattr(args, flag) is None:
            continue
        setattr(args, flag, remove_invisible_characters(getattr(args, flag)))  # what the model will read
        if not getattr(args, flag).strip():
            raise UsageError(f"--{flag} is empty; pass a sentence")
    args.output_dir = check_output(
        args.output_dir,
        flag="--output_dir",
        kind="folder",
        inputs=inputs_of(args, but=["output_dir"]),
        writes=["*.png"],
        overwrite_fix="choose another --output_dir for the pictures",
    )
    from ..app.visualization import matplotlib

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
    from ..app.visualization import KINDS, attention_weights, draw_heads, plot_positional_encoding

    with about("--model"):
        model, tokenizer = load_model_folder(args.model, args.trust_remote_code)
    longest = model.config.max_position_embeddings
    for flag in ("source", "target"):
        text = getattr(args, flag)
        if text is None:
            continue
        count = len(tokenizer(text, verbose=False)["input_ids"])  # verbose=False: the count is reported here
        if count > longest:
            raise UsageError(f"--{flag} has {count} tokens but the model takes at most {longest}; pass one sentence")
    model.eval()
    out = args.output_dir
    out.mkdir(parents=True, exist_ok=True)
    save(plot_positional_encoding(model.config), out / "positional_encoding.png")
    attention = attention_weights(model, tokenizer, args.source, args.target)
    print(f"source: {' | '.join(attention.source_tokens)}\ntarget: {' | '.join(attention.target_tokens)}")
    for kind in KINDS:
        for layer, weights in enumerate(attention.weights(kind)):
            save(draw_heads(attention, kind, layer, list(range(weights.shape[0]))), out / f"{kind}_layer{layer}.png")
    print(f"wrote {len(list(out.glob('*.png')))} pictures to {out}")
    return 0
