"""The app (hf_tiny_transformer.app.page) for a saved model: translation, and the attention of every layer and
head and the positional encoding for the sentence translated.

    tiny-transformer app                                                         # the shipped models, both ways
    tiny-transformer app --model runs/demo/hub                                   # http://127.0.0.1:7860
    tiny-transformer app --model runs/demo/hub --screenshot docs/app.png    # the page in use -> PNG, then exit

Needs the [app] extra (gradio; the pictures need [viz]). --screenshot drives the page in headless Chromium
(Debian's chromium and chromium-driver, and selenium). MODEL, GRADIO_SERVER_NAME and GRADIO_SERVER_PORT give the
defaults of --model, --host and --port, as on a Hub Space. Without --model (nor MODEL), the page has the models that
ship with the project (models/en-ja and models/ja-en), each text going to the one of its language.
"""

import errno
import os
import socket
import sys

from ..errors import ArgumentParser, UsageError, about, first_line
from ..guards.loading import load_model_folder
from ..guards.outputs import check_output, inputs_of
from ..guards.runner import command_output
from ..serving.engines import DIRECTIONS, shipped_model
from .flags import trust_remote_code_argument


def parse_args(argv=None):
    parser = ArgumentParser(prog="tiny-transformer app", description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--model", default=os.environ.get("MODEL"), help="a saved model folder; default: the shipped models (models/)"
    )
    parser.add_argument("--host", default=os.environ.get("GRADIO_SERVER_NAME", "127.0.0.1"))
    parser.add_argument("--port", type=int, default=int(os.environ.get("GRADIO_SERVER_PORT", 7860)))
    parser.add_argument("--screenshot", help="save a screenshot of the page in use as this PNG file, then exit")
    trust_remote_code_argument(parser)
    args = parser.parse_args(argv)
    if args.screenshot:
        check_output(args.screenshot, flag="--screenshot", kind="file", inputs=inputs_of(args, but=["screenshot"]))
    check_port("127.0.0.1" if args.screenshot else args.host, args.port)
    return args


def check_port(host: str, port: int):
    """A port out of range or in use, or a host that is not this machine's, is a UsageError at once, before the
    model is loaded."""
    if not 1 <= port <= 65535:
        raise UsageError(f"--port {port} is not a port number; pass one in 1..65535, e.g. 7860")
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        try:
            probe.bind((host, port))
        except OSError as error:
            if isinstance(error, socket.gaierror) or error.errno == errno.EADDRNOTAVAIL:
                raise UsageError(
                    f"--host {host} is not an address of this machine ({error.strerror}); pass one, e.g. 127.0.0.1"
                ) from None
            raise UsageError(
                f"--port {port} on {host} cannot be used ({error.strerror}); pass another --port"
            ) from None


def main(argv=None) -> int:
    args = parse_args(argv)
    from ..app.page import build_app, examples_for, use_in_browser

    folders = [args.model] if args.model else [shipped_model(direction, "transformers")[0] for direction in DIRECTIONS]
    with about("--model"):
        models = [load_model_folder(folder, args.trust_remote_code) for folder in folders]
    (model, tokenizer), examples = (
        models[0],
        [text for (m, _), f in zip(models, folders) for text in examples_for(m, f)],
    )
    try:
        app = build_app(model, tokenizer, examples, others=models[1:])
    except ImportError as error:
        raise UsageError(first_line(error)) from None
    if not args.screenshot:
        app.launch(server_name=args.host, server_port=args.port)
        return 0
    _, url, _ = app.launch(server_name="127.0.0.1", server_port=args.port, prevent_thread_lock=True, quiet=True)
    try:
        with command_output(sys.stdout) as output:
            output.info(use_in_browser(url, examples[0], args.screenshot))
    finally:
        app.close()
    return 0
