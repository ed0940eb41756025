# ---
# jupyter:
#   jupytext:
#     formats: ipynb,py:percent
#     text_representation:
#       extension: .py
#       format_name: percent
#   kernelspec:
#     display_name: Python 3
#     language: python
#     name: python3
# ---

# %% [markdown]
# # The Transformer, step by step, on the real classes
#
# The two documents this project grew from teach *Attention Is All You Need* (Vaswani et al., 2017) by building
# it: a Livebook that translates four short English sentences into Japanese with a Transformer made block by
# block, and an illustrated walkthrough that shows at each step what shape the data has and where it goes. This
# notebook takes the same thirteen steps in Python, with the package's own building blocks
# (`hf_tiny_transformer`), never a copy of them: what is shown is what the model runs.
#
# At each step: the tensor's shape with its axes named (B sentences, S source tokens, T target tokens, D = d_model
# features, H heads of Dh = D / H features, V vocabulary entries), a picture where one says more than numbers,
# and a one-line check that ties it to the paper. Then the seed's next steps (training every layer, greedy
# decoding, a sentence never seen), and a model trained on a real corpus.

# %%
# %matplotlib inline
import math
import warnings

warnings.filterwarnings("ignore", message="IProgress not found")  # tqdm's note when Jupyter widgets are absent

import torch
from torch import nn

from hf_tiny_transformer import TinyTransformerConfig, TinyTransformerForConditionalGeneration, train_tokenizer
from hf_tiny_transformer.app.visualization import Attention, draw_heads, plot_positional_encoding, readable
from hf_tiny_transformer.modeling_tiny_transformer import (
    DecoderLayer,
    EncoderLayer,
    MultiHeadAttention,
    PositionwiseFeedForward,
    ResidualSublayer,
    shift_tokens_right,
    sinusoidal_table,
)

torch.manual_seed(0)
torch.set_printoptions(precision=3, sci_mode=False)

# %% [markdown]
# ## 1. Four sentence pairs
#
# The seed's data: four English sentences and their Japanese translations, the Japanese written with spaces
# between its words as the seed writes it. The tokenizer is the package's (`train_tokenizer`: one BPE vocabulary
# for both languages, `</s>` at the end of every sequence), trained on these eight sentences only.

# %%
pairs = [
    ("i really like green tea", "わたし は 緑茶 が 好き"),
    ("i really like cats", "わたし は 猫 が 好き"),
    ("i really like coffee", "わたし は コーヒー が 好き"),
    ("i really like books", "わたし は 本 が 好き"),
]
english = [source for source, _ in pairs]
japanese = [target for _, target in pairs]
tokenizer = train_tokenizer(english + japanese, vocab_size=400, model_max_length=16)
for source, target in pairs:
    print(f"{source:24} {readable(tokenizer.tokenize(source))}  ->  {readable(tokenizer.tokenize(target))}")
print("vocabulary:", len(tokenizer), "entries (4 special tokens, 256 bytes for unseen characters, the pieces learned)")

# %% [markdown]
# ## 2. The configuration
#
# The paper's base model has d_model 512, 8 heads, 6 + 6 layers and a feed-forward width of 2048; four sentences
# need far less. Dropout is off here so that every number below can be checked by hand (the paper uses 0.1).

# %%
config = TinyTransformerConfig(
    vocab_size=len(tokenizer), d_model=32, max_position_embeddings=16, dropout=0.0,
    encoder_layers=2, encoder_attention_heads=4, encoder_ffn_dim=64,
    decoder_layers=2, decoder_attention_heads=4, decoder_ffn_dim=64,
)  # fmt: skip  # the encoder's sizes and the decoder's, a line each
d_model, heads = config.d_model, config.encoder_attention_heads
print(f"d_model {d_model}, {heads} heads of d_k = d_v = {d_model // heads}, feed-forward {config.encoder_ffn_dim}")
assert d_model % heads == 0  # section 3.2.2: d_k = d_v = d_model / h

# %% [markdown]
# ## 3. The parameters
#
# `TinyTransformerForConditionalGeneration` holds the encoder, the decoder and the output projection. Section 3.4:
# the embeddings and the pre-softmax projection share one matrix, so there is one (V, D) table.

# %%
model = TinyTransformerForConditionalGeneration(config).eval()
groups = {}
for name, parameter in model.named_parameters():
    group = ".".join(part for part in name.split(".")[:4] if not part.isdigit())
    groups.setdefault(group, 0)
    groups[group] += parameter.numel()
for group, count in groups.items():
    print(f"{group:45} {count:7,}")
print(f"{'in all':45} {model.num_parameters():7,}")
embedding = model.model.encoder.embed_tokens.weight  # (V, D)
print("embedding", tuple(embedding.shape), "(V, D)")
assert model.lm_head.weight is embedding and model.model.decoder.embed_tokens.weight is embedding  # one matrix

# %% [markdown]
# ## 4. The positional encoding
#
# Section 3.5: PE(pos, 2i) = sin(pos / 10000^(2i / d_model)), PE(pos, 2i+1) = cos(...). Each dimension is a wave
# of its own wavelength, from 2π to 10000·2π; the stack adds it to the token embeddings times sqrt(d_model).

# %%
table = sinusoidal_table(config.max_position_embeddings, d_model)  # (P, D)
print("table", tuple(table.shape), "(positions, D)")
assert abs(table[3, 4] - math.sin(3 / 10000 ** (4 / d_model))) < 1e-6  # the formula, at pos 3, 2i = 4
plot_positional_encoding(config)

# %%
import matplotlib.figure  # the pictures are matplotlib figures, drawn without pyplot

from hf_tiny_transformer.app.visualization import font_family

matplotlib.rcParams["font.family"] = font_family()  # IPAexGothic first: Japanese tokens as text, not boxes

figure = matplotlib.figure.Figure(figsize=(8, 3), layout="constrained")
axes = figure.subplots()
for dimension in (0, 1, 4, 10):
    axes.plot(table[:, dimension].numpy(), marker="o", label=f"dimension {dimension}")
axes.set_xlabel("position")
axes.legend()
figure

# %% [markdown]
# ## 5. Multi-head attention on its own
#
# Section 3.2: Attention(Q, K, V) = softmax(Q K^T / sqrt(d_k)) V, computed by h heads side by side on
# projections of the same input, their outputs concatenated and projected by W^O. Here the encoder's first
# self-attention (`MultiHeadAttention`) runs alone on the embedded sources, in the eager implementation, which
# returns the weights. "i really like green tea" is one token longer than the others: the other three are padded,
# and the mask keeps every query from looking at padding.

# %%
model.set_attn_implementation("eager")  # the implementation that returns the attention weights
batch = tokenizer(english, padding=True, return_tensors="pt")
source_ids, source_mask = batch["input_ids"], batch["attention_mask"]  # (B, S) each
encoder = model.model.encoder
x = encoder.embed("input_ids", source_ids, None)  # (B, S, D): embeddings * sqrt(D) + PE
additive_mask = (1.0 - source_mask[:, None, None, :]) * torch.finfo(x.dtype).min  # (B, 1, 1, S): 0 or -inf
attention: MultiHeadAttention = encoder.layers[0].self_attn
with torch.no_grad():
    output, weights = attention(x, attention_mask=additive_mask)  # (B, S, D), (B, H, S, S)
print("source ids", tuple(source_ids.shape), "(B, S); x", tuple(x.shape), "(B, S, D)")
print("weights", tuple(weights.shape), "(B, H, S queries, S keys); output", tuple(output.shape), "(B, S, D)")
assert torch.allclose(weights.sum(-1), torch.ones(weights.shape[:-1]))  # every row is a distribution
assert weights[1][..., source_mask[1] == 0].abs().max() == 0  # padding gets no attention
with torch.no_grad():  # the same heads from torch's own scaled dot-product attention
    q, k, v = (
        attention.split_heads(projection(x)) for projection in (attention.q_proj, attention.k_proj, attention.v_proj)
    )
    reference = nn.functional.scaled_dot_product_attention(q, k, v, attn_mask=additive_mask)  # (B, H, S, Dh)
    reference = attention.out_proj(reference.transpose(1, 2).reshape(x.shape))  # heads concatenated, times W^O
assert torch.allclose(output, reference, atol=1e-6)
tokens = readable(tokenizer.convert_ids_to_tokens(source_ids[0]))
heads_of_the_first = Attention(tokens, tokens, "", encoder=(weights[0],), decoder=(), cross=())
draw_heads(heads_of_the_first, "encoder", 0, list(range(heads)))

# %% [markdown]
# ## 6. The feed-forward network, the residual connection and LayerNorm
#
# Section 3.3: FFN(x) = max(0, x W_1 + b_1) W_2 + b_2, the same at every position. Section 5.4: every sub-layer
# sits in LayerNorm(x + Sublayer(x)) (`ResidualSublayer`, post-LN as in the paper).

# %%
layer: EncoderLayer = encoder.layers[0]
around_attention: ResidualSublayer = layer.self_attn_residual
feed_forward: PositionwiseFeedForward = layer.feed_forward
with torch.no_grad():
    after_attention = around_attention.after(x, output)  # LayerNorm(x + Attention(x)): (B, S, D)
    inner = torch.relu(feed_forward.fc1(after_attention))  # (B, S, F): max(0, x W_1 + b_1)
    ffn = feed_forward(after_attention)  # (B, S, D)
    after_ffn = layer.feed_forward_residual.after(after_attention, ffn)  # (B, S, D)
print("inner", tuple(inner.shape), "(B, S, F);", "after the layer", tuple(after_ffn.shape), "(B, S, D)")
assert torch.allclose(ffn, feed_forward.fc2(inner))  # the formula
mean, variance = after_attention.mean(-1), after_attention.var(-1, unbiased=False)
assert mean.abs().max() < 1e-5 and (variance - 1).abs().max() < 1e-3  # LayerNorm: mean 0, variance 1 per position
with torch.no_grad():
    assert torch.allclose(after_ffn, layer(x, additive_mask), atol=1e-6)  # what EncoderLayer.forward computes
print(f"LayerNorm output: mean {mean.abs().max():.1e} at most, variance {variance.min():.4f} to {variance.max():.4f}")

# %% [markdown]
# ## 7. The encoder
#
# N = 2 layers of step 6's kind over the embedded source: its output is the decoder's "memory", one vector per
# source token.

# %%
with torch.no_grad():
    memory = encoder(input_ids=source_ids, attention_mask=source_mask).last_hidden_state  # (B, S, D)
    by_hand = x
    for each in encoder.layers:
        by_hand = each(by_hand, additive_mask)
print("memory", tuple(memory.shape), "(B, S, D)")
assert torch.allclose(memory, by_hand, atol=1e-6)  # the stack is its layers, one after the other

# %% [markdown]
# ## 8. The decoder
#
# Section 3.1: the decoder reads the target shifted one step right (a start token first), attends to itself
# without seeing later positions, then to the memory, then applies its feed-forward network; `DecoderLayer` has
# the three sub-layers, each in its residual connection.

# %%
labels = tokenizer(text_target=japanese, padding=True, return_tensors="pt")["input_ids"]  # (B, T)
labels[labels == tokenizer.pad_token_id] = -100  # left out of the loss
decoder_input_ids = shift_tokens_right(labels, config.pad_token_id, config.decoder_start_token_id)  # (B, T)
target_mask = (labels != -100).long()
decoder_layer: DecoderLayer = model.model.decoder.layers[0]
with torch.no_grad():
    decoded = model.model.decoder(
        input_ids=decoder_input_ids, attention_mask=target_mask, encoder_hidden_states=memory,
        encoder_attention_mask=source_mask, output_attentions=True,
    )  # fmt: skip
print(
    "decoder input",
    tuple(decoder_input_ids.shape),
    "(B, T):",
    readable(tokenizer.convert_ids_to_tokens(decoder_input_ids[0])),
)
print("decoder output", tuple(decoded.last_hidden_state.shape), "(B, T, D)")
print("sub-layers of a decoder layer:", [name for name, _ in decoder_layer.named_children()])

# %% [markdown]
# ## 9. Masked self-attention and cross-attention
#
# The decoder's self-attention may look only at earlier positions: its weights are zero above the diagonal (the
# causal mask). Its cross-attention goes from the Japanese positions (queries) to the English tokens (keys),
# padding of the source left out.

# %%
self_weights, cross_weights = decoded.attentions[0], decoded.cross_attentions[0]  # (B, H, T, T), (B, H, T, S)
print(
    "self-attention",
    tuple(self_weights.shape),
    "(B, H, T, T); cross-attention",
    tuple(cross_weights.shape),
    "(B, H, T, S)",
)
later = torch.triu(torch.ones(self_weights.shape[-2:], dtype=torch.bool), diagonal=1)  # the positions after each query
assert self_weights[..., later].abs().max() == 0  # no query sees a later position
assert torch.allclose(cross_weights.sum(-1), torch.ones(cross_weights.shape[:-1]))
assert cross_weights[1][..., source_mask[1] == 0].abs().max() == 0  # nor the source's padding
targets = readable(tokenizer.convert_ids_to_tokens(decoder_input_ids[0]))
first = Attention(tokens, targets, japanese[0], encoder=(), decoder=(self_weights[0],), cross=(cross_weights[0],))
draw_heads(first, "decoder", 0, list(range(heads)))

# %%
draw_heads(first, "cross", 0, list(range(heads)))

# %% [markdown]
# ## 10. The whole Transformer
#
# Everything at once: `model(...)` embeds, encodes, decodes and projects every decoder position onto the
# vocabulary; a softmax over the last axis gives the probability of every next token.

# %%
inputs = {"input_ids": source_ids, "attention_mask": source_mask}
with torch.no_grad():
    logits = model(**inputs, decoder_input_ids=decoder_input_ids, decoder_attention_mask=target_mask).logits
probabilities = logits.softmax(-1)  # (B, T, V)
print("logits", tuple(logits.shape), "(B, T, V)")
assert torch.allclose(logits, decoded.last_hidden_state @ embedding.T, atol=1e-5)  # the shared matrix, transposed

# %% [markdown]
# ## 11. The output projection before training
#
# Untrained, the model spreads its probability almost evenly over the vocabulary: the entropy of each next-token
# distribution is close to log V, the entropy of the uniform one. The picture: for the first sentence, each
# position's distribution over the pieces the data uses (and all the rest of the vocabulary together).


# %%
pieces = sorted({piece for text in english + japanese for piece in tokenizer(text)["input_ids"]})  # the data's


def vocabulary_picture(probabilities: torch.Tensor, title: str):
    """For the first sentence: the next-token distribution at each decoder position (rows) over the vocabulary
    pieces the data uses (columns) and all the others together (the last column)."""
    rows = probabilities[0, labels[0] != -100]  # (T, V)
    shown = torch.cat([rows[:, pieces], 1 - rows[:, pieces].sum(-1, keepdim=True)], -1)  # (T, pieces + 1)
    figure = matplotlib.figure.Figure(figsize=(9, 3), layout="constrained")
    axes = figure.subplots()
    image = axes.imshow(shown.numpy(), cmap="viridis", vmin=0, vmax=1, aspect="auto")
    axes.set_xticks(range(len(pieces) + 1), [*readable(tokenizer.convert_ids_to_tokens(pieces)), "others"], rotation=90)
    axes.set_yticks(
        range(rows.shape[0]), readable(tokenizer.convert_ids_to_tokens(decoder_input_ids[0, : rows.shape[0]]))
    )
    axes.set_xlabel("next token")
    axes.set_ylabel("decoder input")
    axes.set_title(title)
    figure.colorbar(image, ax=axes)
    return figure


entropy = -(probabilities * probabilities.log()).sum(-1)  # (B, T)
print(f"entropy {entropy.mean():.2f} nats; the uniform distribution's log V = {math.log(len(tokenizer)):.2f}")
assert entropy.mean() > 0.9 * math.log(len(tokenizer))
vocabulary_picture(probabilities, f"Before training: {japanese[0]}")

# %% [markdown]
# ## 12. Training the output layer only
#
# As the seed does it: the layers stay frozen and only the output projection learns. In the paper that projection
# is the embedding matrix itself (section 3.4), so the one matrix learns, and the inputs move with it. The loss is
# the model's own: cross-entropy over the labelled positions.


# %%
def train(parameters, learning_rate: float, steps: int) -> list[float]:
    """Adam on `parameters` over the four pairs, one batch a step; the loss of each step."""
    optimizer = torch.optim.Adam(parameters, lr=learning_rate)
    model.train()
    losses = []
    for _ in range(steps):
        loss = model(input_ids=source_ids, attention_mask=source_mask, labels=labels).loss
        losses.append(loss.item())
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    model.eval()
    return losses


for parameter in model.parameters():
    parameter.requires_grad_(False)
model.lm_head.weight.requires_grad_(True)
trainable = [parameter for parameter in model.parameters() if parameter.requires_grad]
print("trained:", sum(p.numel() for p in trainable), "of", model.num_parameters(), "parameters")
losses = train(trainable, learning_rate=0.05, steps=150)
print(f"loss {losses[0]:.2f} -> {losses[-1]:.2f}")
assert losses[-1] < losses[0] / 2
figure = matplotlib.figure.Figure(figsize=(6, 2.5), layout="constrained")
axes = figure.subplots()
axes.plot(losses)
axes.set_xlabel("step")
axes.set_ylabel("cross-entropy")
figure

# %%
with torch.no_grad():
    probabilities = model(**inputs, decoder_input_ids=decoder_input_ids, decoder_attention_mask=target_mask).logits
probabilities = probabilities.softmax(-1)  # (B, T, V)
right = probabilities.gather(-1, labels.clamp(min=0)[..., None]).squeeze(-1)[labels != -100]
print(f"the right next token gets {right.mean():.2f} of the probability on average (before: {1 / len(tokenizer):.3f})")
vocabulary_picture(probabilities, f"After training the output layer: {japanese[0]}")

# %% [markdown]
# ## 13. Summing up
#
# | step | block (`hf_tiny_transformer`) | shape |
# |---|---|---|
# | tokens | the tokenizer | (B, S) ids |
# | embeddings + positions | `TransformerStack.embed`, `sinusoidal_table` | (B, S, D) |
# | multi-head attention | `MultiHeadAttention` | (B, H, S, Dh) a head, (B, S, D) out |
# | feed-forward | `PositionwiseFeedForward` | (B, S, F) inside, (B, S, D) out |
# | residual + LayerNorm | `ResidualSublayer` | (B, S, D) |
# | encoder | `EncoderLayer` x N, `TinyTransformerEncoder` | (B, S, D) memory |
# | decoder | `DecoderLayer` x N, `TinyTransformerDecoder` | (B, T, D) |
# | output | `lm_head` (the embedding, transposed) | (B, T, V) logits |
#
# ## Next steps, as the seed lists them
#
# Training every layer, with the padding masks the batches need, then greedy decoding with `generate()`: the four
# sentences, and a fifth one never seen.

# %%
for parameter in model.parameters():
    parameter.requires_grad_(True)
losses = train(model.parameters(), learning_rate=0.003, steps=150)  # at 0.01 this run falls apart (post-LN)
print(f"loss after training every layer: {losses[-1]:.4f}")
generated = model.generate(input_ids=source_ids, attention_mask=source_mask, num_beams=1, max_new_tokens=15)
translations = tokenizer.batch_decode(generated, skip_special_tokens=True)
for source, translation in zip(english, translations):
    print(f"{source:24} -> {translation}")
assert [t.replace(" ", "") for t in translations] == [t.replace(" ", "") for t in japanese]  # the four, learned

# %%
unseen = "i really like green cats"
new = tokenizer([unseen], return_tensors="pt")
print(
    unseen, "->", tokenizer.decode(model.generate(**new, num_beams=1, max_new_tokens=15)[0], skip_special_tokens=True)
)

# %% [markdown]
# Four sentences teach the model a template and four nouns, no more: a combination it never saw comes back as
# the nearest thing it knows.
#
# ## Leaving the toy world
#
# The same classes, trained by the project's training script on the built-in demo corpus (four sentence patterns,
# 2,501 pairs; `make demo` trains a larger one), in under a minute: then the attention of a real sentence.

# %%
import json
import subprocess
import sys
import tempfile
from pathlib import Path

from hf_tiny_transformer.data.demo_corpus import make_demo_corpus

folder = Path(tempfile.mkdtemp(prefix="walkthrough-"))
corpus = make_demo_corpus(seed=0)
for side, attribute in (("en", "english"), ("ja", "japanese")):
    (folder / f"train.{side}").write_text(
        "".join(getattr(p, attribute) + "\n" for p in corpus["train"]), encoding="utf-8"
    )
flags = [
    "--shape", "tiny", "--vocab_size", "600", "--config_overrides",
    "d_model=64,encoder_ffn_dim=256,decoder_ffn_dim=256,encoder_layers=2,decoder_layers=2,max_position_embeddings=64",
    "--train_source_file", str(folder / "train.en"), "--train_target_file", str(folder / "train.ja"),
    "--output_dir", str(folder / "run"), "--per_device_train_batch_size", "64", "--max_steps", "350",
    "--warmup_steps", "100", "--learning_rate", "0.003", "--save_strategy", "no", "--report_to", "none",
    "--disable_tqdm", "true", "--precision", "fp32", "--seed", "0",
]  # fmt: skip
training = subprocess.run([sys.executable, "../training/train.py", *flags], capture_output=True, text=True)
assert training.returncode == 0, training.stderr[-2000:]
metrics = json.loads((folder / "run" / "metrics.json").read_text())
print(f"{metrics['train_steps']} steps in {metrics['train_runtime_s']:.0f} s ({metrics['precision']})")

# %%
from transformers import AutoModelForSeq2SeqLM, AutoTokenizer, pipeline
from transformers.utils import logging

from hf_tiny_transformer.app.visualization import plot_attention

logging.disable_progress_bar()  # no "Loading weights" bars among the outputs
trained = AutoModelForSeq2SeqLM.from_pretrained(folder / "run" / "hub")
trained_tokenizer = AutoTokenizer.from_pretrained(folder / "run" / "hub")
translate = pipeline("translation", model=str(folder / "run" / "hub"), trust_remote_code=True)
sentence = "My mother really likes green tea."
print(sentence, "->", translate(sentence)[0]["translation_text"])
assert type(trained).__name__ == "TinyTransformerForConditionalGeneration"
plot_attention(trained, trained_tokenizer, sentence, kind="cross", layer=1)

# %% [markdown]
# ## Where to go next
#
# - `README.md`: the two commands (`make demo`, `make test`), using a model, the results.
# - `docs/design.md`: the paper in the code, section by section, and every difference from it.
# - `training/README.md`: training real models (`make train-en-ja`), recipes, precision, time budgets.
# - `docs/serving.md`: the translation pipeline, `tiny-transformer translate`, CTranslate2, the demo page
#   (`tiny-transformer app`), pictures of attention (`tiny-transformer visualize`).
