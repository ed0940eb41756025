"""training/train.py (and hf_tiny_transformer/trainer/: arguments, setup, the output lock, the run's record): data
sources, recipes, the model card, lengths checked before the work, the model saved before the test set is
translated, an output folder never overwritten or shared, torchrun, time budgets, progress output at a terminal and
in a log, learning; bad arguments and files are one line each, before any work. The script runs as a user runs it (a
forked child, or a fresh process where a terminal or torchrun needs one)."""

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file
from transformers import AutoModelForSeq2SeqLM, AutoTokenizer, Seq2SeqTrainer

from bad_arguments import apply_changes, assert_refused_before_any_work, folder_digest
from builds import copy_folder
from conftest import HUB_FOLDER_FILES
from hf_tiny_transformer import TinyTransformerForConditionalGeneration, load_shape
from hf_tiny_transformer.data.demo_corpus import make_demo_corpus
from hf_tiny_transformer.marian import marian_of_the_same_shape
from hf_tiny_transformer.trainer.arguments import parse_arguments
from running import (
    AVX2,
    ROOT,
    SMALL_MODEL,
    assert_one_line_error,
    fake_cpuinfo,
    few_steps,
    mode_flags,
    run_in_terminal,
    run_script,
    run_without_package,
)


def train(arguments: list[str]):
    """train.py run in a forked child, which must succeed (the output is shown when it does not); its result."""
    result = run_script("train.py", *arguments, timeout=300)
    assert result.returncode == 0, result.stderr[-3000:]
    return result


def test_defaults_follow_the_papers_recipe(tmp_path):
    _, _, args = parse_arguments(["--output_dir", str(tmp_path), "--shape", "tiny"])
    assert (args.adam_beta2, args.adam_epsilon, args.label_smoothing_factor) == (0.98, 1e-9, 0.1)
    assert args.lr_scheduler_type == "inverse_sqrt" and args.warmup_steps == 4000
    assert args.train_sampling_strategy == "group_by_length" and args.predict_with_generate


def test_a_json_recipe_holds_the_flags_and_later_flags_override_it(tmp_path):
    recipe = tmp_path / "recipe.json"
    recipe.write_text(
        json.dumps(
            {
                "shape": "tiny",
                "output_dir": str(tmp_path / "out"),
                "max_steps": 7,
                "report_to": ["none"],
                "lowercase": True,
                "batch_tokens": 512,
            }
        )
    )
    model_args, _, args = parse_arguments([str(recipe), "--max_steps", "9"])
    assert model_args.shape == "tiny" and args.max_steps == 9 and args.output_dir == str(tmp_path / "out")
    assert model_args.lowercase is True and args.batch_tokens == 512


def test_the_projects_recipes_force_no_device_precision_or_overwrite(tmp_path):
    """The recipes run where the hardware says (a GPU where there is one: tests/test_precision.py) and never replace
    a user's run (that is asked on the command line)."""
    for recipe in sorted((ROOT / "training" / "recipes").glob("*.json")):
        flags = json.loads(recipe.read_text())
        assert not {"use_cpu", "precision", "bf16", "overwrite_output_dir"} & set(flags), recipe
        _, _, args = parse_arguments([str(recipe), "--output_dir", str(tmp_path / recipe.stem)])
        assert args.precision == "auto" and not args.overwrite_output_dir, recipe


def test_the_en_ja_recipe_trains_a_smaller_vocabulary_than_ja_en(tmp_path):
    """docs/everyday-text.md: 4,000 tokens translate English words the corpus never saw better into Japanese; into
    English they change nothing, so ja -> en keeps 8,000."""
    sizes = {}
    for direction in ("en-ja", "ja-en"):
        recipe = ROOT / "training" / "recipes" / f"{direction}.json"
        model_args, _, _ = parse_arguments([str(recipe), "--output_dir", str(tmp_path / direction)])
        sizes[direction] = model_args.vocab_size
    assert sizes == {"en-ja": 4000, "ja-en": 8000}


def test_training_writes_a_hub_folder_with_test_metrics_in_its_card(demo_files, tmp_path):
    out = tmp_path / "run"
    train(
        few_steps(
            demo_files,
            out,
            "--validation_source_file",
            str(demo_files / "validation.en"),
            "--validation_target_file",
            str(demo_files / "validation.ja"),
            "--test_source_file",
            str(demo_files / "validation.en"),
            "--test_target_file",
            str(demo_files / "validation.ja"),
            "--eval_strategy",
            "steps",
            "--eval_steps",
            "4",
            "--generation_max_length",
            "16",
            "--do_predict",
            "true",
        )
    )
    metrics = json.loads((out / "metrics.json").read_text())
    assert {"test_bleu", "test_chrf", "train_steps"} <= set(metrics) and metrics["train_steps"] == 4
    card = (out / "hub" / "README.md").read_text()
    assert "pipeline_tag: translation" in card and "| bleu |" in card and "- Steps: 4 in" in card
    assert {path.name for path in (out / "hub").iterdir()} == HUB_FOLDER_FILES
    assert not list((out / "hub").glob("*.bin"))


def test_a_small_positional_table_with_default_lengths_trains_evaluates_and_saves(demo_files, tmp_path):
    """max_position_embeddings 64 and every length left at its default: an untrained model translates the test
    set to the longest length the table allows, and everything is saved."""
    out = tmp_path / "run"
    test_files = [
        "--test_source_file", f"{demo_files}/validation.en", "--test_target_file", f"{demo_files}/validation.ja",
        "--do_predict", "true",
    ]  # fmt: skip  # flag-value pairs side by side
    train(few_steps(demo_files, out, "--vocab_size", "400", *test_files))
    assert {"test_bleu", "test_chrf"} <= set(json.loads((out / "metrics.json").read_text()))
    arguments = ["--model", str(out / "hub"), "--source_file", f"{demo_files}/validation.en"]
    arguments += ["--reference_file", f"{demo_files}/validation.ja", "--num_beams", "1"]
    evaluated = run_script("evaluate_model.py", *arguments, "--output_file", str(tmp_path / "hypotheses"), timeout=300)
    assert evaluated.returncode == 0, evaluated.stderr[-3000:]
    assert len((tmp_path / "hypotheses").read_text().splitlines()) == 40


def predict_dies():
    """In the child that runs train.py: the test set's translation fails."""

    def dies(*args, **kwargs):
        raise RuntimeError("killed while translating the test set")

    Seq2SeqTrainer.predict = dies


def test_the_model_is_saved_before_the_test_set_is_translated(demo_files, tmp_path):
    out = tmp_path / "run"
    test_files = [
        "--test_source_file", f"{demo_files}/validation.en", "--test_target_file", f"{demo_files}/validation.ja",
        "--do_predict", "true",
    ]  # fmt: skip  # flag-value pairs side by side
    flags = few_steps(demo_files, out, "--vocab_size", "400", *test_files)
    result = run_script("train.py", *flags, timeout=300, setup=("test_training_script", "predict_dies", ()))
    assert result.returncode == 1 and "killed while translating" in result.stderr
    model = AutoModelForSeq2SeqLM.from_pretrained(out / "hub")
    assert model.config.d_model == 32 and (out / "hub" / "tokenizer.json").is_file()


# AutoTokenizer in a process that has not imported the package, for each (folder, options): the ids of the given
# texts, and every question the library asked on the way (input() recorded, not answered: a question would wait for
# a person at a terminal).
LOAD_TOKENIZERS = (
    "import builtins, json, sys\n"
    "from transformers import AutoTokenizer\n"
    "results = []\n"
    "for folder, options in json.loads(sys.argv[1]):\n"
    "    asked = []\n"
    "    builtins.input = lambda prompt='': asked.append(prompt) or ''\n"
    "    tokenizer = AutoTokenizer.from_pretrained(folder, **options)\n"
    "    results.append({'asked': asked, 'ids': tokenizer(json.loads(sys.argv[2]))['input_ids']})\n"
    "print(json.dumps(results))"
)


def test_a_runs_tokenizers_load_with_autotokenizer_without_the_package_and_without_a_question(
    checkpointed_run, tmp_path
):
    """The tokenizer folder of a run (`--tokenizer_name`) as it is; the hub folder as the model is loaded, with
    trust_remote_code=True (transformers 5 reads the model's config.json in AutoTokenizer, and asks about its code
    when the caller has not said): the same ids as in training, and no question."""
    out = checkpointed_run
    texts = ["I like green tea.", "私は緑茶が好きです。", "鬱 🍵"]
    expected = AutoTokenizer.from_pretrained(out / "tokenizer")(texts)["input_ids"]
    folders = [(str(out / "tokenizer"), {}), (str(out / "hub"), {"trust_remote_code": True})]
    results = json.loads(run_without_package(LOAD_TOKENIZERS, json.dumps(folders), json.dumps(texts), cwd=tmp_path))
    assert results == [{"asked": [], "ids": expected}] * 2


def test_json_lines_and_datasets_sources(demo_files, tmp_path):
    pairs = make_demo_corpus(seed=0)["train"][:64]
    records = [json.dumps({"translation": {"en": p.english, "ja": p.japanese}}, ensure_ascii=False) for p in pairs]
    data = tmp_path / "jsonl"
    data.mkdir()
    (data / "train.jsonl").write_text("\n".join(records) + "\n", encoding="utf-8")
    json_lines = train(few_steps(None, tmp_path / "a", "--train_file", str(data / "train.jsonl")))
    dataset = train(few_steps(None, tmp_path / "b", "--dataset_name", str(data)))
    streamed = train(few_steps(None, tmp_path / "c", "--train_file", str(data / "train.jsonl"), "--streaming", "true"))
    assert "data: {'train': 64}" in json_lines.stderr and "data: {'train': 64}" in dataset.stderr
    assert "data: {'train': 'a stream'}" in streamed.stderr


def test_fine_tuning_a_saved_model_and_training_from_a_config(checkpointed_run, demo_files, tmp_path):
    first = checkpointed_run  # 4 steps of the small model
    data = ["--train_source_file", str(demo_files / "train.en"), "--train_target_file", str(demo_files / "train.ja")]
    common = ["--max_steps", "2", "--save_strategy", "no", "--disable_tqdm", "true", *data]
    tuned = tmp_path / "tuned"
    train(["--model_name_or_path", str(first / "hub"), "--output_dir", str(tuned), *common])
    assert not (tuned / "tokenizer").exists()  # the model's own tokenizer, not a new one
    assert (tuned / "hub" / "tokenizer.json").read_text() == (first / "hub" / "tokenizer.json").read_text()
    before, after = load_file(first / "hub" / "model.safetensors"), load_file(tuned / "hub" / "model.safetensors")
    assert before.keys() == after.keys() and any(not torch.equal(before[k], after[k]) for k in before)
    scratch = tmp_path / "scratch"
    args = ["--config_name", str(first / "hub"), "--tokenizer_name", str(first / "hub"), "--output_dir", str(scratch)]
    train(args + common)
    assert json.loads((scratch / "hub" / "config.json").read_text())["d_model"] == 32


def test_an_output_dir_holding_a_model_is_not_overwritten(demo_files, tmp_path):
    out = tmp_path / "run"
    (out / "hub").mkdir(parents=True)
    (out / "hub" / "model.safetensors").write_bytes(b"precious")
    (out / "hub" / "config.json").write_text("{}")
    result = run_script("train.py", *few_steps(demo_files, out))
    assert (
        result.returncode == 2
        and "already holds a model or checkpoints; pass --resume_from_checkpoint true" in result.stderr
    )
    assert (out / "hub" / "model.safetensors").read_bytes() == b"precious"


# A process that holds an output folder as a training run does: an flock on {output_dir}/.train.lock, which holds
# its process id.
HOLD_LOCK = (
    "import fcntl, os, sys, time\n"
    "os.makedirs(os.path.dirname(sys.argv[1]), exist_ok=True)\n"
    "descriptor = os.open(sys.argv[1], os.O_RDWR | os.O_CREAT)\n"
    "fcntl.flock(descriptor, fcntl.LOCK_EX)\n"
    "os.write(descriptor, str(os.getpid()).encode())\n"
    "print('held', flush=True)\n"
    "time.sleep(600)\n"
)


def test_a_run_into_an_output_dir_that_another_run_holds_is_refused(checkpointed_run, demo_files, tmp_path):
    """Two runs into one folder: while the first holds it, the second is one line and exit 2 before it writes
    anything, whether the folder is still empty or holds the first run's model (which --overwrite_output_dir would
    otherwise remove)."""
    finished, empty = copy_folder(checkpointed_run, tmp_path / "finished"), tmp_path / "empty"
    for out, flags in ((finished, ["--overwrite_output_dir", "true"]), (empty, [])):
        holder = subprocess.Popen(
            [sys.executable, "-c", HOLD_LOCK, str(out / ".train.lock")], stdout=subprocess.PIPE, text=True
        )
        try:
            assert holder.stdout.readline() == "held\n"
            before = folder_digest(out)
            result = run_script("train.py", *few_steps(demo_files, out, "--seed", "1", *flags))
            assert_one_line_error(result, f"--output_dir {out} is in use by process {holder.pid}")
            assert folder_digest(out) == before
        finally:
            holder.kill()
            holder.wait()


def test_a_lock_left_by_a_killed_run_is_taken_over_with_a_warning(demo_files, tmp_path):
    out = tmp_path / "run"
    killed = run_script(
        "train.py", *few_steps(demo_files, out, "--max_steps", "100000"), timeout=300,
        kill_when=lambda: (out / "tokenizer").is_dir(),  # written after the lock is taken
    )  # fmt: skip
    assert killed.returncode == -9, "the run ended before it could be killed"
    assert (out / ".train.lock").read_text().strip() == str(killed.pid)
    result = train(few_steps(demo_files, out))
    assert f"--output_dir {out}: taking over the lock of process {killed.pid}" in result.stderr
    assert (out / "hub" / "model.safetensors").is_file() and not (out / ".train.lock").exists()


def test_a_lock_file_that_is_a_link_is_refused_and_what_it_names_is_untouched(demo_files, tmp_path):
    """A folder from elsewhere with `.train.lock -> ~/notes.txt`: the run emptied notes.txt and wrote its process id
    there; a dangling link created the file it names."""
    out, notes = tmp_path / "run", tmp_path / "notes.txt"
    out.mkdir()
    notes.write_text("precious")
    for target in (notes, tmp_path / "not-there.txt"):
        (out / ".train.lock").unlink(missing_ok=True)
        (out / ".train.lock").symlink_to(target)
        result = run_script("train.py", *few_steps(demo_files, out))
        assert_one_line_error(result, f"--output_dir {out}: .train.lock cannot be made", "remove it")
    assert notes.read_text() == "precious" and not (tmp_path / "not-there.txt").exists()
    assert sorted(path.name for path in out.iterdir()) == [".train.lock"]


# train.py as torchrun runs it, except that process 1 records every file it writes, renames or removes under the
# output folder (Python's audit events: files the libraries write natively are listed by the test instead).
RECORD_WRITES_OF_PROCESS_1 = """
import json, os, runpy, sys
output_dir, record, script = os.path.realpath(sys.argv[1]), sys.argv[2], sys.argv[3]
CHANGES = {"os.rename", "os.remove", "os.rmdir", "shutil.rmtree", "os.link", "os.symlink", "os.chmod", "os.truncate"}
WRITING = os.O_WRONLY | os.O_RDWR | os.O_CREAT | os.O_TRUNC | os.O_APPEND
writes = []

def audit(event, args):
    if (event == "open" and isinstance(args[2], int) and args[2] & WRITING) or event in CHANGES:
        if isinstance(args[0], (str, bytes, os.PathLike)):
            path = os.path.realpath(os.fsdecode(args[0]))
            if path == output_dir or path.startswith(output_dir + os.sep):
                writes.append([event, path])

if os.environ["RANK"] == "1":
    sys.addaudithook(audit)
sys.argv = [script, *sys.argv[4:]]
try:
    runpy.run_path(script, run_name="__main__")
finally:
    if os.environ["RANK"] == "1":
        with open(record, "w") as stream:
            json.dump(writes, stream)
"""


def files_under(folder: Path) -> set[str]:
    return {str(path.relative_to(folder)) for path in folder.rglob("*") if path.is_file()}


def test_torchrun_with_two_processes_trains_as_one_process_on_the_same_batches(demo_files, tmp_path):
    """Two processes (gloo, on the CPU), each with its share of every global batch (accelerate hands the batches
    out in turn), train the same parameters as one process that accumulates the same batches two at a time; dropout
    off, label smoothing on as in the recipe. Process 0 writes the run's files; process 1 writes only its own random
    number state into each checkpoint (`rng_state_1.pth`, which Trainer resumes it from)."""
    same = [
        "--config_overrides", SMALL_MODEL + ",dropout=0,attention_dropout=0,activation_dropout=0",
        "--batch_tokens", "400", "--precision", "fp32",
        "--save_strategy", "steps", "--save_steps", "2",
    ]  # fmt: skip  # flag-value pairs side by side
    one, two = tmp_path / "one", tmp_path / "two"
    train(few_steps(demo_files, one, *same, "--gradient_accumulation_steps", "2"))
    wrapper, record = tmp_path / "record_writes.py", tmp_path / "writes_of_process_1.json"
    wrapper.write_text(RECORD_WRITES_OF_PROCESS_1)
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "torch.distributed.run",
            "--nproc_per_node",
            "2",
            "--master_port",
            "29533",
            str(wrapper),
            str(two),
            str(record),
            str(ROOT / "training" / "train.py"),
            *few_steps(demo_files, two, *same, "--ddp_backend", "gloo"),
        ],  # fmt: skip
        capture_output=True,
        text=True,
        timeout=600,
        env={**os.environ, "OMP_NUM_THREADS": "1"},
        stdin=subprocess.DEVNULL,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    log = result.stdout + result.stderr
    assert "process 0 of 2: 4 optimizer steps" in log and "process 1 of 2: 4 optimizer steps" in log
    for name in ("hub/model.safetensors", "checkpoint-2/model.safetensors", "checkpoint-4/model.safetensors"):
        expected, got = load_file(one / name), load_file(two / name)
        assert got.keys() == expected.keys()
        for key in expected:
            torch.testing.assert_close(got[key], expected[key], atol=1e-5, rtol=1e-4, msg=f"{name}: {key}")
    assert json.loads(record.read_text()) == []
    per_process = {f"checkpoint-{step}/rng_state{rank}.pth" for step in (2, 4) for rank in ("", "_0", "_1")}
    assert files_under(two) - per_process == files_under(one) - per_process
    assert {name for name in files_under(two) if "rng_state" in name} == per_process - {
        f"checkpoint-{step}/rng_state.pth" for step in (2, 4)
    }


def test_the_demo_model_learns_held_out_combinations(trained_demo_model, demo_files):
    """A smaller version of `make demo`: held-out exact match far above chance (which is about 0)."""
    result = run_script(
        "evaluate_model.py",
        "--model",
        str(trained_demo_model),
        "--source_file",
        str(demo_files / "test.en"),
        "--reference_file",
        str(demo_files / "test.ja"),
        "--target_lang",
        "ja",
        "--num_beams",
        "1",
        "--batch_size",
        "64",
        "--min_exact_match",
        "40",
    )
    scores = json.loads(result.stdout.strip().splitlines()[-1])
    assert result.returncode == 0, scores
    assert scores["exact_match"] >= 40 and scores["bleu"] > 50


def test_marian_of_the_same_shape_trains_with_the_same_script(demo_files, tmp_path):
    config = load_shape("tiny", vocab_size=600)
    marian = marian_of_the_same_shape(config)
    ours = TinyTransformerForConditionalGeneration(config)
    trainable = sum(p.numel() for p in marian.parameters() if p.requires_grad)
    assert trainable == ours.num_parameters()  # the same shape; Marian also stores its sinusoids as weights
    out = tmp_path / "marian"
    train(few_steps(demo_files, out, "--architecture", "marian"))
    assert json.loads((out / "hub" / "config.json").read_text())["model_type"] == "marian"


def test_the_model_card_states_the_recipe_that_ran(demo_files, tmp_path):
    """Label smoothing, batches by tokens, steps, averaging, precision: each line of the card from the run's flags."""
    out = tmp_path / "run"
    flags = [
        "--batch_tokens", "600", "--label_smoothing_factor", "0.2", "--max_steps", "6", "--save_strategy", "steps",
        "--save_steps", "2", "--average_checkpoints", "3", "--learning_rate", "0.0015",
        "--gradient_accumulation_steps", "2",
    ]  # fmt: skip  # flag-value pairs side by side
    result = run_script(
        "train.py", *few_steps(demo_files, out, *flags), cpuinfo=fake_cpuinfo(tmp_path, AVX2), timeout=300
    )
    assert result.returncode == 0, result.stderr[-3000:]
    card = (out / "hub" / "README.md").read_text()
    metrics = json.loads((out / "metrics.json").read_text())
    lines = dict(line[2:].split(": ", 1) for line in card.splitlines() if line.startswith("- ") and ": " in line)
    assert lines["Steps"].startswith("6 in ")
    assert lines["Batches"].startswith("sentence pairs of similar length, at most 600 source + target tokens a batch")
    assert "x 2 accumulation" in lines["Batches"]
    assert lines["Label smoothing"].startswith("0.2 (in the training loss")
    assert "peak learning rate 0.0015, inverse_sqrt schedule, 2 warmup steps" in lines["Optimizer"]
    assert lines["Checkpoint averaging"] == "the last 3 checkpoints (every 2 steps) averaged"
    no_bf16 = "the CPU has no bfloat16 instructions (no avx512_bf16 or amx_bf16); bf16 would be emulated and slower"
    assert lines["Precision"] == f"fp32: {no_bf16}; sdpa attention"
    assert (metrics["precision"], metrics["attention"]) == ("fp32", "sdpa")
    config = json.loads((out / "hub" / "config.json").read_text())
    assert "label_smoothing" not in config  # a training setting, never the model's
    generation = json.loads((out / "hub" / "generation_config.json").read_text())
    assert (generation["source_lang"], generation["target_lang"]) == ("en", "ja")


def test_a_time_budget_fixes_the_steps_and_the_same_run_repeats_with_max_steps(demo_files, tmp_path):
    """The run measures its speed, fixes max_steps to end within the budget (whole checkpoint intervals), and records
    the number; --max_steps N repeats it exactly."""
    budget = [
        "--max_steps",
        "-1",
        "--time_budget_minutes",
        "0.5",
        "--warmup_steps",
        "400",
        "--save_strategy",
        "steps",
        "--save_steps",
        "5",
        "--average_checkpoints",
        "2",
        "--save_total_limit",
        "2",
    ]
    start = time.monotonic()
    train(few_steps(demo_files, tmp_path / "budget", *budget))
    assert time.monotonic() - start < 40
    metrics = json.loads((tmp_path / "budget" / "metrics.json").read_text())
    steps = metrics["train_steps"]
    assert steps % 5 == 0 and steps >= 10 and metrics["time_budget_minutes"] == 0.5 and metrics["seconds_per_step"] > 0
    card = (tmp_path / "budget" / "hub" / "README.md").read_text()
    mode = mode_flags(metrics)
    assert f"(repeat with --max_steps {steps} {' '.join(mode)})" in card
    repeat = [flag if flag != "-1" else str(steps) for flag in budget] + mode
    train(few_steps(demo_files, tmp_path / "repeat", *repeat))
    first, second = (load_file(tmp_path / run / "hub" / "model.safetensors") for run in ("budget", "repeat"))
    for name in first:
        torch.testing.assert_close(second[name], first[name], msg=name)


# Progress output: a bar at a terminal, lines in a log


def progress_flags(demo_files, output_dir) -> list[str]:
    """train.py's flags for 8 steps of the small model, a logging line every 4."""
    flags = few_steps(demo_files, output_dir, "--max_steps", "8", "--logging_steps", "4")
    at = flags.index("--disable_tqdm")
    del flags[at : at + 2]  # the flag and its value: train.py decides by where its output goes
    return flags


def test_training_at_a_terminal_shows_a_progress_bar_with_elapsed_time_and_eta(demo_files, tmp_path):
    output = run_in_terminal("train.py", *progress_flags(demo_files, tmp_path / "run"))
    bars = [line for line in output.split("\r") if "/8 [" in line]
    assert bars and any("<" in bar and ("it/s]" in bar or "s/it]" in bar) for bar in bars), output[-2000:]


def test_training_into_a_log_file_writes_progress_lines_not_bars(demo_files, tmp_path):
    result = run_script("train.py", *progress_flags(demo_files, tmp_path / "run"), timeout=300)  # into files
    text = result.stdout + result.stderr
    assert result.returncode == 0, text[-3000:]
    assert "\r" not in text
    assert "step 4/8 (50%)" in text and "elapsed, about" in text and "left, loss" in text


# Bad arguments and files: one line each, before any work


def train_args(root) -> list[str]:
    """The few-step flags, each flag once (a case replaces one), with 2 steps."""
    arguments = few_steps(root / "data", root / "outputs" / "new_run")
    arguments[arguments.index("--max_steps") + 1] = "2"
    return arguments


TRAIN_CASES = {
    "max_steps 0": (["--max_steps", "0"], "--max_steps must be positive"),
    "zero epochs": (["--max_steps", "-1", "--num_train_epochs", "0"], "--num_train_epochs must be positive"),
    "batch size 0": (["--per_device_train_batch_size", "0"], "--per_device_train_batch_size must be at least 1"),
    "eval batch size 0": (["--per_device_eval_batch_size", "0"], "--per_device_eval_batch_size must be at least 1"),
    "accumulation 0": (["--gradient_accumulation_steps", "0"], "--gradient_accumulation_steps must be at least 1"),
    "beams 0": (["--generation_num_beams", "0"], "--generation_num_beams must be at least 1"),
    "source length 0": (["--max_source_length", "0"], "--max_source_length must be at least 1"),
    "target longer than the model": (
        ["--max_target_length", "100"],
        "--max_target_length 100 is longer than the model can take (64",
    ),
    "generation longer than the model": (
        ["--generation_max_length", "128"],
        "--generation_max_length 128 is longer than the model can take (65",
    ),
    "vocabulary too small": (["--vocab_size", "10"], "--vocab_size must be at least 261"),
    "negative learning rate": (["--learning_rate", "-1"], "--learning_rate must be a positive number"),
    "misspelled override": (
        ["--config_overrides", "d_modle=32"],
        "--config_overrides d_modle=32: key d_modle isn't in the original config dict",
    ),
    "override without value": (["--config_overrides", "d_model"], "write key=value pairs separated by commas"),
    "override of the wrong type": (["--config_overrides", "dropout=high"], "could not convert string to float: 'high'"),
    "override out of range": (["--config_overrides", "dropout=1.5"], "field 'dropout'"),
    "override that breaks the config": (
        ["--config_overrides", "encoder_attention_heads=3"],
        "divisible by encoder_attention_heads",
    ),
    "unknown flag": (["--learnin_rate", "0.1"], "--learnin_rate"),
    "not a number": (["--learning_rate", "fast"], "invalid float value: 'fast'"),
    "unknown shape": (["--shape", "huge"], "Unknown shape 'huge'"),
    "one language": (["--target_lang", "en"], "--source_lang and --target_lang are both en"),
    "missing file": (
        ["--train_source_file", "/nonexistent/train.en"],
        "--train_source_file /nonexistent/train.en does not exist",
    ),
    "a folder for a file": (["--train_source_file", "{root}/data"], "is not a file"),
    "not UTF-8": (
        ["--train_source_file", "{root}/data/latin1.txt", "--train_target_file", "{root}/data/latin1.txt"],
        "is not UTF-8 text (line 1)",
    ),
    "empty file": (["--train_source_file", "{root}/data/empty.txt"], "is empty"),
    "uneven files": (["--train_source_file", "{root}/data/three.txt"], "has 3 lines but"),
    "JSON line not JSON": (
        ["--train_source_file", None, "--train_target_file", None, "--train_file", "{root}/data/not_json.jsonl"],
        "--train_file {root}/data/not_json.jsonl cannot be read (JSON parse error",
    ),
    "JSON line not an object": (
        ["--train_source_file", None, "--train_target_file", None, "--train_file", "{root}/data/array.jsonl"],
        "--train_file {root}/data/array.jsonl: the train split has no 'translation' column",
    ),
    "JSON line without the target": (
        ["--train_source_file", None, "--train_target_file", None, "--train_file", "{root}/data/no_ja.jsonl"],
        '--train_file {root}/data/no_ja.jsonl: a record is not {{"translation": {{"en": "...", "ja": "..."}}}}',
    ),
    "output_dir is a file": (["--output_dir", "{root}/a_file"], "--output_dir {root}/a_file"),
    "output_dir with a checkpoint": (
        ["--output_dir", "{root}/run"],
        "--output_dir {root}/run already holds a model or checkpoints; pass --resume_from_checkpoint true",
    ),
    "two data sources": (["--train_file", "{root}/data/no_ja.jsonl"], "pass one source of train data, not"),
    "the model fine-tuned as its own output": (
        ["--shape", None, "--model_name_or_path", "{root}/hub", "--output_dir", "{root}/hub"],
        "--output_dir {root}/hub is also an input ({root}/hub) and would be overwritten",
    ),
    "the folder holding the model fine-tuned": (
        [
            "--shape",
            None,
            "--model_name_or_path",
            "{root}/hub",
            "--output_dir",
            "{root}",
            "--overwrite_output_dir",
            "true",
        ],
        "--output_dir {root} holds the input {root}/hub, which the save would replace",
    ),
    "resume and overwrite": (["--resume_from_checkpoint", "true", "--overwrite_output_dir", "true"], "not both"),
    "resume without a checkpoint": (["--resume_from_checkpoint", "true"], "no complete checkpoint in"),
    "resume from an incomplete checkpoint": (
        ["--resume_from_checkpoint", "{root}/data"],
        "is not a complete checkpoint",
    ),
    "model folder missing": (
        ["--shape", None, "--model_name_or_path", "{root}/nothing/here"],
        "--model_name_or_path {root}/nothing/here does not exist",
    ),
    "code of another model": (
        ["--shape", None, "--model_name_or_path", "{root}/foreign"],
        "pass --trust_remote_code to run it",
    ),
    "a recipe flag that does not exist": (
        ["--time_budget_minutes", "-5"],
        "--time_budget_minutes must be a positive number",
    ),
    "budget with a warmup fraction": (
        ["--max_steps", "-1", "--time_budget_minutes", "5", "--warmup_steps", "0.1"],
        "needs --warmup_steps in steps",
    ),
    "precision unknown": (["--precision", "fp8"], "argument --precision: invalid choice: 'fp8'"),
    "learning rate not a number": (["--learning_rate", "nan"], "--learning_rate must be a positive number, got nan"),
    "averaging without checkpoints": (
        ["--max_steps", "6", "--average_checkpoints", "3", "--save_strategy", "no"],
        "--average_checkpoints needs --save_strategy steps",
    ),
    "averaging steps not a multiple of the saves": (
        ["--average_checkpoints", "3", "--save_strategy", "steps", "--save_steps", "4", "--max_steps", "10"],
        "must be a multiple of --save_steps",
    ),
    "averaging more checkpoints than kept": (
        [
            "--max_steps",
            "6",
            "--average_checkpoints",
            "3",
            "--save_strategy",
            "steps",
            "--save_steps",
            "2",
            "--save_total_limit",
            "2",
        ],
        "needs --save_total_limit 3 or more",
    ),  # fmt: skip
    "batch tokens 1": (["--max_steps", "6", "--batch_tokens", "1"], "--batch_tokens must be at least 2"),
}


@pytest.mark.parametrize("case", TRAIN_CASES)
def test_bad_arguments_are_one_line_before_any_work(workspace, case):
    changes, message = TRAIN_CASES[case]
    assert_refused_before_any_work(
        workspace, "train.py", apply_changes(train_args(workspace), changes, workspace), message
    )


@pytest.mark.parametrize(
    "flags_file, message",
    [
        ("nothing.json", "recipe {root}/data/nothing.json does not exist"),
        ("flags_array.json", "must hold a JSON object"),
        ("flags_broken.json", "is not valid JSON (line 1"),
        (
            "flags_empty.json",
            'flags_empty.json is empty; pass a file with a JSON object of flags ({{"flag": value, ...}})',
        ),
        ("unknown_flag.json", "learnin_rate is not a flag of train.py"),
        ("flags_list.json", "learning_rate [0.1, 0.2] is not a value of --learning_rate (one value expected)"),
    ],
)
def test_a_bad_flags_file_is_one_line_before_any_work(workspace, flags_file, message):
    assert_refused_before_any_work(workspace, "train.py", ["{root}/data/" + flags_file], message)


def test_a_save_that_fails_before_metrics_json_leaves_the_earlier_metrics(tmp_path, monkeypatch):
    """The hub folder is saved first and metrics.json after: a save that ends before metrics.json (a kill, a full
    disk) never leaves new metrics beside the earlier model."""
    from hf_tiny_transformer.trainer import record

    (tmp_path / "metrics.json").write_text('{"bleu": 1.0}\n')

    def killed(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(record, "save_hub", killed)
    arguments = type("Arguments", (), {"output_dir": str(tmp_path)})()
    with pytest.raises(KeyboardInterrupt):
        record.save_run(None, None, None, None, arguments, {"bleu": 2.0})
    assert (tmp_path / "metrics.json").read_text() == '{"bleu": 1.0}\n'
