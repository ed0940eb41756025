"""The page that translates in the browser (hf_tiny_transformer.serving.browser): written for the demo model's
ONNX export, served by a plain HTTP server on this machine, and used in headless Chromium with every other address
unreachable: its translation of three sentences equals the Python translator's (greedy), and it grows token by
token before it is final. Needs Debian's chromium and chromium-driver and the page's npm libraries, which .ci/run
and make install; skipped elsewhere, failed under CI=true."""

import os
import shutil

import pytest
from transformers import AutoModelForSeq2SeqLM, AutoTokenizer

from hf_tiny_transformer.serving.browser import VENDOR, served, use_page, write_browser_page
from hf_tiny_transformer.serving.translator import TransformersTranslator

SENTENCES = "My mother really likes green tea. I didn't eat bread. She reads books."


def needed():
    missing = [name for name in ("chromium", "chromedriver") if not shutil.which(name)]
    missing += [name for name, path in VENDOR.items() if not path.is_file()]
    if missing:
        if os.environ.get("CI"):
            pytest.fail(f"CI installs chromium, chromium-driver and the page's npm libraries; missing: {missing}")
        pytest.skip(f"not installed: {', '.join(missing)}")


@pytest.fixture(scope="module")
def page(trained_demo_model, tmp_path_factory):
    needed()
    pytest.importorskip("onnxruntime", reason="the [onnx] extra is not installed")
    from hf_tiny_transformer.serving.onnx import export_onnx

    root = tmp_path_factory.mktemp("page")
    model, tokenizer = (
        AutoModelForSeq2SeqLM.from_pretrained(trained_demo_model),
        AutoTokenizer.from_pretrained(trained_demo_model),
    )
    export_onnx(model, tokenizer, root / "onnx")
    site = write_browser_page(root / "onnx", root / "site")
    with served(site) as url:
        yield url, TransformersTranslator(model, tokenizer), site


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
    for name in ("index.html", "translate.js"):
        assert "https://" not in (site / name).read_text(), name  # no CDN, no remote model
    assert {path.name for path in (site / "vendor").iterdir()} == set(VENDOR)
