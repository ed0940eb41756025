"""Make a trained model one that ships: its Hub folder with 16-bit weights, and its CTranslate2 int8 export beside it.

    python training/release_model.py --model runs/en-ja/hub --output_dir models/en-ja \\
        --made_with "make train-en-ja CORPUS_DIR=runs/unseen/corpus"
    # writes models/en-ja (the model, its code, tokenizer, generation config and card) and models/en-ja-ctranslate2

The weights are stored in float16, half the bytes of float32: float16 keeps three more bits of every weight than
bfloat16, and these weights are far inside its range; config.json keeps `dtype` float32, so that loading gives the
float32 model unless another dtype is asked for. The export is made from the stored weights, so that every engine
translates with the same model. The card is the run's (its training procedure, test scores and machine) with a
section on this release and the commands that made it (`--made_with`). Score the release again afterwards
(`evaluate_model.py --update_model_card`): rounding to float16 can change a token.
"""

import sys
from pathlib import Path

import torch
from huggingface_hub import ModelCard

from hf_tiny_transformer.errors import ArgumentParser, UsageError, about
from hf_tiny_transformer.guards.loading import load_model_folder
from hf_tiny_transformer.guards.outputs import check_output, inputs_of
from hf_tiny_transformer.guards.runner import run
from hf_tiny_transformer.hub import save_for_hub
from hf_tiny_transformer.serving.ctranslate2 import export_ctranslate2
from hf_tiny_transformer.serving.files import EXPORT_WRITES

# What the Hub folder holds (save_for_hub), and nothing else.
HUB_FOLDER = ("config.json", "generation_config.json", "model.safetensors", "*_tiny_transformer.py", "tokenizer*.json",
              "special_tokens_map.json", "README.md")  # fmt: skip


def parse_args(argv=None):
    parser = ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", required=True, help="a trained model folder, e.g. runs/en-ja/hub")
    parser.add_argument("--output_dir", required=True, help="the release's folder; the export goes beside it")
    parser.add_argument("--made_with", action="append", default=[], help="a command that made the model (repeat)")
    parser.add_argument("--training_data", help="what the card's Training data section says instead of the run's")
    parser.add_argument("--overwrite", action="store_true", help="replace a release already there")
    args = parser.parse_args(argv)
    args.export_dir = f"{str(args.output_dir).rstrip('/')}-ctranslate2"
    inputs = inputs_of(args, but=["output_dir", "export_dir"])
    for flag, folder, writes in (
        ("--output_dir", args.output_dir, HUB_FOLDER),
        ("--output_dir's export", args.export_dir, EXPORT_WRITES),
    ):
        check_output(
            folder, flag=flag, kind="folder", inputs=inputs, writes=writes, replaces=True, overwrite=args.overwrite
        )
    return args


def release_card(card: ModelCard, export: str, made_with: list[str], training_data: str | None) -> ModelCard:
    """The run's card with a section on the release (how the weights are stored, the export, the commands), and the
    Training data section's text replaced by `training_data` where given."""
    commands = "".join(f"    {command}\n" for command in made_with)
    section = (
        "## This release\n\nThe weights are stored in float16 (half the bytes of float32; three more bits of each "
        "weight than bfloat16, and well inside its range); `from_pretrained` gives the float32 model unless another "
        f"`dtype` is asked for. `{Path(export).name}` beside this folder is its CTranslate2 export with int8 weights, "
        "made from these weights (`tiny-transformer translate` uses it where ctranslate2 is installed)."
        + (f" Made with:\n\n{commands}" if commands else "")
    )
    heading = "## Differences from the paper"
    text = card.text.replace(heading, f"{section}\n{heading}", 1) if heading in card.text else f"{card.text}\n{section}"
    if training_data and "## Training data\n\n" in text:
        before, rest = text.split("## Training data\n\n", 1)
        text = f"{before}## Training data\n\n{training_data}\n\n## {rest.split('## ', 1)[1]}"
    return ModelCard(card.content.replace(card.text, text))


def main(argv=None) -> int:
    args = parse_args(argv)
    with about("--model"):
        model, tokenizer = load_model_folder(args.model)
    card_file = Path(args.model) / "README.md"
    if not card_file.is_file():
        raise UsageError(f"--model {args.model} has no README.md model card; pass a folder train.py wrote")
    card = release_card(ModelCard.load(card_file), args.export_dir, args.made_with, args.training_data)
    save_for_hub(model, tokenizer, args.output_dir, card, weights_dtype=torch.float16)
    with about("--output_dir"):
        model, tokenizer = load_model_folder(args.output_dir)  # what loading the release gives, exported as it is
    export_ctranslate2(model, tokenizer, args.export_dir, quantization="int8")
    print(f"released {args.model} as {args.output_dir} (float16 weights) and {args.export_dir} (CTranslate2, int8)")
    return 0


if __name__ == "__main__":
    sys.exit(run(main))
