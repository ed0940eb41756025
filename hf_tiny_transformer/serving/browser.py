"""The page that translates in the browser: a static folder (HTML and JavaScript, no Python at run time) that loads
an `export_onnx` folder in transformers.js and translates typed text on the reader's machine, offline.

    write_browser_page("runs/demo/onnx", "runs/demo/page")      # then: python -m http.server -d runs/demo/page

The page (`hf_tiny_transformer/browser/`: index.html, translate.js) handles text as the package's translators do:
every line sentence by sentence (the browser's Intl.Segmenter), the pieces joined as the target language writes
them, English output cased; it decodes greedily and shows the translation as it grows. Its libraries come from npm,
pinned in browser/package-lock.json (`npm ci --prefix hf_tiny_transformer/browser --ignore-scripts`, which `make`
runs): transformers.js's bundle and onnxruntime-web's WebAssembly, copied into `vendor/`; nothing is fetched from a
CDN. The folder also holds a README.md with the header of a static Hugging Face Space, so that it can be uploaded
as one as it is.
"""

import contextlib
import functools
import http.server
import json
import shutil
import threading
from collections.abc import Iterator
from pathlib import Path

from ..errors import UsageError
from ..saving import staged_folder

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
MODEL_FILES = ("config.json", "generation_config.json", "tokenizer.json", "tokenizer_config.json")
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
        for name in ("index.html", "translate.js"):
            shutil.copy(PAGE / name, staging / name)
        (staging / "vendor").mkdir()
        for name, source in VENDOR.items():
            shutil.copy(source, staging / "vendor" / name)
        (staging / "model" / "onnx").mkdir(parents=True)
        for name in MODEL_FILES:
            shutil.copy(export_folder / name, staging / "model" / name)
        for graph in sorted((export_folder / "onnx").glob("*.onnx")):
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


def use_page(
    url: str, text: str, screenshot: str | Path | None = None, offline: bool = True, timeout: float = 300
) -> dict:
    """Open the page in headless Chromium, wait for its model, type `text`, press Translate and wait for the final
    translation. With `offline`, every address but this machine's is unreachable (a proxy that does not exist), so
    that anything fetched from elsewhere would fail. Returns the translation, the texts shown while it grew, the
    seconds the model took to load and the translation took, and the tokens it generated; saves a PNG of the page
    with `screenshot`."""
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import WebDriverWait

    from ..demo.app import chromium

    driver = chromium(extra_flags=["--proxy-server=http://0.0.0.0:9"] if offline else [])
    try:
        driver.get(url)
        wait = WebDriverWait(driver, timeout)
        wait.until(lambda d: d.execute_script("return document.body.dataset.ready === 'true'"))
        box = driver.find_element(By.ID, "source")
        box.clear()
        box.send_keys(text)
        driver.find_element(By.ID, "translate").click()
        output = driver.find_element(By.ID, "translation")
        wait.until(lambda d: output.get_attribute("data-final") == "true")
        if screenshot:
            driver.save_screenshot(str(screenshot))
        return {
            "translation": output.text,
            "updates": driver.execute_script("return window.translationUpdates"),
            "load_seconds": float(driver.execute_script("return document.body.dataset.loadSeconds")),
            "seconds": float(output.get_attribute("data-seconds")),
            "tokens": int(output.get_attribute("data-tokens")),
        }
    finally:
        driver.quit()


__all__ = ["write_browser_page", "check_libraries", "served", "use_page", "PAGE"]
