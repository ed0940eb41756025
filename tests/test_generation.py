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


def test_beam_search_reordering_only_self_attention_scores_as_reordering_the_whole_cache(model, monkeypatch):
    """The model's `_reorder_cache` leaves the cross-attention keys and values in place (each beam of a sentence
    holds the same); without the hook generate reorders the whole cache: the same beams with the same scores."""
    scored = {"num_beams": 4, "num_return_sequences": 4, "output_scores": True, "return_dict_in_generate": True}
    ours = generate(model, **scored)
    monkeypatch.delattr(type(model), "_reorder_cache")
    whole = generate(model, **scored)
    assert torch.equal(ours.sequences, whole.sequences)
    assert torch.equal(ours.sequences_scores, whole.sequences_scores)


def test_static_cache_gives_the_same_tokens(model):
    assert torch.equal(generate(model, cache_implementation="static"), generate(model, use_cache=False))


def test_static_cache_decoding_compiles_as_one_graph(model):
    """generate's compiled path (static cache + torch.compile, fullgraph): no graph break in the model, same
    tokens. Dynamo's "eager" backend traces the graph without the minutes of C++ code generation."""
    from torch._dynamo.utils import counters
    from transformers import CompileConfig

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
    full = model(
        decoder_input_ids=torch.cat([torch.ones(3, 1, dtype=torch.long), next_token], 1), **{**step, "use_cache": False}
    )
    torch.testing.assert_close(out2.logits[:, -1], full.logits[:, -1], atol=1e-5, rtol=1e-5)


def test_bfloat16_forward_and_generate_on_cpu():
    model = tiny_model().to(torch.bfloat16)
    out = model(input_ids=SOURCE, attention_mask=MASK, decoder_input_ids=torch.ones(3, 2, dtype=torch.long))
    assert out.logits.dtype == torch.bfloat16 and torch.isfinite(out.logits).all()
    generated = generate(model)
    assert generated.shape == (3, 13)
    assert model.model.encoder.embed_positions.pe.dtype == torch.bfloat16


# The generate() features that pass keywords or inputs through forward(), each as on transformers' own models.


def test_inputs_embeds_give_the_logits_and_tokens_of_ids(model):
    """Embeddings as get_input_embeddings() gives them, for the source and for the target: the same logits as the
    ids, and generate(inputs_embeds=...) the same tokens (the sqrt(d_model) scale is the model's, applied to both)."""
    embed = model.get_input_embeddings()
    decoder_ids = torch.tensor([[1, 11, 12], [1, 13, 14], [1, 15, 2]])
    from_ids = model(input_ids=SOURCE, attention_mask=MASK, decoder_input_ids=decoder_ids).logits
    from_embeddings = model(inputs_embeds=embed(SOURCE), attention_mask=MASK, decoder_inputs_embeds=embed(decoder_ids))
    torch.testing.assert_close(from_embeddings.logits, from_ids)
    torch.testing.assert_close(
        model(inputs_embeds=embed(SOURCE), attention_mask=MASK, decoder_input_ids=decoder_ids).logits, from_ids
    )
    for beams in (1, 3):
        by_ids = generate(model, num_beams=beams)
        assert torch.equal(
            model.generate(
                inputs_embeds=embed(SOURCE), attention_mask=MASK, num_beams=beams, max_new_tokens=12, min_new_tokens=12
            ),
            by_ids,
        )


def test_encoder_outputs_given_to_generate_skip_the_encoder(model):
    encoder_outputs = model.get_encoder()(SOURCE, MASK)
    given = model.generate(encoder_outputs=encoder_outputs, attention_mask=MASK, max_new_tokens=12, min_new_tokens=12)
    assert torch.equal(given, generate(model))


def test_stop_strings_end_generation_at_the_string(text_model, tokenizer):
    """generate passes its `tokenizer` on to forward(): a model that refused the keyword broke stop strings."""
    source = tokenizer(["I really like green tea."], return_tensors="pt")
    free = text_model.generate(**source, max_new_tokens=12, min_new_tokens=12)[0]
    stop_string = next(text for token in free[4:].tolist() if len(text := tokenizer.decode([token]).strip()) > 1)
    stopped = text_model.generate(**source, max_new_tokens=12, stop_strings=[stop_string], tokenizer=tokenizer)[0]
    assert len(stopped) < len(free) and stopped.tolist() == free[: len(stopped)].tolist()
    assert tokenizer.decode(stopped, skip_special_tokens=True).endswith(stop_string)


def test_a_streamer_sees_every_new_token(model):
    from transformers.generation.streamers import BaseStreamer

    class Collect(BaseStreamer):
        def __init__(self):
            self.tokens = []

        def put(self, value):
            self.tokens += value.flatten().tolist()

        def end(self):
            self.ended = True

    streamer = Collect()
    out = model.generate(
        input_ids=SOURCE[:1], attention_mask=MASK[:1], max_new_tokens=12, min_new_tokens=12, streamer=streamer
    )
    assert streamer.tokens == out[0].tolist() and streamer.ended


def test_assisted_and_prompt_lookup_decoding_give_greedy_tokens(model):
    """Both verify candidate tokens with several decoder positions at once through the cache."""
    greedy = generate(model)[:1]
    single = {"input_ids": SOURCE[:1], "attention_mask": MASK[:1], "max_new_tokens": 12, "min_new_tokens": 12}
    assert torch.equal(model.generate(**single, assistant_model=tiny_model(seed=5)), greedy)
    assert torch.equal(model.generate(**single, prompt_lookup_num_tokens=3), greedy)
