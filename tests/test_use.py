"""What a user sees: progress output, the translate command, the demo page (through gradio_client and in a real
browser), and the Hub Space folder."""

import fcntl
import json
import os
import pty
import shutil
import socket
import struct
import subprocess
import sys
import termios
from pathlib import Path

import pytest

from conftest import ROOT, TINY_TRANSFORMER, few_steps, run_without_package
from hf_tiny_transformer import model_card, save_for_hub
from hf_tiny_transformer.serving.translator import TransformersTranslator


def run_in_terminal(arguments: list[str], timeout: float = 300) -> str:
    """Run a command with a pseudo-terminal as stdout and stderr (as a person at a terminal would) and return all it
    wrote there."""
    leader, follower = pty.openpty()
    # a real terminal's size: tqdm draws nothing on one of unknown size (0 rows)
    fcntl.ioctl(follower, termios.TIOCSWINSZ, struct.pack("HHHH", 24, 120, 0, 0))
    process = subprocess.Popen(arguments, stdin=subprocess.DEVNULL, stdout=follower, stderr=follower, cwd=ROOT)
    os.close(follower)
    output = b""
    while True:
        try:
            chunk = os.read(leader, 65536)
        except OSError:  # the command ended and closed the terminal
            break
        if not chunk:
            break
        output += chunk
    process.wait(timeout=timeout)
    os.close(leader)
    assert process.returncode == 0, output.decode(errors="replace")[-3000:]
    return output.decode(errors="replace")


def small_training(demo_files, output_dir, *extra: str) -> list[str]:
    """train.py's command line for 8 steps of the small model, a logging line every 4."""
    flags = few_steps(demo_files, output_dir, "--max_steps", "8", "--logging_steps", "4", *extra)
    at = flags.index("--disable_tqdm")
    del flags[at : at + 2]  # the flag and its value: train.py decides by where its output goes
    return [sys.executable, str(ROOT / "training" / "train.py"), *flags]


def test_training_at_a_terminal_shows_a_progress_bar_with_elapsed_time_and_eta(demo_files, tmp_path):
    output = run_in_terminal(small_training(demo_files, tmp_path / "run"))
    bars = [line for line in output.split("\r") if "/8 [" in line]
    assert bars and any("<" in bar and ("it/s]" in bar or "s/it]" in bar) for bar in bars), output[-2000:]


def test_training_into_a_log_file_writes_progress_lines_not_bars(demo_files, tmp_path):
    log = tmp_path / "train.log"
    with open(log, "w") as file:
        result = subprocess.run(
            small_training(demo_files, tmp_path / "run"), stdout=file, stderr=subprocess.STDOUT, cwd=ROOT
        )
    text = log.read_text()
    assert result.returncode == 0, text[-3000:]
    assert "\r" not in text
    assert "step 4/8 (50%)" in text and "elapsed, about" in text and "left, loss" in text


def test_evaluation_shows_a_bar_over_sentences_only_at_a_terminal(trained_demo_model, demo_files, tmp_path):
    arguments = [
        sys.executable,
        str(ROOT / "training" / "evaluate_model.py"),
        "--model",
        str(trained_demo_model),
        "--source_file",
        str(demo_files / "validation.en"),
        "--reference_file",
        str(demo_files / "validation.ja"),
        "--num_beams",
        "1",
        "--batch_size",
        "8",
    ]
    at_terminal = run_in_terminal(arguments)
    assert "translating" in at_terminal and "/40 [" in at_terminal and "sentences/s]" in at_terminal
    to_file = subprocess.run(arguments, capture_output=True, text=True, cwd=ROOT)
    assert to_file.returncode == 0 and "\r" not in to_file.stderr and "translating" not in to_file.stderr


def translate_py(*arguments: str, input: str | None = None) -> subprocess.CompletedProcess:
    """`tiny-transformer translate` in a fresh process, standard input given (or none)."""
    result = subprocess.run(
        [TINY_TRANSFORMER, "translate", *arguments],
        input=input or "",
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=300,
    )
    assert result.returncode == 0, result.stderr[-2000:]
    return result


def test_translate_arguments_and_standard_input(trained_demo_model, demo_files):
    from hf_tiny_transformer.serving.engines import load_translator

    sentences = (demo_files / "validation.en").read_text(encoding="utf-8").splitlines()[:5]
    expected = load_translator(str(trained_demo_model)).translate(sentences)
    assert translate_py("--model", str(trained_demo_model), *sentences[:2]).stdout.splitlines() == expected[:2]
    lines = "\n".join([sentences[2], "", sentences[3], "  ", sentences[4]]) + "\n"
    result = translate_py("--model", str(trained_demo_model), "--batch_size", "2", input=lines)
    assert result.stdout.splitlines() == [expected[2], "", expected[3], "", expected[4]]
    only_blank = translate_py("--model", str(trained_demo_model), "", "  ")  # nothing to translate: blank lines
    assert only_blank.stdout == "\n\n"


def test_translate_reads_a_pipe_line_by_line(trained_demo_model, demo_files):
    sentences = (demo_files / "test.en").read_text(encoding="utf-8")
    result = subprocess.run(
        [
            TINY_TRANSFORMER,
            "translate",
            "--model",
            str(trained_demo_model),
            "--batch_size",
            "16",
        ],
        input=sentences,
        capture_output=True,
        text=True,
        cwd=ROOT,
    )
    assert result.returncode == 0, result.stderr[-2000:]
    lines = result.stdout.splitlines()
    assert len(lines) == len(sentences.splitlines()) == 187 and all(lines)
    references = (demo_files / "test.ja").read_text(encoding="utf-8").splitlines()
    assert sum(line == reference for line, reference in zip(lines, references)) > 90  # in the right order


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


@pytest.fixture(scope="module")
def demo_page(trained_demo_model):
    """The demo page of the trained demo model, running on a free local port."""
    from hf_tiny_transformer.app.page import build_app
    from hf_tiny_transformer.loading import load_model_folder

    model, tokenizer = load_model_folder(str(trained_demo_model))
    app = build_app(model, tokenizer, ["I eat cake."])
    _, url, _ = app.launch(server_name="127.0.0.1", server_port=free_port(), prevent_thread_lock=True, quiet=True)
    yield url, model, tokenizer
    app.close()


def test_the_demo_page_translates_and_draws_through_its_api(demo_page):
    from gradio_client import Client
    from PIL import Image

    url, model, tokenizer = demo_page
    job = Client(url, verbose=False).submit("I eat cake.", "cross", 1, api_name="/translate")
    translation, image, note = job.result()
    growing = [output[0] for output in job.outputs()[:-1]]  # the translation as the page showed it growing
    assert growing and all(translation.startswith(text) and text != translation for text in growing[:1])
    assert translation == TransformersTranslator(model, tokenizer).translate(["I eat cake."])[0] and note == ""
    assert translation.endswith("。")
    with Image.open(image) as picture:
        assert picture.format in ("PNG", "WEBP") and picture.width > 200 and picture.height > 200


def test_the_demo_page_in_a_real_browser(demo_page, tmp_path):
    if not (shutil.which("chromium") and shutil.which("chromedriver")):
        if os.environ.get("CI"):
            pytest.fail("CI installs chromium and chromium-driver (.ci/run); they are missing")
        pytest.skip("Debian's chromium and chromium-driver are not installed")
    from hf_tiny_transformer.app.page import use_in_browser

    url, model, tokenizer = demo_page
    screenshot = tmp_path / "page.png"
    shown = use_in_browser(url, "She reads books.", screenshot)
    assert shown == TransformersTranslator(model, tokenizer).translate(["She reads books."])[0]
    assert screenshot.stat().st_size > 10_000


def test_a_space_folder_runs_the_demo_without_the_installed_package(trained_demo_model, tmp_path):
    from transformers import AutoModelForSeq2SeqLM, AutoTokenizer

    model = AutoModelForSeq2SeqLM.from_pretrained(trained_demo_model)
    tokenizer = AutoTokenizer.from_pretrained(trained_demo_model)
    card = model_card(model, source_lang="en", target_lang="ja", training_data="the demo corpus")
    save_for_hub(model, tokenizer, tmp_path / "hub", card, space_folder=tmp_path / "space")
    space = tmp_path / "space"
    assert {"app.py", "requirements.txt", "README.md", "model.safetensors", "tokenizer.json"} <= {
        p.name for p in space.iterdir()
    }
    assert (space / "hf_tiny_transformer" / "app" / "page.py").is_file()
    assert (
        'sdk: "gradio"' in (space / "README.md").read_text()
        and 'app_file: "app.py"' in (space / "README.md").read_text()
    )
    script = (
        "import json, os\nimport hf_tiny_transformer  # the folder's copy: python -c puts the working folder first\n"
        "assert hf_tiny_transformer.__file__.startswith(os.getcwd()), hf_tiny_transformer.__file__\n"
        "from hf_tiny_transformer.loading import load_model_folder\n"
        "from hf_tiny_transformer.app.page import TranslationApp\n"
        "app = TranslationApp(*load_model_folder('.'))\n"
        "*_, (translation, picture, note) = app.translate_and_draw('I eat cake.', 'cross', 1)\n"
        "print(json.dumps([translation, picture.size[0] > 200]))"
    )
    result = json.loads(run_without_package(script, cwd=space))
    assert result == [TransformersTranslator(model, tokenizer).translate(["I eat cake."])[0], True]


def test_translate_refuses_standard_input_that_is_not_utf8(trained_demo_model):
    for data in (b"I eat cake.\n\xff\xfe bad\n", Path(sys.executable).read_bytes()[:4096]):  # Latin-1 bytes, a binary
        result = subprocess.run(
            [TINY_TRANSFORMER, "translate", "--model", str(trained_demo_model)],
            input=data,
            capture_output=True,
            cwd=ROOT,
            timeout=300,
        )
        assert result.returncode == 2, result.stderr[-2000:]
        assert result.stderr.decode().splitlines() == [
            "tiny-transformer translate: standard input is not UTF-8 text; convert it, e.g. with iconv -t utf-8"
        ]


def test_a_reader_that_stops_reading_ends_translate_quietly(trained_demo_model):
    process = subprocess.Popen(
        [
            TINY_TRANSFORMER,
            "translate",
            "--model",
            str(trained_demo_model),
            "--batch_size",
            "4",
        ],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        cwd=ROOT,
    )
    process.stdin.write(b"I eat cake.\n" * 400)
    process.stdin.close()
    assert process.stdout.readline().strip()
    process.stdout.close()  # as `| head -1` does
    assert process.wait(timeout=300) == 0
    assert b"Traceback" not in process.stderr.read()
