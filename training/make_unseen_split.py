"""Build the unseen-words evaluation from a small_parallel_enja-style corpus: English content words of low training
frequency are chosen, every training pair that holds one moves to an `unseen` split, and a model trained on the rest
is scored on words it never saw. The test split is also cut in two: the lines that are near-copies of a training
sentence, and the others, so that a gain on sentence patterns shows apart from one on memorized sentences.

    python training/make_unseen_split.py --corpus_dir data/small_parallel_enja --output_dir runs/unseen/corpus
    python training/train.py training/recipes/en-ja.json --corpus_dir runs/unseen/corpus --output_dir runs/u-en-ja
    python training/evaluate_model.py --model runs/u-en-ja/hub --corpus_dir runs/unseen/corpus --split unseen \\
        --source_lang en --target_lang ja

The output folder has the corpus's layout (its files in the corpus's own tokenized form): train (without the moved
pairs), dev and test as they were, `unseen` (the moved pairs), `test_near` and `test_far` (the test split's near-copies
and the rest), and words.txt (the chosen words, one a line). A word is a content word when it is alphabetic, at
least three letters long and not one of the English function words below; its training frequency is counted in
English sentences. A test line is a near-copy when a training sentence (of the same language pair) matches at least
--near_copy of its words, in order (difflib's ratio over words). Written all or nothing; nothing of it belongs in the
repository.
"""

import difflib
import random
import sys
from collections import Counter, defaultdict
from pathlib import Path

from hf_tiny_transformer.errors import ArgumentParser, UsageError, at_least
from hf_tiny_transformer.guards.outputs import check_output, inputs_of
from hf_tiny_transformer.guards.runner import run
from hf_tiny_transformer.guards.text_files import read_aligned
from hf_tiny_transformer.guards.writing import staged_folder

SPLITS = ("train", "dev", "test")
WRITTEN = (*SPLITS, "unseen", "test_near", "test_far")  # the splits of --output_dir
FUNCTION_WORDS = set(
    """a about above after again against all am an and any are as at be because been before being below between both
    but by can could did do does doing down during each few for from further had has have having he her here hers
    herself him himself his how i if in into is it its itself just me more most my myself no nor not now of off on
    once only or other our ours ourselves out over own same she should so some such than that the their theirs them
    themselves then there these they this those through to too under until up very was we were what when where which
    while who whom why will with would you your yours yourself yourselves one two three four five six seven eight nine
    ten many much also ever never always often still yet let may might must shall ought""".split()
)


def parse_args(argv=None):
    parser = ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--corpus_dir", required=True, help="a small_parallel_enja-style folder (train, dev, test)")
    parser.add_argument("--output_dir", required=True, help="the folder for the split corpus")
    parser.add_argument("--words", type=int, default=300, help="how many low-frequency words are held out")
    parser.add_argument("--min_count", type=int, default=2, help="their least training frequency")
    parser.add_argument("--max_count", type=int, default=10, help="their largest training frequency")
    parser.add_argument("--near_copy", type=float, default=0.8, help="the word match that makes a near-copy")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--overwrite", action="store_true", help="replace a split already in --output_dir")
    args = parser.parse_args(argv)
    at_least("--words", args.words, 1)
    at_least("--min_count", args.min_count, 1)
    at_least("--max_count", args.max_count, args.min_count)
    if not 0 < args.near_copy <= 1:
        raise UsageError(f"--near_copy is a share of words, in (0, 1]; got {args.near_copy}")
    writes = [f"{split}.{lang}" for split in WRITTEN for lang in ("en", "ja")] + ["words.txt"]
    check_output(
        args.output_dir,
        flag="--output_dir",
        kind="folder",
        inputs=inputs_of(args, but=["output_dir"]),
        writes=writes,
        replaces=True,
        overwrite=args.overwrite,
    )
    return args


def read_split(corpus_dir: Path, split: str) -> tuple[list[str], list[str]]:
    """A split's English and Japanese lines, as the corpus holds them (tokenized, segmented)."""
    flags = (f"--corpus_dir's {split}.en", f"--corpus_dir's {split}.ja")
    return read_aligned(corpus_dir / f"{split}.en", corpus_dir / f"{split}.ja", flags)


def choose_words(english: list[str], count: int, lowest: int, highest: int, seed: int) -> list[str]:
    """`count` content words whose training frequency is in [lowest, highest], drawn with `seed`."""
    frequency = Counter(word for line in english for word in line.split())
    candidates = sorted(
        word
        for word, seen in frequency.items()
        if lowest <= seen <= highest and word.isalpha() and len(word) >= 3 and word not in FUNCTION_WORDS
    )
    if len(candidates) < count:
        raise UsageError(
            f"--words {count}: the corpus has only {len(candidates)} content words seen {lowest} to {highest} times; "
            "ask for fewer, or widen --min_count and --max_count"
        )
    return sorted(random.Random(seed).sample(candidates, count))


def near_copies(test: list[str], train: list[str], threshold: float) -> list[bool]:
    """Whether each test line is a near-copy of a training line: the best word match among the training lines that
    share its rarest words (an index by word keeps the comparison to those)."""
    index = defaultdict(set)
    frequency = Counter(word for line in train for word in set(line.split()))
    for number, line in enumerate(train):
        for word in set(line.split()):
            index[word].add(number)
    result = []
    for line in test:
        words = line.split()
        rarest = sorted(set(words), key=lambda word: frequency[word])[:3]
        candidates = set().union(*(index[word] for word in rarest)) if rarest else set()
        matcher = difflib.SequenceMatcher(a=words, autojunk=False)
        best = 0.0
        for number in candidates:
            matcher.set_seq2(train[number].split())
            if matcher.real_quick_ratio() >= threshold and matcher.quick_ratio() >= threshold:
                best = max(best, matcher.ratio())
        result.append(best >= threshold)
    return result


def write_split(folder: Path, name: str, english: list[str], japanese: list[str]):
    for lang, lines in (("en", english), ("ja", japanese)):
        (folder / f"{name}.{lang}").write_text("".join(line + "\n" for line in lines), encoding="utf-8")


def main(argv=None) -> int:
    args = parse_args(argv)
    corpus = Path(args.corpus_dir)
    splits = {split: read_split(corpus, split) for split in SPLITS}
    words = choose_words(splits["train"][0], args.words, args.min_count, args.max_count, args.seed)
    held_out = set(words)
    train_en, train_ja = splits["train"]
    moved = [any(word in held_out for word in line.split()) for line in train_en]
    kept = ([e for e, m in zip(train_en, moved) if not m], [j for j, m in zip(train_ja, moved) if not m])
    unseen = ([e for e, m in zip(train_en, moved) if m], [j for j, m in zip(train_ja, moved) if m])
    test_en, test_ja = splits["test"]
    near = near_copies(test_en, kept[0], args.near_copy)
    with staged_folder(args.output_dir) as staging:
        write_split(staging, "train", *kept)
        write_split(staging, "dev", *splits["dev"])
        write_split(staging, "test", test_en, test_ja)
        write_split(staging, "unseen", *unseen)
        write_split(staging, "test_near", *([line for line, n in zip(side, near) if n] for side in (test_en, test_ja)))
        write_split(
            staging, "test_far", *([line for line, n in zip(side, near) if not n] for side in (test_en, test_ja))
        )
        (staging / "words.txt").write_text("".join(word + "\n" for word in words), encoding="utf-8")
    print(
        f"{len(words)} words held out: {len(unseen[0])} of {len(train_en)} training pairs moved to unseen; test: "
        f"{sum(near)} near-copies of a training sentence, {len(near) - sum(near)} others; in {args.output_dir}"
    )
    return 0


if __name__ == "__main__":
    sys.exit(run(main))
