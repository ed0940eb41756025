"""Shared fixtures: tiny configs and models (vocab ~50, d_model 32, 2 layers) with fixed seeds; the shared builds
(builds.py) and the bad-arguments workspace (bad_arguments.py), whose fixtures and hooks pytest finds here."""

import os
import signal

import pytest
import torch
from transformers import Seq2SeqTrainingArguments

from bad_arguments import workspace  # noqa: F401  a fixture
from builds import (  # noqa: F401  fixtures and hooks
    checkpointed_run,
    demo_browser_page,
    demo_ct2,
    demo_files,
    demo_onnx,
    demo_onnx_int8,
    pytest_collection_finish,
    pytest_collection_modifyitems,
    pytest_sessionfinish,
    shipped_onnx,
    trained_demo_model,
)
from hf_tiny_transformer import TinyTransformerConfig, TinyTransformerForConditionalGeneration

# A suite started in the background of a script (`nohup make test &`) inherits Ctrl-C ignored, and so would every
# command the tests start: the tests that press Ctrl-C need the disposition of a terminal.
signal.signal(signal.SIGINT, signal.default_int_handler)

# pytest-xdist runs a worker a CPU (pyproject.toml's addopts): each worker, and every process it starts, computes on
# its share of the CPUs, so that the workers do not fight over them.
if workers := int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "0")):
    os.environ["OMP_NUM_THREADS"] = str(max(1, (os.cpu_count() or 1) // workers))
    torch.set_num_threads(int(os.environ["OMP_NUM_THREADS"]))

# What save_pretrained writes for a model: config, generation config, safetensors weights, and the code files (the
# remote code: the modeling and configuration files, and what they import: the pipeline and its text handling).
MODEL_FOLDER_FILES = {
    "config.json",
    "generation_config.json",
    "model.safetensors",
    "configuration_tiny_transformer.py",
    "modeling_tiny_transformer.py",
    "pipeline_tiny_transformer.py",
    "text_tiny_transformer.py",
}
# What save_for_hub (train.py's hub folder) writes besides: the tokenizer and the model card.
HUB_FOLDER_FILES = MODEL_FOLDER_FILES | {"tokenizer.json", "tokenizer_config.json", "README.md"}

TINY = dict(
    vocab_size=50,
    d_model=32,
    encoder_layers=2,
    decoder_layers=2,
    encoder_attention_heads=4,
    decoder_attention_heads=4,
    encoder_ffn_dim=64,
    decoder_ffn_dim=64,
    max_position_embeddings=64,
)


def tiny_config(**overrides) -> TinyTransformerConfig:
    return TinyTransformerConfig(**{**TINY, **overrides})


def tiny_model(seed: int = 0, **overrides) -> TinyTransformerForConditionalGeneration:
    """A random tiny model in eval mode. init_std 0.3 gives logits varied enough for generation tests."""
    torch.manual_seed(seed)
    return TinyTransformerForConditionalGeneration(tiny_config(**{"init_std": 0.3, **overrides})).eval()


def training_losses(model, parameters, lr: float, steps: int, after_backward=None, **batch) -> list[float]:
    """The loss of each of `steps` Adam steps on `parameters` (those PEFT leaves trainable) over one batch;
    `after_backward()` runs after each backward pass."""
    optimizer = torch.optim.Adam(parameters, lr=lr)
    losses = []
    for _ in range(steps):
        loss = model(**batch).loss
        optimizer.zero_grad()
        loss.backward()
        if after_backward:
            after_backward()
        optimizer.step()
        losses.append(loss.item())
    return losses


def sgd_arguments(output_dir, **overrides) -> Seq2SeqTrainingArguments:
    """Trainer's arguments for a few steps on the CPU that tests can compare: plain SGD at a constant learning rate of
    0.5 (Adam would blow up float noise in gradients that are zero in exact arithmetic, key biases), nothing saved or
    reported."""
    fixed = {"optim": "sgd", "learning_rate": 0.5, "lr_scheduler_type": "constant", "report_to": []}
    return Seq2SeqTrainingArguments(str(output_dir), **fixed, save_strategy="no", use_cpu=True, **overrides)


@pytest.fixture
def model():
    return tiny_model()


@pytest.fixture
def batch():
    """Two sources of different length (the second padded) and their targets (-100 where padded)."""
    input_ids = torch.tensor([[5, 6, 7, 8, 2], [9, 10, 2, 0, 0]])
    labels = torch.tensor([[11, 12, 13, 2], [14, 2, -100, -100]])
    return {"input_ids": input_ids, "attention_mask": (input_ids != 0).long(), "labels": labels}


ENGLISH = [
    "I really like green tea.",
    "The cat is sleeping on the sofa.",
    "She doesn't drink coffee in the morning.",
    "We read three books last year.",
    "I can't tell who will arrive first.",
    "My brother bought 2 tickets for 1500 yen.",
    "Do you like dogs?",
    'He said, "Let\'s play catch."',
]
JAPANESE = [
    "私は緑茶が本当に好きです。",
    "猫がソファの上で寝ています。",
    "彼女は朝コーヒーを飲みません。",
    "私たちは去年本を三冊読みました。",
    "誰が一番に着くか私には分かりません。",
    "兄はチケットを2枚1500円で買った。",
    "犬が好きですか？",
    "彼は「キャッチボールをしよう」と言った。",
]


@pytest.fixture(scope="session")
def tokenizer():
    """A tokenizer trained on a few English and Japanese sentences (lowercased, as the demo's is)."""
    from hf_tiny_transformer import train_tokenizer

    return train_tokenizer(ENGLISH * 3 + JAPANESE * 3, vocab_size=1000, lowercase=True, model_max_length=64)


@pytest.fixture
def text_model(tokenizer):
    """A random tiny model whose vocabulary is the tokenizer's."""
    return tiny_model(vocab_size=len(tokenizer))
