"""Upload a folder saved for the Hub (model, code, tokenizer, README.md model card) to a Hub repository.

    python training/push_to_hub.py --folder runs/en-ja/hub --repo-id you/tiny-transformer-en-ja [--private]
    python training/push_to_hub.py --folder runs/en-ja/hub --repo-id you/tiny-transformer-en-ja --dry-run

--dry-run lists the files and the model card's metadata header and uploads nothing. Without a token
(`huggingface-cli login` or HF_TOKEN) or without network, the script says so in one line and exits with 1;
the folder is never changed.
"""

import argparse
import sys
from pathlib import Path

from huggingface_hub import HfApi, ModelCard, get_token

REQUIRED = ("config.json", "model.safetensors", "generation_config.json", "tokenizer.json", "README.md")


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--folder", required=True, type=Path, help="folder written by hf_tiny_transformer.save_for_hub")
    parser.add_argument("--repo-id", required=True, help="Hub repository, e.g. your-name/tiny-transformer-en-ja")
    parser.add_argument("--private", action="store_true", help="create the repository as private")
    parser.add_argument("--dry-run", action="store_true", help="list what would be uploaded, upload nothing")
    return parser.parse_args(argv)


def check_folder(folder: Path) -> list[Path]:
    """The folder's files; raise ValueError when it is not a complete Hub folder."""
    if not folder.is_dir():
        raise ValueError(f"{folder} is not a folder")
    missing = [name for name in REQUIRED if not (folder / name).is_file()]
    if missing:
        raise ValueError(f"{folder} lacks {', '.join(missing)}; save it with hf_tiny_transformer.save_for_hub")
    pickles = [p.name for p in folder.iterdir() if p.suffix in (".bin", ".pt", ".pkl")]
    if pickles:
        raise ValueError(f"{folder} holds pickled files ({', '.join(pickles)}); upload safetensors only")
    return sorted(p for p in folder.rglob("*") if p.is_file())


def dry_run(folder: Path, files: list[Path], repo_id: str) -> None:
    print(f"Would upload {len(files)} files to {repo_id}:")
    for path in files:
        print(f"  {path.relative_to(folder)} ({path.stat().st_size:,} bytes)")
    print("Model card header:")
    print(ModelCard.load(folder / "README.md").data.to_yaml())


def upload(folder: Path, repo_id: str, private: bool) -> str:
    api = HfApi()
    api.create_repo(repo_id, private=private, exist_ok=True, repo_type="model")
    commit = api.upload_folder(folder_path=str(folder), repo_id=repo_id, repo_type="model")
    return commit.commit_url


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    try:
        files = check_folder(args.folder)
        if args.dry_run:
            dry_run(args.folder, files, args.repo_id)
            return 0
        if get_token() is None:
            raise ValueError("no Hugging Face token: run `huggingface-cli login` or set HF_TOKEN")
        print(f"Uploaded: {upload(args.folder, args.repo_id, args.private)}")
        return 0
    except Exception as error:  # one clear line instead of a traceback, for every failure (network, auth, folder)
        message = str(error).strip().splitlines()[0] if str(error).strip() else type(error).__name__
        print(f"push_to_hub: {message}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
