"""Bad input to forward and generate: a ValueError that says what to do, never an error from deep inside torch."""

import pytest
import torch

SOURCE = torch.tensor([[5, 6, 7, 2]])
DECODER = torch.tensor([[1, 5]])


def test_source_longer_than_the_positional_table(model):
    too_long = torch.full((1, 65), 5)
    with pytest.raises(ValueError, match="input_ids reaches position 65 but max_position_embeddings is 64; pass truncation=True"):
        model(input_ids=too_long, decoder_input_ids=DECODER)
    with pytest.raises(ValueError, match="max_position_embeddings is 64"):
        model.generate(input_ids=too_long, max_new_tokens=2)


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
    with pytest.raises(ValueError, match=r"attention_mask has shape \(1, 3\) but the sequences it masks have shape \(1, 4\)"):
        model(input_ids=SOURCE, attention_mask=torch.ones(1, 3), decoder_input_ids=DECODER)
    with pytest.raises(ValueError, match=r"decoder_attention_mask has shape \(1, 5\)"):
        model(input_ids=SOURCE, decoder_input_ids=DECODER, decoder_attention_mask=torch.ones(1, 5))
    with pytest.raises(ValueError, match="attention_mask has shape"):
        model.generate(input_ids=SOURCE, attention_mask=torch.ones(1, 7, dtype=torch.long), max_new_tokens=2)


def test_zero_length_input(model):
    empty = torch.zeros(1, 0, dtype=torch.long)
    with pytest.raises(ValueError, match="input_ids is empty .* at least one token"):
        model(input_ids=empty, decoder_input_ids=DECODER)
    with pytest.raises(ValueError, match="decoder_input_ids is empty"):
        model(input_ids=SOURCE, decoder_input_ids=empty)
    with pytest.raises(ValueError, match="input_ids is empty"):
        model.generate(input_ids=empty, max_new_tokens=2)


def test_forward_without_decoder_input_ids_or_labels(model):
    with pytest.raises(ValueError, match="pass labels .* or decoder_input_ids"):
        model(input_ids=SOURCE)


def test_forward_without_source(model):
    with pytest.raises(ValueError, match="Pass input_ids .* or encoder_outputs"):
        model(decoder_input_ids=DECODER)


@pytest.mark.parametrize(
    "inputs, error, message",
    [
        (dict(input_ids=SOURCE.float(), decoder_input_ids=DECODER), TypeError, "input_ids must be a tensor of integer token ids .*got torch.float32"),
        (dict(input_ids=SOURCE, decoder_input_ids=DECODER.float()), TypeError, "decoder_input_ids must be a tensor of integer"),
        (dict(input_ids=SOURCE, labels=torch.tensor([[5.0, 2.0]])), TypeError, "labels must be a tensor of integer"),
        (dict(input_ids=SOURCE, decoder_input_ids=torch.ones(2, 2, dtype=torch.long)), ValueError, r"The batch sizes disagree \(input_ids 1, .*decoder_input_ids 2\)"),
        (dict(input_ids=SOURCE, labels=torch.tensor([[5, 2], [6, 2]])), ValueError, r"batch sizes disagree \(labels 2, input_ids 1\)"),
        (dict(input_ids=SOURCE, attention_mask=torch.ones(2, 4), decoder_input_ids=DECODER), ValueError, r"input_ids 1, attention_mask 2"),
        (dict(input_ids=SOURCE, decoder_input_ids=DECODER, decoder_attention_mask=torch.ones(3, 2)), ValueError, "decoder_attention_mask 3"),
        (dict(input_ids=SOURCE, attention_mask=torch.ones(4), decoder_input_ids=DECODER), ValueError, r"attention_mask must have shape \(batch_size, sequence_length\).*got shape \(4,\)"),
        (dict(input_ids=SOURCE, attention_mask=torch.ones(1, 1, 4), decoder_input_ids=DECODER), ValueError, r"got shape \(1, 1, 4\)"),
        (dict(input_ids=SOURCE, attenton_mask=torch.ones(1, 4), decoder_input_ids=DECODER), TypeError, "unexpected keyword arguments: attenton_mask \\(did you mean attention_mask"),
        (dict(input_ids=SOURCE, decoder_input_ids=DECODER, past_key_values=None), TypeError, "past_key_values \\(transformers 5 calls it cache\\)"),
        (dict(input_ids=SOURCE, decoder_input_ids=DECODER, position_ids=torch.arange(2)), TypeError, "position_ids \\(positions follow"),
    ],
)  # fmt: skip
def test_bad_tensors_and_keywords_name_the_problem(model, inputs, error, message):
    with pytest.raises(error, match=message):
        model(**inputs)


def test_encoder_outputs_of_another_batch_size(model):
    encoder_outputs = model.get_encoder()(torch.cat([SOURCE, SOURCE]))
    with pytest.raises(ValueError, match=r"encoder_outputs 2, decoder_input_ids 1"):
        model(encoder_outputs=encoder_outputs, decoder_input_ids=DECODER)


def test_the_base_model_rejects_unknown_keywords_too(model):
    with pytest.raises(TypeError, match="TinyTransformerModel.forward got unexpected keyword arguments: past_key_values"):
        model.model(input_ids=SOURCE, decoder_input_ids=DECODER, past_key_values=None)
