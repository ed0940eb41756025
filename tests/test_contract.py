"""What transformers' own encoder-decoders guarantee, held by this model too: the cache under its old name
(`past_key_values`, which PEFT's prefix tuning passes), PEFT prefix tuning that trains as on MarianMTModel, resizing
an untied vocabulary, only the attention implementations tested claimed, torch.export, a left-padded batch in
generate(). (Gradient checkpointing, torch.compile, sdpa equal to eager, output_attentions and hidden states, tied
weights, dtype and device_map at load: tests/test_modeling.py, test_generation.py, test_save_load.py.)"""

import warnings

import pytest
import torch
from transformers import AutoModelForSeq2SeqLM

from conftest import tiny_model, training_losses

SOURCE = torch.tensor([[5, 6, 7, 8, 2], [9, 10, 2, 0, 0]])
MASK = (SOURCE != 0).long()
LABELS = torch.tensor([[20, 21, 22, 2], [23, 24, 2, -100]])


@pytest.mark.parametrize("name", ["cache", "past_key_values"])
def test_a_cache_under_either_name_gives_the_uncached_logits(model, name):
    """The old name was accepted and ignored: positions restarted at 0 and the step's logits were wrong."""
    whole = model(input_ids=SOURCE, attention_mask=MASK, decoder_input_ids=torch.tensor([[1, 8, 9], [1, 11, 12]]))
    first = model(
        input_ids=SOURCE, attention_mask=MASK, decoder_input_ids=torch.tensor([[1, 8], [1, 11]]), use_cache=True
    )
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        step = model(input_ids=SOURCE, attention_mask=MASK, decoder_input_ids=torch.tensor([[9], [12]]), use_cache=True,
                     **{name: first.cache})  # fmt: skip
    torch.testing.assert_close(step.logits[:, -1], whole.logits[:, -1], atol=1e-5, rtol=1e-5)
    deprecated = [str(warning.message) for warning in caught if "past_key_values" in str(warning.message)]
    assert bool(deprecated) == (name == "past_key_values")


@pytest.mark.parametrize("architecture", ["ours", "marian"])
def test_peft_prefix_tuning_trains_as_on_marian(architecture):
    """PEFT passes its learned prefix as `past_key_values`: the loss falls, and the base model stays as it was."""
    from peft import PrefixTuningConfig, TaskType, get_peft_model

    from hf_tiny_transformer import to_marian

    model = tiny_model(init_std=0.1)
    model = to_marian(model) if architecture == "marian" else model
    frozen = {name: tensor.clone() for name, tensor in model.state_dict().items()}
    tuned = get_peft_model(model, PrefixTuningConfig(task_type=TaskType.SEQ_2_SEQ_LM, num_virtual_tokens=8))
    prefix = [parameter for parameter in tuned.parameters() if parameter.requires_grad]
    losses = training_losses(tuned, prefix, 0.05, 20, input_ids=SOURCE, attention_mask=MASK, labels=LABELS)
    assert losses[-1] < 0.85 * losses[0]
    assert all(torch.equal(model.state_dict()[name], tensor) for name, tensor in frozen.items())
    assert tuned.generate(input_ids=SOURCE, attention_mask=MASK, max_new_tokens=4).shape[0] == 2


def test_resizing_an_untied_vocabulary_resizes_every_matrix_and_saves(tmp_path):
    """transformers resizes the input embedding and the output projection; the target embedding follows."""
    model = tiny_model(tie_word_embeddings=False)
    model.resize_token_embeddings(60)
    sizes = [model.model.encoder.embed_tokens.num_embeddings, model.model.decoder.embed_tokens.num_embeddings]
    assert sizes + [model.lm_head.out_features, model.config.vocab_size] == [60, 60, 60, 60]
    assert model.model.decoder.embed_tokens.weight is not model.model.encoder.embed_tokens.weight  # still untied
    model.save_pretrained(tmp_path)
    loaded = AutoModelForSeq2SeqLM.from_pretrained(tmp_path).eval()
    inputs = {"input_ids": torch.tensor([[55, 56, 2]]), "decoder_input_ids": torch.tensor([[1, 58, 59]])}
    torch.testing.assert_close(loaded(**inputs).logits, model.eval()(**inputs).logits)


def test_only_the_attention_implementations_tested_here_are_claimed():
    """eager and sdpa (tests/test_modeling.py: equal, and equal to a float64 reference). Flash attention needs a GPU
    and the flash-attn package; flex attention ran equal to eager on the CPU, after 50 s of compiling its kernels,
    too long for the suite: neither is claimed, so that transformers refuses them in one line."""
    from hf_tiny_transformer import TinyTransformerForConditionalGeneration

    claims = {name: getattr(TinyTransformerForConditionalGeneration, f"_supports_{name}", False) for name in
              ("sdpa", "flash_attn", "flex_attn")}  # fmt: skip
    assert claims == {"sdpa": True, "flash_attn": False, "flex_attn": False}


def test_torch_export_gives_the_models_logits(model):
    """As for the library's own encoder-decoders, an exported forward returns no cache (use_cache=False)."""
    inputs = {"input_ids": SOURCE, "attention_mask": MASK, "decoder_input_ids": torch.tensor([[1, 8], [1, 11]])}
    exported = torch.export.export(model, args=(), kwargs={**inputs, "use_cache": False})
    torch.testing.assert_close(exported.module()(**inputs, use_cache=False).logits, model(**inputs).logits)


def test_a_left_padded_batch_generates_each_sentences_own_tokens(model):
    left = torch.tensor([[5, 6, 7, 8, 2], [0, 0, 9, 10, 2]])
    batch = model.generate(input_ids=left, attention_mask=(left != 0).long(), num_beams=1, max_new_tokens=6)
    alone = model.generate(input_ids=torch.tensor([[9, 10, 2]]), num_beams=1, max_new_tokens=6)
    assert batch[1, : alone.shape[1]].tolist() == alone[0].tolist()
