"""`tiny-transformer`: the installed command for using a model, with one subcommand a job.

    tiny-transformer --help
    tiny-transformer translate --model runs/en-ja/hub "I like green tea."
    tiny-transformer translate --help

Each subcommand is a module here with `main(argv)`, imported only when it runs (the app's gradio is not
imported to translate). Making a model is not here: it is `training/` in a clone (train.py and its recipes).
"""

import importlib
import sys

from ..errors import UsageError
from ..guards.runner import run

PROG = "tiny-transformer"
COMMANDS = {
    "translate": "translate texts, or every line of standard input",
    "export-ctranslate2": "export a saved model to CTranslate2, the fast inference engine",
    "export-onnx": "export a saved model to ONNX, for onnxruntime and the browser page",
    "browser-page": "write the page that translates in the browser, offline, for an ONNX export",
    "push-to-hub": "upload a folder saved for the Hub (model, code, tokenizer, model card)",
    "visualize": "pictures of the positional encoding and every attention head for one sentence",
    "app": "a page for a model: translation and attention pictures in the browser (gradio)",
}


def usage() -> str:
    width = max(map(len, COMMANDS))
    lines = [f"  {name:<{width}}  {summary}" for name, summary in COMMANDS.items()]
    return "\n".join([f"usage: {PROG} COMMAND [flags]  ({PROG} COMMAND --help for its flags)", "", "commands:", *lines])


def dispatch(argv: list[str] | None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if not argv or argv[0] in ("-h", "--help"):
        print(usage())
        return 0
    name, rest = argv[0], argv[1:]
    if name not in COMMANDS:
        raise UsageError(f"{name!r} is not a command; pass one of {', '.join(COMMANDS)} (see --help)")
    module = importlib.import_module(f".{name.replace('-', '_')}", __name__)
    return module.main(rest)


def main(argv: list[str] | None = None) -> int:
    """The entry point of `tiny-transformer` ([project.scripts]); returns the exit status."""
    command = PROG if not (argv or sys.argv[1:]) else f"{PROG} {(argv if argv is not None else sys.argv[1:])[0]}"
    return run(dispatch, argv, prog=command)


__all__ = ["main", "COMMANDS"]
