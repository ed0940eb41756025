"""Choose the beam size and the length penalty of a model on development data, never on the test set.

    python training/tune_decoding.py --model runs/en-ja/hub --corpus_dir ../shared/data/small_parallel_enja \\
        --source_lang en --target_lang ja [--num_beams 1 4 6] [--length_penalty 0.6 1.0 1.4]
    python training/tune_decoding.py --model FOLDER --source_file dev.en --reference_file dev.ja --target_lang ja

Translates the dev split (or the given files) with every combination, prints their BLEU, and writes the best
one into the model folder's generation_config.json (all or nothing), where generate(), the pipeline and
evaluate_model.py take it from. --dry_run writes nothing. Greedy search (1 beam) has no length penalty.
"""

import json
import sys
import time
from pathlib import Path

from hf_tiny_transformer.commands import flags
from hf_tiny_transformer.data.tokenizer import lowercases
from hf_tiny_transformer.errors import ArgumentParser, UsageError, first_line
from hf_tiny_transformer.evaluation import scores
from hf_tiny_transformer.guards import outputs, runner
from hf_tiny_transformer.guards.writing import write_atomically
from hf_tiny_transformer.text_tiny_transformer import generation_settings


def parse_args(argv=None):
    parser = ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", required=True, help="a saved model folder")
    flags.scoring_arguments(parser, "its dev split is translated")
    parser.add_argument("--num_beams", type=int, nargs="+", default=[1, 4, 6])
    parser.add_argument("--length_penalty", type=float, nargs="+", default=[0.6, 1.0, 1.4])
    parser.add_argument("--batch_size", type=int, default=32)
    parser.add_argument("--dry_run", action="store_true", help="print the table, change nothing")
    flags.engine_arguments(parser)
    args = parser.parse_args(argv)
    try:
        for beams, penalty in settings(args):
            generation_settings(num_beams=beams, length_penalty=penalty, batch_size=args.batch_size)
    except ValueError as error:
        raise UsageError(f"--{first_line(error)}") from None
    if not args.dry_run:
        if not Path(args.model, "generation_config.json").is_file():
            raise UsageError(f"--model {args.model} has no generation_config.json to write the choice into")
        outputs.check_output(Path(args.model, "generation_config.json"), flag="--model", kind="file")
    return args


def settings(args) -> list[tuple[int, float]]:
    """Every (beams, length penalty) to try; greedy search once, since it has no length penalty."""
    return [
        (beams, penalty)
        for beams in sorted(set(args.num_beams))
        for penalty in (args.length_penalty if beams > 1 else [1.0])
    ]


def main(argv=None) -> int:
    args = parse_args(argv)
    sources, references = flags.sources_and_references(args, "dev")
    translator = flags.load_translator_from(args)
    lowercase = lowercases(translator.tokenizer)
    results = []
    print("| beams | length penalty | dev BLEU | dev chrF | seconds |\n|---:|---:|---:|---:|---:|")
    for beams, penalty in settings(args):
        start = time.perf_counter()
        with flags.decoding_limits():
            hypotheses = translator.translate(
                sources, batch_size=args.batch_size, num_beams=beams, length_penalty=penalty, progress=True
            )
        result = scores(hypotheses, references, args.target_lang, lowercase=lowercase)
        seconds = time.perf_counter() - start
        results.append(
            {
                "num_beams": beams,
                "length_penalty": penalty,
                "bleu": result["bleu"],
                "chrf": result["chrf"],
                "seconds": seconds,
            }
        )
        print(f"| {beams} | {penalty} | {result['bleu']:.2f} | {result['chrf']:.2f} | {seconds:.0f} |", flush=True)
    best = max(results, key=lambda result: (result["bleu"], -result["seconds"]))
    print(json.dumps({"best": best, "tried": results}))
    if not args.dry_run:
        generation_config = translator.generation_config
        generation_config.num_beams, generation_config.length_penalty = best["num_beams"], best["length_penalty"]
        write_atomically(Path(args.model) / "generation_config.json", generation_config.to_json_string())
        print(f"wrote num_beams {best['num_beams']}, length_penalty {best['length_penalty']} into {args.model}")
    return 0


if __name__ == "__main__":
    sys.exit(runner.run(main))
