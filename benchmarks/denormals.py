"""Training steps of a trained checkpoint against a fresh model, with denormal floats kept and flushed to zero.

    python benchmarks/denormals.py --checkpoint runs/en-ja/checkpoint-5900 [--steps 25] [--threads 2] [--rounds 2]

A checkpoint of train.py holds the model and Adam's state; its steps run on the same batch (113 pairs of 9 + 9
tokens, random ids, the label-smoothed loss, AdamW with the recipes' betas) as those of a fresh model of the same
config. Each measurement is a fresh process (the CPU's flush-to-zero setting is per thread, inherited by the
threads torch starts later), the settings taking turns for --rounds rounds; prints the seconds a step of each.
"""

import json
import subprocess
import sys
from pathlib import Path

from hf_tiny_transformer.commands.shared import run
from hf_tiny_transformer.errors import ArgumentParser, UsageError, at_least

STEPS = """
import json, sys, time, torch
from torch import nn
from transformers import AutoModelForSeq2SeqLM
from transformers.trainer_pt_utils import get_parameter_names
from hf_tiny_transformer.hardware import flush_denormals, keep_freed_memory
from hf_tiny_transformer.training.loss import label_smoothed_cross_entropy

checkpoint, steps, threads, flush = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4] == "flush"
if flush:
    flush_denormals()
keep_freed_memory()
torch.set_num_threads(threads)
result = {}
for kind in ("trained", "fresh"):
    model = AutoModelForSeq2SeqLM.from_pretrained(checkpoint)
    if kind == "fresh":
        model = type(model)(model.config)
    decay = {name for name in get_parameter_names(model, [nn.LayerNorm]) if "bias" not in name}
    groups = [{"params": [p for n, p in model.named_parameters() if (n in decay) == wanted], "weight_decay": 0.0}
              for wanted in (True, False)]
    optimizer = torch.optim.AdamW(groups, lr=1e-4, betas=(0.9, 0.98), eps=1e-9)
    if kind == "trained":  # Trainer's two parameter groups, in its order
        optimizer.load_state_dict(torch.load(f"{checkpoint}/optimizer.pt", weights_only=False))
    ids = torch.randint(4, model.config.vocab_size, (2, 113, 9), generator=torch.Generator().manual_seed(0))
    source, labels = ids[0], ids[1]
    decoder_input_ids = model.prepare_decoder_input_ids_from_labels(labels)
    model.train()
    for step in range(steps + 3):
        if step == 3:
            start = time.perf_counter()
        optimizer.zero_grad(set_to_none=True)
        logits = model(input_ids=source, decoder_input_ids=decoder_input_ids).logits
        label_smoothed_cross_entropy(logits, labels, 0.1).backward()
        optimizer.step()
    result[kind] = (time.perf_counter() - start) / steps
print(json.dumps(result))
"""


def main(argv=None) -> None:
    parser = ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--checkpoint", required=True, type=Path, help="a checkpoint folder of a train.py run")
    parser.add_argument("--steps", type=int, default=25)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--rounds", type=int, default=2)
    args = parser.parse_args(argv)
    for flag in ("--steps", "--threads", "--rounds"):
        at_least(flag, getattr(args, flag[2:]), 1)
    if not (args.checkpoint / "optimizer.pt").is_file():
        raise UsageError(f"--checkpoint {args.checkpoint} holds no optimizer.pt; pass a train.py checkpoint")
    seconds = {mode: {"trained": [], "fresh": []} for mode in ("keep", "flush")}
    for _ in range(args.rounds):
        for mode in seconds:
            command = [sys.executable, "-c", STEPS, str(args.checkpoint), str(args.steps), str(args.threads), mode]
            result = subprocess.run(command, capture_output=True, text=True)
            if result.returncode != 0:
                raise UsageError(f"a {mode} run failed: {(result.stderr.strip().splitlines() or ['no output'])[-1]}")
            measured = json.loads(result.stdout)
            for kind, value in measured.items():
                seconds[mode][kind].append(value)
    print(f"{args.threads} threads, {args.steps} steps, {args.rounds} rounds: seconds a step")
    print("| denormals | trained model | fresh model |\n|---|---:|---:|")
    for mode, kinds in seconds.items():
        shown = {kind: ", ".join(f"{value:.3f}" for value in values) for kind, values in kinds.items()}
        print(f"| {'kept' if mode == 'keep' else 'flushed to zero'} | {shown['trained']} | {shown['fresh']} |")
    print(json.dumps(seconds))


if __name__ == "__main__":
    sys.exit(run(main))
