"""generate(): greedy, beam and sampling, with and without the key/value cache, and the static cache."""

import torch
from transformers import EncoderDecoderCache, LogitsProcessor, LogitsProcessorList

from conftest import tiny_model

SOURCE = torch.tensor([[5, 6, 7, 8, 2], [9, 10, 2, 0, 0], [11, 12, 13, 2, 0]])
MASK = (SOURCE != 0).long()


def generate(model, **kwargs):
    kwargs = {"max_new_tokens": 12, "min_new_tokens": 12, **kwargs}
    return model.generate(input_ids=SOURCE, attention_mask=MASK, **kwargs)


def test_greedy_with_and_without_cache_gives_identical_tokens_and_scores(model):
    scored = {"output_scores": True, "return_dict_in_generate": True}
    cached, uncached = generate(model, use_cache=True, **scored), generate(model, use_cache=False, **scored)
    assert cached.sequences.shape == (3, 13) and cached.sequences[:, 0].eq(1).all()
    assert torch.equal(cached.sequences, uncached.sequences)
    for step_cached, step_uncached in zip(cached.scores, uncached.scores, strict=True):
        torch.testing.assert_close(step_cached, step_uncached, atol=1e-5, rtol=1e-5)
    assert not torch.allclose(cached.scores[1], cached.scores[-1])  # each step saw a different prefix


def test_beam_search_with_and_without_cache_gives_identical_tokens(model):
    cached = generate(model, num_beams=4, use_cache=True)
    assert torch.equal(cached, generate(model, num_beams=4, use_cache=False))
    assert not torch.equal(cached, generate(model))  # beam search really searched


def test_static_cache_gives_the_same_tokens(model):
    assert torch.equal(generate(model, cache_implementation="static"), generate(model, use_cache=False))


def test_static_cache_decoding_compiles_as_one_graph(model):
    """generate's compiled path (static cache + torch.compile, fullgraph): no graph break in the model, same
    tokens. Dynamo's "eager" backend traces the graph without the minutes of C++ code generation."""
    from transformers import CompileConfig

    from torch._dynamo.utils import counters

    torch._dynamo.reset()
    counters.clear()
    compile_config = CompileConfig(fullgraph=True, dynamic=False, backend="eager")
    compile_config._compile_all_devices = True  # generate compiles on its own only on accelerators
    compiled = generate(model, cache_implementation="static", compile_config=compile_config)
    assert counters["stats"]["unique_graphs"] >= 1  # the decoding steps really ran compiled
    assert torch.equal(compiled, generate(model, use_cache=False))


def test_sampling_is_seeded_and_stays_in_the_vocabulary(model):
    torch.manual_seed(0)
    first = generate(model, do_sample=True, top_k=10, temperature=1.5)
    torch.manual_seed(0)
    second = generate(model, do_sample=True, top_k=10, temperature=1.5)
    torch.manual_seed(1)
    third = generate(model, do_sample=True, top_k=10, temperature=1.5)
    assert torch.equal(first, second) and not torch.equal(first, third)
    assert first.min() >= 0 and first.max() < 50


class EndRowAfter(LogitsProcessor):
    """Makes </s> row i's (i + 1)-th new token and no other, so that the rows of a batch end at different steps."""

    def __call__(self, input_ids: torch.Tensor, scores: torch.Tensor) -> torch.Tensor:
        for row in range(scores.shape[0]):
            if input_ids.shape[1] == row + 1:
                scores[row] = float("-inf")
                scores[row, 2] = 0.0
            else:
                scores[row, 2] = float("-inf")
        return scores


def test_generation_stops_at_eos_and_pads_after_it(model):
    out = model.generate(
        input_ids=SOURCE, attention_mask=MASK, max_new_tokens=30, logits_processor=LogitsProcessorList([EndRowAfter()])
    )
    assert out.shape == (3, 4)  # the longest row: <s>, two tokens, </s>; then generation stops
    for row in range(3):
        assert out[row, row + 1] == 2  # </s> where it was forced
        assert 2 not in out[row, : row + 1].tolist()
        assert out[row, row + 2 :].tolist() == [0] * (2 - row)  # padding after it


def test_cache_appends_self_attention_and_computes_cross_attention_once(model):
    encoder_outputs = model.get_encoder()(SOURCE, MASK)
    step = dict(encoder_outputs=encoder_outputs, attention_mask=MASK, use_cache=True)
    out = model(decoder_input_ids=torch.ones(3, 1, dtype=torch.long), **step)
    cache = out.cache
    assert isinstance(cache, EncoderDecoderCache)
    assert cache.self_attention_cache.get_seq_length() == 1
    cross_keys = cache.cross_attention_cache.layers[0].keys
    assert cross_keys.shape == (3, 4, 5, 8)  # (B, H, source length, d_k)

    next_token = out.logits[:, -1].argmax(-1, keepdim=True)
    out2 = model(decoder_input_ids=next_token, cache=cache, **step)
    assert cache.self_attention_cache.get_seq_length() == 2
    assert cache.cross_attention_cache.layers[0].keys is cross_keys  # reused, not recomputed
    full = model(decoder_input_ids=torch.cat([torch.ones(3, 1, dtype=torch.long), next_token], 1), **{**step, "use_cache": False})
    torch.testing.assert_close(out2.logits[:, -1], full.logits[:, -1], atol=1e-5, rtol=1e-5)


def test_bfloat16_forward_and_generate_on_cpu():
    model = tiny_model().to(torch.bfloat16)
    out = model(input_ids=SOURCE, attention_mask=MASK, decoder_input_ids=torch.ones(3, 2, dtype=torch.long))
    assert out.logits.dtype == torch.bfloat16 and torch.isfinite(out.logits).all()
    generated = generate(model)
    assert generated.shape == (3, 13)
    assert model.model.encoder.embed_positions.pe.dtype == torch.bfloat16
