"""Write the built-in English -> Japanese demo corpus as parallel text files.

    python training/make_demo_data.py --output_dir runs/demo/data [--seed 0]

Writes train.en/train.ja and test.en/test.ja; the test pairs combine subjects and objects never seen
together in training (see hf_tiny_transformer/demo_corpus.py).
"""

import argparse
from pathlib import Path

from hf_tiny_transformer.demo_corpus import make_demo_corpus


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--output_dir", required=True, type=Path)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    args.output_dir.mkdir(parents=True, exist_ok=True)
    for split, pairs in make_demo_corpus(args.seed).items():
        (args.output_dir / f"{split}.en").write_text("".join(p.english + "\n" for p in pairs), encoding="utf-8")
        (args.output_dir / f"{split}.ja").write_text("".join(p.japanese + "\n" for p in pairs), encoding="utf-8")
        print(f"{split}: {len(pairs)} pairs")


if __name__ == "__main__":
    main()
