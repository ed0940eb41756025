"""Numbers, masks and equivalences of the model, against references written straight from the paper."""

import math

import pytest
import torch

from conftest import tiny_config, tiny_model
from hf_tiny_transformer import TinyTransformerModel
from hf_tiny_transformer.modeling_tiny_transformer import MultiHeadAttention, sinusoidal_table


def test_sinusoidal_table_is_the_papers_formula_interleaved():
    d_model, positions = 10, 7
    table = sinusoidal_table(positions, d_model)
    for pos in range(positions):
        for i in range(d_model // 2):
            angle = pos / 10000 ** (2 * i / d_model)
            assert table[pos, 2 * i].item() == pytest.approx(math.sin(angle), abs=1e-7)
            assert table[pos, 2 * i + 1].item() == pytest.approx(math.cos(angle), abs=1e-7)


def linear(module, x):
    """x W^T + b in float64: nn.Linear stores W as (out, in)."""
    return x.double() @ module.weight.double().T + module.bias.double()


def reference_attention(module, query_source, key_source, mask):
    """softmax(Q K^T / sqrt(d_k)) V per head, heads concatenated, times W^O: float64, from the formula."""
    heads, d_k = module.num_heads, module.head_dim
    q, k, v = linear(module.q_proj, query_source), linear(module.k_proj, key_source), linear(module.v_proj, key_source)
    outputs = []
    for h in range(heads):
        columns = slice(h * d_k, (h + 1) * d_k)
        scores = q[:, :, columns] @ k[:, :, columns].transpose(1, 2) / math.sqrt(d_k)
        scores = scores.masked_fill(~mask, float("-inf"))
        outputs.append(torch.softmax(scores, dim=-1) @ v[:, :, columns])
    return linear(module.out_proj, torch.cat(outputs, dim=-1))


def layer_norm(x, norm):
    return torch.nn.functional.layer_norm(x, x.shape[-1:], norm.weight.double(), norm.bias.double(), norm.eps)


def reference_feed_forward(module, x):
    """max(0, x W_1 + b_1) W_2 + b_2 in float64."""
    return linear(module.fc2, torch.relu(linear(module.fc1, x)))


def around(residual_sublayer, x, sublayer):
    """Post-LN: LayerNorm(x + Sublayer(x)); pre-LN: x + Sublayer(LayerNorm(x)) (float64, no dropout)."""
    if residual_sublayer.normalize_before:
        return x + sublayer(layer_norm(x, residual_sublayer.layer_norm))
    return layer_norm(x + sublayer(x), residual_sublayer.layer_norm)


@pytest.mark.parametrize("implementation", ["eager", "sdpa"])
def test_attention_matches_a_float64_reference(implementation):
    from transformers.masking_utils import create_bidirectional_mask, create_causal_mask

    torch.manual_seed(0)
    config = tiny_config()
    config._attn_implementation = implementation
    attention = MultiHeadAttention(32, 4, attention_dropout=0.0, is_causal=True, layer_idx=0, config=config).eval()
    x = torch.randn(2, 5, 32)
    padding = torch.tensor([[1, 1, 1, 1, 1], [1, 1, 1, 0, 0]])
    mask = create_causal_mask(config=config, inputs_embeds=x, attention_mask=padding, cache=None)
    output, _ = attention(x, attention_mask=mask)
    allowed = torch.tril(torch.ones(5, 5, dtype=torch.bool)) & padding.bool()[:, None, :]
    torch.testing.assert_close(output.double(), reference_attention(attention, x, x, allowed), atol=1e-5, rtol=1e-5)

    attention.is_causal = False
    memory = torch.randn(2, 3, 32)
    memory_padding = torch.tensor([[1, 1, 1], [1, 0, 0]])
    mask = create_bidirectional_mask(
        config=config, inputs_embeds=x, attention_mask=memory_padding, encoder_hidden_states=memory
    )
    output, _ = attention(x, key_value_states=memory, attention_mask=mask)
    allowed = memory_padding.bool()[:, None, :].expand(2, 5, 3)
    torch.testing.assert_close(
        output.double(), reference_attention(attention, x, memory, allowed), atol=1e-5, rtol=1e-5
    )


@pytest.mark.parametrize("normalize_before", [False, True])
def test_encoder_layer_matches_a_float64_reference_of_the_paper(normalize_before):
    """Post-LN: LayerNorm(x + MultiHead(x)), then LayerNorm(x + FFN(x)); pre-LN: x + MultiHead(LayerNorm(x)), ..."""
    layer = tiny_model(normalize_before=normalize_before).model.encoder.layers[0]
    x = torch.randn(1, 4, 32)
    everywhere = torch.ones(1, 4, 4, dtype=torch.bool)
    h = around(layer.self_attn_residual, x.double(), lambda y: reference_attention(layer.self_attn, y, y, everywhere))
    h = around(layer.feed_forward_residual, h, lambda y: reference_feed_forward(layer.feed_forward, y))
    torch.testing.assert_close(layer(x, None).double(), h, atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("normalize_before", [False, True])
def test_decoder_layer_matches_a_float64_reference_of_the_paper(normalize_before):
    """Masked self-attention, cross-attention over the memory (with its padding), feed-forward: each in its
    residual connection and LayerNorm, in float64."""
    from transformers.masking_utils import create_bidirectional_mask, create_causal_mask

    model = tiny_model(normalize_before=normalize_before)
    layer = model.model.decoder.layers[1]
    x, memory = torch.randn(2, 4, 32), torch.randn(2, 3, 32)
    memory_padding = torch.tensor([[1, 1, 1], [1, 1, 0]])
    causal = create_causal_mask(config=model.config, inputs_embeds=x, attention_mask=None, cache=None)
    cross = create_bidirectional_mask(
        config=model.config, inputs_embeds=x, attention_mask=memory_padding, encoder_hidden_states=memory
    )
    output = layer(x, causal, memory, cross)

    future_hidden = torch.tril(torch.ones(4, 4, dtype=torch.bool)).expand(2, 4, 4)
    padding_hidden = memory_padding.bool()[:, None, :].expand(2, 4, 3)
    h = around(
        layer.self_attn_residual, x.double(), lambda y: reference_attention(layer.self_attn, y, y, future_hidden)
    )
    h = around(
        layer.encoder_attn_residual, h, lambda y: reference_attention(layer.encoder_attn, y, memory, padding_hidden)
    )
    h = around(layer.feed_forward_residual, h, lambda y: reference_feed_forward(layer.feed_forward, y))
    torch.testing.assert_close(output.double(), h, atol=1e-5, rtol=1e-5)


def test_embedding_output_is_scaled_token_embedding_plus_positional_encoding(model, batch):
    out = model(**batch, output_hidden_states=True)
    embedding = model.model.encoder.embed_tokens.weight[batch["input_ids"]] * math.sqrt(32)
    expected = embedding + sinusoidal_table(64, 32)[:5]
    torch.testing.assert_close(out.encoder_hidden_states[0], expected)
    assert len(out.encoder_hidden_states) == 3 and len(out.decoder_hidden_states) == 3
    torch.testing.assert_close(out.encoder_hidden_states[-1], out.encoder_last_hidden_state)


def test_one_matrix_for_encoder_input_decoder_input_and_output_projection(model):
    shared = model.model.encoder.embed_tokens.weight
    assert model.model.decoder.embed_tokens.weight is shared
    assert model.lm_head.weight is shared
    assert model.get_output_embeddings().weight is model.get_input_embeddings().weight


def test_untied_model_has_separate_matrices():
    model = tiny_model(tie_word_embeddings=False)
    assert model.lm_head.weight is not model.model.encoder.embed_tokens.weight
    assert model.model.decoder.embed_tokens.weight is not model.model.encoder.embed_tokens.weight


def test_causal_mask_hides_the_future(model, batch):
    decoder_input_ids = torch.tensor([[1, 11, 12, 13, 14, 15]])
    source = {"input_ids": batch["input_ids"][:1], "attention_mask": batch["attention_mask"][:1]}
    logits = model(**source, decoder_input_ids=decoder_input_ids).logits
    for t in range(5):
        changed = decoder_input_ids.clone()
        changed[0, t + 1] = 40
        changed_logits = model(**source, decoder_input_ids=changed).logits
        torch.testing.assert_close(changed_logits[:, : t + 1], logits[:, : t + 1])
        assert not torch.allclose(changed_logits[:, t + 1 :], logits[:, t + 1 :])


def test_source_padding_changes_nothing(model):
    source = torch.tensor([[5, 6, 7, 2]])
    padded = torch.tensor([[5, 6, 7, 2, 0, 0, 0]])
    decoder_input_ids = torch.tensor([[1, 11, 12]])
    expected = model(input_ids=source, decoder_input_ids=decoder_input_ids).logits
    # pad tokens with garbage ids under the mask: the mask, not the id, must hide them
    for pad_ids in (padded, torch.tensor([[5, 6, 7, 2, 33, 44, 0]])):
        got = model(input_ids=pad_ids, attention_mask=(padded != 0).long(), decoder_input_ids=decoder_input_ids).logits
        torch.testing.assert_close(got, expected)


@pytest.mark.parametrize("implementation", ["eager", "sdpa"])
def test_padded_batch_equals_examples_one_by_one(batch, implementation):
    model = tiny_model(attn_implementation=implementation)
    decoder_input_ids = model.prepare_decoder_input_ids_from_labels(batch["labels"])
    decoder_attention_mask = (batch["labels"] != -100).long()
    together = model(
        input_ids=batch["input_ids"],
        attention_mask=batch["attention_mask"],
        decoder_input_ids=decoder_input_ids,
        decoder_attention_mask=decoder_attention_mask,
    ).logits
    for i in range(2):
        source_length = int(batch["attention_mask"][i].sum())
        target_length = int(decoder_attention_mask[i].sum())
        alone = model(
            input_ids=batch["input_ids"][i : i + 1, :source_length],
            decoder_input_ids=decoder_input_ids[i : i + 1, :target_length],
        ).logits
        torch.testing.assert_close(together[i : i + 1, :target_length], alone)


def test_eager_and_sdpa_agree(batch):
    eager = tiny_model(attn_implementation="eager")
    sdpa = tiny_model(attn_implementation="sdpa")
    assert sdpa.config._attn_implementation == "sdpa"
    for normalize_before in (False, True):
        eager = tiny_model(attn_implementation="eager", normalize_before=normalize_before)
        sdpa = tiny_model(attn_implementation="sdpa", normalize_before=normalize_before)
        out_eager, out_sdpa = eager(**batch), sdpa(**batch)
        torch.testing.assert_close(out_eager.logits, out_sdpa.logits, atol=1e-5, rtol=1e-5)
        torch.testing.assert_close(out_eager.loss, out_sdpa.loss)


def test_default_attention_is_sdpa_and_weights_need_eager(model, batch):
    """As in transformers' own models: sdpa never materializes the weights (the library warns once)."""
    assert model.config._attn_implementation == "sdpa"
    assert model(**batch, output_attentions=True).encoder_attentions == ()
    model.set_attn_implementation("eager")
    assert len(model(**batch, output_attentions=True).encoder_attentions) == 2


def test_attention_weights_are_distributions_that_respect_the_masks(batch):
    model = tiny_model(attn_implementation="eager")
    out = model(**batch, output_attentions=True)
    assert len(out.encoder_attentions) == len(out.decoder_attentions) == len(out.cross_attentions) == 2
    for weights in out.encoder_attentions + out.decoder_attentions + out.cross_attentions:
        torch.testing.assert_close(weights.sum(-1), torch.ones(weights.shape[:-1]))
    assert out.encoder_attentions[0].shape == (2, 4, 5, 5)
    assert out.cross_attentions[0].shape == (2, 4, 4, 5)
    for weights in out.decoder_attentions:
        assert torch.all(torch.triu(weights, diagonal=1) == 0)  # nothing from the future
    for weights in out.encoder_attentions + out.cross_attentions:
        assert torch.all(weights[1, :, :, 3:] == 0)  # nothing from the source padding


def test_pre_ln_variant_differs_and_normalizes_the_stack_output(batch):
    post = tiny_model(normalize_before=False)
    pre = tiny_model(normalize_before=True)
    assert post.model.encoder.layer_norm is None and pre.model.encoder.layer_norm is not None
    out = pre(**batch, output_hidden_states=True)
    torch.testing.assert_close(out.encoder_hidden_states[-1].mean(-1), torch.zeros(2, 5), atol=1e-5, rtol=0)
    assert not torch.allclose(out.logits, post(**batch).logits)


def test_base_model_returns_seq2seq_model_output(batch):
    model = TinyTransformerModel(tiny_config()).eval()
    decoder_input_ids = torch.tensor([[1, 5], [1, 6]])
    out = model(
        input_ids=batch["input_ids"], attention_mask=batch["attention_mask"], decoder_input_ids=decoder_input_ids
    )
    assert type(out).__name__ == "Seq2SeqModelOutput"
    assert out.last_hidden_state.shape == (2, 2, 32) and out.encoder_last_hidden_state.shape == (2, 5, 32)
    as_tuple = model(input_ids=batch["input_ids"], decoder_input_ids=decoder_input_ids, return_dict=False)
    assert isinstance(as_tuple, tuple) and as_tuple[0].shape == (2, 2, 32)


def test_return_dict_false_gives_a_tuple_with_the_loss_first(model, batch):
    out = model(**batch, return_dict=False)
    assert isinstance(out, tuple)
    torch.testing.assert_close(out[0], model(**batch).loss)


def test_encoder_outputs_skip_the_encoder(model, batch):
    encoder_outputs = model.get_encoder()(batch["input_ids"], batch["attention_mask"])
    with_outputs = model(
        encoder_outputs=encoder_outputs, attention_mask=batch["attention_mask"], labels=batch["labels"]
    )
    torch.testing.assert_close(with_outputs.logits, model(**batch).logits)
    as_tuple = model(
        encoder_outputs=tuple(encoder_outputs.values()), attention_mask=batch["attention_mask"], labels=batch["labels"]
    )
    torch.testing.assert_close(as_tuple.logits, with_outputs.logits)
