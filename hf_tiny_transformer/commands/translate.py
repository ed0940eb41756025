"""Translate texts with a saved model: the ones given as arguments, or every line of standard input.

    tiny-transformer translate "Where is the station?" "駅はどこですか。"        # the shipped models, by script
    tiny-transformer translate --model runs/demo/hub "I like green tea." "My sister reads books."
    cat document.en | tiny-transformer translate --model runs/en-ja/hub > document.ja
    tiny-transformer translate --engine ctranslate2 --model runs/en-ja/ct2-int8 --num_beams 4

Without --model, each text goes to the model that ships with the project for its script (Japanese: ja -> en, else
en -> ja; in CTranslate2 int8 where ctranslate2 is installed, which imports neither torch nor transformers), said
once on stderr. Prints one translation per text (per line of standard input), in order. A text longer than the
model takes at once is translated sentence by sentence and put back together (a line on stderr says so); a blank
line gives a blank line. From standard input, lines are translated as they come: one at a time when a person types
them, in batches of --batch_size from a file or a pipe, so that a file of any size is translated in constant memory.
Lines end at "\\n" (or "\\r\\n") only. Standard input is UTF-8. Invisible characters (a zero-width space, a
byte-order mark, NULs...) are not translated. With --stream (for a person at a terminal), each translation is printed
as it grows, token by token.
"""

import argparse
import collections
import io
import itertools
import sys
from pathlib import Path

from ..errors import ArgumentParser, UsageError, WorkFailed, first_line
from ..guards.runner import command_output
from ..guards.text_files import SNIFFED, check_not_wide
from ..serving.engines import direction_of, shipped_model
from .flags import decoding_arguments, decoding_limits, decoding_settings, engine_arguments, load_translator_from


def parse_args(argv=None):
    parser = ArgumentParser(prog="tiny-transformer translate", description=__doc__.split("\n\n")[0])
    parser.add_argument("text", nargs="*", help="texts to translate; none: read lines from standard input")
    parser.add_argument(
        "--model",
        help="a saved model folder (or, with --engine ctranslate2 or onnx, its export); default: the shipped model of "
        "each text's language (models/)",
    )
    decoding_arguments(parser, "lines translated together from a file or pipe")
    parser.add_argument(
        "--stream",
        action="store_true",
        help="print each translation as it grows, token by token (greedy decoding; with beams, the final one): for "
        "a person at a terminal",
    )
    engine_arguments(parser)
    args = parser.parse_args(argv)
    for number, text in enumerate(args.text, 1):
        check_utf8(text, f"text argument {number}")
    args.settings = decoding_settings(args)
    if args.model and args.engine is None:
        args.engine = "transformers"
    if args.stream and args.engine in (None, "ctranslate2") and not args.model:
        args.engine = "transformers"  # the shipped model folder: it streams
    if args.stream and args.engine == "ctranslate2":
        raise UsageError("--stream works with --engine transformers or onnx; CTranslate2 translates whole sentences")
    return args


def check_utf8(text: str, what: str):
    """A UsageError naming `what` when `text` holds bytes that are not UTF-8: Python gives each such byte of an
    argument as a lone surrogate (U+DC80..U+DCFF), which no tokenizer encodes."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as error:
        byte = ord(text[error.start]) - 0xDC00
        raise UsageError(
            f"{what} holds a byte that is not UTF-8 (0x{byte:02x}); pass UTF-8 text, e.g. convert it with "
            "iconv -t UTF-8"
        ) from None


def read_standard_input():
    """Set standard input to read UTF-8 text as it is written: bytes that are not UTF-8 are an error, not text with
    surrogates in it; lines end at "\\n" only. A file or a pipe that starts in UTF-16 or UTF-32 is a UsageError at
    once (a person typing at a terminal gives nothing to look at before the first line)."""
    if not isinstance(sys.stdin, io.TextIOWrapper):
        return
    if not sys.stdin.isatty():
        check_not_wide(sys.stdin.buffer.peek(SNIFFED), "standard input")
    sys.stdin.reconfigure(encoding="utf-8", errors="strict", newline="\n")


def print_growing(translations) -> None:
    """Print a translation as it grows: what each new text adds to the last, or the whole line again where an
    earlier part changed (casing at a sentence start)."""
    shown = ""
    for text in translations:
        if text.startswith(shown):
            sys.stdout.write(text[len(shown) :])
        else:
            sys.stdout.write("\r" + text)
        sys.stdout.flush()
        shown = text
    sys.stdout.write("\n")


def batches(lines, size: int):
    """Lists of up to `size` lines, without their line ends, as they come."""
    lines = (line.removesuffix("\n").removesuffix("\r") for line in lines)
    while batch := list(itertools.islice(lines, size)):
        yield batch


class Translators:
    """--model's translator, or without it the shipped ones, by the script of each text: each loaded when a text
    first needs it, and said once on stderr."""

    def __init__(self, args):
        self.args, self.loaded = args, {}
        if args.model:  # first: a problem with the model is said before any input is awaited
            self.loaded[None] = load_translator_from(args)

    def pick(self, text: str):
        if None in self.loaded:
            return self.loaded[None]
        folder, engine = shipped_model(direction_of(text), self.args.engine)
        if folder not in self.loaded:
            self.loaded[folder] = load_translator_from(
                argparse.Namespace(**{**vars(self.args), "model": folder, "engine": engine})
            )
            with command_output(sys.stderr) as output:
                output.info(
                    f"tiny-transformer translate: {Path(folder).name} ({engine}), a shipped model; --model for another"
                )
        return self.loaded[folder]

    def translate(self, texts: list[str], **settings) -> list[str]:
        """Each text translated by its translator, in the texts' order."""
        by_translator = collections.defaultdict(list)
        for index, text in enumerate(texts):
            by_translator[id(self.pick(text))].append(index)
        translations = [""] * len(texts)
        for indices in by_translator.values():
            done = self.pick(texts[indices[0]]).translate([texts[i] for i in indices], **settings)
            for index, translation in zip(indices, done, strict=True):
                translations[index] = translation
        return translations


def main(argv=None) -> int:
    args = parse_args(argv)
    interactive = not args.text and sys.stdin.isatty()
    translators = Translators(args)
    if not args.text:
        read_standard_input()
    if interactive:
        print("Type a text and press Enter (Ctrl-D to stop):", file=sys.stderr)
    stream_settings = {name: value for name, value in args.settings.items() if name != "batch_size"}
    try:
        with decoding_limits():
            for batch in batches(
                args.text or sys.stdin, 1 if interactive or args.stream else args.settings["batch_size"]
            ):
                if args.stream:
                    print_growing(translators.pick(batch[0]).stream(batch[0], **stream_settings))
                else:
                    print("\n".join(translators.translate(batch, **args.settings)), flush=True)
    except UnicodeDecodeError:
        raise UsageError("standard input is not UTF-8 text; convert it with iconv -f ITS-ENCODING -t UTF-8") from None
    except Exception as error:  # raised by the model while it translated (streamed too: the thread's own error)
        if isinstance(error, UsageError | OSError):  # the runner's: a closed pipe, a full disk
            raise
        raise WorkFailed(f"translating failed ({type(error).__name__}: {first_line(error)})") from error
    return 0
