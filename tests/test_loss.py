"""The training loss (hf_tiny_transformer/trainer/loss.py): label-smoothed cross-entropy (paper section 5.4)
against a float64 reference, in chunks, in bfloat16, and made from the decoder's output and the output projection
without the full logits; label smoothing belongs to the training run, never to the model."""

import pytest
import torch
from transformers import AutoModelForSeq2SeqLM, AutoTokenizer

from conftest import tiny_model
from hf_tiny_transformer.trainer.loss import (
    LabelSmoothedCrossEntropy,
    LabelSmoothing,
    OutputLayerLabelSmoothedCrossEntropy,
    label_smoothed_cross_entropy,
    output_layer_label_smoothed_cross_entropy,
)


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


def test_label_smoothed_loss_in_bfloat16_is_close_to_float32():
    torch.manual_seed(2)
    logits = torch.randn(2, 6, 40) * 2
    labels = torch.randint(0, 40, (2, 6))
    expected = label_smoothed_cross_entropy(logits, labels, 0.1)
    got = label_smoothed_cross_entropy(logits.bfloat16(), labels, 0.1)
    assert got.dtype == torch.float32
    torch.testing.assert_close(got, expected, atol=2e-2, rtol=1e-2)


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
    """A model that train.py trained with label smoothing 0.1, saved: its loss is the plain one."""
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
