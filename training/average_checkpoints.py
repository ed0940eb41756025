"""Average the weights of checkpoints into one model folder: the paper's checkpoint averaging (section 6.1).

    python training/average_checkpoints.py --run_dir runs/en-ja --last 5 --output_dir runs/en-ja/averaged
    python training/average_checkpoints.py --checkpoints runs/x/checkpoint-800 runs/x/checkpoint-1000 --output_dir out

The output folder gets the newest checkpoint's config, generation config, tokenizer and code, and the mean of the
checkpoints' weights, written all or nothing. It may not be one of the checkpoints or lie inside one, and an
existing model there is replaced only with --overwrite. Checkpoints of different models (a field of the shape in
config.json, or the tokenizer's vocabulary) are refused. `train.py --average_checkpoints N` does the same at the end
of a run and makes the average the run's final model.
"""

import sys
from pathlib import Path

from hf_tiny_transformer.commands.flags import trust_remote_code_argument
from hf_tiny_transformer.errors import ArgumentParser, UsageError, about, at_least, first_line
from hf_tiny_transformer.guards.loading import load_model_folder
from hf_tiny_transformer.guards.outputs import check_output, inputs_of
from hf_tiny_transformer.guards.runner import run
from hf_tiny_transformer.guards.writing import staged_folder
from hf_tiny_transformer.trainer.checkpoints import average_checkpoints, last_checkpoints

# What the averaged model's folder holds (save_pretrained of the model and its tokenizer), and nothing else.
MODEL_FOLDER = (
    "config.json",
    "generation_config.json",
    "model*.safetensors*",
    "*_tiny_transformer.py",
    "tokenizer*.json",
    "special_tokens_map.json",
)


def parse_args(argv=None):
    parser = ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--run_dir", help="a training output folder holding checkpoint-N folders")
    parser.add_argument("--last", type=int, default=5, help="with --run_dir: how many of the newest checkpoints")
    parser.add_argument("--checkpoints", nargs="+", help="instead: the checkpoint folders to average")
    parser.add_argument("--output_dir", required=True, help="the folder for the averaged model")
    parser.add_argument("--overwrite", action="store_true", help="replace a model already in --output_dir")
    trust_remote_code_argument(parser)
    args = parser.parse_args(argv)
    if bool(args.run_dir) == bool(args.checkpoints):
        raise UsageError("pass --run_dir (with --last) or --checkpoints, one of them")
    at_least("--last", args.last, 2)
    args.folders = checkpoint_folders(args)
    check_output(
        args.output_dir,
        flag="--output_dir",
        kind="folder",
        inputs=[*inputs_of(args, but=["output_dir"]), *args.folders],
        writes=MODEL_FOLDER,
        replaces=True,
        overwrite=args.overwrite,
    )
    return args


def checkpoint_folders(args) -> list[Path]:
    if args.checkpoints:
        folders = [Path(folder) for folder in args.checkpoints]
        for folder in folders:
            if not folder.exists():
                raise UsageError(f"--checkpoints: {folder} does not exist; pass checkpoint-N folders of a run")
            if not (folder / "model.safetensors").is_file():
                raise UsageError(f"--checkpoints: {folder} holds no model.safetensors")
            if [other.resolve() for other in folders].count(folder.resolve()) > 1:
                raise UsageError(f"--checkpoints: {folder} is listed twice; pass each checkpoint once")
        return folders
    if not Path(args.run_dir).is_dir():
        raise UsageError(f"--run_dir {args.run_dir} is not a folder")
    try:
        return last_checkpoints(args.run_dir, args.last)
    except ValueError as error:
        raise UsageError(f"--run_dir {args.run_dir}: {first_line(error)}") from None


def main(argv=None) -> int:
    args = parse_args(argv)
    newest = str(args.folders[-1])
    with about("--checkpoints"):
        model, tokenizer = load_model_folder(newest, args.trust_remote_code)
    try:
        weights = average_checkpoints(args.folders)
    except ValueError as error:
        raise UsageError(first_line(error)) from None
    unexpected = model.load_state_dict(weights, strict=False).unexpected_keys
    if unexpected:
        raise UsageError(f"the checkpoints hold weights the model of {newest} does not have: {unexpected[:3]}")
    with staged_folder(args.output_dir) as staging:
        model.save_pretrained(staging)
        tokenizer.save_pretrained(staging)
    print(f"averaged {', '.join(folder.name for folder in args.folders)} into {args.output_dir}")
    return 0


if __name__ == "__main__":
    sys.exit(run(main))
