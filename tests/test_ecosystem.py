"""The ecosystem's tools on the model (hf_tiny_transformer/marian.py, PEFT): Marian conversion both ways, with the
same function and the same translations; a trained model in bfloat16; LoRA and prompt tuning with PEFT."""

import pytest
import torch
from transformers import AutoModelForSeq2SeqLM, AutoTokenizer, MarianMTModel

from conftest import tiny_config, tiny_model, training_losses
from hf_tiny_transformer import TinyTransformerForConditionalGeneration, from_marian, to_marian
from hf_tiny_transformer.marian import marian_config, marian_of_the_same_shape

SOURCE = torch.tensor([[5, 6, 7, 8, 2], [9, 10, 2, 0, 0]])


MASK = (SOURCE != 0).long()


DECODER = torch.tensor([[1, 11, 12, 13], [1, 14, 15, 0]])


def logits(model):
    return model(input_ids=SOURCE, attention_mask=MASK, decoder_input_ids=DECODER).logits


def test_to_marian_computes_the_same_function(model):
    marian = to_marian(model)
    assert isinstance(marian, MarianMTModel) and not marian.training
    torch.testing.assert_close(logits(marian), logits(model), atol=1e-5, rtol=1e-5)
    assert not torch.allclose(logits(marian), logits(tiny_model(seed=1)), atol=1e-2)  # the weights really moved


def test_from_marian_computes_the_same_function():
    torch.manual_seed(0)
    marian = marian_of_the_same_shape(tiny_config(init_std=0.3)).eval()
    ours = from_marian(marian)
    assert isinstance(ours, TinyTransformerForConditionalGeneration)
    torch.testing.assert_close(logits(ours), logits(marian), atol=1e-5, rtol=1e-5)
    back = to_marian(ours)
    for name, tensor in marian.state_dict().items():
        torch.testing.assert_close(back.state_dict()[name], tensor, atol=0, rtol=0, msg=name)


def test_the_positional_tables_are_the_same_sinusoids_in_another_order(model):
    marian = to_marian(model)
    ours = model.model.encoder.embed_positions.pe  # (P, D): sin, cos, sin, cos, ...
    theirs = marian.model.encoder.embed_positions.weight  # (P, D): every sine, then every cosine
    torch.testing.assert_close(theirs, torch.cat([ours[:, 0::2], ours[:, 1::2]], dim=1), atol=1e-6, rtol=0)


def test_a_trained_model_and_its_marian_twin_translate_alike(trained_demo_model, demo_files):
    ours = AutoModelForSeq2SeqLM.from_pretrained(trained_demo_model).eval()
    tokenizer = AutoTokenizer.from_pretrained(trained_demo_model)
    marian = to_marian(ours)
    sources = (demo_files / "test.en").read_text(encoding="utf-8").splitlines()
    batch = tokenizer(sources, return_tensors="pt", padding=True)
    for beams in (1, 4):
        expected = ours.generate(**batch, num_beams=beams, max_new_tokens=40)
        assert torch.equal(marian.generate(**batch, num_beams=beams, max_new_tokens=40), expected), beams


@pytest.mark.parametrize(
    "overrides, message",
    [
        (dict(normalize_before=True), "normalize_before=True"),
        (dict(tie_word_embeddings=False), "tie_word_embeddings=False"),
        (dict(layer_norm_eps=1e-6), "layer_norm_eps=1e-06"),
    ],
)
def test_a_model_marian_cannot_express_is_refused(overrides, message):
    with pytest.raises(ValueError, match=f"no MarianMTModel equivalent: {message}"):
        to_marian(tiny_model(**overrides))


def test_a_marian_model_with_its_own_target_vocabulary_is_refused():
    config = marian_config(tiny_config())
    config.share_encoder_decoder_embeddings = False
    marian = MarianMTModel(config)
    with pytest.raises(ValueError, match="one shared vocabulary"):
        from_marian(marian)


def greedy_tokens(model, tokenizer, sentences: list[str]) -> list[list[int]]:
    batch = tokenizer(sentences, return_tensors="pt", padding=True)
    with torch.inference_mode():
        return model.generate(**batch, num_beams=1, max_new_tokens=40).tolist()


def test_bfloat16_weights_translate_as_float32(trained_demo_model, demo_files):
    """A trained model loaded in bfloat16: nearly all of 40 greedy translations the same tokens as in float32."""
    tokenizer = AutoTokenizer.from_pretrained(trained_demo_model)
    float32 = AutoModelForSeq2SeqLM.from_pretrained(trained_demo_model).eval()
    bfloat16 = AutoModelForSeq2SeqLM.from_pretrained(trained_demo_model, dtype=torch.bfloat16).eval()
    assert bfloat16.lm_head.weight.dtype == torch.bfloat16
    sentences = (demo_files / "validation.en").read_text(encoding="utf-8").splitlines()
    pairs = zip(greedy_tokens(float32, tokenizer, sentences), greedy_tokens(bfloat16, tokenizer, sentences))
    same = sum(a == b for a, b in pairs)
    assert same >= 36, f"{same} of 40 the same"


def test_lora_on_the_usual_targets_wraps_queries_and_values():
    from peft import LoraConfig, get_peft_model

    model = get_peft_model(tiny_model(), LoraConfig(target_modules=["q_proj", "v_proj"], r=4))
    wrapped = {name.rsplit(".", 1)[-1] for name, module in model.named_modules() if hasattr(module, "lora_A")}
    assert wrapped == {"q_proj", "v_proj"}
    attention_modules = 2 + 2 * 2  # encoder self-attention, decoder self- and cross-attention
    assert sum(hasattr(module, "lora_A") for module in model.modules()) == 2 * attention_modules
    model.train()
    loss = model(input_ids=SOURCE, attention_mask=MASK, labels=DECODER[:, 1:]).loss
    loss.backward()
    trained = [name for name, p in model.named_parameters() if p.grad is not None]
    assert trained and all("lora_" in name for name in trained)


def test_peft_prompt_tuning_trains_soft_prompts_on_the_frozen_model():
    """Prompt tuning feeds learned embeddings through `inputs_embeds`: gradients reach the soft prompts, the loss
    falls, the base model stays as it was, and generate runs with the prompts."""
    from peft import PromptTuningConfig, TaskType, get_peft_model

    model = tiny_model(init_std=0.1)
    frozen = {name: tensor.clone() for name, tensor in model.state_dict().items()}
    tuned = get_peft_model(model, PromptTuningConfig(task_type=TaskType.SEQ_2_SEQ_LM, num_virtual_tokens=8))
    prompts = [parameter for parameter in tuned.parameters() if parameter.requires_grad]
    labels = torch.tensor([[20, 21, 22, 2], [23, 24, 2, -100]])

    def prompts_get_gradients():
        assert prompts[0].grad.abs().sum() > 0

    batch = {"input_ids": SOURCE, "attention_mask": MASK, "labels": labels}
    losses = training_losses(tuned, prompts, 0.1, 30, after_backward=prompts_get_gradients, **batch)
    assert losses[-1] < 0.95 * losses[0]
    assert all(torch.equal(model.state_dict()[name], tensor) for name, tensor in frozen.items())
    generated = tuned.generate(input_ids=SOURCE, attention_mask=MASK, max_new_tokens=4)
    assert generated.shape[0] == 2 and generated[:, 0].eq(1).all()
