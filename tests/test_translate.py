"""The translate command (`tiny-transformer translate`): what reaches the model is the text a person sees, whatever
invisible characters, byte-order marks or encodings the arguments and standard input carry; text it cannot read is
one line naming where it is and the fix."""

import codecs
import os
import signal
import subprocess
import sys
import tempfile

import pytest

from conftest import ROOT, TINY_TRANSFORMER, ScriptResult, assert_one_line_error, run_command, run_in_child
from hf_tiny_transformer.serving.engines import load_translator

LINES = ["I eat cake.", "She reads books.", "I like green tea."]
BYTE_ORDER_MARKS = {
    "utf-16-le": codecs.BOM_UTF16_LE,
    "utf-16-be": codecs.BOM_UTF16_BE,
    "utf-32-le": codecs.BOM_UTF32_LE,
    "utf-32-be": codecs.BOM_UTF32_BE,
}


def translate_standard_input(model, data: bytes, *arguments: str) -> ScriptResult:
    """`tiny-transformer translate --model model ...` reading `data` from standard input (a file, as `< file` gives
    it), in a child forked from this one."""
    from hf_tiny_transformer.commands import main

    def command_main():
        with tempfile.TemporaryFile() as file:
            file.write(data)
            file.seek(0)
            os.dup2(file.fileno(), 0)
        sys.stdin = open(0, encoding="utf-8", closefd=False)  # as Python opens it at start
        sys.exit(main(["translate", "--model", str(model), *arguments]))

    return run_in_child(command_main, "tiny-transformer translate < data", None, 120, None)


@pytest.fixture(scope="module")
def expected(trained_demo_model) -> str:
    """What translate prints for LINES: their translations, a line each."""
    return "".join(line + "\n" for line in load_translator(str(trained_demo_model)).translate(LINES))


def test_invisible_characters_in_arguments_and_on_standard_input_change_nothing(trained_demo_model, expected):
    """Two UTF-8 files with byte-order marks joined by `cat` (a mark inside the input), a zero-width space, NULs."""
    hostile = ["I eat\u200b cake.", "\ufeffShe reads books.\0\0", "I\u202e like\u2060 green tea.\ufe0f"]
    result = translate_standard_input(trained_demo_model, b"\xef\xbb\xbf" + "\n".join(hostile).encode() + b"\n")
    assert result.returncode == 0, result.stderr[-2000:]
    assert result.stdout == expected
    given = run_command("translate", "--model", str(trained_demo_model), *hostile)
    assert given.returncode == 0, given.stderr[-2000:]
    assert given.stdout == expected


@pytest.mark.parametrize("encoding", BYTE_ORDER_MARKS)
def test_standard_input_is_read_in_the_encoding_its_byte_order_mark_names(trained_demo_model, expected, encoding):
    data = BYTE_ORDER_MARKS[encoding] + "".join(line + "\n" for line in LINES).encode(encoding)
    result = translate_standard_input(trained_demo_model, data)
    assert result.returncode == 0, result.stderr[-2000:]
    assert result.stdout == expected


def test_utf16_from_a_pipe_is_read_in_the_encoding_its_byte_order_mark_names(trained_demo_model, expected):
    """From a real pipe, as `iconv -t UTF-16 | tiny-transformer translate` gives it (the first bytes are peeked)."""
    result = subprocess.run(
        [TINY_TRANSFORMER, "translate", "--model", str(trained_demo_model)],
        input="".join(line + "\n" for line in LINES).encode("utf-16"),
        capture_output=True,
        cwd=ROOT,
        timeout=300,
    )
    assert result.returncode == 0, result.stderr.decode()[-2000:]
    assert result.stdout.decode() == expected


@pytest.mark.parametrize("encoding, name", [("utf-16-le", "UTF-16LE"), ("utf-16-be", "UTF-16BE")])
def test_utf16_standard_input_without_a_byte_order_mark_is_one_line(trained_demo_model, encoding, name):
    """It was read as UTF-8 (ASCII in UTF-16 is UTF-8 with NULs between): invented lines, and exit 0."""
    result = translate_standard_input(trained_demo_model, "".join(line + "\n" for line in LINES).encode(encoding))
    assert_one_line_error(
        result,
        f"tiny-transformer translate: standard input looks like {name} text without a byte-order mark; convert it "
        f"to UTF-8, e.g. with iconv -f {name} -t UTF-8",
    )


def test_a_text_argument_that_is_not_utf8_is_one_line(trained_demo_model):
    """Python gives the bytes of an argument that are not UTF-8 as lone surrogates (`$'caf\\xe9'` is "caf\\udce9");
    they were a UnicodeEncodeError traceback."""
    result = run_command("translate", "--model", str(trained_demo_model), "I eat cake.", "caf\udce9")
    assert_one_line_error(
        result,
        "tiny-transformer translate: text argument 2 holds a byte that is not UTF-8 (0xe9); pass UTF-8 text, e.g. "
        "convert it with iconv -t UTF-8",
    )


def test_ctrl_c_between_two_lines_of_standard_input_is_one_line_and_exit_status_130(trained_demo_model):
    """A person translating line by line stops with Ctrl-C: the lines translated so far stay printed, then one line."""
    command = [TINY_TRANSFORMER, "translate", "--model", str(trained_demo_model), "--batch_size", "1"]
    process = subprocess.Popen(
        command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, encoding="utf-8"
    )
    try:
        process.stdin.write("I like green tea.\n")
        process.stdin.flush()
        first = process.stdout.readline()  # translated: the command now waits for the next line
        process.send_signal(signal.SIGINT)
        rest, stderr = process.communicate(timeout=60)
    finally:
        process.kill()
    assert first == "私は緑茶が好きです。\n" and rest == ""
    assert (process.returncode, stderr.strip()) == (130, "tiny-transformer translate: interrupted"), stderr[-2000:]
