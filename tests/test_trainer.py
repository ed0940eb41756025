"""Training with Trainer (hf_tiny_transformer/trainer/trainer.py): TranslationTrainer's gradient accumulation and
its training loss from the decoder's output; and the batches it trains on (hf_tiny_transformer/data/batching.py):
sentence pairs of similar length, at most a budget of tokens a batch."""

import pytest
import torch

from conftest import sgd_arguments, tiny_model
from hf_tiny_transformer.data.batching import TokenBatchSampler, batch_shapes, padding_fraction
from hf_tiny_transformer.marian import marian_of_the_same_shape
from hf_tiny_transformer.trainer.loss import LabelSmoothing, label_smoothed_cross_entropy
from hf_tiny_transformer.trainer.trainer import TranslationTrainer


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


# Batches by tokens


def lengths(seed: int, count: int = 500) -> tuple[list[int], list[int]]:
    """Source lengths of 3 to 40 tokens, each target a few tokens longer or shorter, as translations are."""
    generator = torch.Generator().manual_seed(seed)
    sources = torch.randint(3, 40, (count,), generator=generator)
    targets = (sources + torch.randint(-3, 6, (count,), generator=generator)).clamp(min=2)
    return sources.tolist(), targets.tolist()


def test_token_batches_hold_every_pair_once_an_epoch_within_the_budget():
    sources, targets = lengths(0)
    sampler = TokenBatchSampler(sources, targets, max_tokens=600, seed=3)
    epochs = []
    for epoch in range(3):
        sampler.set_epoch(epoch)
        batches = list(sampler)
        assert len(batches) == len(sampler)
        assert sorted(i for batch in batches for i in batch) == list(range(500))  # each pair once
        for batch in batches:
            assert len(batch) * (max(sources[i] for i in batch) + max(targets[i] for i in batch)) <= 600
        epochs.append(batches)
    assert epochs[0] != epochs[1]  # another order each epoch
    sampler.set_epoch(0)
    assert list(sampler) == epochs[0]  # the same order for the same epoch: resuming replays it


def test_token_batches_pad_far_less_than_random_batches_of_as_many_pairs():
    sources, targets = lengths(1)
    sampler = TokenBatchSampler(sources, targets, max_tokens=800)
    pairs_per_batch = round(500 / len(sampler))
    random_batches = torch.randperm(500, generator=torch.Generator().manual_seed(0)).split(pairs_per_batch)
    by_tokens = padding_fraction(sampler.batches, sources, targets)
    random = padding_fraction([b.tolist() for b in random_batches], sources, targets)
    assert by_tokens < 0.15 < random


def test_batch_shapes_are_the_distinct_pairs_and_longest_lengths():
    sources, targets = [3, 5, 4, 2, 5], [4, 7, 7, 1, 6]
    batches = [[0, 1], [2, 3], [1, 0], [4], [2, 1]]
    assert batch_shapes(batches, sources, targets) == {(2, 5, 7), (2, 4, 7), (1, 5, 6)}


def test_a_budget_below_the_longest_pair_is_refused():
    with pytest.raises(
        ValueError, match="smaller than the longest pair \\(12 source \\+ target tokens\\); raise it to at least 12"
    ):
        TokenBatchSampler([3, 5], [4, 7], max_tokens=10)


def test_a_schedule_that_decays_to_the_end_ends_at_zero_on_the_step_the_budget_fixed():
    """Trainer makes its schedule for the provisional step count; the budget, once it has fixed max_steps, gives the
    scheduler the same schedule for that count (ja-en.json's linear decay), keeping the learning rate of the step."""
    from transformers import Seq2SeqTrainingArguments
    from transformers.optimization import get_scheduler

    from hf_tiny_transformer.trainer.budget import reschedule

    args = Seq2SeqTrainingArguments("unused", learning_rate=1e-3, lr_scheduler_type="linear", warmup_steps=10)
    optimizer = torch.optim.AdamW([torch.nn.Parameter(torch.zeros(2))], lr=args.learning_rate)
    scheduler = get_scheduler("linear", optimizer, num_warmup_steps=10, num_training_steps=100_000)
    for _ in range(20):
        optimizer.step()
        scheduler.step()
    before = optimizer.param_groups[0]["lr"]
    reschedule(args, optimizer, scheduler, 110)
    assert optimizer.param_groups[0]["lr"] == pytest.approx(1e-3 * 90 / 100) != pytest.approx(before)
    for _ in range(90):
        optimizer.step()
        scheduler.step()
    assert optimizer.param_groups[0]["lr"] == 0.0
