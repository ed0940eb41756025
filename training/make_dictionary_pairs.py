"""English-Japanese pairs of words and short phrases from JMdict, the dictionary of the Electronic Dictionary Research
and Development Group (CC BY-SA), as extra training pairs: a bilingual lexicon beside the sentence pairs.

    pip install jamdict-data==1.5     # JMdict compiled into SQLite: the training set-up installs it, not the package
    python training/make_dictionary_pairs.py --output_file runs/dictionary/pairs.jsonl [--entries 20000]
    python training/train.py training/recipes/en-ja.json --extra_train_file runs/dictionary/pairs.jsonl

Takes the entries JMdict marks as common (the priority tags news1, ichi1, spec1, gai1), most common first: each one's
first written form (its kana where it has none) and its first English gloss, lowercased, without parenthesized
notes, at most --max_words words long. Writes JSON lines of {"translation": {"en": ..., "ja": ...}} (train.py's
--train_file format), all or nothing.
"""

import json
import re
import sqlite3
import sys
from pathlib import Path

from hf_tiny_transformer.commands.runner import interrupted_while_importing, run

if __name__ == "__main__":
    interrupted_while_importing()  # Ctrl-C while the libraries below import: one line, exit status 130

from hf_tiny_transformer.commands.output_guard import check_output
from hf_tiny_transformer.errors import ArgumentParser, UsageError, at_least
from hf_tiny_transformer.saving import write_atomically

COMMON = ("news1", "ichi1", "spec1", "gai1")  # JMdict's priority tags of common words
NOTE = re.compile(r"\s*\([^)]*\)\s*")  # "(former) regular ...": a gloss's parenthesized note
# Each common entry: its first written form (kanji, else kana) and its first English gloss, most common first (the
# more priority tags an entry has, the more sources count it common).
QUERY = f"""
SELECT
    (SELECT text FROM Kanji WHERE Kanji.idseq = Entry.idseq ORDER BY ID LIMIT 1),
    (SELECT text FROM Kana WHERE Kana.idseq = Entry.idseq ORDER BY ID LIMIT 1),
    (SELECT SenseGloss.text FROM Sense JOIN SenseGloss ON SenseGloss.sid = Sense.ID
     WHERE Sense.idseq = Entry.idseq AND SenseGloss.lang = 'eng' ORDER BY Sense.ID LIMIT 1),
    (SELECT COUNT(*) FROM Kanji JOIN KJP ON KJP.kid = Kanji.ID WHERE Kanji.idseq = Entry.idseq
     AND KJP.text IN ({", ".join("?" * len(COMMON))}))
    + (SELECT COUNT(*) FROM Kana JOIN KNP ON KNP.kid = Kana.ID WHERE Kana.idseq = Entry.idseq
     AND KNP.text IN ({", ".join("?" * len(COMMON))})) AS priority
FROM Entry
WHERE priority > 0
ORDER BY priority DESC, Entry.idseq
"""


def database() -> Path:
    """jamdict-data's SQLite file, or a UsageError saying how to install it."""
    try:
        import jamdict_data
    except ImportError:
        raise UsageError("JMdict is not installed; install it with: pip install jamdict-data==1.5") from None
    path = Path(jamdict_data.__file__).parent / "jamdict.db"
    if not path.is_file():
        raise UsageError(
            f"{path} is missing (jamdict-data unpacks it when installed); pip install --force-reinstall jamdict-data"
        )
    return path


def pairs(path: Path, entries: int, max_words: int) -> list[dict]:
    """Up to `entries` (en, ja) pairs of common words and phrases, most common first, without repeats."""
    connection = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    found, seen = [], set()
    for kanji, kana, gloss, _ in connection.execute(QUERY, COMMON * 2):
        english = NOTE.sub(" ", gloss or "").strip().lower()
        japanese = kanji or kana
        if not english or not japanese or len(english.split()) > max_words or (english, japanese) in seen:
            continue
        seen.add((english, japanese))
        found.append({"translation": {"en": english, "ja": japanese}})
        if len(found) == entries:
            break
    return found


def main(argv=None) -> int:
    parser = ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--output_file", required=True, help="the JSON lines file of pairs")
    parser.add_argument("--entries", type=int, default=20000, help="how many pairs, most common first")
    parser.add_argument("--max_words", type=int, default=4, help="the longest English gloss kept, in words")
    args = parser.parse_args(argv)
    at_least("--entries", args.entries, 1)
    at_least("--max_words", args.max_words, 1)
    check_output(args.output_file, kind="file", flag="--output_file")
    found = pairs(database(), args.entries, args.max_words)
    write_atomically(args.output_file, "".join(json.dumps(pair, ensure_ascii=False) + "\n" for pair in found))
    print(f"{len(found)} dictionary pairs in {args.output_file}")
    return 0


if __name__ == "__main__":
    sys.exit(run(main))
