"""Corpus preparation: segmented Japanese and tokenized English back to natural text."""

import pytest

from hf_tiny_transformer.data.corpus import detokenize_english, read_parallel, unsegment_japanese


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
        ("i can 't tell who will arrive first .", "i can't tell who will arrive first."),
        ("you have eaten lunch , haven 't you ?", "you have eaten lunch, haven't you?"),
        ("he said , '' it 's nine o 'clock . ''", "he said, \"it's nine o'clock.\""),
        ("he said to me , ' let 's play catch . '", "he said to me, 'let's play catch.'"),
        ("it is no more than ten minutes ' walk from here .", "it is no more than ten minutes' walk from here."),
        ("year followed year ...", "year followed year..."),
        ("i 'm in the tennis club .", "i'm in the tennis club."),
    ],
)
def test_detokenize_english(line, natural):
    assert detokenize_english(line) == natural


def write(folder, name, lines):
    (folder / name).write_text("\n".join(lines) + "\n", encoding="utf-8")


def test_read_parallel_prepares_both_sides(tmp_path):
    write(tmp_path, "train.en", ["i can 't tell .", "i like tea ."])
    write(tmp_path, "train.ja", ["分か り ま せ ん 。", "お 茶 が 好き 。"])
    assert read_parallel(tmp_path, "train", "en", "ja") == (
        ["i can't tell.", "i like tea."],
        ["分かりません。", "お茶が好き。"],
    )
    assert read_parallel(tmp_path, "train", "ja", "en")[0] == ["分かりません。", "お茶が好き。"]


def test_read_parallel_errors(tmp_path):
    write(tmp_path, "train.en", ["a .", "b ."])
    write(tmp_path, "train.ja", ["あ 。"])
    with pytest.raises(ValueError, match="train.en has 2 lines but train.ja has 1"):
        read_parallel(tmp_path, "train", "en", "ja")
    with pytest.raises(ValueError, match="Unknown language code 'fr'"):
        read_parallel(tmp_path, "train", "en", "fr")
    with pytest.raises(FileNotFoundError, match="dev.en does not exist"):
        read_parallel(tmp_path, "dev", "en", "ja")
