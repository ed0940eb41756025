"""Fetch small_parallel_enja, the English-Japanese corpus the recipes train on, at a pinned commit.

    python training/get_corpus.py --output_dir data/small_parallel_enja        # what `make data` runs
    python training/get_corpus.py --output_dir D --repository URL --commit SHA  # a mirror, or another commit

Clones the corpus's Git repository (Yusuke Oda's selection of 50,000 short pairs from the Tanaka Corpus, CC BY),
checks out the commit, and keeps its train, dev and test files (`{split}.{en,ja}`) and its README in the output
folder, written all or nothing. Needs `git`.
"""

import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from hf_tiny_transformer.errors import ArgumentParser, UsageError
from hf_tiny_transformer.guards.outputs import check_output
from hf_tiny_transformer.guards.runner import run
from hf_tiny_transformer.guards.text_files import decoded, text_lines
from hf_tiny_transformer.guards.writing import staged_folder

REPOSITORY = "https://github.com/odashi/small_parallel_enja.git"
COMMIT = "312408a11c5fbcbc09443bebb18121f7efdcd61e"
SPLITS, LANGS = ("train", "dev", "test"), ("en", "ja")
FILES = [f"{split}.{lang}" for split in SPLITS for lang in LANGS]  # what the recipes read


def parse_args(argv=None):
    parser = ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--output_dir", required=True, help="the folder for the corpus, e.g. data/small_parallel_enja")
    parser.add_argument("--repository", default=REPOSITORY, help="the corpus's Git repository (a URL or a path)")
    parser.add_argument("--commit", default=COMMIT, help="the commit to take")
    parser.add_argument("--overwrite", action="store_true", help="replace a corpus already in --output_dir")
    args = parser.parse_args(argv)
    if args.commit.startswith("-"):  # git would take it for an option
        raise UsageError(f"--commit {args.commit} is not a commit; pass a commit hash, a tag or a branch name")
    if shutil.which("git") is None:
        raise UsageError("git is not installed; install it (Debian, Ubuntu: apt-get install git)")
    args.there = not args.overwrite and all((Path(args.output_dir) / name).is_file() for name in FILES)
    if args.there:  # fetched before (a folder is written whole): `make data` twice does nothing the second time
        return args
    check_output(
        args.output_dir,
        flag="--output_dir",
        kind="folder",
        writes=[*FILES, "README.md"],
        replaces=True,
        overwrite=args.overwrite,
        overwrite_fix="pass --overwrite to fetch the corpus again",
    )
    return args


def git(*arguments: str, failure: str):
    """Run git quietly; a UsageError with `failure` and git's own last line when it fails."""
    result = subprocess.run(["git", *arguments], capture_output=True, text=True)
    if result.returncode != 0:
        said = (result.stderr.strip().splitlines() or ["no message"])[-1]
        raise UsageError(f"{failure} (git: {said})")


def main(argv=None) -> int:
    args = parse_args(argv)
    if args.there:
        print(f"{args.output_dir} holds the corpus already; pass --overwrite to fetch it again")
        return 0
    fetched = f"{args.repository} at {args.commit}"
    with tempfile.TemporaryDirectory() as clone, staged_folder(args.output_dir) as staging:
        git("clone", "--quiet", "--no-checkout", args.repository, clone,
            failure=f"--repository {args.repository} cannot be cloned; check the address and the network")  # fmt: skip
        git("-C", clone, "checkout", "--quiet", args.commit,
            failure=f"--commit {args.commit} is not in {args.repository}; pass one of its commits")  # fmt: skip
        if missing := [name for name in FILES if not (Path(clone) / name).is_file()]:
            raise UsageError(f"{fetched} has no {', '.join(missing)}; is it the corpus?")
        for split in SPLITS:  # each split's two sides must pair up line by line
            sides = [
                decoded((Path(clone) / f"{split}.{lang}").read_bytes(), f"{fetched}: {split}.{lang}") for lang in LANGS
            ]
            if len(text_lines(sides[0])) != len(text_lines(sides[1])):
                raise UsageError(
                    f"{fetched}: {split}.en has {len(text_lines(sides[0]))} lines but {split}.ja has "
                    f"{len(text_lines(sides[1]))}; is it the corpus?"
                )
        for name in [*FILES, "README.md"]:
            if (Path(clone) / name).is_file():
                shutil.copy(Path(clone) / name, staging / name)
    print(f"small_parallel_enja ({args.commit[:7]}) is in {args.output_dir}")
    return 0


if __name__ == "__main__":
    sys.exit(run(main))
