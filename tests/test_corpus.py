"""The corpora (hf_tiny_transformer/data/corpus.py, training/get_corpus.py, training/make_demo_data.py): segmented
Japanese and tokenized English back to natural text; the pinned corpus fetched into the folder the recipes read; the
demo corpus's script refusing bad arguments in one line."""

import os
import shutil
import subprocess
from pathlib import Path

import pytest

from bad_arguments import assert_refused_before_any_work, folder_digest
from hf_tiny_transformer.data.corpus import detokenize_english, read_parallel, unsegment_japanese
from running import assert_one_line_error, run_script


@pytest.mark.parametrize(
    "line, natural",
    [
        ("私 は 毎朝 コーヒー を 飲 み ま す 。", "私は毎朝コーヒーを飲みます。"),
        ("私 は CD を 10 枚 持 っ て い る 。", "私はCDを10枚持っている。"),
        ("New York に 行 く", "New Yorkに行く"),
        ("", ""),
    ],
)
def test_unsegment_japanese(line, natural):
    assert unsegment_japanese(line) == natural


@pytest.mark.parametrize(
    "line, natural",
    [
        ("you can 't see who will come first .", "you can't see who will come first."),
        ("we have had dinner , haven 't we ?", "we have had dinner, haven't we?"),
        ("she said , '' it 's ten o 'clock . ''", "she said, \"it's ten o'clock.\""),
        ("she said to him , ' let 's go home . '", "she said to him, 'let's go home.'"),
        ("it is only five minutes ' drive from the station .", "it is only five minutes' drive from the station."),
        ("day followed day ...", "day followed day..."),
        ("i 'm in the chess club .", "i'm in the chess club."),
    ],
)
def test_detokenize_english(line, natural):
    assert detokenize_english(line) == natural


def write(folder, name, lines):
    (folder / name).write_text("\n".join(lines) + "\n", encoding="utf-8")


def test_read_parallel_prepares_both_sides(tmp_path):
    write(tmp_path, "train.en", ["i can 't swim .", "i like coffee ."])
    write(tmp_path, "train.ja", ["泳げ ま せ ん 。", "コーヒー が 好き 。"])
    assert read_parallel(tmp_path, "train", "en", "ja") == (
        ["i can't swim.", "i like coffee."],
        ["泳げません。", "コーヒーが好き。"],
    )
    assert read_parallel(tmp_path, "train", "ja", "en")[0] == ["泳げません。", "コーヒーが好き。"]


def test_read_parallel_errors(tmp_path):
    write(tmp_path, "train.en", ["a .", "b ."])
    write(tmp_path, "train.ja", ["あ 。"])
    with pytest.raises(ValueError, match="train.en has 2 lines but train.ja has 1"):
        read_parallel(tmp_path, "train", "en", "ja")
    with pytest.raises(ValueError, match="Unknown language code 'fr'"):
        read_parallel(tmp_path, "train", "en", "fr")
    with pytest.raises(FileNotFoundError, match="dev.en does not exist"):
        read_parallel(tmp_path, "dev", "en", "ja")


def corpus_repository(folder: Path, lines: dict[str, str]) -> str:
    """A Git repository standing in for small_parallel_enja's: each split's files, one commit; its commit id."""
    folder.mkdir()
    for name, text in lines.items():
        (folder / name).write_text(text, encoding="utf-8")
    environment = {**os.environ, "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@t", "GIT_COMMITTER_NAME": "t",
                   "GIT_COMMITTER_EMAIL": "t@t"}  # fmt: skip
    for command in (["init", "--quiet"], ["add", "."], ["commit", "--quiet", "-m", "corpus"]):
        subprocess.run(["git", "-C", str(folder), *command], check=True, env=environment)
    return subprocess.run(
        ["git", "-C", str(folder), "rev-parse", "HEAD"], check=True, capture_output=True, text=True
    ).stdout.strip()


SPLITS = ("train", "dev", "test")
CORPUS = {
    **{f"{split}.en": "i can 't say who will leave last .\nnight followed night ...\n" for split in SPLITS},
    **{f"{split}.ja": "誰 が 最後 に 出 る か 私 に は 言え ま せ ん 。\n夜 が 続 い た 。\n" for split in SPLITS},
    "README.md": "small_parallel_enja\n",
}


@pytest.mark.skipif(shutil.which("git") is None, reason="git is not installed")
def test_get_corpus_fetches_the_pinned_commit_into_a_folder_the_recipes_read(tmp_path):
    commit = corpus_repository(tmp_path / "remote", CORPUS)
    (tmp_path / "remote" / "train.en").write_text("a later line\n", encoding="utf-8")  # a change after the commit
    output = tmp_path / "data" / "small_parallel_enja"
    result = run_script(
        "get_corpus.py", "--output_dir", str(output), "--repository", str(tmp_path / "remote"), "--commit", commit
    )
    assert result.returncode == 0, result.stderr[-2000:]
    assert sorted(p.name for p in output.iterdir()) == sorted(CORPUS)
    assert read_parallel(output, "train", "en", "ja") == (
        ["i can't say who will leave last.", "night followed night..."],
        ["誰が最後に出るか私には言えません。", "夜が続いた。"],
    )
    before = folder_digest(output)
    again = run_script(
        "get_corpus.py", "--output_dir", str(output), "--repository", str(tmp_path / "remote"), "--commit", commit
    )
    assert again.returncode == 0 and "holds the corpus already; pass --overwrite" in again.stdout  # `make data` twice
    assert folder_digest(output) == before
    (output / "dev.ja").unlink()  # no longer the whole corpus: fetched again only with --overwrite, never over notes
    flags = ["--output_dir", str(output), "--repository", str(tmp_path / "remote"), "--commit", commit]
    assert_one_line_error(run_script("get_corpus.py", *flags), "already holds an earlier output; pass --overwrite")
    (output / "notes.txt").write_text("mine")
    assert_one_line_error(run_script("get_corpus.py", *flags, "--overwrite"), "does not write (notes.txt)")
    assert (output / "notes.txt").read_text() == "mine"


@pytest.mark.skipif(shutil.which("git") is None, reason="git is not installed")
def test_get_corpus_refuses_a_missing_commit_or_repository_in_one_line_and_writes_nothing(tmp_path):
    corpus_repository(tmp_path / "remote", CORPUS)
    output = tmp_path / "corpus"
    missing_commit = run_script(
        "get_corpus.py", "--output_dir", str(output), "--repository", str(tmp_path / "remote"), "--commit", "0" * 40
    )
    assert_one_line_error(missing_commit, "--commit", "is not in")
    missing_repository = run_script(
        "get_corpus.py", "--output_dir", str(output), "--repository", str(tmp_path / "nowhere")
    )
    assert_one_line_error(missing_repository, "--repository", "cannot be cloned")
    not_the_corpus = {name: text for name, text in CORPUS.items() if name != "dev.ja"}
    commit = corpus_repository(tmp_path / "other", not_the_corpus)
    wrong = run_script("get_corpus.py", "--output_dir", str(output), "--repository", str(tmp_path / "other"),
                       "--commit", commit)  # fmt: skip
    assert_one_line_error(wrong, "has no dev.ja")
    unequal = corpus_repository(tmp_path / "unequal", {**CORPUS, "dev.ja": ""})
    result = run_script("get_corpus.py", "--output_dir", str(output), "--repository", str(tmp_path / "unequal"),
                        "--commit", unequal)  # fmt: skip
    assert_one_line_error(result, f"{tmp_path / 'unequal'} at {unequal}: dev.en has 2 lines but dev.ja has 0")
    option = run_script("get_corpus.py", "--output_dir", str(output), "--repository", str(tmp_path / "remote"),
                        "--commit=--x")  # fmt: skip
    assert_one_line_error(option, "--commit --x is not a commit; pass a commit hash")
    assert not output.exists() and not list(tmp_path.glob(".corpus*"))


@pytest.mark.parametrize(
    "arguments, message",
    [
        (["--output_dir", "{root}/a_file"], "--output_dir {root}/a_file"),
        (["--output_dir", "{root}/a_file/data"], "{root}/a_file is a file, not a folder"),
        (["--output_dir", "{root}/outputs/demo", "--seed", "one"], "argument --seed: invalid int value: 'one'"),
    ],
)
def test_make_demo_data_refuses_bad_arguments_in_one_line(workspace, arguments, message):
    assert_refused_before_any_work(workspace, "make_demo_data.py", arguments, message)


# The unseen-words evaluation (training/make_unseen_split.py)

UNSEEN_TRAIN = [
    ("i like green tea .", "私 は 緑茶 が 好き で す 。"),
    ("i like black coffee .", "私 は ブラック コーヒー が 好き で す 。"),
    ("the violin is old .", "その バイオリン は 古 い 。"),
    ("she plays the violin .", "彼女 は バイオリン を 弾 く 。"),
    ("the harbor is quiet .", "港 は 静か だ 。"),
    ("he walked to the harbor .", "彼 は 港 まで 歩 い た 。"),
    ("the tea is hot .", "お茶 は 熱 い 。"),
    ("the tea is cold .", "お茶 は 冷た い 。"),
]


def write_corpus(folder: Path, splits: dict[str, list[tuple[str, str]]]):
    folder.mkdir(parents=True)
    for split, pairs in splits.items():
        for index, lang in enumerate(("en", "ja")):
            (folder / f"{split}.{lang}").write_text("".join(pair[index] + "\n" for pair in pairs), encoding="utf-8")


def test_the_unseen_split_moves_every_pair_with_a_chosen_word_and_cuts_the_test_by_near_copies(tmp_path):
    test = [("the tea is warm .", "お茶 は 温か い 。"), ("my brother reads books .", "兄 は 本 を 読 む 。")]
    write_corpus(tmp_path / "corpus", {"train": UNSEEN_TRAIN, "dev": test, "test": test})
    out = tmp_path / "unseen"
    result = run_script("make_unseen_split.py", "--corpus_dir", str(tmp_path / "corpus"), "--output_dir", str(out),
                        "--words", "2", "--min_count", "2", "--max_count", "2")  # fmt: skip
    assert result.returncode == 0, result.stderr
    lines = {path.name: path.read_text(encoding="utf-8").splitlines() for path in out.iterdir()}
    words = set(lines["words.txt"])
    assert len(words) == 2 and words <= {"violin", "harbor", "like"}  # content words seen twice ("tea": four times)
    assert not any(word in line.split() for line in lines["train.en"] for word in words)
    assert all(any(word in line.split() for word in words) for line in lines["unseen.en"])
    pairs = sorted(zip(lines["train.en"] + lines["unseen.en"], lines["train.ja"] + lines["unseen.ja"]))
    assert pairs == sorted(UNSEEN_TRAIN)  # every pair kept, with its own translation
    assert lines["test_near.en"] == ["the tea is warm ."] and lines["test_far.en"] == ["my brother reads books ."]
    assert lines["test_near.ja"] == ["お茶 は 温か い 。"] and lines["test.en"] == [pair[0] for pair in test]
    (out / "notes.txt").write_text("mine")  # --overwrite replaces the split, and never deletes what it did not write
    again = run_script("make_unseen_split.py", "--corpus_dir", str(tmp_path / "corpus"), "--output_dir", str(out),
                       "--words", "2", "--min_count", "2", "--max_count", "2", "--overwrite")  # fmt: skip
    assert_one_line_error(again, f"--output_dir {out} holds what this command does not write (notes.txt)")
    assert (out / "notes.txt").read_text() == "mine"


def test_the_unseen_split_refuses_more_words_than_the_corpus_has(tmp_path):
    write_corpus(tmp_path / "corpus", {"train": UNSEEN_TRAIN, "dev": UNSEEN_TRAIN[:1], "test": UNSEEN_TRAIN[:1]})
    assert_one_line_error(
        run_script(
            "make_unseen_split.py",
            "--corpus_dir",
            str(tmp_path / "corpus"),
            "--output_dir",
            str(tmp_path / "unseen"),
            "--words",
            "5",
            "--min_count",
            "2",
            "--max_count",
            "2",
        ),  # fmt: skip
        "--words 5: the corpus has only 3 content words seen 2 to 2 times; ask for fewer",
    )
    assert not (tmp_path / "unseen").exists()
