"""The translate command (`tiny-transformer translate`): texts given as arguments or read from standard input, a line
each, translated in order; what reaches the model is the text a person sees, whatever invisible characters,
byte-order marks, line ends or encodings the arguments and standard input carry; text it cannot read, settings that
cannot work and bad arguments are one line naming where the problem is and the fix; a reader that stops reading and
Ctrl-C end it quietly."""

import signal
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from bad_arguments import apply_changes, assert_refused_before_any_work
from hf_tiny_transformer.serving.engines import load_translator
from running import ROOT, TINY_TRANSFORMER, ScriptResult, assert_one_line_error, run_command

LINES = ["I eat cake.", "She reads books.", "I like green tea."]


def translate_standard_input(model, data: bytes, *arguments: str) -> ScriptResult:
    """`tiny-transformer translate --model model ...` reading `data` from standard input (a file, as `< file` gives
    it)."""
    return run_command("translate", "--model", str(model), *arguments, stdin=data, stdin_file=True)


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


WIDE = [("utf-16", "UTF-16LE"), ("utf-16-le", "UTF-16LE"), ("utf-16-be", "UTF-16BE"), ("utf-32", "UTF-32LE")]


@pytest.mark.parametrize("encoding, name", WIDE)
def test_utf16_or_utf32_on_standard_input_is_one_line(trained_demo_model, encoding, name):
    """With a byte-order mark or without: ASCII in them was read as UTF-8 with NULs between, invented lines, exit 0."""
    result = translate_standard_input(trained_demo_model, "".join(line + "\n" for line in LINES).encode(encoding))
    assert_one_line_error(
        result,
        f"tiny-transformer translate: standard input is {name} text, not UTF-8; convert it with iconv -f {name} -t "
        "UTF-8",
    )


def test_utf16_from_a_pipe_is_one_line(trained_demo_model):
    """From a real pipe, as `iconv -t UTF-16 | tiny-transformer translate` gives it (the first bytes are peeked)."""
    result = translate_piped(trained_demo_model, "".join(line + "\n" for line in LINES).encode("utf-16"))
    assert_one_line_error(result, "standard input is UTF-16LE text, not UTF-8", "iconv -f UTF-16LE -t UTF-8")


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


def translate_piped(model, data: bytes, *arguments: str) -> ScriptResult:
    """`printf data | tiny-transformer translate --model model ...` (a forked child reading a pipe)."""
    return run_command("translate", "--model", str(model), *arguments, stdin=data, timeout=300)


def succeeded(result: ScriptResult) -> ScriptResult:
    assert result.returncode == 0, result.stderr[-2000:]
    return result


def test_translate_arguments_and_standard_input(trained_demo_model, demo_files):
    sentences = (demo_files / "validation.en").read_text(encoding="utf-8").splitlines()[:5]
    expected = load_translator(str(trained_demo_model)).translate(sentences)
    given = succeeded(run_command("translate", "--model", str(trained_demo_model), *sentences[:2]))
    assert given.stdout.splitlines() == expected[:2]
    lines = "\n".join([sentences[2], "", sentences[3], "  ", sentences[4]]) + "\n"
    result = succeeded(translate_piped(trained_demo_model, lines.encode(), "--batch_size", "2"))
    assert result.stdout.splitlines() == [expected[2], "", expected[3], "", expected[4]]
    only_blank = succeeded(run_command("translate", "--model", str(trained_demo_model), "", "  "))
    assert only_blank.stdout == "\n\n"  # nothing to translate: blank lines


def test_translate_reads_a_pipe_line_by_line(trained_demo_model, demo_files):
    sentences = (demo_files / "test.en").read_text(encoding="utf-8")
    result = succeeded(translate_piped(trained_demo_model, sentences.encode(), "--batch_size", "16"))
    lines = result.stdout.splitlines()
    assert len(lines) == len(sentences.splitlines()) == 187 and all(lines)
    references = (demo_files / "test.ja").read_text(encoding="utf-8").splitlines()
    assert sum(line == reference for line, reference in zip(lines, references)) > 90  # in the right order


def test_translate_refuses_standard_input_that_is_not_utf8(trained_demo_model):
    for data in (b"I eat cake.\n\xff\xfe bad\n", Path(sys.executable).read_bytes()[:4096]):  # Latin-1 bytes, a binary
        result = translate_piped(trained_demo_model, data)
        assert result.returncode == 2, result.stderr[-2000:]
        assert result.stderr.splitlines() == [
            "tiny-transformer translate: standard input is not UTF-8 text; convert it with iconv -f ITS-ENCODING -t "
            "UTF-8"
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


def test_a_byte_order_mark_at_the_start_of_a_pipe_is_not_text(trained_demo_model):
    """ "I like green tea." came back as "I did not like green tea" when the mark reached the model."""
    plain = translate_piped(trained_demo_model, b"I eat cake.\nShe reads books.\n")
    marked = translate_piped(trained_demo_model, "\ufeffI eat cake.\nShe reads books.\n".encode())
    assert plain.returncode == marked.returncode == 0, marked.stderr[-2000:]
    assert marked.stdout == plain.stdout and len(plain.stdout.splitlines()) == 2


def test_a_lone_carriage_return_inside_a_line_does_not_end_it(trained_demo_model):
    """One line in, one line out."""
    result = succeeded(translate_piped(trained_demo_model, b"I eat cake.\rShe reads books.\nI drink tea.\r\n"))
    assert len(result.stdout.split("\n")) == 3  # two lines and the final line end


def test_beams_that_cannot_fit_are_one_line_naming_the_limit(trained_demo_model):
    result = run_command("translate", "--model", str(trained_demo_model), "--num_beams", "1000000000", "I eat cake.")
    assert_one_line_error(result, "--num_beams 1000000000 does not fit in memory: 1 sentence x 1000000000 beams")
    assert "beams fit at batch size 1 (lower the beams or the batch size)" in result.stderr


def test_a_batch_size_python_cannot_count_to_is_one_line(trained_demo_model):
    result = run_command("translate", "--model", str(trained_demo_model), "--batch_size", "9" * 20, "I eat cake.")
    assert_one_line_error(result, f"--batch_size must be at most {sys.maxsize:,}, got {int('9' * 20):,}")


def test_an_engine_that_does_not_exist_is_an_argument_error(trained_demo_model):
    result = run_command("translate", "--model", str(trained_demo_model), "--engine", "tensorrt", "I eat cake.")
    assert_one_line_error(result, "argument --engine: invalid choice: 'tensorrt'")


def test_a_compute_type_the_transformers_engine_cannot_use_is_refused(trained_demo_model):
    result = run_command("translate", "--model", str(trained_demo_model), "--compute_type", "int8", "I eat cake.")
    assert_one_line_error(result, "--compute_type int8 applies to the exports (--engine ctranslate2 or onnx)")


# Bad arguments: one line each, before any work


TRANSLATE_CASES = {
    "no model, and an engine none ships for": (
        ["--model", None, "--engine", "onnx"],
        "no shipped model for en-ja with the onnx engine here",
    ),
    "model is a file": (
        ["--model", "{root}/a_file"],
        "--model {root}/a_file is a file; pass the model folder that holds it",
    ),
    "beams 0": (["--num_beams", "0"], "--num_beams must be a whole number of at least 1"),
    "beams not whole": (["--num_beams", "2.5"], "argument --num_beams/--num-beams: invalid int value: '2.5'"),
    "batch size 0": (["--batch_size", "0"], "--batch_size must be a whole number of at least 1"),
    "length penalty infinite": (["--length_penalty", "inf"], "--length_penalty must be a finite number"),
    "not a device": (["--device", "toaster"], "--device 'toaster' is not a device"),
    "a GPU this machine lacks": (
        ["--device", "cuda"] if not torch.cuda.is_available() else ["--device", "mps"],
        "this machine has no {} device; pass cpu".format("cuda" if not torch.cuda.is_available() else "mps"),
    ),
    "missing model": (["--model", "{root}/nothing"], "--model {root}/nothing does not exist"),
    "missing model in a local folder": (["--model", "tests/nothing"], "--model tests/nothing does not exist"),
    "not an export": (["--engine", "ctranslate2"], "is not a folder written by export_ctranslate2"),
    "code of another model": (["--model", "{root}/foreign"], "pass --trust_remote_code to run it"),
}


@pytest.mark.parametrize("case", TRANSLATE_CASES)
def test_bad_arguments_are_one_line_before_any_work(workspace, case):
    changes, message = TRANSLATE_CASES[case]
    arguments = apply_changes(["--model", "{root}/hub", "I like tea."], changes, workspace)
    assert_refused_before_any_work(workspace, "translate", arguments, message)


# A failure inside generation, and a generation config without its token ids


def generate_fails():
    """In the child that runs the command: the model's generate() raises, as an out-of-memory error would."""
    from hf_tiny_transformer import TinyTransformerForConditionalGeneration

    def fail(*args, **kwargs):
        raise RuntimeError("out of memory (injected)")

    TinyTransformerForConditionalGeneration.generate = fail


@pytest.mark.parametrize("stream", [["--stream"], []], ids=["streamed", "whole"])
def test_an_error_inside_generation_is_one_line_and_never_a_hang(trained_demo_model, stream):
    """Streamed, generate() runs on a thread of its own: its error used to end that thread only, and the command
    waited on the stream for ever."""
    result = run_command(
        "translate",
        "--model",
        str(trained_demo_model),
        *stream,
        "I like tea.",
        setup=("test_translate", "generate_fails", ()),
        timeout=60,
    )
    assert_one_line_error(result, "translating failed (RuntimeError: out of memory (injected))", code=1)


def test_the_error_of_the_generating_thread_is_raised_where_the_stream_is_read(trained_demo_model, monkeypatch):
    translator = load_translator(str(trained_demo_model))

    def fail(*args, **kwargs):
        raise RuntimeError("injected")

    monkeypatch.setattr(translator.model, "generate", fail)
    with pytest.raises(RuntimeError, match="injected"):
        list(translator.stream("I like tea."))


SCORED = ["--source_file", "{data}/test.en", "--reference_file", "{data}/test.ja"]


@pytest.fixture(scope="module")
def no_token_ids(trained_demo_model, tmp_path_factory):
    """The trained demo model with generation_config.json replaced by `{}` (an older tool, a hand edit)."""
    import shutil

    folder = Path(shutil.copytree(trained_demo_model, tmp_path_factory.mktemp("ge") / "model"))
    (folder / "generation_config.json").write_text("{}")
    return folder


@pytest.mark.parametrize(
    "tool, arguments",
    [
        ("translate", ["I like tea."]),
        ("translate", ["--stream", "I like tea."]),
        ("evaluate_model.py", [*SCORED, "--num_beams", "1"]),
        ("tune_decoding.py", [*SCORED, "--num_beams", "1", "--length_penalty", "1.0", "--dry_run"]),
    ],
    ids=["translate", "translate --stream", "evaluate_model.py", "tune_decoding.py"],
)  # fmt: skip
def test_a_generation_config_without_token_ids_takes_them_from_config_json(no_token_ids, demo_files, tool, arguments):
    """`{}` as generation_config.json: the model's config.json names the token ids, as transformers saves them."""
    from running import run_tool

    result = run_tool(tool, "--model", str(no_token_ids), *[a.format(data=demo_files) for a in arguments], timeout=300)
    assert result.returncode == 0 and "Traceback" not in result.stderr, result.stderr[-2000:]


def test_without_token_ids_anywhere_every_door_is_one_line(no_token_ids, tmp_path):
    """config.json without them too: one line naming generation_config.json, before any work; an export of such a
    model, or an export whose generation config lost them, is refused."""
    import json
    import shutil

    folder = Path(shutil.copytree(no_token_ids, tmp_path / "model"))
    config = json.loads((folder / "config.json").read_text())
    (folder / "config.json").write_text(json.dumps({**config, "decoder_start_token_id": None, "bos_token_id": None}))
    message = f"--model {folder}: generation_config.json (and config.json) name no decoder_start_token_id"
    for command in (["translate", "--stream", "I like tea."], ["export-onnx", "--output_dir", str(tmp_path / "onnx")]):
        assert_one_line_error(run_command(command[0], "--model", str(folder), *command[1:]), message)
    assert not (tmp_path / "onnx").exists()


def test_an_export_whose_generation_config_lost_its_token_ids_is_one_line(demo_onnx, tmp_path):
    import shutil

    folder = Path(shutil.copytree(demo_onnx, tmp_path / "onnx"))
    (folder / "generation_config.json").write_text("{}")
    result = run_command("translate", "--engine", "onnx", "--model", str(folder), "I like tea.")
    assert_one_line_error(
        result, f"{folder}/generation_config.json names no decoder_start_token_id", "export the model again"
    )
