"""The paper's label-smoothed cross-entropy (section 5.4), for training: a saved model's own loss stays plain.

    loss = label_smoothed_cross_entropy(logits, labels, epsilon=0.1, num_items_in_batch=n)

One fused autograd function that keeps a single float32 logits-sized buffer (the softmax, then the gradient) where
torch's cross_entropy with label_smoothing keeps its log-softmax and a gradient: a float32 training step 1.18-1.20x
as fast as MarianMTModel's with Trainer's label smoother, at 0.81x its peak memory (speed_vs_marian.py on this
project's AMD CPU; benchmarks/label_smoothing.py times the loss alone: benchmarks/README.md).
"""

import torch


class LabelSmoothedCrossEntropy(torch.autograd.Function):
    """Sum over labelled positions of the cross-entropy against the smoothed target (1 - eps) one-hot(y) + eps / V,

        loss_i = logsumexp(z_i) - (1 - eps) z_iy - eps mean_v(z_iv),

    with the gradient softmax(z_i) - (1 - eps) one-hot(y) - eps / V. The forward pass writes the softmax into one
    float32 logits-sized buffer, reading the logits `chunk_rows` rows at a time, and takes logsumexp from it:
    softmax's largest entry is exp(max z - logsumexp z). The backward pass turns that buffer into the gradient in
    place (cast to the logits' dtype when that is lower): one pass over it, where exp(z - logsumexp z) was
    recomputed before. No other logits-sized buffer is made (torch's cross_entropy keeps its log-softmax for the
    backward pass, and its gradient is a second one).
    """

    chunk_rows = 1024

    @staticmethod
    def forward(ctx, logits: torch.Tensor, labels: torch.Tensor, epsilon: float) -> torch.Tensor:
        """logits (N, V) in any float dtype, labels (N,) with -100 where ignored -> the summed loss, float32."""
        active = labels != -100
        targets = labels.clamp(min=0)
        probabilities = torch.empty_like(logits, dtype=torch.float32)  # (N, V): the one logits-sized buffer
        total = logits.new_zeros((), dtype=torch.float32)
        for start in range(0, logits.shape[0], LabelSmoothedCrossEntropy.chunk_rows):
            rows = slice(start, start + LabelSmoothedCrossEntropy.chunk_rows)
            z = logits[rows].float()  # (n, V)
            softmax = torch.softmax(z, dim=-1, out=probabilities[rows])  # (n, V)
            log_normalizers = z.amax(-1) - softmax.amax(-1).log()  # (n,): logsumexp(z)
            target_logit = z.gather(-1, targets[rows, None]).squeeze(-1)  # (n,)
            row_loss = log_normalizers - (1 - epsilon) * target_logit - epsilon * z.mean(-1)
            total += row_loss.masked_fill(~active[rows], 0.0).sum()
        ctx.save_for_backward(probabilities, targets, active)
        ctx.epsilon, ctx.logits_dtype = epsilon, logits.dtype
        return total

    @staticmethod
    def backward(ctx, grad_total: torch.Tensor):
        """The gradient, written over the saved softmax (a second backward pass through the same graph is refused by
        autograd, which sees the saved buffer changed)."""
        grad, targets, active = ctx.saved_tensors  # grad (N, V): the softmax until overwritten below
        epsilon, vocab_size = ctx.epsilon, grad.shape[-1]
        row_scale = (grad_total * active).unsqueeze(-1)  # (N, 1): 0 where ignored
        torch.addcmul(row_scale * (-epsilon / vocab_size), grad, row_scale, out=grad)  # (softmax - eps / V) * scale
        grad.scatter_add_(-1, targets[:, None], row_scale * -(1 - epsilon))
        return grad.to(ctx.logits_dtype), None, None


def label_smoothed_cross_entropy(
    logits: torch.Tensor, labels: torch.Tensor, epsilon: float, num_items_in_batch: torch.Tensor | int | None = None
) -> torch.Tensor:
    """The mean token loss: summed over the labelled positions of logits (B, T, V) and labels (B, T) (-100 where
    ignored), divided by their number, or by `num_items_in_batch` (Trainer's count over the accumulated
    batches: then the gradient is exactly that of the large batch)."""
    labels = labels.to(logits.device)
    total = LabelSmoothedCrossEntropy.apply(logits.flatten(0, 1), labels.flatten(), epsilon)
    divisor = num_items_in_batch if num_items_in_batch is not None else (labels != -100).sum()
    return total / (divisor.to(total.device) if isinstance(divisor, torch.Tensor) else divisor)


__all__ = ["LabelSmoothedCrossEntropy", "label_smoothed_cross_entropy"]
