"""The configuration (configuration_tiny_transformer.py): the paper's defaults, the library's names, the checks of
every field on every path, what a saved config holds; and the shapes (hf_tiny_transformer/shapes/), whose parameter
counts match the formula."""

import json

import pytest
from huggingface_hub.errors import StrictDataclassError

from conftest import tiny_config
from hf_tiny_transformer import TinyTransformerConfig, TinyTransformerForConditionalGeneration, load_shape, shape_names


def test_defaults_are_the_papers_base_model():
    config = TinyTransformerConfig()
    assert (config.d_model, config.encoder_layers, config.decoder_layers) == (512, 6, 6)
    assert (config.encoder_attention_heads, config.decoder_attention_heads) == (8, 8)
    assert (config.encoder_ffn_dim, config.decoder_ffn_dim) == (2048, 2048)
    assert config.dropout == 0.1 and config.activation_function == "relu"
    assert config.scale_embedding and config.tie_word_embeddings and not config.normalize_before
    assert (config.pad_token_id, config.bos_token_id, config.eos_token_id, config.decoder_start_token_id) == (
        0,
        1,
        2,
        1,
    )
    assert config.is_encoder_decoder


def test_library_names_map_to_the_config():
    config = tiny_config(encoder_layers=3, decoder_layers=2)
    assert config.hidden_size == config.d_model
    assert config.num_attention_heads == config.encoder_attention_heads
    assert config.get_text_config(decoder=True).num_hidden_layers == 2


BAD_VALUES = [
    (
        dict(d_model=30, encoder_attention_heads=4),
        "d_model \\(30\\) must be divisible by encoder_attention_heads \\(4\\)",
    ),
    (dict(decoder_attention_heads=3), "divisible by decoder_attention_heads \\(3\\)"),
    (dict(d_model=0), "field 'd_model'.*must be a positive integer, got 0"),
    (dict(encoder_layers=0), "field 'encoder_layers'.*positive integer"),
    (dict(decoder_ffn_dim=-1), "field 'decoder_ffn_dim'.*positive integer, got -1"),
    (dict(vocab_size=0), "field 'vocab_size'.*positive integer"),
    (dict(max_position_embeddings=0), "field 'max_position_embeddings'"),
    (dict(activation_function="tanh"), "field 'activation_function'.*must be one of relu"),
    (dict(dropout=1.0), "field 'dropout'.*must be in \\[0, 1\\), got 1.0"),
    (dict(attention_dropout=-0.1), "field 'attention_dropout'"),
    (dict(activation_dropout=2), "field 'activation_dropout'"),
    (dict(d_model="512"), "field 'd_model'.*expected int"),
    (dict(vocab_size=2), "eos_token_id \\(2\\) must be in \\[0, vocab_size=2\\)"),
]


@pytest.mark.parametrize("overrides, message", BAD_VALUES)
def test_bad_values_raise_when_the_config_is_created_naming_the_field(overrides, message):
    """The checks are @strict validators: the library's errors, which name the field (or the validator)."""
    with pytest.raises(StrictDataclassError, match=f"(?s){message}"):
        tiny_config(**overrides)


@pytest.mark.parametrize("field, value", [("d_model", 0), ("dropout", 1.5), ("activation_function", "tanh")])
def test_a_bad_value_set_later_is_refused_on_every_path(field, value, tmp_path):
    """Field checks run whenever a field is set: update(), attribute assignment, from_pretrained(folder, field=...)."""
    config = tiny_config()
    with pytest.raises(StrictDataclassError, match=f"field '{field}'"):
        config.update({field: value})
    with pytest.raises(StrictDataclassError, match=f"field '{field}'"):
        setattr(config, field, value)
    config.save_pretrained(tmp_path)
    with pytest.raises(StrictDataclassError, match=f"field '{field}'"):
        TinyTransformerConfig.from_pretrained(tmp_path, **{field: value})


def test_checks_across_fields_run_at_creation_and_at_save(tmp_path):
    """As the library runs class validators: a config made valid and changed later is refused when it is saved (and
    by `validate()`, which scripts call after changing fields)."""
    config = tiny_config()
    config.encoder_attention_heads = 3
    with pytest.raises(StrictDataclassError, match="divisible by encoder_attention_heads"):
        config.validate()
    with pytest.raises(StrictDataclassError, match="divisible by encoder_attention_heads"):
        config.save_pretrained(tmp_path)
    assert not (tmp_path / "config.json").exists()


def test_checks_across_fields_refuse_a_loaded_config_given_a_bad_override(tmp_path):
    """from_pretrained(folder, field=...): what a script does with a saved config and its own overrides."""
    tiny_config().save_pretrained(tmp_path)
    with pytest.raises(StrictDataclassError, match=r"divisible by encoder_attention_heads \(3\)"):
        TinyTransformerConfig.from_pretrained(tmp_path, encoder_attention_heads=3).validate()


def test_a_saved_config_holds_no_training_setting(tmp_path):
    """Label smoothing belongs to training: config.json has no loss setting, and one saved by version 0.1 (its
    `label_smoothing`) is dropped when the config is loaded."""
    tiny_config().save_pretrained(tmp_path)
    saved = json.loads((tmp_path / "config.json").read_text())
    assert "label_smoothing" not in saved
    (tmp_path / "config.json").write_text(json.dumps({**saved, "label_smoothing": 0.1}))
    loaded = TinyTransformerConfig.from_pretrained(tmp_path)
    assert not hasattr(loaded, "label_smoothing")
    assert "label_smoothing" not in loaded.to_dict()


def test_config_round_trips_through_json(tmp_path):
    config = tiny_config(normalize_before=True)
    config.save_pretrained(tmp_path)
    loaded = TinyTransformerConfig.from_pretrained(tmp_path)
    assert loaded.to_dict() == config.to_dict()


def closed_form_parameter_count(config: TinyTransformerConfig) -> int:
    """Tied V x D embedding; per attention 4 D x D matrices + 4 D biases; per FFN 2 D F + F + D; 2 D per LayerNorm."""
    d, v = config.d_model, config.vocab_size
    attention = 4 * d * d + 4 * d
    layer_norm = 2 * d

    def ffn(f):
        return 2 * d * f + f + d

    encoder_layer = attention + ffn(config.encoder_ffn_dim) + 2 * layer_norm
    decoder_layer = 2 * attention + ffn(config.decoder_ffn_dim) + 3 * layer_norm
    final_norms = 2 * layer_norm if config.normalize_before else 0
    return v * d + config.encoder_layers * encoder_layer + config.decoder_layers * decoder_layer + final_norms


def test_shapes_are_data_and_the_parameter_count_matches_the_formula():
    assert {"paper-base", "tiny"} <= set(shape_names())
    base = load_shape("paper-base")
    assert base.to_dict() == TinyTransformerConfig().to_dict()
    model = TinyTransformerForConditionalGeneration(base)
    count = model.num_parameters()
    assert count == closed_form_parameter_count(base)
    assert 62_000_000 < count < 64_000_000  # the paper's "65M" base model with a 37k shared vocabulary

    tiny = load_shape("tiny")
    assert (tiny.vocab_size, tiny.d_model, tiny.encoder_layers, tiny.decoder_layers) == (8000, 256, 3, 3)
    assert (tiny.encoder_attention_heads, tiny.encoder_ffn_dim) == (4, 1024)
    assert TinyTransformerForConditionalGeneration(tiny).num_parameters() == closed_form_parameter_count(tiny)
    pre_ln = tiny_config(normalize_before=True)
    assert TinyTransformerForConditionalGeneration(pre_ln).num_parameters() == closed_form_parameter_count(pre_ln)


def test_shape_overrides_and_unknown_shape():
    assert load_shape("tiny", vocab_size=1234).vocab_size == 1234
    with pytest.raises(ValueError, match="Unknown shape 'huge'; choose one of"):
        load_shape("huge")
