"""On a CUDA GPU (skipped elsewhere): training steps through train.py's Trainer with the precision the hardware
chooses, the training loss with the output projection equal to the CPU's, generate() equal to the CPU's tokens, and
the CTranslate2 export of a model that lives on the GPU."""

import pytest
import torch

from conftest import tiny_model
from hf_tiny_transformer.hardware import best_device, choose_precision
from hf_tiny_transformer.trainer.arguments import TranslationTrainingArguments
from hf_tiny_transformer.trainer.loss import label_smoothing
from hf_tiny_transformer.trainer.trainer import TranslationTrainer

pytestmark = pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA device on this machine")

SOURCE = torch.tensor([[5, 6, 7, 8, 2], [9, 10, 2, 0, 0]])
MASK = (SOURCE != 0).long()


def test_the_best_device_is_the_gpu_and_auto_precision_follows_it():
    assert best_device() == "cuda"
    choice = choose_precision("auto", "cuda")
    assert choice.precision == ("bf16" if torch.cuda.is_bf16_supported(including_emulation=False) else "fp32")


def test_training_steps_on_the_gpu(tmp_path):
    model = tiny_model(seed=1, dropout=0.0).train()
    labels = torch.randint(4, 50, (16, 5), generator=torch.Generator().manual_seed(0))
    data = [{"input_ids": SOURCE[i % 2], "attention_mask": MASK[i % 2], "labels": labels[i]} for i in range(16)]
    args = TranslationTrainingArguments(
        output_dir=str(tmp_path),
        per_device_train_batch_size=8,
        max_steps=4,
        warmup_steps=1,
        report_to=[],
        save_strategy="no",
        logging_strategy="no",
    )
    assert args.device.type == "cuda" and not args.use_cpu

    def collate(examples):
        batch = {key: torch.stack([example[key] for example in examples]) for key in examples[0]}
        return {**batch, "decoder_input_ids": model.prepare_decoder_input_ids_from_labels(batch["labels"])}

    before = {name: p.detach().clone() for name, p in model.named_parameters()}
    made = []  # the logits' positions each forward pass made: none, the loss makes them (training.loss)
    model.register_forward_hook(lambda module, inputs, outputs: made.append(outputs.logits.shape[1]))
    result = TranslationTrainer(model=model, args=args, train_dataset=data, data_collator=collate).train()
    assert torch.isfinite(torch.tensor(result.training_loss))
    assert next(model.parameters()).device.type == "cuda"
    assert any(not torch.equal(p.detach().cpu(), before[name]) for name, p in model.named_parameters())
    assert made and set(made) == {0}


def loss_and_gradients(model, smoothing, device: str):
    """The training loss of one batch on `device` (the model asked for no logits) and the parameters' gradients."""
    labels = torch.tensor([[7, 8, 9, 2], [11, 2, -100, -100]])
    decoder_input_ids = model.prepare_decoder_input_ids_from_labels(labels)
    inputs = {"input_ids": SOURCE, "attention_mask": MASK, "decoder_input_ids": decoder_input_ids}
    model.to(device).zero_grad()
    outputs = model(**smoothing.model_inputs({key: value.to(device) for key, value in inputs.items()}))
    loss = smoothing(outputs, labels.to(device))
    loss.backward()
    assert outputs.logits.shape[1] == 0
    return loss.detach().cpu(), {name: p.grad.detach().cpu() for name, p in model.named_parameters()}


def test_the_loss_with_the_output_projection_on_the_gpu_gives_the_cpus_values():
    """The training loss that makes the logits from the decoder's output and the tied embeddings (training.loss),
    float32 on CUDA tensors (the model's logits_to_keep an index tensor on the CPU): the CPU's loss and gradients."""
    model = tiny_model(seed=2, dropout=0.0).train()
    smoothing = label_smoothing(model, 0.1, torch.float32)
    assert smoothing.output_layer is model.get_output_embeddings()
    on_cpu, cpu_gradients = loss_and_gradients(model, smoothing, "cpu")
    on_gpu, gpu_gradients = loss_and_gradients(model, smoothing, "cuda")
    torch.testing.assert_close(on_gpu, on_cpu, atol=1e-5, rtol=1e-5)
    for name, gradient in cpu_gradients.items():
        torch.testing.assert_close(gpu_gradients[name], gradient, atol=1e-5, rtol=1e-4, msg=name)


def test_generate_on_the_gpu_gives_the_cpu_tokens():
    model = tiny_model()
    on_cpu = model.generate(input_ids=SOURCE, attention_mask=MASK, max_new_tokens=8, num_beams=2)
    on_gpu = model.to("cuda").generate(
        input_ids=SOURCE.cuda(), attention_mask=MASK.cuda(), max_new_tokens=8, num_beams=2
    )
    assert torch.equal(on_gpu.cpu(), on_cpu)


def test_a_model_on_the_gpu_exports_to_ctranslate2(text_model, tokenizer, tmp_path):
    pytest.importorskip("ctranslate2")
    from hf_tiny_transformer.serving.ctranslate2 import CTranslate2Translator, export_ctranslate2

    text_model.generation_config.english_casing = False
    expected = CTranslate2Translator(
        export_ctranslate2(text_model, tokenizer, tmp_path / "cpu"), compute_type="float32"
    )
    export_ctranslate2(text_model.to("cuda"), tokenizer, tmp_path / "gpu")
    texts = ["I like tea.", "Do you like dogs?"]
    on_cpu = CTranslate2Translator(tmp_path / "gpu", compute_type="float32").translate(texts)
    assert on_cpu == expected.translate(texts)  # the weights came off the GPU unchanged
