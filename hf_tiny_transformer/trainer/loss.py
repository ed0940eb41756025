"""The paper's label-smoothed cross-entropy (section 5.4), for training: a saved model's own loss stays plain.

    loss = label_smoothed_cross_entropy(logits, labels, epsilon=0.1, num_items_in_batch=n)
    loss = output_layer_label_smoothed_cross_entropy(hidden, lm_head.weight, labels, 0.1, torch.bfloat16, n)

From the logits: one fused autograd function that keeps a single float32 logits-sized buffer (the softmax, then the
gradient) where torch's cross_entropy with label_smoothing keeps its log-softmax and a gradient, which makes a
training step faster and smaller than with Trainer's label smoother (benchmarks/speed_vs_marian.py measures it). From
the decoder's output and the output projection: the same loss, the logits made block by block in the run's precision
and never kept, for a model that makes none itself (`logits_to_keep`).
`LabelSmoothing` is TranslationTrainer's (and the precision trial's) choice between the two.
"""

import inspect

import torch


def rows_loss(z: torch.Tensor, softmax: torch.Tensor, targets: torch.Tensor, active: torch.Tensor, epsilon: float):
    """The summed loss of rows of float32 logits z (n, V), given their softmax: logsumexp(z) is max z - log of
    softmax's largest entry."""
    log_normalizers = z.amax(-1) - softmax.amax(-1).log()  # (n,): logsumexp(z)
    target_logit = z.gather(-1, targets[:, None]).squeeze(-1)  # (n,)
    row_loss = log_normalizers - (1 - epsilon) * target_logit - epsilon * z.mean(-1)
    return row_loss.masked_fill(~active, 0.0).sum()


def gradient_in_place(softmax: torch.Tensor, targets: torch.Tensor, row_scale: torch.Tensor, epsilon: float):
    """softmax (n, V) turned into the loss's gradient, (softmax - (1 - eps) one-hot(y) - eps / V) * row_scale."""
    scale_epsilon = row_scale * (-epsilon / softmax.shape[-1])  # (n, 1)
    torch.addcmul(scale_epsilon, softmax, row_scale, out=softmax)  # (softmax - eps / V) * scale
    softmax.scatter_add_(-1, targets[:, None], row_scale * -(1 - epsilon))


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
            total += rows_loss(z, softmax, targets[rows], active[rows], epsilon)
        ctx.save_for_backward(probabilities, targets, active)
        ctx.epsilon, ctx.logits_dtype = epsilon, logits.dtype
        return total

    @staticmethod
    def backward(ctx, grad_total: torch.Tensor):
        """The gradient, written over the saved softmax (a second backward pass through the same graph is refused by
        autograd, which sees the saved buffer changed)."""
        grad, targets, active = ctx.saved_tensors  # grad (N, V): the softmax until overwritten below
        row_scale = (grad_total * active).unsqueeze(-1)  # (N, 1): 0 where ignored
        gradient_in_place(grad, targets, row_scale, ctx.epsilon)
        return grad.to(ctx.logits_dtype), None, None


def label_smoothed_cross_entropy(
    logits: torch.Tensor, labels: torch.Tensor, epsilon: float, num_items_in_batch: torch.Tensor | int | None = None
) -> torch.Tensor:
    """The mean token loss: summed over the labelled positions of logits (B, T, V) and labels (B, T) (-100 where
    ignored), divided by their number, or by `num_items_in_batch` (Trainer's count over the accumulated
    batches: then the gradient is exactly that of the large batch)."""
    labels = labels.to(logits.device)
    total = LabelSmoothedCrossEntropy.apply(logits.flatten(0, 1), labels.flatten(), epsilon)
    return mean_token_loss(total, labels, num_items_in_batch)


class OutputLayerLabelSmoothedCrossEntropy(torch.autograd.Function):
    """The output projection and the loss above in one: the logits z = h W^T are made `chunk_rows` rows at a time,
    in `dtype` (the run's: bfloat16 under bf16, as autocast would make them), and each block's softmax, loss and
    gradient are taken from it while it is in the cache; only the gradient of the logits is kept, in `dtype`, for
    the backward pass, which turns it into the gradients of h and W (two matrix multiplies, accumulated in float32
    by the kernel, then scaled by the incoming gradient). No logits-sized float32 buffer is made, nor the float32
    logits accelerate hands a loss under mixed precision.
    """

    chunk_rows = 128

    @staticmethod
    def forward(ctx, hidden, weight, labels, epsilon: float, dtype: torch.dtype) -> torch.Tensor:
        """hidden (N, D) and weight (V, D) in any float dtype, labels (N,) with -100 where ignored -> the summed
        loss, float32."""
        active = labels != -100
        targets = labels.clamp(min=0)
        with torch.autocast(hidden.device.type, enabled=False):
            low_hidden, low_weight = hidden.to(dtype), weight.to(dtype)  # (N, D), (V, D)
            grad_logits = hidden.new_empty((hidden.shape[0], weight.shape[0]), dtype=dtype)  # (N, V)
            total = hidden.new_zeros((), dtype=torch.float32)
            for start in range(0, hidden.shape[0], OutputLayerLabelSmoothedCrossEntropy.chunk_rows):
                rows = slice(start, start + OutputLayerLabelSmoothedCrossEntropy.chunk_rows)
                z = (low_hidden[rows] @ low_weight.T).float()  # (n, V)
                softmax = torch.softmax(z, dim=-1)  # (n, V)
                total += rows_loss(z, softmax, targets[rows], active[rows], epsilon)
                gradient_in_place(softmax, targets[rows], active[rows, None].float(), epsilon)
                grad_logits[rows] = softmax
        ctx.save_for_backward(grad_logits, low_hidden, low_weight)
        ctx.dtypes = hidden.dtype, weight.dtype
        return total

    @staticmethod
    def backward(ctx, grad_total: torch.Tensor):
        grad_logits, low_hidden, low_weight = ctx.saved_tensors  # (N, V), (N, D), (V, D)
        hidden_dtype, weight_dtype = ctx.dtypes
        with torch.autocast(grad_total.device.type, enabled=False):
            grad_hidden = (grad_logits @ low_weight).float() * grad_total  # (N, D)
            grad_weight = (grad_logits.T @ low_hidden).float() * grad_total  # (V, D)
        return grad_hidden.to(hidden_dtype), grad_weight.to(weight_dtype), None, None, None


def output_layer_label_smoothed_cross_entropy(
    hidden: torch.Tensor,
    weight: torch.Tensor,
    labels: torch.Tensor,
    epsilon: float,
    dtype: torch.dtype,
    num_items_in_batch: torch.Tensor | int | None = None,
) -> torch.Tensor:
    """label_smoothed_cross_entropy of the logits hidden W^T, made in `dtype` block by block: the decoder's output
    hidden (B, T, D), the output projection's weight (V, D) (the model's tied embeddings), labels (B, T)."""
    labels = labels.to(hidden.device)
    total = OutputLayerLabelSmoothedCrossEntropy.apply(hidden.flatten(0, 1), weight, labels.flatten(), epsilon, dtype)
    return mean_token_loss(total, labels, num_items_in_batch)


def mean_token_loss(total: torch.Tensor, labels: torch.Tensor, num_items_in_batch) -> torch.Tensor:
    """The summed loss divided by the labelled positions' number, or by `num_items_in_batch` (Trainer's count over
    the accumulated batches: then the gradient is exactly that of the large batch)."""
    divisor = num_items_in_batch if num_items_in_batch is not None else (labels != -100).sum()
    return total / (divisor.to(total.device) if isinstance(divisor, torch.Tensor) else divisor)


NO_POSITIONS = torch.empty(0, dtype=torch.long)  # logits_to_keep: the model makes no logits


class LabelSmoothing:
    """Trainer's `compute_loss_func`: the label-smoothed loss of a step. Given the model's output projection (a
    model that takes `logits_to_keep`, as this package's does), the loss makes the logits itself, block by block in
    `dtype` (the run's precision), from the decoder's output (`trainer.loss`): `model_inputs` asks the model for
    that output and no logits. Otherwise (MarianMTModel), from the model's logits.

        smoothing = LabelSmoothing(0.1, model.get_output_embeddings(), torch.bfloat16)
        loss = smoothing(model(**smoothing.model_inputs(inputs)), labels)
    """

    def __init__(self, epsilon: float, output_layer: torch.nn.Linear | None = None, dtype=torch.float32):
        self.epsilon = epsilon
        self.output_layer = output_layer
        self.dtype = dtype

    def model_inputs(self, inputs: dict) -> dict:
        """The model's inputs for a training step whose loss this makes."""
        if self.output_layer is None:
            return inputs
        return {**inputs, "logits_to_keep": NO_POSITIONS, "output_hidden_states": True}

    def __call__(self, outputs, labels, num_items_in_batch=None):
        if outputs.logits.shape[1] or self.output_layer is None:  # the model made the logits
            return label_smoothed_cross_entropy(outputs.logits, labels, self.epsilon, num_items_in_batch)
        return output_layer_label_smoothed_cross_entropy(
            outputs.decoder_hidden_states[-1],
            self.output_layer.weight,
            labels,
            self.epsilon,
            self.dtype,
            num_items_in_batch,
        )


def label_smoothing(model, epsilon: float, dtype: torch.dtype) -> LabelSmoothing:
    """A run's label-smoothed loss: from `model`'s output projection where the model can leave its logits to the
    loss: it takes `logits_to_keep`, and its output projection is a plain nn.Linear without bias (not one a library
    such as PEFT replaced) tied to the embeddings, which the forward pass uses (DistributedDataParallel then sees the
    weight in use, as it does the logits' weight); its logits made in `dtype` (the run's: bfloat16 under bf16, on
    bfloat16 weights too, whose copy holds the same weights rounded)."""
    output_layer = model.get_output_embeddings()
    takes_logits_to_keep = "logits_to_keep" in inspect.signature(model.forward).parameters
    plain = type(output_layer) is torch.nn.Linear and output_layer.bias is None  # z = h W^T
    tied = plain and output_layer.weight is model.get_input_embeddings().weight
    return LabelSmoothing(epsilon, output_layer if takes_logits_to_keep and tied else None, dtype)


__all__ = [
    "LabelSmoothedCrossEntropy",
    "label_smoothed_cross_entropy",
    "OutputLayerLabelSmoothedCrossEntropy",
    "output_layer_label_smoothed_cross_entropy",
    "LabelSmoothing",
    "label_smoothing",
]
