import pytest

from hf_tiny_transformer import TinyTransformerConfig, TinyTransformerForConditionalGeneration, load_preset, preset_names

from conftest import tiny_config


def test_defaults_are_the_papers_base_model():
    config = TinyTransformerConfig()
    assert (config.d_model, config.encoder_layers, config.decoder_layers) == (512, 6, 6)
    assert (config.encoder_attention_heads, config.decoder_attention_heads) == (8, 8)
    assert (config.encoder_ffn_dim, config.decoder_ffn_dim) == (2048, 2048)
    assert config.dropout == 0.1 and config.activation_function == "relu"
    assert config.scale_embedding and config.tie_word_embeddings and not config.normalize_before
    assert (config.pad_token_id, config.bos_token_id, config.eos_token_id, config.decoder_start_token_id) == (0, 1, 2, 1)
    assert config.is_encoder_decoder


def test_library_names_map_to_the_config():
    config = tiny_config(encoder_layers=3, decoder_layers=2)
    assert config.hidden_size == config.d_model
    assert config.num_attention_heads == config.encoder_attention_heads
    assert config.get_text_config(decoder=True).num_hidden_layers == 2


@pytest.mark.parametrize(
    "overrides, message",
    [
        (dict(d_model=30, encoder_attention_heads=4), "divisible by encoder_attention_heads"),
        (dict(decoder_attention_heads=3), "divisible by decoder_attention_heads"),
        (dict(d_model=0), "d_model must be a positive integer"),
        (dict(encoder_layers=0), "encoder_layers must be a positive integer"),
        (dict(decoder_ffn_dim=-1), "decoder_ffn_dim must be a positive integer"),
        (dict(vocab_size=0), "vocab_size must be a positive integer"),
        (dict(activation_function="tanh"), "activation_function must be one of"),
        (dict(dropout=1.0), r"dropout must be in \[0, 1\)"),
        (dict(attention_dropout=-0.1), r"attention_dropout must be in \[0, 1\)"),
        (dict(vocab_size=2), r"eos_token_id \(2\) must be in \[0, vocab_size=2\)"),
    ],
)
def test_bad_values_raise_when_the_config_is_created(overrides, message):
    with pytest.raises(ValueError, match=message):
        tiny_config(**overrides)


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


def test_presets_are_data_and_the_parameter_count_matches_the_formula():
    assert {"paper-base", "tiny"} <= set(preset_names())
    base = load_preset("paper-base")
    assert base.to_dict() == TinyTransformerConfig().to_dict()
    model = TinyTransformerForConditionalGeneration(base)
    count = model.num_parameters()
    assert count == closed_form_parameter_count(base)
    assert 62_000_000 < count < 64_000_000  # the paper's "65M" base model with a 37k shared vocabulary

    tiny = load_preset("tiny")
    assert (tiny.vocab_size, tiny.d_model, tiny.encoder_layers, tiny.decoder_layers) == (8000, 256, 3, 3)
    assert (tiny.encoder_attention_heads, tiny.encoder_ffn_dim) == (4, 1024)
    assert TinyTransformerForConditionalGeneration(tiny).num_parameters() == closed_form_parameter_count(tiny)
    pre_ln = tiny_config(normalize_before=True)
    assert TinyTransformerForConditionalGeneration(pre_ln).num_parameters() == closed_form_parameter_count(pre_ln)


def test_preset_overrides_and_unknown_preset():
    assert load_preset("tiny", vocab_size=1234).vocab_size == 1234
    with pytest.raises(ValueError, match="Unknown preset 'huge'; choose one of"):
        load_preset("huge")
