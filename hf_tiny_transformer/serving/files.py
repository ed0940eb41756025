"""The files of a serving export and the checks both kinds share (`open_export`): its kind, its settings file, its
files present, the tokenizer it was exported with and its generation config. Importing this loads no engine; every
check raises a ValueError naming the file and the fix (export the model again).
"""

import contextlib
import hashlib
import importlib
import json
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import NamedTuple

from ..errors import first_line
from ..guards.loading import CTRANSLATE2_MODEL, KINDS, export_kind
from ..guards.loading import EXPORT_SETTINGS as SETTINGS_FILE

# The engines a model translates with, and what each one takes as --model.
ENGINES = {
    "transformers": "a folder saved with save_pretrained, in transformers",
    "ctranslate2": "a folder written by export_ctranslate2 (tiny-transformer export-ctranslate2), in CTranslate2",
    "onnx": "a folder written by export_onnx (tiny-transformer export-onnx), in onnxruntime",
}
VOCABULARY = "shared_vocabulary.json"  # CTranslate2's tokens by id
ENCODER, DECODER = "onnx/encoder_model", "onnx/decoder_model_merged"  # + ".onnx", as transformers.js lays them out
QUANTIZED = "_quantized"  # transformers.js's name for the int8 variant of a graph
EMBEDDINGS = "embeddings"  # onnx/embeddings[_quantized].onnx_data: the embedding table both graphs read
TRANSLATOR_FILES = ("tokenizer.json", "tokenizer_config.json", "generation_config.json")  # in every export
# What either export writes at its folder's top: --overwrite replaces a folder of these, and nothing else.
EXPORT_WRITES = (SETTINGS_FILE, CTRANSLATE2_MODEL, VOCABULARY, "onnx", "config.json", "special_tokens_map.json",
                 *TRANSLATOR_FILES)  # fmt: skip


def export_again(kind: str) -> str:
    return f"export the model again with tiny-transformer export-{kind} --overwrite"


class TranslatorFiles(NamedTuple):
    """What a translator reads from an export besides the engine's own files."""

    settings: dict
    tokenizer: object
    generation_config: object


def open_export(
    folder: Path,
    kind: str,
    keys: tuple[str, ...],
    files: tuple[str, ...],
    load_tokenizer: Callable[[Path], object],
    load_generation_config: Callable[[Path], object],
) -> TranslatorFiles:
    """An export of `kind`: its settings (a JSON object with `keys`), `files` and TRANSLATOR_FILES present, the
    tokenizer and generation config loaded by the loaders given, the tokenizer the one it was exported with; else a
    ValueError."""
    if (found := export_kind(folder) if folder.is_dir() else None) != kind:
        raise ValueError(
            f"{folder} is {KINDS[found]} export, not {KINDS[kind]} one; translate with it with the {found} engine "
            f"(--engine {found})"
            if found
            else f"{folder} is not a folder written by export_{kind} (no {SETTINGS_FILE}); write one with "
            f"tiny-transformer export-{kind}"
        )
    settings = read_settings(folder, kind, keys)
    check_files(folder, (*files, *TRANSLATOR_FILES), kind)
    with errors_naming(folder / "tokenizer.json", "cannot be loaded", kind):
        tokenizer = load_tokenizer(folder)
    with errors_naming(folder / "generation_config.json", "cannot be loaded", kind):
        generation_config = load_generation_config(folder)
    if not starts(generation_config):
        raise ValueError(f"{folder / 'generation_config.json'} names no decoder_start_token_id; {export_again(kind)}")
    if settings.get("vocabulary", vocabulary_digest(tokenizer)) != vocabulary_digest(tokenizer):
        raise ValueError(
            f"{folder / 'tokenizer.json'} is not the tokenizer the model was exported with; {export_again(kind)}"
        )
    return TranslatorFiles(settings, tokenizer, generation_config)


def starts(generation_config) -> bool:
    """Whether a generation config names the token generate() starts from (an export refuses to write one that does
    not: every translation would fail)."""
    return generation_config.decoder_start_token_id is not None or generation_config.bos_token_id is not None


def read_settings(folder: Path, kind: str, keys: tuple[str, ...]) -> dict:
    """The settings file of an export of `kind`: a JSON object with `keys` (the caller checks the values)."""
    check_files(folder, [SETTINGS_FILE], kind)
    with errors_naming(folder / SETTINGS_FILE, "is not a JSON object", kind):
        if not isinstance(settings := json.loads((folder / SETTINGS_FILE).read_text(encoding="utf-8")), dict):
            raise ValueError(type(settings).__name__)
    if missing := next((key for key in keys if key not in settings), None):
        raise ValueError(f"{folder / SETTINGS_FILE} has no {missing}; {export_again(kind)}")
    return settings


def check_files(folder: Path, names, kind: str):
    """Each of `names` is a file in `folder`; else a ValueError naming the first one missing."""
    if missing := next((name for name in names if not (folder / name).is_file()), None):
        raise ValueError(f"{folder / missing} is missing; {export_again(kind)}")


def vocabulary_digest(tokenizer) -> str:
    """A fingerprint of the tokenizer's tokens in id order: an export records it, so that another model's tokenizer
    put beside its weights (which would translate into other words without an error) is found."""
    tokens = [token for token, _ in sorted(tokenizer.get_vocab().items(), key=lambda item: item[1])]
    return hashlib.sha256(json.dumps(tokens, ensure_ascii=False).encode()).hexdigest()


@contextlib.contextmanager
def errors_naming(path: Path | str, problem: str, kind: str) -> Iterator[None]:
    """An error in the block as a ValueError in one line: `path`, the `problem`, the library's reason and the fix."""
    try:
        yield
    except Exception as error:
        raise ValueError(f"{path} {problem} ({first_line(error)}); {export_again(kind)}") from None


def import_installed(name: str, missing: str):
    """`importlib.import_module(name)` for an engine's package; an ImportError saying `missing` (how to install it)
    only where the package itself is not installed. An import that Ctrl-C interrupted (reported by a compiled
    extension as an ImportError caused by it) raises KeyboardInterrupt."""
    try:
        return importlib.import_module(name)
    except ImportError as error:
        cause = error
        while cause is not None and not isinstance(cause, KeyboardInterrupt):
            cause = cause.__cause__ or cause.__context__
        if cause is not None:
            raise KeyboardInterrupt from error
        if isinstance(error, ModuleNotFoundError) and error.name == name.partition(".")[0]:
            raise ImportError(missing) from error
        raise ImportError(f"importing {name} failed: {first_line(error)}") from error
