"""Translate sentences with a saved model: the ones given as arguments, or every line of standard input.

    python training/translate.py --model runs/demo/hub "I like green tea." "My sister reads books."
    cat sentences.en | python training/translate.py --model runs/en-ja/hub > sentences.ja
    python training/translate.py --engine ctranslate2 --model runs/en-ja/ct2-int8 --num_beams 4

Prints one translation per line, in the order of the sentences. From standard input, lines are translated as they
come: one at a time when a person types them, in batches of --batch_size when they come from a file or a pipe,
so that a file of any size is translated in constant memory. An empty line gives an empty line.
"""

import itertools
import os
import sys

from hf_tiny_transformer.cli import (
    ArgumentParser,
    UsageError,
    at_least,
    check_generation_length,
    engine_arguments,
    load_translator,
    run,
    trust_remote_code_argument,
)


def parse_args(argv=None):
    parser = ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("text", nargs="*", help="sentences to translate; none: read lines from standard input")
    parser.add_argument("--model", required=True, help="a saved model folder (or, with --engine ctranslate2, an export)")
    parser.add_argument("--num_beams", type=int, help="beam size; default: the model's generation config")
    parser.add_argument("--max_new_tokens", type=int, help="longest translation; default: twice the source, plus 10")
    parser.add_argument("--batch_size", type=int, default=32, help="lines translated together from a file or pipe")
    engine_arguments(parser)
    trust_remote_code_argument(parser)
    args = parser.parse_args(argv)
    for flag, lowest in (("num_beams", 1), ("max_new_tokens", 1), ("batch_size", 1)):
        at_least(f"--{flag}", getattr(args, flag), lowest)
    return args


def batches(lines, size: int):
    """Lists of up to `size` lines, without their line ends, as they come."""
    lines = (line.rstrip("\r\n") for line in lines)
    while batch := list(itertools.islice(lines, size)):
        yield batch


def translate_lines(translator, lines: list[str], args) -> list[str]:
    """Translations of `lines`; an empty or blank line gives an empty translation."""
    texts = [line for line in lines if line.strip()]
    translated = iter(translator.translate(texts, batch_size=args.batch_size, num_beams=args.num_beams, max_new_tokens=args.max_new_tokens))
    return [next(translated) if line.strip() else "" for line in lines]


def main(argv=None) -> int:
    args = parse_args(argv)
    interactive = not args.text and sys.stdin.isatty()
    if interactive:
        print("Type a sentence and press Enter (Ctrl-D to stop):", file=sys.stderr)
    translator = load_translator(args.model, args.engine, args.trust_remote_code, args.device)
    if args.max_new_tokens:
        check_generation_length(translator.max_positions, args.max_new_tokens, "--max_new_tokens")
    try:
        for batch in batches(args.text or sys.stdin, 1 if interactive else args.batch_size):
            print("\n".join(translate_lines(translator, batch, args)), flush=True)
    except UnicodeDecodeError:
        raise UsageError("standard input is not UTF-8 text; convert it, e.g. with iconv -t utf-8") from None
    except BrokenPipeError:  # the reader stopped reading (`| head`): nothing more to do
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
    except KeyboardInterrupt:
        return 130
    return 0


if __name__ == "__main__":
    sys.exit(run(main))
