"""The page that translates in the browser (hf_tiny_transformer/serving/browser.py, `tiny-transformer
browser-page`): written for the demo model's ONNX export, served by a plain HTTP server on this machine, and used in
headless Chromium with every other address unreachable: its translation of three sentences equals the Python
translator's (greedy), and it grows token by token before it is final; a text longer than the model takes is cut as
the Python front doors cut it; what fails (opened as a file, a model file missing or cut, scripts that do not run, a
translation) is said on the page, and a model written again over the old one is loaded anew. Needs Debian's chromium
and chromium-driver and the page's npm libraries, which .ci/run and make install; skipped elsewhere, failed under
CI=true. The command refuses an export it cannot serve before it writes anything. The page's text handling
(browser/text.js) is compared with text_tiny_transformer's under node, without a browser."""

import itertools
import json
import os
import shutil
import subprocess
import sys

import pytest

from bad_arguments import removed
from builds import load_demo_model
from hf_tiny_transformer import text_tiny_transformer as text
from hf_tiny_transformer.serving.browser import (
    PAGE,
    VENDOR,
    PageFailure,
    chromium_on,
    is_ready,
    page_failure,
    served,
    shown_failure,
    use_page,
)
from hf_tiny_transformer.serving.translator import TransformersTranslator
from running import assert_one_line_error, run_command, run_script

SENTENCES = "My mother really likes green tea. I didn't eat bread. She reads books."
# Longer than the demo model takes at once (max_position_embeddings tokens), with no sentence end to split it at.
LONG_TEXT = ("my mother really likes green tea and i like green tea too " * 90)[:5000].strip()


def needed():
    missing = [name for name in ("chromium", "chromedriver") if not shutil.which(name)]
    missing += [name for name, path in VENDOR.items() if not path.is_file()]
    if missing:
        if os.environ.get("CI"):
            pytest.fail(f"CI installs chromium, chromium-driver and the page's npm libraries; missing: {missing}")
        pytest.skip(f"not installed: {', '.join(missing)}")


@pytest.fixture(scope="module")
def page(request, trained_demo_model):
    """The page written for the trained demo model's float32 ONNX export, served on this machine: its address, the
    Python translator of the same model, and the page's folder (to copy before changing it)."""
    needed()
    site = request.getfixturevalue("demo_browser_page")
    with served(site) as url:
        yield url, TransformersTranslator(*load_demo_model(trained_demo_model)), site


def test_the_page_translates_offline_as_the_python_translator_does(page):
    url, translator, site = page
    used = use_page(url, SENTENCES, offline=True)
    assert used["translation"] == translator.translate([SENTENCES], num_beams=1)[0]
    partial = [update for update in used["updates"] if update != used["translation"]]
    assert partial and len(partial[0]) < len(used["translation"])  # it grew before it was final
    assert used["tokens"] > 10 and used["seconds"] > 0 and used["load_seconds"] > 0


def test_the_folder_is_a_static_space_with_nothing_from_elsewhere(page):
    _, _, site = page
    readme = (site / "README.md").read_text()
    assert 'sdk: "static"' in readme and 'app_file: "index.html"' in readme
    for name in ("index.html", "translate.js", "text.js"):
        assert "https://" not in (site / name).read_text(), name  # no CDN, no remote model
    assert {path.name for path in (site / "vendor").iterdir()} == set(VENDOR)


# The page's failures, each said on the page with what to do


def test_the_page_translates_a_text_longer_than_the_model_takes_as_python_does(page):
    url, translator, _ = page
    used = use_page(url, LONG_TEXT, offline=True)
    assert used["button_enabled"]
    assert used["translation"] == translator.translate([LONG_TEXT], num_beams=1)[0]  # cut into the same pieces


def test_the_page_opened_as_a_file_says_to_serve_its_folder(page):
    _, _, site = page
    failure = page_failure((site / "index.html").as_uri(), timeout=60)
    assert failure["kind"] == "file"
    assert f'python -m http.server --directory "{site}" 8000' in failure["message"]
    assert "http://localhost:8000" in failure["message"]


@pytest.mark.parametrize("damage", ["missing", "cut"])
def test_the_page_names_a_missing_or_cut_model_file_and_says_to_export_again(page, tmp_path, damage):
    _, _, site = page
    broken = shutil.copytree(site, tmp_path / "site")
    graph = broken / "model" / "onnx" / "decoder_model_merged.onnx"  # the fixture's export is not quantized
    if damage == "missing":
        graph.unlink()
    else:
        graph.write_bytes(graph.read_bytes()[: graph.stat().st_size // 2])
    with served(broken) as url:
        failure = page_failure(url, timeout=60)
    assert failure["kind"] == "model"
    said = {"missing": "is missing", "cut": "is not a whole ONNX file"}[damage]
    assert f"model/onnx/decoder_model_merged.onnx {said}" in failure["message"]
    assert "tiny-transformer export-onnx" in failure["message"]
    assert "tiny-transformer browser-page" in failure["message"]


@pytest.mark.parametrize("damage", ["library missing", "script not JavaScript"])
def test_the_page_whose_scripts_do_not_run_says_to_write_it_again(page, tmp_path, damage):
    _, _, site = page
    broken = shutil.copytree(site, tmp_path / "site")
    if damage == "library missing":
        (broken / "vendor" / "transformers.min.js").unlink()
    else:
        (broken / "text.js").write_text("<!doctype html><title>Not found</title>")
    with served(broken) as url:
        failure = page_failure(url, timeout=60)
    assert failure["kind"] == "script"
    assert "Write the page again (tiny-transformer browser-page)" in failure["message"]


def test_the_page_loads_its_model_anew_when_the_files_change(page, tmp_path):
    from selenium.webdriver.support.ui import WebDriverWait

    _, _, site = page
    copied = shutil.copytree(site, tmp_path / "site")  # the files' old times: a browser may keep them a long while
    with served(copied) as url, chromium_on(url) as driver:
        wait = WebDriverWait(driver, 60)
        wait.until(is_ready)
        graph = copied / "model" / "onnx" / "decoder_model_merged.onnx"
        graph.write_bytes(graph.read_bytes()[: graph.stat().st_size // 2])
        driver.refresh()
        wait.until(lambda d: is_ready(d) or shown_failure(d))
        failure = shown_failure(driver)
        assert failure and failure["kind"] == "model"  # not the graph the browser loaded before


def test_a_translation_that_fails_says_so_and_enables_the_button_again(page, tmp_path):
    _, _, site = page
    broken = shutil.copytree(site, tmp_path / "site")
    config = broken / "model" / "config.json"
    # A positional table claimed longer than the graphs': the page no longer cuts the long text, and onnxruntime fails.
    config.write_text(json.dumps({**json.loads(config.read_text()), "max_position_embeddings": 100_000}))
    with served(broken) as url, pytest.raises(PageFailure) as failed:
        use_page(url, LONG_TEXT, timeout=120)
    assert failed.value.failure["kind"] == "translation"
    assert failed.value.failure["message"].startswith("The translation failed: ")
    assert failed.value.failure["button_enabled"]


# The command's checks of the export it is given: one line naming the file, before anything is written

EXPORT_AGAIN = "export the model again with tiny-transformer export-onnx --overwrite"


def edited_config(**fields):
    """config.json, the one transformers.js reads, changed by hand."""

    def damage(folder):
        config = json.loads((folder / "config.json").read_text())
        (folder / "config.json").write_text(json.dumps({**config, **fields}))

    return damage


@pytest.mark.parametrize(
    ("damage", "problem"),
    [
        pytest.param(removed("tokenizer.json"), "tokenizer.json is missing", id="no tokenizer.json"),
        pytest.param(removed("onnx/decoder_model_merged.onnx"), "onnx/decoder_model_merged.onnx is missing",
                     id="no decoder graph"),
        pytest.param(removed("config.json"), "config.json is missing", id="no config.json"),
        pytest.param(lambda folder: (folder / "onnx/decoder_model_merged_quantized.onnx").write_bytes(b""),
                     "onnx/decoder_model_merged_quantized.onnx is not a whole ONNX file (it holds no graph)",
                     id="empty int8 graph"),
        pytest.param(edited_config(decoder_layers=3),
                     "config.json's decoder_layers is 3, but the graphs' is 2 (hf_tiny_transformer.json)",
                     id="config.json of another shape"),
    ],
)  # fmt: skip
def test_the_browser_page_refuses_an_export_it_cannot_serve_before_writing(demo_onnx_int8, tmp_path, damage, problem):
    folder = shutil.copytree(demo_onnx_int8, tmp_path / "export")
    damage(folder)
    page = tmp_path / "page"
    assert_one_line_error(
        run_command("browser-page", "--model", str(folder), "--output_dir", str(page)),
        f"--model {folder}: {folder}/{problem}",
        EXPORT_AGAIN,
    )
    assert not page.exists()


def test_a_missing_model_folder_is_said_to_be_missing(tmp_path):
    """It was called a folder not written by export_onnx, though a saved model folder is taken too."""
    missing = tmp_path / "mistyped"
    result = run_command("browser-page", "--model", str(missing), "--output_dir", str(tmp_path / "page"))
    assert_one_line_error(result, f"--model {missing} does not exist; pass a folder written by tiny-transformer")
    assert not (tmp_path / "page").exists()


def test_the_browser_page_refuses_a_ctranslate2_export_and_names_the_onnx_one(demo_ct2, tmp_path):
    folder = demo_ct2["int8"]
    assert_one_line_error(
        run_command("browser-page", "--model", str(folder), "--output_dir", str(tmp_path / "page")),
        f"--model {folder} is a CTranslate2 export; the page runs ONNX graphs: export the model with "
        "tiny-transformer export-onnx and pass that folder",
    )
    assert not (tmp_path / "page").exists()


# The page's text handling (browser/text.js) under node, beside text_tiny_transformer's

# One character of each kind that changes a text's meaning without showing, between ordinary text: zero-width space,
# non-joiner and joiner, word joiner, soft hyphen, bidi marks, embeddings, overrides and isolates, a byte order mark
# inside a line, a tag, an Egyptian format control, variation selectors; NUL, a bell, DEL and NEL; the object
# replacement character, private-use characters of the BMP and of planes 15 and 16.
INVISIBLE = "\u200b\u200c\u200d\u2060\u00ad\u200e\u200f\u202a\u202e\u2066\u2069\ufeff\U000e0041\U00013430"
INVISIBLE += "\ufe0f\U000e0100\x00\x07\x7f\x85\ufffc\ue000\U000f0000\U0010fffd"
BLANKS = "\u2800\u115f\u1160\u3164\uffa0"  # the Braille pattern blank, the Hangul fillers: made spaces
VISIBLE = "I like green tea.\t緑茶が好きです。\n🍵👍🏽 \x0b\x0c\r\u3000end"


def tokenizer_json(tokenizer) -> dict:
    """The tokenizer.json that `tokenizer` saves, parsed."""
    return json.loads(tokenizer.backend_tokenizer.to_str())


def run_node(tmp_path, script: str, payload) -> object:
    """What `script` (an ES module that reads `payload` as JSON on its standard input) writes as JSON, run by node."""
    if not shutil.which("node"):
        if os.environ.get("CI"):
            pytest.fail("CI installs node, which runs the page's JavaScript in this test")
        pytest.skip("node is not installed")
    driver = tmp_path / "driver.mjs"
    driver.write_text(script)
    done = subprocess.run(
        ["node", str(driver)], input=json.dumps(payload), capture_output=True, text=True, timeout=60, check=True
    )
    return json.loads(done.stdout)


def run_text_js(tmp_path, calls: list[list], tokenizer: dict | None = None) -> list:
    """What text.js's functions give for `calls` ([name, *arguments]), run by node; the argument "count_tokens"
    stands for a tokenizer of one token a character (code point) and one more for the end of the text, and "clean",
    as an argument or a name, for the text cleaning of `tokenizer` (a parsed tokenizer.json)."""
    script = (
        f"import * as text from {json.dumps((PAGE / 'text.js').as_uri())};\n"
        "import { readFileSync } from 'node:fs';\n"
        "const countTokens = (piece) => [...piece].length + 1;\n"
        "const { calls, tokenizer } = JSON.parse(readFileSync(0, 'utf8'));\n"
        "const clean = text.textCleaning(tokenizer ?? {});\n"
        "const functions = { ...text, clean };\n"
        "const argument = (a) => (a === 'count_tokens' ? countTokens : a === 'clean' ? clean : a);\n"
        "const results = calls.map(([name, ...args]) => functions[name](...args.map(argument)));\n"
        "process.stdout.write(JSON.stringify(results));\n"
    )
    return run_node(tmp_path, script, {"calls": calls, "tokenizer": tokenizer})


def count_tokens(piece: str) -> int:
    return len(piece) + 1


def test_text_js_cleans_text_as_python_does_with_the_tokenizers_own_patterns(tmp_path, tokenizer):
    """The page takes its cleaning from the model's tokenizer.json; it reads the patterns as Python does, every code
    point (but the surrogates, which no UTF-8 text holds)."""
    mixed = "".join(shown + hidden for shown, hidden in itertools.zip_longest(VISIBLE, INVISIBLE, fillvalue=""))
    every = "".join(chr(code) for code in range(sys.maxunicode + 1) if not 0xD800 <= code <= 0xDFFF)
    calls = [["clean", mixed], ["clean", f"a{BLANKS}b"], ["clean", every]]
    cleaned, blanks, every_cleaned = run_text_js(tmp_path, calls, tokenizer_json(tokenizer))
    assert cleaned == text.remove_invisible_characters(mixed) == VISIBLE
    assert blanks == text.remove_invisible_characters(f"a{BLANKS}b") == f"a{' ' * len(BLANKS)}b"
    assert every_cleaned == text.remove_invisible_characters(every)


def test_the_cleaning_is_the_rule_by_nodes_own_unicode_properties(tmp_path, tokenizer):
    """text_tiny_transformer's written-out ranges, as the page reads them, against the rule in Node's Unicode
    properties (a newer Unicode than Python's), every code point Node assigns: Cf, Default_Ignorable_Code_Point, Co,
    the object replacement character and Cc but tab and the line ends are removed; the blanks become spaces."""
    script = (
        f"import * as text from {json.dumps((PAGE / 'text.js').as_uri())};\n"
        "import { readFileSync } from 'node:fs';\n"
        "const { tokenizer, blanks } = JSON.parse(readFileSync(0, 'utf8'));\n"
        "const clean = text.textCleaning(tokenizer);\n"
        "const RULE = /[\\p{Cf}\\p{Default_Ignorable_Code_Point}\\p{Co}\\uFFFC]|(?![\\t\\n\\v\\f\\r])\\p{Cc}/gu;\n"
        "const rule = (c) => (blanks.includes(c) ? ' ' : c.replace(RULE, ''));\n"
        "const wrong = [];\n"
        "for (let code = 0; code <= 0x10ffff; code++) {\n"
        "  const c = String.fromCodePoint(code);\n"
        "  if (!/\\p{Cn}|\\p{Cs}/u.test(c) && clean(c) !== rule(c)) wrong.push(code.toString(16));\n"
        "}\n"
        "process.stdout.write(JSON.stringify(wrong));\n"
    )
    assert run_node(tmp_path, script, {"tokenizer": tokenizer_json(tokenizer), "blanks": BLANKS}) == []


def test_the_pages_tokenizer_reads_invisible_characters_as_nothing(tmp_path, tokenizer):
    """transformers.js's own normalizer (the page's bundle, building the tokenizer as its AutoTokenizer does for a
    class it does not know) gives the Python tokenizer's ids, those of the text without the invisible characters."""
    bundle = VENDOR["transformers.min.js"]
    if not bundle.is_file():
        if os.environ.get("CI"):
            pytest.fail("CI installs the page's npm libraries, whose transformers.js this test runs")
        pytest.skip(f"not installed: {bundle}")
    texts = ["I like green tea.", f"I{INVISIBLE} like{BLANKS}green tea.{INVISIBLE}"]
    script = (
        f"import {{ PreTrainedTokenizer }} from {json.dumps(bundle.as_uri())};\n"
        "import { readFileSync } from 'node:fs';\n"
        "const { tokenizer, config, texts } = JSON.parse(readFileSync(0, 'utf8'));\n"
        "const page = new PreTrainedTokenizer(tokenizer, config);\n"
        "process.stdout.write(JSON.stringify(texts.map((t) => page.encode(t))));\n"
    )
    tokenizer.save_pretrained(tmp_path / "tokenizer")
    config = json.loads((tmp_path / "tokenizer" / "tokenizer_config.json").read_text())
    ids = run_node(tmp_path, script, {"tokenizer": tokenizer_json(tokenizer), "config": config, "texts": texts})
    assert ids == tokenizer(texts)["input_ids"] and ids[1] == ids[0]


def test_text_js_cuts_a_long_sentence_as_python_does(tmp_path, tokenizer):
    japanese = "緑茶が好きで、パンを食べませんでしたが" * 12 + "🍵" * 40  # no sentence end: one sentence each line
    # emoji before a clause mark: in the first half of a piece counted in code points, in the second in UTF-16 units
    emoji = ("🍵" * 6 + "、ab cdefg ") * 8
    lines = ["my mother really likes green tea, and i like\u200b it too; " * 12, japanese, emoji, "a" * 150]
    long_text = "\n".join(lines[:2]) + "\n\n" + lines[2]
    calls = [["hardSplit", line, "count_tokens", limit] for line in lines for limit in (1, 16, 64)]
    calls.append(["segments", long_text, "en", "count_tokens", 64, "clean"])
    split = [text.hard_split(line, count_tokens, limit) for line in lines for limit in (1, 16, 64)]
    plan = text.segments(long_text, "en", count_tokens, 64)
    *js_split, js_plan = run_text_js(tmp_path, calls, tokenizer_json(tokenizer))
    assert js_split == split
    assert [(piece["text"], piece["lineBreaks"]) for piece in js_plan] == [(s.text, s.line_breaks) for s in plan]
    assert len(plan) > len(lines) and max(count_tokens(s.text) for s in plan) <= 64


def test_text_js_joins_and_cases_as_python_does(tmp_path):
    plan = text.segments("one. two.\n\n three.\nfour.", "en", count_tokens, 64)
    pieces = [{"text": s.text, "lineBreaks": s.line_breaks} for s in plan]
    translations = ["i went. ", 'she said "no." mr. smith came', "e.g. this... wait", "i.e. the i-th one"]
    calls = [["join", translations, pieces, lang] for lang in ("en", "ja", "zh-Hans")]
    calls += [["englishCasing", translation] for translation in translations]
    expected = [text.join(translations, plan, lang) for lang in ("en", "ja", "zh-Hans")]
    expected += [text.english_casing(translation) for translation in translations]
    assert run_text_js(tmp_path, calls) == expected


def test_the_browser_benchmark_measures_both_dtypes_and_the_shared_table(trained_demo_model, demo_onnx_int8, tmp_path):
    """benchmarks/browser_page.py end to end, one round, on the int8 export (a model folder is exported first, as the
    browser-page command does): the float32 page translates as the Python translator does, both dtypes are timed,
    and the export's sizes show the embedding table stored once."""
    needed()
    output = tmp_path / "page.json"
    flags = ["--model", str(demo_onnx_int8), "--rounds", "1", "--output", str(output)]
    result = run_script("browser_page.py", *flags, folder="benchmarks", timeout=600)
    assert result.returncode == 0, result.stderr[-2000:]
    report = json.loads(output.read_text())
    translator = TransformersTranslator(*load_demo_model(trained_demo_model))
    assert report["fp32"]["translation"] == translator.translate([report["text"]], num_beams=1)[0]
    for dtype in ("fp32", "q8"):
        timing = report[dtype]
        assert timing["load_seconds"] > 0 and timing["first_translation_seconds"] > 0 and timing["tokens_per_s"] > 0
    sizes, table = report["export_bytes"], report["one_table_saves_bytes"]
    assert sizes["int8"] < sizes["float32"] and 0 < table["int8"] < table["float32"] < sizes["float32"]
    assert f"the page downloads {sizes['float32'] / 1e6:.2f} MB (float32)" in result.stdout


def test_the_browser_benchmark_refuses_an_export_without_int8_graphs_in_one_line(demo_onnx):
    result = run_script("browser_page.py", "--model", str(demo_onnx), folder="benchmarks")
    message = f"browser_page.py: --model {demo_onnx} has no int8 graphs; export it with --quantization int8, or pass"
    assert result.returncode == 2 and result.stderr.startswith(message) and len(result.stderr.splitlines()) == 1


def test_the_page_is_one_command_away_from_a_model_folder(trained_demo_model, tmp_path):
    """browser-page given a saved model folder (`--model models/en-ja`) exports it to ONNX int8 on the way."""
    from hf_tiny_transformer.serving.browser import VENDOR

    if not all(path.is_file() for path in VENDOR.values()):
        pytest.skip("the page's npm libraries are not installed")
    result = run_command("browser-page", "--model", str(trained_demo_model), "--output_dir", str(tmp_path / "page"))
    assert result.returncode == 0, result.stderr[-2000:]
    assert (tmp_path / "page" / "model" / "onnx" / "decoder_model_merged_quantized.onnx").is_file()
    assert sorted(path.name for path in tmp_path.iterdir()) == ["page"]  # the export made on the way is gone
