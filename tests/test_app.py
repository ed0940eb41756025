"""The app (hf_tiny_transformer/app/page.py, `tiny-transformer app`): the Gradio page that translates and draws the
attention, used through gradio_client and in a real browser; its start-up problems (port, host, folder), each one
line before the page would start; a model of any shape; text of invisible characters only."""

import os
import shutil
import socket
import time

import pytest

from conftest import tiny_model
from hf_tiny_transformer.serving.translator import TransformersTranslator
from running import ScriptResult, assert_one_line_error, run_command

PLAIN = "I like green tea."


@pytest.fixture
def folder(text_model, tokenizer, tmp_path):
    """A random model and the test tokenizer, saved."""
    text_model.save_pretrained(tmp_path / "model")
    tokenizer.save_pretrained(tmp_path / "model")
    return tmp_path / "model"


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


@pytest.fixture(scope="module")
def running_app(trained_demo_model):
    """The app of the trained demo model, running on a free local port."""
    from hf_tiny_transformer.app.page import build_app
    from hf_tiny_transformer.guards.loading import load_model_folder

    model, tokenizer = load_model_folder(str(trained_demo_model))
    app = build_app(model, tokenizer, ["I eat cake."])
    _, url, _ = app.launch(server_name="127.0.0.1", server_port=free_port(), prevent_thread_lock=True, quiet=True)
    yield url, model, tokenizer
    app.close()


def test_the_app_translates_and_draws_through_its_api(running_app):
    from gradio_client import Client
    from PIL import Image

    url, model, tokenizer = running_app
    job = Client(url, verbose=False).submit("I eat cake.", "cross", 1, api_name="/translate")
    translation, image, note = job.result()
    growing = [output[0] for output in job.outputs()[:-1]]  # the translation as the page showed it growing
    assert growing and all(translation.startswith(text) and text != translation for text in growing[:1])
    assert translation == TransformersTranslator(model, tokenizer).translate(["I eat cake."])[0] and note == ""
    assert translation.endswith("。")
    with Image.open(image) as picture:
        assert picture.format in ("PNG", "WEBP") and picture.width > 200 and picture.height > 200


def test_the_app_in_a_real_browser(running_app, tmp_path):
    if not (shutil.which("chromium") and shutil.which("chromedriver")):
        if os.environ.get("CI"):
            pytest.fail("CI installs chromium and chromium-driver (.ci/run); they are missing")
        pytest.skip("Debian's chromium and chromium-driver are not installed")
    from hf_tiny_transformer.app.page import use_in_browser

    url, model, tokenizer = running_app
    screenshot = tmp_path / "page.png"
    shown = use_in_browser(url, "She reads books.", screenshot)
    assert shown == TransformersTranslator(model, tokenizer).translate(["She reads books."])[0]
    assert screenshot.stat().st_size > 10_000


def run_app(*arguments: str) -> ScriptResult:
    """`tiny-transformer app` forked from this process: each case fails before the page would start."""
    return run_command("app", *arguments)


def test_the_app_refuses_a_busy_port_a_bad_port_and_a_missing_folder_at_once(folder, tmp_path):
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        result = run_app("--model", str(folder), "--port", str(port))
    assert_one_line_error(result, f"--port {port} on 127.0.0.1 cannot be used", "pass another --port")
    assert_one_line_error(run_app("--model", str(folder), "--port", "70000"), "--port 70000 is not a port number")
    assert_one_line_error(
        run_app("--model", str(folder), "--host", "999.1.1.1"), "--host 999.1.1.1 is not an address of this machine"
    )
    start = time.monotonic()
    assert_one_line_error(run_app("--model", str(tmp_path / "runs" / "mistyped")), "does not exist")
    assert_one_line_error(run_app("--model", "tests/mistyped-hub"), "--model tests/mistyped-hub does not exist")
    assert time.monotonic() - start < 60  # no Hub lookups with retries


def test_the_app_takes_a_model_of_any_shape(tokenizer):
    pytest.importorskip("gradio")
    import gradio as gr
    from PIL import Image

    from hf_tiny_transformer.app.page import TranslationApp, build_app

    for layers in (1, 3):
        model = tiny_model(vocab_size=len(tokenizer), encoder_layers=layers, decoder_layers=layers)
        app = build_app(model, tokenizer, ["I eat cake."])  # a one-layer model used to crash its layer slider
        (slider,) = [block for block in app.blocks.values() if isinstance(block, gr.Slider)]
        assert (slider.value, slider.maximum, slider.visible) == (layers - 1, max(layers - 1, 1), layers > 1)
        for kind in ("encoder", "decoder", "cross"):
            *_, (_, image, _) = TranslationApp(model, tokenizer).translate_and_draw("I eat cake.", kind, layers - 1)
            assert isinstance(image, Image.Image) and image.width > 100, (layers, kind)


def test_the_app_takes_text_of_invisible_characters_only_as_empty(trained_demo_model):
    """A text of invisible characters only is an empty text (it was a crash: no piece to draw)."""
    from hf_tiny_transformer.app.page import TranslationApp
    from hf_tiny_transformer.guards.loading import load_model_folder

    demo = TranslationApp(*load_model_folder(str(trained_demo_model)))
    assert list(demo.translate_and_draw("\u200b\ufeff", "cross", 1)) == [("", None, "")]
    hidden = "\u200b\u202e"  # a zero-width space and a right-to-left override, in and after the text
    assert demo.pieces(f"I{hidden} like green tea.{hidden}{hidden}") == [PLAIN]
