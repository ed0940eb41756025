"""The model (modeling_tiny_transformer.py): its numbers, masks and equivalences against references written
straight from the paper; its own loss and gradients; and its input checks, which refuse only what would otherwise
give a silently wrong result or a crash deep inside torch, and are no stricter than transformers about the rest
(keywords it does not use pass)."""

import math

import pytest
import torch

from conftest import tiny_config, tiny_model
from hf_tiny_transformer import TinyTransformerModel
from hf_tiny_transformer.modeling_tiny_transformer import MultiHeadAttention, shift_tokens_right, sinusoidal_table


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


# The model's own loss and gradients: plain cross-entropy over the labelled tokens, as transformers' models.


def test_decoder_inputs_are_labels_shifted_right(model):
    labels = torch.tensor([[11, 12, 2], [13, 2, -100]])
    expected = torch.tensor([[1, 11, 12], [1, 13, 2]])
    assert torch.equal(model.prepare_decoder_input_ids_from_labels(labels), expected)
    assert torch.equal(shift_tokens_right(torch.tensor([[5, -100, -100]]), 0, 1), torch.tensor([[1, 5, 0]]))


def test_loss_is_mean_cross_entropy_over_labelled_tokens_and_ignores_minus_100(model, batch):
    out = model(**batch)
    logits, labels = out.logits, batch["labels"]
    kept = labels != -100
    expected = torch.nn.functional.cross_entropy(logits[kept], labels[kept])
    torch.testing.assert_close(out.loss, expected)
    # what the decoder reads at a position whose label is -100 changes that position's logits, not the loss
    decoder_input_ids = model.prepare_decoder_input_ids_from_labels(labels)
    changed = decoder_input_ids.clone()
    changed[1, 3] = 7  # row 1's labels are [14, 2, -100, -100]
    again = model(**batch, decoder_input_ids=changed)
    assert not torch.allclose(again.logits[1, 3], out.logits[1, 3])
    torch.testing.assert_close(again.logits[1, :3], out.logits[1, :3])
    torch.testing.assert_close(again.loss, out.loss)


def test_num_items_in_batch_turns_the_loss_into_a_sum_divided_by_it(model, batch):
    mean = model(**batch).loss
    summed = model(**batch, num_items_in_batch=torch.tensor(100)).loss
    torch.testing.assert_close(summed, mean * 6 / 100)


def test_the_model_makes_the_logits_asked_for():
    """logits_to_keep as transformers' models take it: 0 all positions, 1 the last (generate's), an empty tensor
    none (the training loss's); the positions kept are the full logits' own."""
    model, batch = (
        tiny_model(),
        {"input_ids": torch.tensor([[5, 6, 2]]), "decoder_input_ids": torch.tensor([[1, 7, 8]])},
    )
    full = model(**batch).logits
    assert full.shape == (1, 3, model.config.vocab_size)
    torch.testing.assert_close(model(**batch, logits_to_keep=1).logits, full[:, -1:])
    assert model(**batch, logits_to_keep=torch.tensor([], dtype=torch.long)).logits.shape == (1, 0, full.shape[-1])


def test_gradient_checkpointing_gives_the_same_gradients(batch):
    grads = []
    for checkpointing in (False, True):
        model = tiny_model(dropout=0.0)
        model.train()
        if checkpointing:
            model.activation_checkpointing_enable()
            assert all(layer.gradient_checkpointing for layer in model.model.encoder.layers)
        model(**batch).loss.backward()
        grads.append({n: p.grad.clone() for n, p in model.named_parameters() if p.grad is not None})
    for name in grads[0]:
        torch.testing.assert_close(grads[1][name], grads[0][name])


def test_the_padding_row_gets_gradient_only_through_the_output_projection(batch):
    """The header's difference 3: nn.Embedding's padding_idx stops the lookup's gradient, not the tied lm_head's."""
    for tied in (True, False):
        model = tiny_model(tie_word_embeddings=tied, dropout=0.0)
        model.train()
        model(**batch).loss.backward()
        embedding_gradient = model.model.encoder.embed_tokens.weight.grad[0]
        assert bool(embedding_gradient.abs().sum() > 0) is tied
        assert model.lm_head.weight.grad[0].abs().sum() > 0


def test_a_tiny_model_overfits_a_few_pairs_until_greedy_reproduces_them():
    torch.manual_seed(0)
    pairs = [([5, 6, 7], [20, 21, 22]), ([8, 9], [23, 24, 25, 26]), ([10, 11, 12, 13], [27, 28])]
    model = tiny_model(seed=0, init_std=0.02, dropout=0.0)
    model.train()
    input_ids = torch.zeros(3, 5, dtype=torch.long)
    labels = torch.full((3, 5), -100)
    for i, (source, target) in enumerate(pairs):
        input_ids[i, : len(source) + 1] = torch.tensor(source + [2])
        labels[i, : len(target) + 1] = torch.tensor(target + [2])
    attention_mask = (input_ids != 0).long()
    optimizer = torch.optim.Adam(model.parameters(), lr=3e-3, betas=(0.9, 0.98), eps=1e-9)
    for _ in range(150):
        loss = model(input_ids=input_ids, attention_mask=attention_mask, labels=labels).loss
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    model.eval()
    generated = model.generate(input_ids=input_ids, attention_mask=attention_mask, max_new_tokens=8)
    for i, (_, target) in enumerate(pairs):
        assert generated[i, 1 : len(target) + 2].tolist() == target + [2]


# Bad input to forward and generate


SOURCE = torch.tensor([[5, 6, 7, 2]])


DECODER = torch.tensor([[1, 5]])


def test_source_longer_than_the_positional_table(model):
    too_long = torch.full((1, 65), 5)
    with pytest.raises(
        ValueError, match="input_ids reaches position 65 but max_position_embeddings is 64; pass truncation=True"
    ):
        model(input_ids=too_long, decoder_input_ids=DECODER)
    with pytest.raises(ValueError, match="max_position_embeddings is 64"):
        model.generate(input_ids=too_long, max_new_tokens=2)
    embeddings = model.get_input_embeddings()(too_long)
    with pytest.raises(ValueError, match="input_ids reaches position 65"):
        model(inputs_embeds=embeddings, decoder_input_ids=DECODER)


def test_generation_longer_than_the_positional_table(model):
    with pytest.raises(ValueError, match="decoder_input_ids reaches position 65 .* lower max_new_tokens"):
        model.generate(input_ids=SOURCE, max_new_tokens=80, min_new_tokens=80)


@pytest.mark.parametrize("bad_id", [50, 1000, -1])
def test_token_id_outside_the_vocabulary(model, bad_id):
    with pytest.raises(ValueError, match=rf"input_ids holds token id {bad_id}, outside \[0, vocab_size=50\)"):
        model(input_ids=torch.tensor([[5, bad_id, 2]]), decoder_input_ids=DECODER)
    with pytest.raises(ValueError, match=rf"decoder_input_ids holds token id {bad_id}"):
        model(input_ids=SOURCE, decoder_input_ids=torch.tensor([[1, bad_id]]))
    if bad_id >= 0:
        with pytest.raises(ValueError, match="outside"):
            model.generate(input_ids=torch.tensor([[5, bad_id, 2]]), max_new_tokens=2)


def test_attention_mask_of_the_wrong_shape(model):
    """A mask of another shape would broadcast over the wrong tokens (another batch size) or fail deep in torch."""
    with pytest.raises(
        ValueError, match=r"attention_mask has shape \(1, 3\) but the sequences it masks have shape \(1, 4\)"
    ):
        model(input_ids=SOURCE, attention_mask=torch.ones(1, 3), decoder_input_ids=DECODER)
    with pytest.raises(ValueError, match=r"attention_mask has shape \(2, 4\)"):
        model(input_ids=SOURCE, attention_mask=torch.ones(2, 4), decoder_input_ids=DECODER)
    with pytest.raises(ValueError, match=r"decoder_attention_mask has shape \(1, 5\)"):
        model(input_ids=SOURCE, decoder_input_ids=DECODER, decoder_attention_mask=torch.ones(1, 5))
    with pytest.raises(ValueError, match=r"attention_mask has shape \(4,\)"):
        model(input_ids=SOURCE, attention_mask=torch.ones(4), decoder_input_ids=DECODER)
    with pytest.raises(ValueError, match="attention_mask has shape"):
        model.generate(input_ids=SOURCE, attention_mask=torch.ones(1, 7, dtype=torch.long), max_new_tokens=2)


def test_zero_length_input(model):
    """Attention over no keys is NaN: an empty sequence is refused."""
    empty = torch.zeros(1, 0, dtype=torch.long)
    with pytest.raises(ValueError, match="input_ids is empty; every sequence needs at least one token"):
        model(input_ids=empty, decoder_input_ids=DECODER)
    with pytest.raises(ValueError, match="decoder_input_ids is empty"):
        model(input_ids=SOURCE, decoder_input_ids=empty)
    with pytest.raises(ValueError, match="input_ids is empty"):
        model.generate(input_ids=empty, max_new_tokens=2)


def test_forward_needs_one_decoder_input(model):
    with pytest.raises(ValueError, match="exactly one of decoder_input_ids or decoder_inputs_embeds .*labels"):
        model(input_ids=SOURCE)
    with pytest.raises(ValueError, match="exactly one of decoder_input_ids or decoder_inputs_embeds"):
        model(input_ids=SOURCE, decoder_input_ids=DECODER, decoder_inputs_embeds=model.get_input_embeddings()(DECODER))


def test_forward_needs_one_source(model):
    with pytest.raises(ValueError, match="exactly one of input_ids or inputs_embeds"):
        model(decoder_input_ids=DECODER)
    with pytest.raises(ValueError, match="exactly one of input_ids or inputs_embeds"):
        model(input_ids=SOURCE, inputs_embeds=model.get_input_embeddings()(SOURCE), decoder_input_ids=DECODER)


def test_keywords_the_model_does_not_use_pass_as_in_transformers_models(model):
    """generate() hands forward() its own keywords (its tokenizer for stop strings, among others); refusing them would
    break those features, so the model leaves them alone, as MarianMTModel does."""
    expected = model(input_ids=SOURCE, decoder_input_ids=DECODER).logits
    for extra in ({"tokenizer": object()}, {"some_future_flag": True}, {"position_ids": torch.arange(2)}):
        torch.testing.assert_close(model(input_ids=SOURCE, decoder_input_ids=DECODER, **extra).logits, expected)
        torch.testing.assert_close(
            model.model(input_ids=SOURCE, decoder_input_ids=DECODER, **extra).last_hidden_state,
            model.model(input_ids=SOURCE, decoder_input_ids=DECODER).last_hidden_state,
        )


@pytest.mark.parametrize(
    "inputs, error",
    [
        (dict(input_ids=SOURCE.float(), decoder_input_ids=DECODER), RuntimeError),  # torch: indices must be integers
        (dict(input_ids=SOURCE, labels=torch.tensor([[5.0, 2.0]])), RuntimeError),  # torch's cross_entropy
    ],
)
def test_what_the_library_and_torch_catch_is_left_to_them(model, inputs, error):
    with pytest.raises(error):
        model(**inputs)
