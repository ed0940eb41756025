"""Labels, the loss, gradient accumulation under Trainer, gradient checkpointing, and a model that learns."""

import pytest
import torch
from transformers import AutoModelForSeq2SeqLM, AutoTokenizer

from conftest import sgd_arguments, tiny_model
from hf_tiny_transformer.marian import marian_of_the_same_shape
from hf_tiny_transformer.modeling_tiny_transformer import shift_tokens_right
from hf_tiny_transformer.trainer.loss import (
    LabelSmoothedCrossEntropy,
    LabelSmoothing,
    OutputLayerLabelSmoothedCrossEntropy,
    label_smoothed_cross_entropy,
    output_layer_label_smoothed_cross_entropy,
)
from hf_tiny_transformer.trainer.trainer import TranslationTrainer


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


def trainer_parameters(tmp_path, batch_size, accumulation, label_smoothing=0.0):
    model = tiny_model(seed=1, dropout=0.0)
    model.train()
    torch.manual_seed(2)
    sources = torch.randint(4, 50, (8, 6))
    targets = torch.randint(4, 50, (8, 5))
    targets[::3, 3:] = -100  # uneven lengths: the per-token mean over the whole batch is what must match
    data = [{"input_ids": s, "attention_mask": torch.ones_like(s), "labels": t} for s, t in zip(sources, targets)]
    args = sgd_arguments(
        tmp_path / f"run{batch_size}",
        per_device_train_batch_size=batch_size,
        gradient_accumulation_steps=accumulation,
        max_steps=3,
        logging_strategy="no",
        seed=0,
        dataloader_drop_last=False,
        label_smoothing_factor=label_smoothing,
    )
    trainer = TranslationTrainer(model=model, args=args, train_dataset=data, data_collator=with_decoder_inputs(model))
    assert isinstance(trainer.compute_loss_func, LabelSmoothing) == bool(label_smoothing)
    trainer.train()
    return {name: p.detach().clone() for name, p in model.named_parameters()}


def with_decoder_inputs(model):
    """Stack the examples and add the decoder inputs (what DataCollatorForSeq2Seq(model=...) does): with label
    smoothing, Trainer calls the model without labels."""

    def collate(examples):
        batch = {key: torch.stack([example[key] for example in examples]) for key in examples[0]}
        return {**batch, "decoder_input_ids": model.prepare_decoder_input_ids_from_labels(batch["labels"])}

    return collate


@pytest.mark.parametrize("label_smoothing", [0.0, 0.1])
def test_trainer_gradient_accumulation_is_exact(tmp_path, label_smoothing):
    """Batch 8 and batch 4 x 2 accumulation steps give the same parameters (the loss is summed / num_items)."""
    big = trainer_parameters(tmp_path, 8, 1, label_smoothing)
    accumulated = trainer_parameters(tmp_path, 4, 2, label_smoothing)
    initial = {name: p for name, p in tiny_model(seed=1, dropout=0.0).named_parameters()}
    assert any(not torch.allclose(big[name], initial[name]) for name in big)
    for name in big:
        torch.testing.assert_close(accumulated[name], big[name], atol=1e-5, rtol=1e-4)


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


def test_the_padding_row_gets_gradient_only_through_the_output_projection(batch):
    """The header's difference 3: nn.Embedding's padding_idx stops the lookup's gradient, not the tied lm_head's."""
    for tied in (True, False):
        model = tiny_model(tie_word_embeddings=tied, dropout=0.0)
        model.train()
        model(**batch).loss.backward()
        embedding_gradient = model.model.encoder.embed_tokens.weight.grad[0]
        assert bool(embedding_gradient.abs().sum() > 0) is tied
        assert model.lm_head.weight.grad[0].abs().sum() > 0


def reference_label_smoothed_loss(logits: torch.Tensor, labels: torch.Tensor, epsilon: float) -> torch.Tensor:
    """Paper section 5.4 in float64: cross-entropy against (1 - eps) one-hot + eps / V, mean over labelled tokens."""
    log_probs = torch.log_softmax(logits.double(), dim=-1)  # (B, T, V)
    target = torch.full_like(log_probs, epsilon / logits.shape[-1])
    target.scatter_add_(-1, labels.clamp(min=0)[..., None], torch.full_like(log_probs[..., :1], 1 - epsilon))
    per_token = -(target * log_probs).sum(-1)  # (B, T)
    kept = labels != -100
    return per_token[kept].sum() / kept.sum()


@pytest.mark.parametrize("epsilon", [0.0, 0.1, 0.3])
@pytest.mark.parametrize("spread", [3.0, 300.0])  # 300: exp of most logits underflows, the softmax is nearly one-hot
def test_label_smoothed_loss_and_its_gradient_match_a_float64_reference(epsilon, spread):
    torch.manual_seed(0)
    logits = (torch.randn(3, 5, 50) * spread).requires_grad_()
    labels = torch.randint(0, 50, (3, 5))
    labels[1, 3:] = -100
    reference_logits = logits.detach().double().requires_grad_()
    expected = reference_label_smoothed_loss(reference_logits, labels, epsilon)
    expected.backward()
    got = label_smoothed_cross_entropy(logits, labels, epsilon)
    got.backward()
    torch.testing.assert_close(got.double(), expected, atol=1e-6, rtol=1e-6)
    torch.testing.assert_close(logits.grad.double(), reference_logits.grad, atol=1e-7, rtol=1e-5)
    assert torch.all(logits.grad[1, 3:] == 0)  # ignored positions get no gradient


@pytest.mark.parametrize("chunk_rows", [1024, 4])
def test_label_smoothed_loss_of_bfloat16_logits_is_computed_in_float32(monkeypatch, chunk_rows):
    """bf16 logits (bf16 autocast's): the loss is float32, computed from them as a float64 reference computes it,
    and the gradient is that reference's, computed in float32 and rounded once to bfloat16 (in chunks of 4 rows
    too: 15 rows, a partial chunk)."""
    monkeypatch.setattr(LabelSmoothedCrossEntropy, "chunk_rows", chunk_rows)
    torch.manual_seed(2)
    logits = (torch.randn(3, 5, 50) * 3).bfloat16().requires_grad_()
    labels = torch.randint(0, 50, (3, 5))
    labels[2, 1:] = -100
    reference_logits = logits.detach().double().requires_grad_()
    expected = reference_label_smoothed_loss(reference_logits, labels, 0.1)
    expected.backward()
    got = label_smoothed_cross_entropy(logits, labels, 0.1)
    got.backward()
    assert got.dtype == torch.float32 and logits.grad.dtype == torch.bfloat16
    torch.testing.assert_close(got.double(), expected, atol=1e-6, rtol=1e-6)
    torch.testing.assert_close(logits.grad, reference_logits.grad.bfloat16(), atol=1e-6, rtol=2**-8)
    assert torch.all(logits.grad[2, 1:] == 0)


def test_a_second_backward_pass_through_the_loss_is_refused():
    """The backward pass writes the gradient over the saved softmax, so a second one (retain_graph) would read the
    gradient as the softmax: autograd refuses it instead of giving a wrong gradient."""
    logits = torch.randn(2, 3, 10, requires_grad=True)
    loss = label_smoothed_cross_entropy(logits, torch.randint(0, 10, (2, 3)), 0.1)
    loss.backward(retain_graph=True)
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        loss.backward()


def test_label_smoothed_loss_in_chunks_equals_one_piece(monkeypatch):
    torch.manual_seed(1)
    logits = torch.randn(4, 7, 30, requires_grad=True)
    labels = torch.randint(0, 30, (4, 7))
    whole = label_smoothed_cross_entropy(logits, labels, 0.1)
    (whole_grad,) = torch.autograd.grad(whole, logits)
    monkeypatch.setattr(LabelSmoothedCrossEntropy, "chunk_rows", 5)  # 28 rows: 5 full chunks and a partial one
    chunked = label_smoothed_cross_entropy(logits, labels, 0.1)
    (chunked_grad,) = torch.autograd.grad(chunked, logits)
    torch.testing.assert_close(chunked, whole)
    torch.testing.assert_close(chunked_grad, whole_grad)


@pytest.mark.parametrize("epsilon", [0.0, 0.1])
@pytest.mark.parametrize("chunk_rows", [128, 4])
def test_the_loss_with_the_output_projection_and_its_gradients_match_a_float64_reference(
    monkeypatch, epsilon, chunk_rows
):
    """float32: the loss of the logits h W^T, made block by block (15 rows: blocks of 4 and a partial one, or one),
    and the gradients of h and W (the tied embeddings'), against the float64 formula; ignored rows get none."""
    monkeypatch.setattr(OutputLayerLabelSmoothedCrossEntropy, "chunk_rows", chunk_rows)
    torch.manual_seed(3)
    hidden = torch.randn(3, 5, 8, requires_grad=True)
    weight = (torch.randn(50, 8) * 2).requires_grad_()
    labels = torch.randint(0, 50, (3, 5))
    labels[1, 3:] = -100
    reference_hidden = hidden.detach().double().requires_grad_()
    reference_weight = weight.detach().double().requires_grad_()
    expected = reference_label_smoothed_loss(reference_hidden @ reference_weight.T, labels, epsilon)
    expected.backward()
    got = output_layer_label_smoothed_cross_entropy(hidden, weight, labels, epsilon, torch.float32)
    got.backward()
    assert got.dtype == hidden.grad.dtype == weight.grad.dtype == torch.float32
    torch.testing.assert_close(got.double(), expected, atol=1e-6, rtol=1e-6)
    torch.testing.assert_close(hidden.grad.double(), reference_hidden.grad, atol=1e-7, rtol=1e-5)
    torch.testing.assert_close(weight.grad.double(), reference_weight.grad, atol=1e-7, rtol=1e-5)
    assert torch.all(hidden.grad[1, 3:] == 0)


def test_the_loss_with_the_output_projection_in_bfloat16_makes_bfloat16_logits():
    """bf16: the logits are those of h and W rounded to bfloat16, rounded to bfloat16 themselves (as autocast makes
    them); the loss is the float64 formula's of those logits, and each gradient is the float64 one from them (G W and
    G^T h, G the logits' gradient) to within G's rounding to bfloat16 (2^-7 of the sum of the terms' sizes); float32
    h and W get float32 gradients."""
    torch.manual_seed(4)
    hidden = torch.randn(2, 7, 16, requires_grad=True)
    weight = torch.randn(40, 16, requires_grad=True)
    labels = torch.randint(0, 40, (2, 7))
    labels[0, 5:] = -100
    low_hidden, low_weight = hidden.detach().bfloat16().double(), weight.detach().bfloat16().double()
    logits = (low_hidden @ low_weight.T).bfloat16().double().requires_grad_()  # (2, 7, 40)
    expected = reference_label_smoothed_loss(logits, labels, 0.1)
    expected.backward()
    got = output_layer_label_smoothed_cross_entropy(hidden, weight, labels, 0.1, torch.bfloat16)
    got.backward()
    assert got.dtype == hidden.grad.dtype == weight.grad.dtype == torch.float32
    torch.testing.assert_close(got.double(), expected, atol=1e-5, rtol=1e-5)
    g, h = logits.grad.flatten(0, 1), low_hidden.flatten(0, 1)  # (14, 40), (14, 16)
    for grad, reference, bound in (
        (hidden.grad.flatten(0, 1), g @ low_weight, g.abs() @ low_weight.abs()),
        (weight.grad, g.T @ h, g.abs().T @ h.abs()),
    ):
        assert torch.all((grad.double() - reference).abs() <= 2**-7 * bound)
    assert torch.all(hidden.grad[0, 5:] == 0)


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


@pytest.mark.parametrize("architecture", ["ours", "ours, untied", "marian"])
def test_training_steps_take_the_loss_with_the_output_projection_where_the_model_can(tmp_path, batch, architecture):
    """TranslationTrainer's training loss: our model makes no logits and the loss makes them from the decoder's
    output, equal to the loss of the full logits; with an output projection of its own (untied: a weight the
    forward pass would not use), and MarianMTModel (no logits_to_keep), the model hands its logits as before.
    Evaluation (return_outputs) always gets the logits."""
    model = tiny_model(dropout=0.0, tie_word_embeddings=architecture != "ours, untied")
    model = marian_of_the_same_shape(model.config) if architecture == "marian" else model
    model.train()
    args = sgd_arguments(tmp_path, label_smoothing_factor=0.1, per_device_train_batch_size=2)
    trainer = TranslationTrainer(model=model, args=args, train_dataset=[], data_collator=with_decoder_inputs(model))
    made = []
    model.register_forward_hook(lambda module, inputs, outputs: made.append(outputs.logits.shape[1]))
    inputs = {**batch, "decoder_input_ids": model.prepare_decoder_input_ids_from_labels(batch["labels"])}
    loss = trainer.compute_loss(model, dict(inputs))
    expected = label_smoothed_cross_entropy(model(**inputs).logits, batch["labels"], 0.1)
    torch.testing.assert_close(loss, expected, atol=1e-6, rtol=1e-5)
    _, outputs = trainer.compute_loss(model, dict(inputs), return_outputs=True)
    assert made == ([0] if architecture == "ours" else [4]) + [4, 4] and outputs.logits.shape[1] == 4


def test_label_smoothing_is_the_training_runs_never_the_models(batch):
    """TranslationTrainer's loss (its compute_loss_func) smooths; the model's own loss stays plain cross-entropy."""
    model = tiny_model()
    plain = model(**batch)
    smoothed = LabelSmoothing(0.1)(plain, batch["labels"])
    torch.testing.assert_close(smoothed.double(), reference_label_smoothed_loss(plain.logits, batch["labels"], 0.1))
    kept = batch["labels"] != -100
    torch.testing.assert_close(plain.loss, torch.nn.functional.cross_entropy(plain.logits[kept], batch["labels"][kept]))
    assert not torch.allclose(smoothed, plain.loss)


def test_a_model_trained_with_label_smoothing_and_saved_computes_plain_cross_entropy(trained_demo_model, demo_files):
    """The issue's case: train.py's run used label smoothing 0.1; the saved model's loss is the plain one."""
    model = AutoModelForSeq2SeqLM.from_pretrained(trained_demo_model).eval()
    tokenizer = AutoTokenizer.from_pretrained(trained_demo_model)
    sources = (demo_files / "test.en").read_text().splitlines()[:16]
    targets = (demo_files / "test.ja").read_text().splitlines()[:16]
    batch = tokenizer(sources, text_target=targets, padding=True, return_tensors="pt")
    batch["labels"][batch["labels"] == tokenizer.pad_token_id] = -100
    with torch.no_grad():
        out = model(**batch)
    kept = batch["labels"] != -100
    torch.testing.assert_close(out.loss, torch.nn.functional.cross_entropy(out.logits[kept], batch["labels"][kept]))
    assert "label_smoothing" not in model.config.to_dict()


def test_label_smoothed_loss_in_bfloat16_is_close_to_float32():
    torch.manual_seed(2)
    logits = torch.randn(2, 6, 40) * 2
    labels = torch.randint(0, 40, (2, 6))
    expected = label_smoothed_cross_entropy(logits, labels, 0.1)
    got = label_smoothed_cross_entropy(logits.bfloat16(), labels, 0.1)
    assert got.dtype == torch.float32
    torch.testing.assert_close(got, expected, atol=2e-2, rtol=1e-2)
