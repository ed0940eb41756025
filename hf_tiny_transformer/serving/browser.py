"""The page that translates in the browser: a static folder (HTML and JavaScript, no Python at run time) that loads
an `export_onnx` folder in transformers.js and translates typed text on the reader's machine, offline.

    write_browser_page("runs/demo/onnx", "runs/demo/page")      # then: python -m http.server -d runs/demo/page

The page (`hf_tiny_transformer/browser/`: index.html, translate.js, and text.js for the text) handles text as the
package's translators do: invisible characters removed, every line sentence by sentence (the browser's
Intl.Segmenter), a sentence longer than the model takes cut as `text_tiny_transformer.hard_split` cuts it, the
pieces joined as the target language writes them, English output cased; it decodes greedily and shows the
translation as it grows. What fails is said on the page with what to do (opened as a file, a model file missing or
cut, a translation that failed), in the status line and in the body's data-error. It keeps no copy of the model (its
files are checked with the server at each load), so that a page written again over a model is loaded anew. Its
libraries come from npm, pinned in browser/package-lock.json (`npm ci --prefix hf_tiny_transformer/browser
--ignore-scripts`, which `make` runs): transformers.js's bundle and onnxruntime-web's WebAssembly, copied into
`vendor/`; nothing is fetched from a CDN. The folder also holds a README.md with the header of a static Hugging Face
Space, so that it can be uploaded as one as it is.
"""

import contextlib
import functools
import http.server
import json
import shutil
import tempfile
import threading
from collections.abc import Iterator
from pathlib import Path

from ..errors import UsageError
from ..guards.writing import staged_folder

PAGE = Path(__file__).resolve().parents[1] / "browser"
MODULES = PAGE / "node_modules"
VENDOR = {  # what the page loads from vendor/ -> where npm put it
    "transformers.min.js": MODULES / "@huggingface" / "transformers" / "dist" / "transformers.min.js",
    "ort-wasm-simd-threaded.asyncify.mjs": MODULES / "onnxruntime-web" / "dist" / "ort-wasm-simd-threaded.asyncify.mjs",
    "ort-wasm-simd-threaded.asyncify.wasm": MODULES
    / "onnxruntime-web"
    / "dist"
    / "ort-wasm-simd-threaded.asyncify.wasm",
}
PAGE_FILES = ("index.html", "translate.js", "text.js")
MODEL_FILES = ("config.json", "generation_config.json", "tokenizer.json", "tokenizer_config.json")
PAGE_WRITES = (*PAGE_FILES, "vendor", "model", "README.md")  # what the page's folder holds, and nothing else
SPACE_HEADER = {"title": "hf-tiny-transformer in the browser", "emoji": "🔤", "colorFrom": "blue", "colorTo": "green",
                "sdk": "static", "app_file": "index.html", "pinned": False}  # fmt: skip


def check_libraries():
    """A UsageError naming the command that installs them, when the page's libraries are not there."""
    missing = [name for name, source in VENDOR.items() if not source.is_file()]
    if missing:
        raise UsageError(
            f"the browser page's libraries are not installed ({', '.join(missing)}); run: npm ci --prefix {PAGE} "
            "--ignore-scripts (make install does)"
        )


def write_browser_page(export_folder: str | Path, output_dir: str | Path) -> Path:
    """The static folder: the page, its libraries in vendor/, the exported model in model/, and README.md with a
    static Space's header; written all or nothing."""
    export_folder = Path(export_folder)
    check_libraries()
    with staged_folder(output_dir) as staging:
        for name in PAGE_FILES:
            shutil.copy(PAGE / name, staging / name)
        (staging / "vendor").mkdir()
        for name, source in VENDOR.items():
            shutil.copy(source, staging / "vendor" / name)
        (staging / "model" / "onnx").mkdir(parents=True)
        for name in MODEL_FILES:
            shutil.copy(export_folder / name, staging / "model" / name)
        for graph in sorted((export_folder / "onnx").glob("*.onnx*")):  # the graphs, and the table they share
            shutil.copy(graph, staging / "model" / "onnx" / graph.name)
        header = "\n".join(f"{key}: {json.dumps(value, ensure_ascii=False)}" for key, value in SPACE_HEADER.items())
        about = ("A page that translates in the browser with an encoder-decoder Transformer (hf-tiny-transformer), "
                 "offline: serve this folder (`python -m http.server`) and open index.html.")  # fmt: skip
        (staging / "README.md").write_text(f"---\n{header}\n---\n\n{about}\n", encoding="utf-8")
    return Path(output_dir)


class QuietHandler(http.server.SimpleHTTPRequestHandler):
    """http.server's handler, without a line on stderr for every request."""

    def log_message(self, format, *args):
        pass


@contextlib.contextmanager
def served(folder: str | Path) -> Iterator[str]:
    """The page's address while the block runs, served from `folder` on this machine as `python -m http.server`
    serves it, on a free port, its requests unlogged."""
    handler = functools.partial(QuietHandler, directory=str(folder))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)  # port 0: the system picks a free one
    port = server.server_address[1]
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{port}/index.html"
    finally:
        server.shutdown()
        server.server_close()


def chromium(headless: bool = True, extra_flags: list[str] = ()):
    """Selenium's Chrome driver on Debian's Chromium, with the flags a machine without a screen or a network needs
    (and `extra_flags`)."""
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = "/usr/bin/chromium"
    for flag in (
        "--no-sandbox",
        "--disable-gpu",
        "--disable-quic",
        "--no-first-run",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        "--window-size=1280,1400",
        f"--user-data-dir={tempfile.mkdtemp(prefix='chromium-')}",
        *extra_flags,
    ):
        options.add_argument(flag)
    if headless:
        options.add_argument("--headless=new")
    return webdriver.Chrome(service=Service("/usr/bin/chromedriver"), options=options)


@contextlib.contextmanager
def chromium_on(url: str, offline: bool = True) -> Iterator:
    """Headless Chromium showing `url` while the block runs. With `offline`, every address but this machine's is
    unreachable (a proxy that does not exist), so that anything fetched from elsewhere would fail."""
    driver = chromium(extra_flags=["--proxy-server=http://0.0.0.0:9"] if offline else [])
    try:
        driver.get(url)
        yield driver
    finally:
        driver.quit()


class PageFailure(RuntimeError):
    """The page showed a failure: `failure` as `shown_failure` gives it."""

    def __init__(self, failure: dict):
        super().__init__(f"the page shows a failure ({failure['kind']}): {failure['message']}")
        self.failure = failure


def shown_failure(driver) -> dict | None:
    """The failure the page shows, or None: its `kind` ("file", "script", "model" or "translation"), the status
    line's `message`, and whether the Translate button is enabled (`button_enabled`)."""
    return driver.execute_script(
        "const kind = document.body.dataset.error;"
        "return kind ? {kind, message: document.getElementById('status').innerText,"
        " button_enabled: !document.getElementById('translate').disabled} : null"
    )


def is_ready(driver) -> bool:
    """True once the page has loaded its model."""
    return driver.execute_script("return document.body.dataset.ready === 'true'")


def raise_shown_failure(driver):
    """A PageFailure when the page shows a failure."""
    failure = shown_failure(driver)
    if failure:
        raise PageFailure(failure)


def page_failure(url: str, offline: bool = True, timeout: float = 120) -> dict:
    """Open the page in headless Chromium and wait until it shows a failure; returns it as `shown_failure` does.
    Raises RuntimeError when the page gets ready instead."""
    from selenium.webdriver.support.ui import WebDriverWait

    with chromium_on(url, offline) as driver:
        WebDriverWait(driver, timeout).until(lambda d: shown_failure(d) or is_ready(d))
        failure = shown_failure(driver)
        if failure is None:
            raise RuntimeError(f"{url} loaded its model and shows no failure")
        return failure


def use_page(
    url: str, text: str, screenshot: str | Path | None = None, offline: bool = True, timeout: float = 300
) -> dict:
    """Open the page in headless Chromium (see `chromium_on`), wait for its model, type `text`, press Translate and
    wait for the final translation. Returns the translation, the texts shown while it grew, the seconds the model
    took to load and the translation took, the tokens it generated, and whether the button is enabled again; saves
    a PNG of the page with `screenshot`. Raises PageFailure when the page shows a failure."""
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import WebDriverWait

    with chromium_on(url, offline) as driver:
        wait = WebDriverWait(driver, timeout)
        wait.until(lambda d: is_ready(d) or shown_failure(d))
        raise_shown_failure(driver)
        box = driver.find_element(By.ID, "source")
        box.clear()
        box.send_keys(text)
        button = driver.find_element(By.ID, "translate")
        button.click()
        output = driver.find_element(By.ID, "translation")
        wait.until(lambda d: output.get_attribute("data-final") == "true" or shown_failure(d))
        if screenshot:
            driver.save_screenshot(str(screenshot))
        raise_shown_failure(driver)
        return {
            "translation": output.text,
            "updates": driver.execute_script("return window.translationUpdates"),
            "load_seconds": float(driver.execute_script("return document.body.dataset.loadSeconds")),
            "seconds": float(output.get_attribute("data-seconds")),
            "tokens": int(output.get_attribute("data-tokens")),
            "button_enabled": button.is_enabled(),
        }


__all__ = ["write_browser_page", "check_libraries", "served", "use_page", "page_failure", "PageFailure", "PAGE"]
