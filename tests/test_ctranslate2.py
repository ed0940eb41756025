"""The CTranslate2 engine (hf_tiny_transformer/serving/ctranslate2.py, `tiny-transformer export-ctranslate2`): the
export gives the tokens of transformers in float32, int8 close to it; the translator has the pipeline's shape; the
export command's checks; a damaged export, or one of another kind, is one line naming the file and the fix."""

import json
import shutil
import subprocess
import sys

import pytest
import torch
from transformers import AutoTokenizer

from bad_arguments import assert_refused_before_any_work, command_lines, cut, folder_digest, removed
from builds import copy_folder, load_demo_model
from conftest import tiny_config
from hf_tiny_transformer import hardware
from hf_tiny_transformer.marian import marian_of_the_same_shape
from hf_tiny_transformer.serving import ctranslate2 as serving_ctranslate2
from hf_tiny_transformer.serving.ctranslate2 import CTranslate2Translator, export_ctranslate2
from running import AVX2, FAKED_CPU, ROOT, assert_one_line_error, fake_cpuinfo, run_command, run_script


@pytest.fixture(scope="module")
def exports(trained_demo_model, demo_ct2):
    """The trained demo model, its tokenizer, and its exports with float32 and int8 weights."""
    return (*load_demo_model(trained_demo_model), demo_ct2)


def test_the_float32_export_gives_the_tokens_of_generate(exports, demo_files):
    model, tokenizer, paths = exports
    # float32 arithmetic, as generate(): the default ("auto") would compute in int8 on an x86 CPU with AVX2
    translator = CTranslate2Translator(paths["float32"], compute_type="float32", intra_threads=1)
    sources = (demo_files / "test.en").read_text(encoding="utf-8").splitlines()
    for beams in (1, 4):
        for source in sources:
            encoded = tokenizer(source, return_tensors="pt")
            expected = model.generate(**encoded, num_beams=beams, max_new_tokens=40)[0, 1:].tolist()
            expected = [token for token in expected if token not in (0, 2)]  # without padding and </s>
            result = translator.translator.translate_batch(
                [tokenizer.convert_ids_to_tokens(encoded["input_ids"][0])], beam_size=beams, max_decoding_length=40
            )
            assert tokenizer.convert_tokens_to_ids(result[0].hypotheses[0]) == expected, (beams, source)


def test_a_batch_shared_between_translators_gives_the_translations_of_one(exports, demo_files, monkeypatch):
    """On the CPU a translator per core (inter_threads), each with its share of a batch: the translations of one
    translator on the whole batch, in the same order."""
    _, _, paths = exports
    monkeypatch.setattr(serving_ctranslate2, "cpu_cores", lambda: 3)  # shares of unequal size too
    sources = (demo_files / "test.en").read_text(encoding="utf-8").splitlines()[:40]
    shared = CTranslate2Translator(paths["float32"], compute_type="float32")
    assert shared.inter_threads == 3
    one = CTranslate2Translator(paths["float32"], compute_type="float32", inter_threads=1)
    assert shared.translate(sources, batch_size=32) == one.translate(sources, batch_size=32)


def test_batches_queued_in_the_background_give_each_sentences_own_translation(exports, demo_files):
    """translate_batch works in the background, several batches queued at once: each sentence gets the translation
    it gets alone, in the given order."""
    _, _, paths = exports
    sources = (demo_files / "test.en").read_text(encoding="utf-8").splitlines()[:40]
    translator = CTranslate2Translator(paths["float32"], compute_type="float32")
    assert translator.in_flight > 1
    alone = [translator.translate([source], num_beams=1)[0] for source in sources]
    assert translator.translate(sources, batch_size=3, num_beams=1) == alone


def test_loading_a_ctranslate2_translator_leaves_torchs_threads_as_they_were(exports):
    _, _, paths = exports
    before = torch.get_num_threads()
    try:
        torch.set_num_threads(2)
        CTranslate2Translator(paths["float32"], intra_threads=1)  # CTranslate2 sets the OpenMP threads to 1
        assert torch.get_num_threads() == 2
    finally:
        torch.set_num_threads(before)


def test_int8_is_within_two_points_of_float32_in_exact_matches(exports, demo_files):
    _, _, paths = exports
    sources = (demo_files / "test.en").read_text(encoding="utf-8").splitlines()
    references = (demo_files / "test.ja").read_text(encoding="utf-8").splitlines()
    rates = {}
    for quantization, folder in paths.items():
        translator = CTranslate2Translator(folder, compute_type="default")  # each computed as it was exported
        translations = [item["translation_text"] for item in translator(sources, num_beams=1)]
        rates[quantization] = 100 * sum(t == r for t, r in zip(translations, references)) / len(references)
    assert rates["float32"] > 50 and abs(rates["int8"] - rates["float32"]) <= 2, rates
    assert json.loads((paths["int8"] / "hf_tiny_transformer.json").read_text())["quantization"] == "int8"


def test_the_translator_has_the_pipelines_shape(exports, monkeypatch, tmp_path):
    _, _, paths = exports
    monkeypatch.setattr(hardware, "CPUINFO", str(fake_cpuinfo(tmp_path, AVX2)))
    assert CTranslate2Translator(paths["float32"]).compute_type == "int8"  # "auto" on an AVX2 CPU
    monkeypatch.setattr(hardware, "CPUINFO", str(fake_cpuinfo(tmp_path, frozenset({"sse2"}))))
    translate = CTranslate2Translator(paths["float32"])
    assert translate.compute_type == "float32"  # "auto" on a CPU without AVX2
    single = translate("I like cake.")
    assert isinstance(single, list) and set(single[0]) == {"translation_text"} and single[0]["translation_text"]
    many = translate(["I like cake.", "Tom eats bread."], num_beams=2, batch_size=1)
    assert len(many) == 2 and many[0] == single[0]
    assert translate(["", "I like cake."]) == [{"translation_text": ""}, single[0]]
    with pytest.raises(TypeError, match="text must be a string or a list of strings"):
        translate(42)
    for setting, value in (
        ("num_beams", 0),
        ("batch_size", 0),
        ("max_new_tokens", 1.5),
        ("length_penalty", float("nan")),
    ):
        with pytest.raises(ValueError, match=setting):
            translate("I like cake.", **{setting: value})


def test_exporting_another_model_is_an_error_and_an_export_replaces_a_folder_whole(exports, tmp_path, monkeypatch):
    model, tokenizer, _ = exports
    with pytest.raises(ValueError, match="exports hf-tiny-transformer models, not MarianMTModel"):
        export_ctranslate2(marian_of_the_same_shape(tiny_config()), tokenizer, tmp_path / "marian")
    assert not (tmp_path / "marian").exists()
    used = tmp_path / "used"
    used.mkdir()
    (used / "notes.txt").write_text("mine\n")
    export_ctranslate2(model, tokenizer, used, quantization="float32")
    export_ctranslate2(model, tokenizer, used, quantization="int8")  # an existing export is replaced
    assert json.loads((used / "hf_tiny_transformer.json").read_text())["quantization"] == "int8"
    assert not (used / "notes.txt").exists()  # the export replaces the whole folder (saving.staged_folder)
    assert CTranslate2Translator(used, compute_type="default")("I like cake.")[0]["translation_text"]
    before = folder_digest(used)

    def failing_convert(spec, output_dir, quantization):
        (output_dir / "model.bin").write_bytes(b"half written")
        raise RuntimeError("disk full")

    monkeypatch.setattr(serving_ctranslate2, "convert", failing_convert)
    with pytest.raises(RuntimeError, match="disk full"):
        export_ctranslate2(model, tokenizer, used, quantization="float32")
    assert folder_digest(used) == before  # all or nothing
    assert sorted(path.name for path in tmp_path.iterdir()) == ["used"]  # no staging folder left behind


def test_the_export_script_refuses_used_folders_and_other_models(trained_demo_model, tmp_path):
    model_before = folder_digest(trained_demo_model)
    ct2 = tmp_path / "ct2"
    result = run_command(
        "export-ctranslate2", "--model", str(trained_demo_model), "--output_dir", str(ct2), "--quantization", "int8"
    )
    assert result.returncode == 0, result.stderr[-2000:]
    assert json.loads((ct2 / "hf_tiny_transformer.json").read_text())["quantization"] == "int8"
    export = folder_digest(ct2)
    assert_one_line_error(
        run_command("export-ctranslate2", "--model", str(trained_demo_model), "--output_dir", str(ct2)),
        f"--output_dir {ct2} already holds a model",
        "pass --overwrite",
    )
    assert folder_digest(ct2) == export
    mine = tmp_path / "mine"
    mine.mkdir()
    (mine / "notes.txt").write_text("mine\n")
    mine_before = folder_digest(mine)
    assert_one_line_error(
        run_command("export-ctranslate2", "--model", str(trained_demo_model), "--output_dir", str(mine)),
        f"--output_dir {mine} holds what this command does not write (notes.txt), which replacing the folder would "
        "delete; move it elsewhere, or choose another folder",
    )
    assert folder_digest(mine) == mine_before
    beside = copy_folder(ct2, tmp_path / "beside")  # an export with a user's files beside it: never deleted
    for name in ("README.md", "my_eval.en", "my_eval.ja"):
        (beside / name).write_text("mine\n")
    assert_one_line_error(
        run_command("export-onnx", "--model", str(trained_demo_model), "--output_dir", str(beside), "--overwrite"),
        f"--output_dir {beside} holds what this command does not write (README.md, my_eval.en, my_eval.ja)",
    )
    assert (beside / "README.md").read_text() == "mine\n"
    # the model folder itself, or a folder inside it: refused even with --overwrite
    for inside, problem in (
        (trained_demo_model, f"is also an input ({trained_demo_model})"),
        (trained_demo_model / "ct2", f"lies inside the input folder {trained_demo_model}"),
    ):
        assert_one_line_error(
            run_command(
                "export-ctranslate2", "--model", str(trained_demo_model), "--output_dir", str(inside), "--overwrite"
            ),
            f"--output_dir {inside} {problem}",
        )
    assert folder_digest(trained_demo_model) == model_before
    result = run_command(
        "export-ctranslate2", "--model", str(trained_demo_model), "--output_dir", str(ct2), "--overwrite"
    )
    assert result.returncode == 0, result.stderr[-2000:]
    assert json.loads((ct2 / "hf_tiny_transformer.json").read_text())["quantization"] == "float32"
    marian = tmp_path / "marian"
    marian_of_the_same_shape(tiny_config(vocab_size=600)).save_pretrained(marian)
    AutoTokenizer.from_pretrained(trained_demo_model).save_pretrained(marian)
    assert_one_line_error(
        run_command("export-ctranslate2", "--model", str(marian), "--output_dir", str(tmp_path / "m")),
        "exports hf-tiny-transformer models, not MarianMTModel",
    )
    assert not (tmp_path / "m").exists()


def test_a_ctranslate2_export_is_named_as_such_with_the_flag_to_use(demo_ct2, tmp_path):
    export = demo_ct2["float32"]
    named = f"--model {export} is a CTranslate2 export, not a model folder"
    assert_one_line_error(
        run_command("translate", "--model", str(export), "I eat cake."), named, "--engine ctranslate2"
    )
    assert_one_line_error(
        run_command("export-ctranslate2", "--model", str(export), "--output_dir", str(tmp_path / "again")), named
    )
    assert not (tmp_path / "again").exists()


def test_evaluation_with_the_engine(exports, trained_demo_model, demo_files, tmp_path):
    _, _, paths = exports
    arguments = [
        "--engine", "ctranslate2", "--model", str(paths["int8"]),
        "--source_file", str(demo_files / "validation.en"), "--reference_file", str(demo_files / "validation.ja"),
        "--target_lang", "ja", "--num_beams", "1", "--device", "cpu",
    ]  # fmt: skip  # flag-value pairs side by side
    # fresh processes, not forks (this one has run CTranslate2's thread pools already), on an AVX2 CPU
    evaluate = [
        sys.executable,
        "-c",
        FAKED_CPU,
        str(fake_cpuinfo(tmp_path, AVX2)),
        str(ROOT / "training" / "evaluate_model.py"),
    ]
    result = subprocess.run([*evaluate, *arguments], capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr[-3000:]
    scores = json.loads(result.stdout.strip().splitlines()[-1])
    assert scores["sentences"] == 40 and scores["exact_match"] > 50, scores
    assert (scores["engine"], scores["compute_type"]) == ("ctranslate2", "int8")  # auto, on AVX2
    result = subprocess.run(
        [*evaluate, *arguments, "--compute_type", "float32"], capture_output=True, text=True, timeout=300
    )
    assert json.loads(result.stdout.strip().splitlines()[-1])["compute_type"] == "float32", result.stderr[-3000:]
    result = subprocess.run(
        [*evaluate, *arguments, "--compute_type", "int3"], capture_output=True, text=True, timeout=300
    )
    assert_one_line_error(result, f"--engine ctranslate2 --model {paths['int8']}: ", "compute type")
    assert_one_line_error(
        run_script("evaluate_model.py", *arguments[:3], str(trained_demo_model), *arguments[4:]),
        "is not a folder written by export_ctranslate2",
    )


# A damaged export, or one of the other kind: one line naming the file and the fix, before any work

EXPORT_AGAIN = "export the model again with tiny-transformer export-ctranslate2 --overwrite"
SETTINGS = "hf_tiny_transformer.json"


def edited_json(name: str, change):
    def damage(folder):
        path = folder / name
        content = json.loads(path.read_text())
        change(content)
        path.write_text(json.dumps(content))

    return damage


def swap_two_tokens(vocabulary: list[str]):
    vocabulary[5], vocabulary[6] = vocabulary[6], vocabulary[5]


DAMAGED_CTRANSLATE2_EXPORTS = [
    pytest.param(removed("model.bin"), "model.bin is missing", id="weights missing"),
    pytest.param(cut("model.bin"), "model.bin did not load in CTranslate2", id="weights cut"),
    pytest.param(removed("config.json"), "config.json is missing", id="engine config missing"),
    pytest.param(removed("shared_vocabulary.json"), "shared_vocabulary.json is missing", id="vocabulary missing"),
    pytest.param(edited_json("shared_vocabulary.json", swap_two_tokens),
                 "shared_vocabulary.json does not match tokenizer.json: token 5 is", id="another vocabulary"),
    pytest.param(removed("hf_tiny_transformer.json"), "hf_tiny_transformer.json is missing", id="settings missing"),
    pytest.param(lambda folder: (folder / "hf_tiny_transformer.json").write_text("[1, 2"),
                 "hf_tiny_transformer.json is not a JSON object", id="settings not JSON"),
    pytest.param(edited_json(SETTINGS, lambda settings: settings.pop("max_position_embeddings")),
                 "hf_tiny_transformer.json has no max_position_embeddings", id="without max_position_embeddings"),
    pytest.param(edited_json(SETTINGS, lambda settings: settings.update(max_position_embeddings="64")),
                 "hf_tiny_transformer.json's max_position_embeddings must be a positive whole number, not '64'",
                 id="max_position_embeddings not a number"),
    pytest.param(edited_json(SETTINGS, lambda settings: settings.update(hypothesis_bytes=-1)),
                 "hf_tiny_transformer.json's hypothesis_bytes must be a positive whole number, not -1",
                 id="hypothesis size negative"),
    pytest.param(edited_json("shared_vocabulary.json", lambda vocabulary: vocabulary.append("<extra>")),
                 "shared_vocabulary.json does not match tokenizer.json: 601 tokens there, 600 in the tokenizer",
                 id="vocabulary longer"),
    pytest.param(lambda folder: (folder / "shared_vocabulary.json").write_text("{}"),
                 "shared_vocabulary.json is not a list of tokens", id="vocabulary not a list"),
    pytest.param(cut("generation_config.json"), "generation_config.json cannot be loaded", id="generation config cut"),
    pytest.param(removed("tokenizer.json"), "tokenizer.json is missing", id="no tokenizer.json"),
    pytest.param(removed("generation_config.json"), "generation_config.json is missing", id="no generation config"),
]  # fmt: skip


@pytest.mark.parametrize(("damage", "problem"), DAMAGED_CTRANSLATE2_EXPORTS)
def test_a_damaged_ctranslate2_export_is_one_line_naming_the_file_and_the_fix(exports, tmp_path, damage, problem):
    _, _, paths = exports
    folder = shutil.copytree(paths["int8"], tmp_path / "export")
    damage(folder)
    assert_one_line_error(
        run_command("translate", "--engine", "ctranslate2", "--model", str(folder), "I like green tea."),
        f"--engine ctranslate2 --model {folder}: {folder}/{problem}",
        EXPORT_AGAIN,
    )


def test_an_onnx_export_given_to_the_ctranslate2_engine_names_the_engine_to_use(demo_onnx, tmp_path):
    folder = copy_folder(demo_onnx, tmp_path / "onnx")
    problem = (
        f"--engine ctranslate2 --model {folder}: {folder} is an ONNX export, not a CTranslate2 one; translate with it "
        "with the onnx engine (--engine onnx)"
    )
    translate = ("translate", "--engine", "ctranslate2", "--model", str(folder), "I like green tea.")
    assert_one_line_error(run_command(*translate), problem)
    edited_json(SETTINGS, lambda settings: settings.pop("format"))(folder)  # as exports before the format key
    assert_one_line_error(run_command(*translate), problem)


# CTranslate2's import: "install" only where it is not installed


@pytest.fixture
def fake_ctranslate2(tmp_path, monkeypatch):
    """Imports of ctranslate2 find a package whose import runs the code the test writes into the file returned."""
    monkeypatch.syspath_prepend(str(tmp_path))
    for name in [name for name in sys.modules if name.partition(".")[0] == "ctranslate2"]:
        monkeypatch.delitem(sys.modules, name)
    (tmp_path / "ctranslate2").mkdir()
    return tmp_path / "ctranslate2" / "__init__.py"


def test_an_interrupted_import_of_ctranslate2_is_an_interruption_not_a_missing_package(fake_ctranslate2):
    # what a compiled extension raises when Ctrl-C comes while its module initializes (pybind11)
    fake_ctranslate2.write_text("raise ImportError('initialization failed') from KeyboardInterrupt()")
    with pytest.raises(KeyboardInterrupt):
        serving_ctranslate2.ctranslate2()


def test_a_broken_ctranslate2_is_named_with_its_own_error_not_as_missing(fake_ctranslate2):
    fake_ctranslate2.write_text("import a_library_it_needs")
    with pytest.raises(ImportError, match="^importing ctranslate2 failed: No module named 'a_library_it_needs'$"):
        serving_ctranslate2.ctranslate2()


def test_a_missing_ctranslate2_says_how_to_install_it(monkeypatch):
    monkeypatch.setitem(sys.modules, "ctranslate2", None)  # what an import finds for a package not installed
    with pytest.raises(ImportError, match=r"pip install 'hf-tiny-transformer\[serve\]'"):
        serving_ctranslate2.ctranslate2()


# Bad arguments: one line each, before any work

EXPORT_CASES = """
export-ctranslate2 --model {root}/hub --output_dir {root}/data
    --output_dir {root}/data holds what this command does not write
export-ctranslate2 --model {root}/hub --output_dir {root}/hub/ct2 --overwrite
    lies inside the input folder {root}/hub
export-ctranslate2 --model {root}/hub --output_dir {root}/outputs/ct2 --quantization int4
    argument --quantization: invalid choice: 'int4'
export-ctranslate2 --model {root}/nothing --output_dir {root}/outputs/ct2
    --model {root}/nothing does not exist
"""


@pytest.mark.parametrize("command, arguments, message", command_lines(EXPORT_CASES))
def test_bad_arguments_are_one_line_before_any_work(workspace, command, arguments, message):
    assert_refused_before_any_work(workspace, command, arguments, message)
