"""Bad input to forward and generate: the model checks only what would otherwise give a silently wrong result or a
crash deep inside torch, and is no stricter than transformers about the rest (keywords it does not use pass)."""

import pytest
import torch

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
