"""Write the built-in English -> Japanese demo corpus as parallel text files.

    python training/make_demo_data.py --output_dir runs/demo/data [--seed 0]

Writes train.en/train.ja and test.en/test.ja; the test pairs combine subjects and objects never seen
together in training (see hf_tiny_transformer/data/demo_corpus.py). Each file is written whole or not at all.
"""

import sys

from hf_tiny_transformer.data.demo_corpus import make_demo_corpus
from hf_tiny_transformer.errors import ArgumentParser
from hf_tiny_transformer.guards.outputs import check_output
from hf_tiny_transformer.guards.runner import run
from hf_tiny_transformer.guards.writing import write_atomically


def main(argv=None) -> int:
    parser = ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--output_dir", required=True, help="folder for the files (created if missing)")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    output_dir = check_output(args.output_dir, flag="--output_dir", kind="folder", writes=["*.en", "*.ja"])
    output_dir.mkdir(parents=True, exist_ok=True)
    for split, pairs in make_demo_corpus(args.seed).items():
        write_atomically(output_dir / f"{split}.en", "".join(p.english + "\n" for p in pairs))
        write_atomically(output_dir / f"{split}.ja", "".join(p.japanese + "\n" for p in pairs))
        print(f"{split}: {len(pairs)} pairs")
    return 0


if __name__ == "__main__":
    sys.exit(run(main))
