"""What the last hostile tries found, each pinned: the commands and scripts run as a user runs them (forked
children, or fresh processes where standard input matters), a problem is one line naming the problem and the fix,
and nothing a user saved changes."""

import json
import math
import os
import shutil
import subprocess
import sys

import pytest
from safetensors.torch import load_file, save_file

from conftest import (
    TINY_TRANSFORMER,
    assert_one_line_error,
    few_steps,
    folder_digest,
    run_command,
    run_script,
)
from hf_tiny_transformer import saving
from hf_tiny_transformer.errors import UsageError
from hf_tiny_transformer.serving.engines import load_translator


def translate(model, *arguments: str, input: bytes | None = None) -> subprocess.CompletedProcess:
    """`tiny-transformer translate --model model ...` in a fresh process (standard input as a user's)."""
    return subprocess.run(
        [TINY_TRANSFORMER, "translate", "--model", str(model), *arguments],
        input=input or b"",
        capture_output=True,
        timeout=300,
    )


@pytest.fixture
def copy(trained_demo_model, tmp_path):
    """A copy of the trained demo model's folder, to damage."""
    return shutil.copytree(trained_demo_model, tmp_path / "model")


def test_a_byte_order_mark_at_the_start_of_the_input_is_not_text(trained_demo_model, tmp_path):
    """ "I like green tea." came back as "I did not like green tea" when the mark reached the model."""
    plain = translate(trained_demo_model, input=b"I eat cake.\nShe reads books.\n")
    marked = translate(trained_demo_model, input="\ufeffI eat cake.\nShe reads books.\n".encode())
    assert plain.returncode == marked.returncode == 0, marked.stderr.decode()[-2000:]
    assert marked.stdout == plain.stdout and len(plain.stdout.decode().splitlines()) == 2
    sources, references = tmp_path / "sources.en", tmp_path / "references.ja"
    sources.write_text("\ufeffI eat cake.\n", encoding="utf-8")
    references.write_text("\ufeffケーキを食べます。\n", encoding="utf-8")
    output = tmp_path / "hypotheses.ja"
    result = run_script(
        "evaluate_model.py", "--model", str(trained_demo_model), "--source_file", str(sources),
        "--reference_file", str(references), "--output_file", str(output),
    )  # fmt: skip
    assert result.returncode == 0, result.stderr[-2000:]
    first = translate(trained_demo_model, "I eat cake.").stdout.decode()
    assert output.read_text(encoding="utf-8") == first


def test_a_lone_carriage_return_inside_a_line_does_not_end_it(trained_demo_model, tmp_path):
    """One line in, one line out; evaluate_model.py counts lines as `wc -l` does."""
    result = translate(trained_demo_model, input=b"I eat cake.\rShe reads books.\nI drink tea.\r\n")
    assert result.returncode == 0, result.stderr.decode()[-2000:]
    assert len(result.stdout.decode().split("\n")) == 3  # two lines and the final line end
    (tmp_path / "sources.en").write_bytes(b"I eat cake.\rShe reads books.\nI drink tea.\r\n")
    (tmp_path / "references.ja").write_text("a\nb\n")
    evaluated = run_script(
        "evaluate_model.py", "--model", str(trained_demo_model), "--source_file", str(tmp_path / "sources.en"),
        "--reference_file", str(tmp_path / "references.ja"),
    )  # fmt: skip
    assert evaluated.returncode == 0, evaluated.stderr[-2000:]
    assert json.loads(evaluated.stdout.strip().splitlines()[-1])["sentences"] == 2


def test_beams_that_cannot_fit_are_one_line_naming_the_limit(trained_demo_model):
    result = run_command("translate", "--model", str(trained_demo_model), "--num_beams", "1000000000", "I eat cake.")
    assert_one_line_error(result, "--num_beams 1000000000 does not fit in memory: 1 sentence x 1000000000 beams")
    assert "beams fit at batch size 1 (lower the beams or the batch size)" in result.stderr


def test_a_batch_size_python_cannot_count_to_is_one_line(trained_demo_model):
    result = run_command("translate", "--model", str(trained_demo_model), "--batch_size", "9" * 20, "I eat cake.")
    assert_one_line_error(result, f"--batch_size must be at most {sys.maxsize:,}, got {int('9' * 20):,}")


@pytest.mark.parametrize(
    "damage, message",
    [
        ("layer_norm_eps", "config.json's layer_norm_eps is not a finite number; fix it or save the model again"),
        (
            "weights",
            "model.safetensors holds NaN or infinity in model.encoder.embed_tokens.weight; save a trained model again",
        ),
    ],
)
def test_nan_in_the_config_or_the_weights_is_one_line_not_blank_translations(copy, damage, message):
    if damage == "layer_norm_eps":
        config = json.loads((copy / "config.json").read_text())
        (copy / "config.json").write_text(json.dumps({**config, "layer_norm_eps": math.nan}))
    else:
        weights = load_file(copy / "model.safetensors")
        weights["model.encoder.embed_tokens.weight"][5, 3] = math.nan  # the tied table: lm_head.weight too
        save_file(weights, copy / "model.safetensors", metadata={"format": "pt"})
    assert_one_line_error(run_command("translate", "--model", str(copy), "I eat cake."), f"--model {copy}: {message}")


def test_zero_beams_in_the_generation_config_is_one_line(copy):
    settings = json.loads((copy / "generation_config.json").read_text())
    (copy / "generation_config.json").write_text(json.dumps({**settings, "num_beams": 0}))
    assert_one_line_error(
        run_command("translate", "--model", str(copy), "I eat cake."),
        f"--model {copy}: generation_config.json's num_beams must be a whole number of at least 1, got 0; fix it",
    )


def test_a_tokenizer_without_its_config_is_one_line(copy):
    (copy / "tokenizer_config.json").unlink()
    assert_one_line_error(
        run_command("translate", "--model", str(copy), "I eat cake."),
        f"--model {copy}: the tokenizer has no padding token (tokenizer_config.json is missing or names none)",
    )


def test_a_ctranslate2_export_is_named_as_such_with_the_flag_to_use(trained_demo_model, tmp_path):
    export = tmp_path / "ct2"
    result = run_command("export-ctranslate2", "--model", str(trained_demo_model), "--output_dir", str(export))
    assert result.returncode == 0, result.stderr[-2000:]
    named = f"--model {export} is a CTranslate2 export, not a model folder"
    assert_one_line_error(
        run_command("translate", "--model", str(export), "I eat cake."), named, "--engine ctranslate2"
    )
    assert_one_line_error(
        run_command("export-ctranslate2", "--model", str(export), "--output_dir", str(tmp_path / "again")), named
    )


def test_averaging_a_checkpoint_that_does_not_exist_says_so(tmp_path):
    (tmp_path / "checkpoint-2").mkdir()
    result = run_script(
        "average_checkpoints.py", "--checkpoints", str(tmp_path / "checkpoint-1"), str(tmp_path / "checkpoint-2"),
        "--output_dir", str(tmp_path / "averaged"),
    )  # fmt: skip
    assert_one_line_error(
        result, f"--checkpoints: {tmp_path / 'checkpoint-1'} does not exist; pass checkpoint-N folders"
    )


def test_a_staging_folder_nested_by_an_older_save_goes_with_the_next_good_save(tmp_path):
    """Saves before version 0.2 nested a staged save in another: a kill left `..name.saving-PID-x.saving-PID-y`."""
    dead = 2**22 + 1  # above any pid this machine gives (pid_max is at most 2^22)
    nested = tmp_path / f"..hub.saving-{dead}-0a1b2c3d.saving-{dead}-4e5f6a7b"
    nested.mkdir()
    (nested / "model.safetensors").write_bytes(b"half written")
    with saving.staged_folder(tmp_path / "hub") as staging:
        (staging / "config.json").write_text("{}")
    assert sorted(path.name for path in tmp_path.iterdir()) == ["hub"]


def test_visualize_of_a_text_too_long_says_one_line_and_no_warning(trained_demo_model, tmp_path):
    result = run_command(
        "visualize", "--model", str(trained_demo_model), "--source", "cake " * 100,
        "--output_dir", str(tmp_path / "pictures"),
    )  # fmt: skip
    assert_one_line_error(result, "--source has", "tokens but the model takes at most 64; pass one sentence")


def test_an_engine_that_does_not_exist_is_refused(trained_demo_model):
    with pytest.raises(UsageError, match=rf"^{trained_demo_model}: engine 'tensorrt' is not one of transformers"):
        load_translator(str(trained_demo_model), engine="tensorrt")
    result = run_command("translate", "--model", str(trained_demo_model), "--engine", "tensorrt", "I eat cake.")
    assert_one_line_error(result, "argument --engine: invalid choice: 'tensorrt'")


def test_a_compute_type_the_transformers_engine_cannot_use_is_refused(trained_demo_model):
    result = run_command("translate", "--model", str(trained_demo_model), "--compute_type", "int8", "I eat cake.")
    assert_one_line_error(result, "--compute_type int8 applies to the exports (--engine ctranslate2 or onnx)")


def test_resuming_a_run_that_reached_max_steps_trains_nothing_and_leaves_its_model(demo_files, tmp_path):
    out = tmp_path / "run"
    steps = ["--save_strategy", "steps", "--save_steps", "2"]
    first = run_script("train.py", *few_steps(demo_files, out, *steps), timeout=300)
    assert first.returncode == 0, first.stderr[-2000:]
    before = folder_digest(out)
    again = run_script("train.py", *few_steps(demo_files, out, *steps, "--resume_from_checkpoint", "true"), timeout=300)
    assert again.returncode == 0, again.stderr[-2000:]
    assert "checkpoint-4 has trained all 4 steps of the run: nothing to train" in again.stderr
    assert folder_digest(out) == before


def test_make_demos_gate_fails_below_its_exact_match(trained_demo_model, demo_files):
    """`make demo` ends with evaluate_model.py --min_exact_match 95: a model below it fails the run."""
    result = run_script(
        "evaluate_model.py", "--model", str(trained_demo_model), "--source_file", str(demo_files / "validation.en"),
        "--reference_file", str(demo_files / "validation.ja"), "--num_beams", "1", "--min_exact_match", "100",
    )  # fmt: skip
    scores = json.loads(result.stdout.strip().splitlines()[-1])
    assert scores["exact_match"] < 100 and result.returncode == 1, scores
    assert result.stderr.strip().splitlines()[-1] == (
        f"evaluate_model.py: exact match {scores['exact_match']:.1f}% is below 100.0%"
    )


def test_update_model_card_rewrites_only_the_metrics_block(copy, demo_files):
    card_before = (copy / "README.md").read_text()
    result = run_script(
        "evaluate_model.py", "--model", str(copy), "--source_file", str(demo_files / "validation.en"),
        "--reference_file", str(demo_files / "validation.ja"), "--num_beams", "1", "--update_model_card",
    )  # fmt: skip
    assert result.returncode == 0, result.stderr[-2000:]
    scores = json.loads(result.stdout.strip().splitlines()[-1])
    card = (copy / "README.md").read_text()
    assert f"| bleu | {scores['bleu']:.2f} ± {scores['bleu_ci']:.2f} |" in card
    assert "40 sentences of `validation.en`, beam search with 1 beams" in card
    added = card[card.index("## Evaluation") : card.index("## Differences from the paper")]
    assert "<!-- metrics: written by hf-tiny-transformer -->" in added
    assert card.replace(added, "") == card_before  # the rest of the card, a person's, as it was


def test_a_truly_read_only_place_is_refused(tmp_path):
    """As a user without write permission there: the suite runs as root, who may write anywhere, so the check runs
    in a child that has given up root (the user nobody) where the suite is root."""
    import tempfile

    place = tempfile.mkdtemp(prefix="read-only-")
    try:
        os.chmod(place, 0o777)  # nobody may create files here; only the two below are locked
        locked = os.path.join(place, "locked")
        os.mkdir(locked, 0o555)
        with open(os.path.join(place, "out.txt"), "w") as file:
            file.write("text")
        os.chmod(os.path.join(place, "out.txt"), 0o444)
        read, write = os.pipe()
        pid = os.fork()
        if pid == 0:  # the child
            try:
                if os.geteuid() == 0:
                    os.setgid(65534)
                    os.setuid(65534)
                from hf_tiny_transformer.commands.output_guard import check_output

                messages = []
                for path, kind in (
                    (os.path.join(locked, "new", "model"), "folder"),
                    (os.path.join(place, "out.txt"), "file"),
                ):
                    try:
                        check_output(path, kind=kind, flag="--output", overwrite=True)
                        messages.append("accepted")
                    except UsageError as error:
                        messages.append(str(error))
                os.write(write, json.dumps(messages).encode())
            finally:
                os._exit(0)
        os.close(write)
        os.waitpid(pid, 0)
        messages = json.loads(os.read(read, 65536).decode())
    finally:
        shutil.rmtree(place, ignore_errors=True)
    assert messages == [
        f"--output {locked}/new/model: cannot write in {locked} (permission denied); choose another place or chmod "
        "u+w it",
        f"--output {place}/out.txt is read-only; choose another file or chmod u+w it",
    ]
