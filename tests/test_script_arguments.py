"""Every command's and training script's bad arguments and files: one line on stderr that names the problem and the
fix, exit code 2, no traceback, before any long work, and no file changed. Each case runs the command (`tiny-transformer
...`) or the script (`training/...py`) in a child process."""

import json
import shlex
import shutil

import pytest
import torch

from conftest import ROOT, assert_one_line_error, few_steps, folder_digest, run_tool, tiny_model
from hf_tiny_transformer import model_card, save_for_hub
from hf_tiny_transformer.commands import COMMANDS
from hf_tiny_transformer.data.demo_corpus import make_demo_corpus


@pytest.fixture(scope="module")
def workspace(tmp_path_factory, tokenizer):
    """data/ (demo text, broken files), hub/ (a saved model, max_position_embeddings 64), foreign/ (a folder whose
    code would leave a marker file if it ran), pickled/ (a model folder with pickles), run/ (an output folder
    holding a checkpoint), a_file, outputs/."""
    root = tmp_path_factory.mktemp("workspace")
    data = root / "data"
    data.mkdir()
    pairs = make_demo_corpus(seed=0)["train"][:40]
    (data / "train.en").write_text("".join(p.english + "\n" for p in pairs), encoding="utf-8")
    (data / "train.ja").write_text("".join(p.japanese + "\n" for p in pairs), encoding="utf-8")
    (data / "three.txt").write_text("a\nb\nc\n")
    (data / "empty.txt").write_text("\n \n")
    (data / "latin1.txt").write_bytes("caf\xe9\n".encode("latin-1"))
    (data / "not_json.jsonl").write_text('{"translation": {"en": "a", "ja": "b"}}\nnot json\n')
    (data / "array.jsonl").write_text("[1, 2]\n")
    (data / "no_ja.jsonl").write_text('{"translation": {"en": "a"}}\n')
    (data / "flags_array.json").write_text("[1, 2]")
    (data / "flags_empty.json").write_text("\n")
    (data / "flags_broken.json").write_text("{ not json")
    (data / "unknown_flag.json").write_text('{"learnin_rate": 0.1}')
    model = tiny_model(vocab_size=len(tokenizer))
    card = model_card(model, source_lang="en", target_lang="ja", training_data="test sentences")
    save_for_hub(model, tokenizer, root / "hub", card)
    foreign = root / "foreign"
    shutil.copytree(root / "hub", foreign)
    config = json.loads((foreign / "config.json").read_text())
    config["model_type"] = "somebody_elses_model"
    config["auto_map"] = {
        "AutoConfig": "configuration_elsewhere.Config",
        "AutoModelForSeq2SeqLM": "modeling_elsewhere.Model",
    }
    (foreign / "config.json").write_text(json.dumps(config))
    marker = root / "code_ran"
    for name in ("configuration_elsewhere.py", "modeling_elsewhere.py"):
        (foreign / name).write_text(f"open({str(marker)!r}, 'w').write('ran')\n")
    pickled = root / "pickled"  # a training output: a model, and pickles beside it
    shutil.copytree(root / "hub", pickled)
    (pickled / "checkpoint-8").mkdir()
    (pickled / "checkpoint-8" / "optimizer.pt").write_bytes(b"a pickle")
    (pickled / "training_args.bin").write_bytes(b"a pickle holding --hub_token")
    (root / "run" / "checkpoint-4").mkdir(parents=True)
    (root / "run" / "checkpoint-4" / "trainer_state.json").write_text('{"global_step": 4}')
    cut = root / "cut"  # a Hub folder whose weights file was cut short
    shutil.copytree(root / "hub", cut)
    (cut / "model.safetensors").write_bytes((cut / "model.safetensors").read_bytes()[:1000])
    (root / "ct2").mkdir()  # what export_ctranslate2.py writes
    for name in ("model.bin", "config.json", "tokenizer.json"):
        (root / "ct2" / name).write_bytes(b"{}")
    (root / "a_file").write_text("a file, not a folder\n")
    (root / "outputs").mkdir()
    return root


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
    "generation longer than the model": (["--generation_max_length", "128"], "--generation_max_length 128 is longer"),
    "vocabulary too small": (["--vocab_size", "10"], "--vocab_size must be at least 261"),
    "negative learning rate": (["--learning_rate", "-1"], "--learning_rate must be a positive number"),
    "misspelled override": (["--config_overrides", "d_modle=32"], "key d_modle isn't in the original config dict"),
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
}


def apply_changes(arguments: list[str], changes: list[str | None], root) -> list[str]:
    """Replace the value of each flag in `changes` (None removes the flag), or append it."""
    arguments = list(arguments)
    for flag, value in zip(changes[::2], changes[1::2]):
        value = value.format(root=root) if value is not None else None
        if flag in arguments:
            index = arguments.index(flag)
            del arguments[index : index + 2]
            if value is None:
                continue
            arguments[index:index] = [flag, value]
        elif value is not None:
            arguments += [flag, value]
    return arguments


def check_case(workspace, script: str, arguments: list[str], message: str):
    before = folder_digest(workspace)
    result = run_tool(script, *arguments)
    assert_one_line_error(result, message.format(root=workspace))
    assert folder_digest(workspace) == before, "a file was changed"
    assert not (workspace / "code_ran").exists(), "a folder's code ran without --trust_remote_code"


@pytest.mark.parametrize("case", TRAIN_CASES)
def test_train_py(workspace, case):
    changes, message = TRAIN_CASES[case]
    check_case(workspace, "train.py", apply_changes(train_args(workspace), changes, workspace), message)


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
    ],
)
def test_train_py_flags_file(workspace, flags_file, message):
    check_case(workspace, "train.py", [str(workspace / "data" / flags_file)], message)


def evaluate_args(root) -> list[str]:
    return [
        "--model",
        str(root / "hub"),
        "--source_file",
        str(root / "data" / "train.en"),
        "--reference_file",
        str(root / "data" / "train.ja"),
        "--target_lang",
        "ja",
        "--output_file",
        str(root / "outputs" / "hypotheses.txt"),
    ]


EVALUATE_CASES = {
    "no model": (["--model", None], "the following arguments are required: --model"),
    "no data": (["--source_file", None], "pass --corpus_dir, or --source_file and --reference_file"),
    "beams 0": (["--num_beams", "0"], "--num_beams must be a whole number of at least 1, got 0"),
    "batch size 0": (["--batch_size", "0"], "--batch_size must be a whole number of at least 1"),
    "no new tokens": (["--max_new_tokens", "0"], "--max_new_tokens must be a whole number of at least 1"),
    "length penalty not a number": (["--length_penalty", "nan"], "--length_penalty must be a finite number, got nan"),
    "exact match over 100": (["--min_exact_match", "150"], "--min_exact_match is a percentage"),
    "missing source": (
        ["--source_file", "{root}/data/nothing.en"],
        "--source_file {root}/data/nothing.en does not exist",
    ),
    "not UTF-8": (["--source_file", "{root}/data/latin1.txt"], "is not UTF-8 text"),
    "empty reference": (
        ["--reference_file", "{root}/data/empty.txt"],
        "--reference_file {root}/data/empty.txt is empty",
    ),
    "uneven": (
        ["--reference_file", "{root}/data/three.txt"],
        "--source_file {root}/data/train.en has 40 lines but --reference_file {root}/data/three.txt has 3",
    ),
    "output is a folder": (["--output_file", "{root}/outputs"], "--output_file {root}/outputs is a folder"),
    "output in a missing folder": (
        ["--output_file", "{root}/nothing/out.txt"],
        "the folder {root}/nothing does not exist",
    ),
    "output over the source": (["--output_file", "{root}/data/train.en"], "is also an input ({root}/data/train.en)"),
    "output over the reference": (["--output_file", "{root}/data/train.ja"], "is also an input ({root}/data/train.ja)"),
    "output inside the model folder": (
        ["--output_file", "{root}/hub/translations.txt"],
        "lies inside the input folder {root}/hub",
    ),
    "output over a model file": (
        ["--output_file", "{root}/hub/config.json"],
        "lies inside the input folder {root}/hub",
    ),
    "missing model": (["--model", "{root}/nothing/model"], "--model {root}/nothing/model does not exist"),
    "not a model": (["--model", "{root}/data"], "--model {root}/data has no config.json"),
    "code of another model": (["--model", "{root}/foreign"], "pass --trust_remote_code to run it"),
    "unknown split": (["--corpus_dir", "{root}/data", "--split", "valid"], "argument --split: invalid choice"),
}


@pytest.mark.parametrize("case", EVALUATE_CASES)
def test_evaluate_model_py(workspace, case):
    changes, message = EVALUATE_CASES[case]
    check_case(workspace, "evaluate_model.py", apply_changes(evaluate_args(workspace), changes, workspace), message)


VISUALIZE_CASES = {
    "empty sentence": (["--source", " "], "--source is empty"),
    "longer than the model": (
        ["--source", "tea " * 70],
        "--source has 71 tokens but the model takes at most 64; pass one sentence",
    ),
    "output inside the model": (["--output_dir", "{root}/hub/pictures"], "lies inside the input folder {root}/hub"),
    "output is a file (the old spelling)": (["--out", "{root}/a_file"], "--output_dir {root}/a_file is a file"),
    "output is a run": (
        ["--output_dir", "{root}/run"],
        "--output_dir {root}/run already holds a model or checkpoints; choose another --output_dir for the pictures",
    ),
    "missing model": (["--model", "{root}/nothing"], "--model {root}/nothing does not exist"),
    "code of another model": (["--model", "{root}/foreign"], "pass --trust_remote_code to run it"),
}


@pytest.mark.parametrize("case", VISUALIZE_CASES)
def test_visualize_py(workspace, case):
    arguments = [
        "--model",
        str(workspace / "hub"),
        "--source",
        "I like tea.",
        "--output_dir",
        str(workspace / "outputs" / "pictures"),
    ]
    changes, message = VISUALIZE_CASES[case]
    check_case(workspace, "visualize", apply_changes(arguments, changes, workspace), message)


PUSH_CASES = {
    "missing folder": (["--folder", "{root}/nothing"], "--folder {root}/nothing is not a folder"),
    "not a model folder": (["--folder", "{root}/data"], "lacks config.json"),
    "bad repository id": (["--repo_id", "me/two words"], "--repo_id 'me/two words' is not a Hub repository id"),
    "pickles in the tree": (
        ["--folder", "{root}/pickled"],
        "holds pickled files (checkpoint-8/optimizer.pt, training_args.bin)",
    ),
    "damaged weights": (["--folder", "{root}/cut"], "--folder {root}/cut: model.safetensors cannot be loaded"),
    "a CTranslate2 export": (
        ["--folder", "{root}/ct2"],
        "--folder {root}/ct2 is a CTranslate2 export (model.bin); push the model folder it was exported from",
    ),
}


@pytest.mark.parametrize("case", PUSH_CASES)
def test_push_to_hub_py(workspace, case):
    changes, message = PUSH_CASES[case]
    arguments = apply_changes(
        ["--folder", str(workspace / "hub"), "--repo_id", "me/tiny", "--dry_run"], changes, workspace
    )
    check_case(workspace, "push-to-hub", arguments, message)


@pytest.mark.parametrize(
    "arguments, message",
    [
        (["--output_dir", "{root}/a_file"], "--output_dir {root}/a_file"),
        (["--output_dir", "{root}/a_file/data"], "{root}/a_file is a file, not a folder"),
        (["--output_dir", "{root}/outputs/demo", "--seed", "one"], "argument --seed: invalid int value: 'one'"),
    ],
)
def test_make_demo_data_py(workspace, arguments, message):
    check_case(workspace, "make_demo_data.py", [a.format(root=workspace) for a in arguments], message)


TRANSLATE_CASES = {
    "no model": (["--model", None], "the following arguments are required: --model"),
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
def test_translate_py(workspace, case):
    changes, message = TRANSLATE_CASES[case]
    check_case(
        workspace,
        "translate",
        apply_changes(["--model", str(workspace / "hub"), "I like tea."], changes, workspace),
        message,
    )


# Each case: the command line, then (indented) the one-line error it must give.
OTHER_SCRIPT_CASES = """
tune_decoding.py --model {root}/hub --source_file {root}/data/train.en
    pass --corpus_dir, or --source_file and --reference_file
tune_decoding.py --model {root}/hub --source_file {root}/data/train.en --reference_file {root}/data/three.txt
    --source_file {root}/data/train.en has 40 lines but --reference_file {root}/data/three.txt has 3
tune_decoding.py --model {root}/hub --corpus_dir {root}/data --num_beams 0
    --num_beams must be a whole number of at least 1
tune_decoding.py --model {root}/hub --corpus_dir {root}/data --length_penalty nan
    --length_penalty must be a finite number
average_checkpoints.py --output_dir {root}/outputs/averaged
    pass --run_dir (with --last) or --checkpoints
average_checkpoints.py --run_dir {root}/run --last 1 --output_dir {root}/outputs/averaged
    --last must be at least 2
average_checkpoints.py --checkpoints {root}/hub {root}/pickled --output_dir {root}/a_file
    --output_dir {root}/a_file is a file
average_checkpoints.py --checkpoints {root}/hub {root}/pickled --output_dir {root}/hub
    --output_dir {root}/hub is also an input
average_checkpoints.py --checkpoints {root}/hub {root}/pickled --output_dir {root}/pickled/checkpoint-9
    lies inside the input folder {root}/pickled
average_checkpoints.py --checkpoints {root}/hub {root}/pickled --output_dir {root}/foreign
    --output_dir {root}/foreign already holds a model or checkpoints; pass --overwrite
average_checkpoints.py --checkpoints {root}/data {root}/hub --output_dir {root}/outputs/averaged
    --checkpoints: {root}/data holds no model.safetensors
average_checkpoints.py --checkpoints {root}/hub {root}/hub/ --output_dir {root}/outputs/averaged
    --checkpoints: {root}/hub is listed twice; pass each checkpoint once
export-ctranslate2 --model {root}/hub --output_dir {root}/data
    --output_dir {root}/data is not empty
export-ctranslate2 --model {root}/hub --output_dir {root}/hub/ct2 --overwrite
    lies inside the input folder {root}/hub
export-ctranslate2 --model {root}/hub --output_dir {root}/outputs/ct2 --quantization int4
    argument --quantization: invalid choice: 'int4'
export-ctranslate2 --model {root}/nothing --output_dir {root}/outputs/ct2
    --model {root}/nothing does not exist
"""


def script_cases(table: str) -> list[tuple[str, list[str], str]]:
    """(script, arguments, message) for each pair of lines of `table`."""
    rows = table.strip("\n").split("\n")
    return [(*(lambda words: (words[0], words[1:]))(shlex.split(command)), message.strip())
            for command, message in zip(rows[::2], rows[1::2], strict=True)]  # fmt: skip


@pytest.mark.parametrize("script, arguments, message", script_cases(OTHER_SCRIPT_CASES))
def test_the_other_scripts(workspace, script, arguments, message):
    check_case(workspace, script, [argument.format(root=workspace) for argument in arguments], message)


TOOLS = [*sorted(path.name for path in (ROOT / "training").glob("*.py")), *COMMANDS]


@pytest.mark.parametrize("tool", TOOLS)
def test_every_command_and_script_prints_its_help(tool):
    result = run_tool(tool, "--help")
    prog = f"tiny-transformer {tool}" if tool in COMMANDS else tool
    assert result.returncode == 0 and result.stdout.startswith(f"usage: {prog}"), result.stderr[-2000:]
