"""The files of a serving export, and the checks both kinds of export share: which kind a folder is, its settings
file, its files present, its tokenizer and generation config loaded, the import of an engine's package. Importing
this loads no engine. Every check raises a ValueError naming the file and the fix (export the model again).
"""

import contextlib
import hashlib
import importlib
import json
from collections.abc import Iterator
from pathlib import Path
from typing import NamedTuple

from ..errors import first_line
from ..guards.loading import EXPORT_SETTINGS as SETTINGS_FILE

# The engines a model translates with, and what each one takes as --model.
ENGINES = {
    "transformers": "a folder saved with save_pretrained, in transformers",
    "ctranslate2": "a folder written by export_ctranslate2 (tiny-transformer export-ctranslate2), in CTranslate2",
    "onnx": "a folder written by export_onnx (tiny-transformer export-onnx), in onnxruntime",
}
CTRANSLATE2_MODEL = "model.bin"  # CTranslate2's weights
# the ONNX graphs, laid out as transformers.js and Optimum lay out an encoder-decoder (+ ".onnx")
ENCODER, DECODER = "onnx/encoder_model", "onnx/decoder_model_merged"
QUANTIZED = "_quantized"  # transformers.js's name for the int8 variant of a graph
EMBEDDINGS = "embeddings"  # onnx/embeddings[_quantized].onnx_data: the embedding table both graphs read
# what every export holds for its translator besides the engine's files: the tokenizer and the decoding settings
TRANSLATOR_FILES = ("tokenizer.json", "tokenizer_config.json", "generation_config.json")
KINDS = {"onnx": "an ONNX", "ctranslate2": "a CTranslate2"}  # the settings file's `format` -> an export of it
VOCABULARY = "shared_vocabulary.json"  # CTranslate2's tokens by id, one vocabulary for both sides
# What either export writes at its folder's top: --overwrite replaces a folder of these, and nothing else.
EXPORT_WRITES = (
    SETTINGS_FILE,
    CTRANSLATE2_MODEL,
    VOCABULARY,
    "onnx",
    "config.json",
    "special_tokens_map.json",
    *TRANSLATOR_FILES,
)


def export_again(kind: str) -> str:
    return f"export the model again with tiny-transformer export-{kind} --overwrite"


def export_kind(folder: Path) -> str | None:
    """The kind of export `folder` is: its settings file's `format`, else what its files say; None for no export."""
    with contextlib.suppress(OSError, ValueError, AttributeError):
        if (kind := json.loads((folder / SETTINGS_FILE).read_text(encoding="utf-8")).get("format")) in KINDS:
            return kind
    return "ctranslate2" if (folder / CTRANSLATE2_MODEL).is_file() else "onnx" if (folder / "onnx").is_dir() else None


def check_kind(folder: Path, kind: str):
    """`folder` is an export of `kind`; else a ValueError saying how to write one, or which engine takes it."""
    found = export_kind(folder) if folder.is_dir() else None
    if found is None:
        raise ValueError(
            f"{folder} is not a folder written by export_{kind} (no {SETTINGS_FILE}); write one with tiny-transformer "
            f"export-{kind}"
        )
    if found != kind:
        raise ValueError(
            f"{folder} is {KINDS[found]} export, not {KINDS[kind]} one; translate with it with the {found} engine "
            f"(--engine {found})"
        )


def check_files(folder: Path, names, kind: str):
    """Each of `names` is a file in `folder`; else a ValueError naming the first one missing."""
    if missing := next((name for name in names if not (folder / name).is_file()), None):
        raise ValueError(f"{folder / missing} is missing; {export_again(kind)}")


def read_settings(folder: Path, kind: str, required: tuple[str, ...]) -> dict:
    """The settings file of an export of `kind`: a JSON object with the keys `required` (the caller checks values)."""
    check_files(folder, [SETTINGS_FILE], kind)
    path = folder / SETTINGS_FILE
    with errors_naming(path, "is not a JSON object", kind):
        settings = json.loads(path.read_text(encoding="utf-8"))
        if not isinstance(settings, dict):
            raise ValueError(type(settings).__name__)
    if missing := next((key for key in required if key not in settings), None):
        raise ValueError(f"{path} has no {missing}; {export_again(kind)}")
    return settings


def check_positive(folder: Path, settings: dict, key: str, kind: str):
    """The settings' `key` is a whole number above 0; else a ValueError naming it."""
    value = settings[key]
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ValueError(
            f"{folder / SETTINGS_FILE}'s {key} must be a positive whole number, not {value!r}; {export_again(kind)}"
        )


def vocabulary_digest(tokenizer) -> str:
    """A fingerprint of the tokenizer's tokens in id order: an export records it, so that another model's tokenizer
    put beside its graphs (which would translate into other words without an error) is found."""
    tokens = [token for token, _ in sorted(tokenizer.get_vocab().items(), key=lambda item: item[1])]
    return hashlib.sha256(json.dumps(tokens, ensure_ascii=False).encode()).hexdigest()


class TranslatorFiles(NamedTuple):
    """What a translator reads from an export besides the engine's own files."""

    settings: dict
    tokenizer: object
    generation_config: object


def load_translator_files(folder: Path, kind: str, settings: dict) -> TranslatorFiles:
    """The export's tokenizer and generation config with its `settings`; else a ValueError naming the file."""
    from transformers import AutoTokenizer, GenerationConfig

    check_files(folder, TRANSLATOR_FILES, kind)
    with errors_naming(folder / "tokenizer.json", "cannot be loaded", kind):
        tokenizer = AutoTokenizer.from_pretrained(folder)
    with errors_naming(folder / "generation_config.json", "cannot be loaded", kind):
        generation_config = GenerationConfig.from_pretrained(folder)
    if settings.get("vocabulary", vocabulary_digest(tokenizer)) != vocabulary_digest(tokenizer):
        raise ValueError(
            f"{folder / 'tokenizer.json'} is not the tokenizer the model was exported with; {export_again(kind)}"
        )
    return TranslatorFiles(settings, tokenizer, generation_config)


@contextlib.contextmanager
def errors_naming(path: Path | str, problem: str, kind: str) -> Iterator[None]:
    """An error in the block as a ValueError in one line: `path`, the `problem`, the library's reason and the fix."""
    try:
        yield
    except Exception as error:
        raise ValueError(f"{path} {problem} ({first_line(error)}); {export_again(kind)}") from None


def import_installed(name: str, missing: str):
    """`importlib.import_module(name)` for an engine's package; an ImportError saying `missing` (how to install it)
    only where the package itself is not installed. An import that Ctrl-C interrupted raises KeyboardInterrupt (a
    compiled extension reports one as an ImportError caused by it)."""
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
