"""save_pretrained / from_pretrained (the Auto classes, half precision, remote code in a process without the
package) and the library's own errors for bad folders."""

import copy
import importlib
import json
import os
import subprocess
import sys
import textwrap

import pytest
import torch
from safetensors.torch import load_file
from transformers import AutoConfig, AutoModel, AutoModelForSeq2SeqLM, pipeline

import hf_tiny_transformer
from conftest import MODEL_FOLDER_FILES
from hf_tiny_transformer import (
    TinyTransformerConfig,
    TinyTransformerForConditionalGeneration,
    TinyTransformerModel,
    TranslationPipeline,
    model_card,
    save_for_hub,
)
from hf_tiny_transformer.modeling_tiny_transformer import sinusoidal_table
from running import run_without_package

SOURCE = torch.tensor([[5, 6, 7, 8, 2], [9, 10, 2, 0, 0]])


MASK = (SOURCE != 0).long()


DECODER = torch.tensor([[1, 11, 12], [1, 13, 14]])


def test_saved_folder_is_self_contained(model, tmp_path):
    model.save_pretrained(tmp_path)
    files = set(os.listdir(tmp_path))
    assert MODEL_FOLDER_FILES <= files
    assert not any(name.endswith((".bin", ".pt", ".pkl")) for name in files)
    config = json.loads((tmp_path / "config.json").read_text())
    assert config["model_type"] == "tiny_transformer"
    assert config["auto_map"] == {  # the class saved, and the base model the config names for AutoModel
        "AutoConfig": "configuration_tiny_transformer.TinyTransformerConfig",
        "AutoModel": "modeling_tiny_transformer.TinyTransformerModel",
        "AutoModelForSeq2SeqLM": "modeling_tiny_transformer.TinyTransformerForConditionalGeneration",
    }
    generation = json.loads((tmp_path / "generation_config.json").read_text())
    assert generation["decoder_start_token_id"] == 1 and generation["eos_token_id"] == 2


def test_reload_gives_identical_logits_and_the_sinusoidal_table_survives(model, tmp_path):
    model.save_pretrained(tmp_path)
    loaded = TinyTransformerForConditionalGeneration.from_pretrained(tmp_path).eval()
    assert torch.equal(loaded.model.decoder.embed_positions.pe, sinusoidal_table(64, 32))
    assert torch.equal(loaded.model.encoder.embed_positions.pe, sinusoidal_table(64, 32))
    assert loaded.lm_head.weight is loaded.model.encoder.embed_tokens.weight
    expected = model(input_ids=SOURCE, attention_mask=MASK, decoder_input_ids=DECODER).logits
    assert torch.equal(loaded(input_ids=SOURCE, attention_mask=MASK, decoder_input_ids=DECODER).logits, expected)


def test_auto_classes_in_process(model, tmp_path):
    model.save_pretrained(tmp_path)
    assert isinstance(AutoConfig.from_pretrained(tmp_path), TinyTransformerConfig)
    assert type(AutoModel.from_pretrained(tmp_path)) is TinyTransformerModel
    assert type(AutoModelForSeq2SeqLM.from_pretrained(tmp_path)) is TinyTransformerForConditionalGeneration
    assert type(AutoModelForSeq2SeqLM.from_config(model.config)) is TinyTransformerForConditionalGeneration


def test_importing_twice_is_safe():
    importlib.reload(hf_tiny_transformer)
    assert AutoConfig.for_model("tiny_transformer").__class__.__name__ == "TinyTransformerConfig"


def test_device_map_auto_loads_on_cpu(model, tmp_path):
    model.save_pretrained(tmp_path)
    loaded = AutoModelForSeq2SeqLM.from_pretrained(tmp_path, device_map="auto").eval()
    assert loaded.device.type == "cpu"
    expected = model(input_ids=SOURCE, attention_mask=MASK, decoder_input_ids=DECODER).logits
    torch.testing.assert_close(
        loaded(input_ids=SOURCE, attention_mask=MASK, decoder_input_ids=DECODER).logits, expected
    )


REMOTE_SCRIPT = textwrap.dedent(
    """
    import json, sys, torch
    try:
        import hf_tiny_transformer
        sys.exit("hf_tiny_transformer must not be importable here")
    except ImportError:
        pass
    from transformers import AutoConfig, AutoModel, AutoModelForSeq2SeqLM
    folder = sys.argv[1]
    model = AutoModelForSeq2SeqLM.from_pretrained(folder, trust_remote_code=True).eval()
    source = torch.tensor({source})
    out = model.generate(input_ids=source, attention_mask=(source != 0).long(), max_new_tokens=10, min_new_tokens=10)
    base = AutoModel.from_pretrained(folder, trust_remote_code=True)
    config = AutoConfig.from_pretrained(folder, trust_remote_code=True)
    print(json.dumps({{"tokens": out.tolist(), "base": type(base).__name__, "config": type(config).__name__,
                       "module": type(model).__module__}}))
    """
)


def test_remote_code_loads_without_the_package_and_generates_the_same_tokens(model, tokenizer, tmp_path):
    """A Hub folder (save_for_hub): the head, the base model (AutoModel) and the config as remote code."""
    folder = tmp_path / "exported"
    save_for_hub(model, tokenizer, folder, model_card(model, source_lang="en", target_lang="ja", training_data="none"))
    expected = model.generate(input_ids=SOURCE, attention_mask=MASK, max_new_tokens=10, min_new_tokens=10)
    result = json.loads(run_without_package(REMOTE_SCRIPT.format(source=SOURCE.tolist()), str(folder), cwd=tmp_path))
    assert result["tokens"] == expected.tolist()
    assert result["base"] == "TinyTransformerModel" and result["config"] == "TinyTransformerConfig"
    assert result["module"].startswith("transformers_modules.")


PLAIN_SAVE_SCRIPT = textwrap.dedent(
    """
    import json, sys, torch
    try:
        import hf_tiny_transformer
        sys.exit("hf_tiny_transformer must not be importable here")
    except ImportError:
        pass
    from transformers import AutoModel, AutoModelForSeq2SeqLM
    base = AutoModel.from_pretrained(sys.argv[1], trust_remote_code=True).eval()
    source = torch.tensor({source})
    decoder = torch.tensor({decoder})
    hidden = base(input_ids=source, attention_mask=(source != 0).long(), decoder_input_ids=decoder).last_hidden_state
    half = AutoModelForSeq2SeqLM.from_pretrained(sys.argv[1], trust_remote_code=True, dtype=torch.bfloat16)
    tokens = half.generate(input_ids=source, attention_mask=(source != 0).long(), max_new_tokens=8, min_new_tokens=8)
    print(json.dumps({{"class": type(base).__name__, "hidden": hidden.tolist(), "bfloat16_tokens": tokens.tolist()}}))
    """
)


def test_a_plain_save_loads_without_the_package_through_automodel_and_in_bfloat16(model, tmp_path):
    """model.save_pretrained, nothing else: AutoModel loads its base model as remote code, with the same output;
    the whole model loaded as remote code in bfloat16 gives the tokens of the float32 model cast the same way."""
    model.save_pretrained(tmp_path / "plain")
    script = PLAIN_SAVE_SCRIPT.format(source=SOURCE.tolist(), decoder=DECODER.tolist())
    result = json.loads(run_without_package(script, str(tmp_path / "plain"), cwd=tmp_path))
    expected = model.model(input_ids=SOURCE, attention_mask=MASK, decoder_input_ids=DECODER).last_hidden_state
    assert result["class"] == "TinyTransformerModel"
    torch.testing.assert_close(torch.tensor(result["hidden"]), expected, rtol=1e-5, atol=1e-5)
    assert result["bfloat16_tokens"] == generate(copy.deepcopy(model).to(torch.bfloat16)).tolist()


def test_missing_config_is_the_librarys_error(model, tmp_path):
    model.save_pretrained(tmp_path)
    (tmp_path / "config.json").unlink()
    with pytest.raises(ValueError, match="config.json"):
        AutoModelForSeq2SeqLM.from_pretrained(tmp_path)


def test_corrupt_config_is_a_clear_error(model, tmp_path):
    model.save_pretrained(tmp_path)
    (tmp_path / "config.json").write_text("{ not json")
    with pytest.raises(OSError, match="config.json"):
        TinyTransformerForConditionalGeneration.from_pretrained(tmp_path)


def test_weights_that_do_not_fit_the_config_are_a_clear_error(model, tmp_path):
    model.save_pretrained(tmp_path)
    config = json.loads((tmp_path / "config.json").read_text())
    config["d_model"] = 64
    (tmp_path / "config.json").write_text(json.dumps(config))
    with pytest.raises(RuntimeError, match="size mismatch|ignore_mismatched_sizes"):
        TinyTransformerForConditionalGeneration.from_pretrained(tmp_path)


def test_resize_token_embeddings_keeps_the_ties(model):
    model.resize_token_embeddings(60)
    shared = model.model.encoder.embed_tokens.weight
    assert shared.shape == (60, 32) and model.config.vocab_size == 60
    assert model.model.decoder.embed_tokens.weight is shared and model.lm_head.weight is shared
    out = model(input_ids=torch.tensor([[55, 2]]), decoder_input_ids=torch.tensor([[1, 59]]))
    assert out.logits.shape == (1, 2, 60)


# Saving after the pipeline was built, and saving twice


def hub_card(model):
    return model_card(model, source_lang="en", target_lang="ja", training_data="test sentences")


def test_a_model_saves_after_the_pipeline_function_built_a_pipeline_of_it(text_model, tokenizer, tmp_path):
    pipeline(
        "translation",
        model=text_model,
        config=text_model.config,
        tokenizer=tokenizer,
        pipeline_class=TranslationPipeline,
    )
    text_model.save_pretrained(tmp_path / "model")
    saved = json.loads((tmp_path / "model" / "config.json").read_text())
    assert saved["custom_pipelines"]["translation"]["pt"] == ["AutoModelForSeq2SeqLM"]
    save_for_hub(text_model, tokenizer, tmp_path / "hub", hub_card(text_model))
    assert TinyTransformerConfig.from_pretrained(tmp_path / "hub").custom_pipelines == saved["custom_pipelines"]


def test_saving_twice_leaves_the_models_weights_and_no_temporary_files(model, tmp_path):
    """A save over an earlier one replaces every file whole: the weights read back equal to the model's."""
    model.save_pretrained(tmp_path)
    model.save_pretrained(tmp_path)
    assert not [p for p in tmp_path.parent.iterdir() if ".saving-" in p.name]
    weights = load_file(tmp_path / "model.safetensors")
    for name, value in model.state_dict().items():
        if name in weights:
            assert torch.equal(weights[name], value), name


# Half precision: every loading path gives the tokens of the float32 model cast the same way


def generate(model):
    return model.generate(input_ids=SOURCE, attention_mask=MASK, max_new_tokens=8, min_new_tokens=8)


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
def test_half_precision_loads_give_the_tokens_of_the_cast_model(model, tmp_path, dtype):
    model.save_pretrained(tmp_path / "float32")
    cast = copy.deepcopy(model).to(dtype)
    expected = generate(cast)
    cast.save_pretrained(tmp_path / "cast")
    from_config = AutoModelForSeq2SeqLM.from_config(model.config, dtype=dtype)
    from_config.load_state_dict(cast.state_dict())
    loaded = {
        "from_pretrained": AutoModelForSeq2SeqLM.from_pretrained(tmp_path / "float32", dtype=dtype),
        "device_map": AutoModelForSeq2SeqLM.from_pretrained(tmp_path / "float32", dtype=dtype, device_map="auto"),
        "from_config": from_config,
        "saved after .to()": AutoModelForSeq2SeqLM.from_pretrained(tmp_path / "cast"),
    }
    for path, half in loaded.items():
        assert half.dtype == dtype, path
        assert torch.equal(generate(half.eval()), expected), path


REGISTERED = (
    "import sys, transformers, hf_tiny_transformer\n"
    "from transformers.models.auto.configuration_auto import CONFIG_MAPPING\n"
    "print('tiny_transformer' in CONFIG_MAPPING, 'torch' in sys.modules)\n"
)


def test_importing_the_package_after_transformers_registers_its_auto_classes(tmp_path):
    """The README's route, `import hf_tiny_transformer` then AutoTokenizer / AutoModelForSeq2SeqLM on a folder without
    trust_remote_code: registered at import (it asked the remote-code question at a terminal and waited 15 s)."""
    result = subprocess.run([sys.executable, "-c", REGISTERED], capture_output=True, text=True, check=True)
    assert result.stdout.split()[0] == "True"  # (alone, it imports nothing heavy: tests/test_commands.py's --help)
