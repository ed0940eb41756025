"""Upload a folder saved for the Hub (model, code, tokenizer, README.md model card) to a Hub repository.

    tiny-transformer push-to-hub --folder runs/en-ja/hub --repo_id you/tiny-transformer-en-ja [--private]
    tiny-transformer push-to-hub --folder runs/en-ja/hub --repo_id you/tiny-transformer-en-ja --dry_run

Only the files a model repository needs are uploaded (an allow-list: config, weights in safetensors, the code files
config.json names, tokenizer files, README.md); --dry-run lists them, and what is left behind, and uploads nothing.
(`--repo-id` and `--dry-run` are accepted too, as for every flag.) A folder holding pickled files anywhere
(optimizer.pt, training_args.bin, which holds --hub_token, ...) is refused: push the `hub` folder train.py writes,
not its output_dir. Without a token (`hf auth login` or HF_TOKEN) or without network, the script says so in one line
and exits with 1; the folder is never changed.
"""

import json
import sys
from pathlib import Path

from huggingface_hub import HfApi, ModelCard, get_token
from huggingface_hub.errors import HFValidationError
from huggingface_hub.utils import validate_repo_id

from ..errors import ArgumentParser, UsageError, about, first_line
from ..guards.loading import load_model_folder
from ..serving.files import CTRANSLATE2_MODEL
from .flags import trust_remote_code_argument

REQUIRED = ("config.json", "model.safetensors", "generation_config.json", "tokenizer.json", "README.md")
ALLOWED = {
    "config.json",
    "generation_config.json",
    "model.safetensors",
    "model.safetensors.index.json",
    "tokenizer.json",
    "tokenizer_config.json",
    "special_tokens_map.json",
    "README.md",
}
PICKLE_SUFFIXES = (".bin", ".pt", ".pth", ".pkl", ".pickle", ".ckpt", ".joblib", ".npy", ".npz")


def parse_args(argv: list[str] | None = None):
    parser = ArgumentParser(prog="tiny-transformer push-to-hub", description=__doc__.split("\n\n")[0])
    parser.add_argument("--folder", required=True, type=Path, help="folder written by hf_tiny_transformer.save_for_hub")
    parser.add_argument("--repo_id", required=True, help="Hub repository, e.g. your-name/tiny-transformer-en-ja")
    parser.add_argument("--private", action="store_true", help="create the repository as private")
    parser.add_argument("--dry_run", action="store_true", help="list what would be uploaded, upload nothing")
    trust_remote_code_argument(parser)
    args = parser.parse_args(argv)
    try:
        validate_repo_id(args.repo_id)
    except HFValidationError:
        raise UsageError(
            f"--repo_id {args.repo_id!r} is not a Hub repository id such as your-name/model-name"
        ) from None
    return args


def code_files(folder: Path) -> set[str]:
    """The Python files config.json names (the auto_map classes and the custom pipelines) and the files they import
    relatively, as transformers finds them when it loads remote code."""
    from transformers.dynamic_module_utils import get_relative_import_files

    config = json.loads((folder / "config.json").read_text(encoding="utf-8"))
    references = list((config.get("auto_map") or {}).values())
    references += [task.get("impl", "") for task in (config.get("custom_pipelines") or {}).values()]
    named = {
        folder / (reference.rsplit(".", 1)[0].split("--")[-1] + ".py") for reference in references if "." in reference
    }
    imported = {Path(path) for file in named if file.is_file() for path in get_relative_import_files(file)}
    return {path.name for path in named | imported}


def files_to_upload(folder: Path) -> tuple[list[Path], list[Path]]:
    """(the files to upload, the files left behind); a UsageError when the folder is not a complete Hub folder
    or holds pickled files anywhere."""
    if not folder.is_dir():
        raise UsageError(f"--folder {folder} is not a folder")
    if (folder / CTRANSLATE2_MODEL).is_file() and not (folder / "model.safetensors").is_file():
        raise UsageError(
            f"--folder {folder} is a CTranslate2 export ({CTRANSLATE2_MODEL}); "
            "push the model folder it was exported from"
        )
    every = sorted(path for path in folder.rglob("*") if path.is_file())
    pickles = [str(path.relative_to(folder)) for path in every if path.suffix in PICKLE_SUFFIXES]
    if pickles:
        shown = ", ".join(pickles[:3]) + (f" and {len(pickles) - 3} more" if len(pickles) > 3 else "")
        raise UsageError(
            f"--folder {folder} holds pickled files ({shown}), which run code when loaded and can hold secrets; "
            "push the hub folder train.py writes ({output_dir}/hub), which has none"
        )
    missing = [name for name in REQUIRED if not (folder / name).is_file()]
    if missing:
        raise UsageError(f"--folder {folder} lacks {', '.join(missing)}; save it with hf_tiny_transformer.save_for_hub")
    allowed = ALLOWED | code_files(folder)
    shards = {path.name for path in folder.glob("model-*-of-*.safetensors")}
    upload = [path for path in every if path.parent == folder and path.name in allowed | shards]
    return upload, [path for path in every if path not in upload]


def dry_run(folder: Path, upload: list[Path], left: list[Path], repo_id: str) -> None:
    print(f"Would upload {len(upload)} files to {repo_id}:")
    for path in upload:
        print(f"  {path.relative_to(folder)} ({path.stat().st_size:,} bytes)")
    if left:
        print(
            f"Not uploaded ({len(left)}, not part of a model repository): "
            + ", ".join(str(path.relative_to(folder)) for path in left)
        )
    print("Model card header:")
    print(ModelCard.load(folder / "README.md").data.to_yaml())


def upload(folder: Path, files: list[Path], repo_id: str, private: bool) -> str:
    api = HfApi()
    api.create_repo(repo_id, private=private, exist_ok=True, repo_type="model")
    names = [str(path.relative_to(folder)) for path in files]
    commit = api.upload_folder(folder_path=str(folder), repo_id=repo_id, repo_type="model", allow_patterns=names)
    return commit.commit_url


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    files, left = files_to_upload(args.folder)
    with about("--folder"):  # a damaged folder is refused, not pushed
        load_model_folder(str(args.folder), args.trust_remote_code)
    if args.dry_run:
        dry_run(args.folder, files, left, args.repo_id)
        return 0
    if get_token() is None:
        print(
            "tiny-transformer push-to-hub: no Hugging Face token: run `hf auth login` or set HF_TOKEN", file=sys.stderr
        )
        return 1
    try:
        print(f"Uploaded: {upload(args.folder, files, args.repo_id, args.private)}")
    except Exception as error:  # network, authentication, server: one clear line instead of a traceback
        print(f"tiny-transformer push-to-hub: {first_line(error)}", file=sys.stderr)
        return 1
    return 0
