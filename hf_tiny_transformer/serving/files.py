"""The names of the files a serving export writes, for the exporters, their translators and the commands that tell
an export from a model folder (loading.py, push-to-hub, browser-page), and the checks both kinds of export share:
which kind a folder is, its settings file read, its files present, its tokenizer loaded, and the import of an
engine's package. Importing this loads no engine. Every check raises a ValueError that names the file of the folder
and the fix (export the model again).
"""

import contextlib
import importlib
import json
from collections.abc import Iterator
from pathlib import Path
from typing import NamedTuple

from ..errors import first_line

# The engines a model translates with, and what each one takes as --model.
ENGINES = {
    "transformers": "a folder saved with save_pretrained, in transformers",
    "ctranslate2": "a folder written by export_ctranslate2 (tiny-transformer export-ctranslate2), in CTranslate2",
    "onnx": "a folder written by export_onnx (tiny-transformer export-onnx), in onnxruntime",
}
SETTINGS_FILE = "hf_tiny_transformer.json"  # what a translator needs besides the engine's own files
CTRANSLATE2_MODEL = "model.bin"  # CTranslate2's weights
# the ONNX graphs, laid out as transformers.js and Optimum lay out an encoder-decoder (+ ".onnx")
ENCODER, DECODER = "onnx/encoder_model", "onnx/decoder_model_merged"
QUANTIZED = "_quantized"  # transformers.js's name for the int8 variant of a graph
EMBEDDINGS = "embeddings"  # onnx/embeddings[_quantized].onnx_data: the embedding table both graphs read
# what every export holds for its translator besides the engine's files: the tokenizer and the decoding settings
TRANSLATOR_FILES = ("tokenizer.json", "tokenizer_config.json", "generation_config.json")
KINDS = {"onnx": "an ONNX", "ctranslate2": "a CTranslate2"}  # the settings file's `format` -> an export of it


def export_again(kind: str) -> str:
    """The fix for a damaged export of `kind` (one of KINDS)."""
    return f"export the model again with tiny-transformer export-{kind} --overwrite"


def export_kind(folder: Path) -> str | None:
    """The kind of export `folder` is (one of KINDS): what its settings file's `format` says, or for an export
    written before the file said it (or whose settings file is gone or damaged), what its files say; None for a
    folder that is no export."""
    try:
        kind = json.loads((folder / SETTINGS_FILE).read_text(encoding="utf-8")).get("format")
    except (OSError, ValueError, AttributeError):  # no settings file, not JSON, not an object: the files tell
        kind = None
    if kind in KINDS:
        return kind
    if (folder / CTRANSLATE2_MODEL).is_file():
        return "ctranslate2"
    if (folder / "onnx").is_dir():
        return "onnx"
    return None


def check_kind(folder: Path, kind: str):
    """`folder` is an export of `kind`; else a ValueError that says how to write one, or for an export of the other
    kind, which engine translates with it."""
    if not folder.is_dir():
        raise ValueError(f"{folder} is not a folder; pass one written by tiny-transformer export-{kind}")
    found = export_kind(folder)
    if found is None:
        files = f"{SETTINGS_FILE} or {ENCODER}.onnx" if kind == "onnx" else SETTINGS_FILE
        raise ValueError(
            f"{folder} is not a folder written by export_{kind} (no {files}); write one with tiny-transformer "
            f"export-{kind}"
        )
    if found != kind:
        raise ValueError(
            f"{folder} is {KINDS[found]} export, not {KINDS[kind]} one; translate with it with the {found} engine "
            f"(--engine {found})"
        )


def check_files(folder: Path, names, kind: str):
    """Each of `names` is a file in `folder`; else a ValueError naming the first one missing."""
    for name in names:
        if not (folder / name).is_file():
            raise ValueError(f"{folder / name} is missing; {export_again(kind)}")


def read_settings(folder: Path, kind: str, required: tuple[str, ...]) -> dict:
    """The settings file of an export of `kind`: a JSON object with the keys `required`; else a ValueError naming
    the file (the caller checks the values)."""
    path = folder / SETTINGS_FILE
    check_files(folder, [SETTINGS_FILE], kind)
    try:
        settings = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError) as error:
        raise ValueError(f"{path} cannot be read ({first_line(error)}); {export_again(kind)}") from None
    except ValueError as error:
        raise ValueError(f"{path} is not JSON ({first_line(error)}); {export_again(kind)}") from None
    if not isinstance(settings, dict):
        raise ValueError(f"{path} is not a JSON object; {export_again(kind)}")
    for key in required:
        if key not in settings:
            raise ValueError(f"{path} has no {key}; {export_again(kind)}")
    return settings


def check_positive(folder: Path, settings: dict, key: str, kind: str):
    """The settings' `key` is a whole number above 0; else a ValueError naming it."""
    value = settings[key]
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ValueError(
            f"{folder / SETTINGS_FILE}'s {key} must be a positive whole number, not {value!r}; {export_again(kind)}"
        )


class TranslatorFiles(NamedTuple):
    """What a translator reads from an export besides the engine's own files."""

    settings: dict
    tokenizer: object
    generation_config: object


def load_translator_files(folder: Path, kind: str, settings: dict) -> TranslatorFiles:
    """The export's tokenizer and generation config (TRANSLATOR_FILES) with its `settings`; else a ValueError
    naming the file that is missing or cannot be loaded."""
    from transformers import AutoTokenizer, GenerationConfig

    check_files(folder, TRANSLATOR_FILES, kind)
    with errors_naming(folder / "tokenizer.json", "cannot be loaded", kind):
        tokenizer = AutoTokenizer.from_pretrained(folder)
    with errors_naming(folder / "generation_config.json", "cannot be loaded", kind):
        generation_config = GenerationConfig.from_pretrained(folder)
    return TranslatorFiles(settings, tokenizer, generation_config)


@contextlib.contextmanager
def errors_naming(path: Path | str, problem: str, kind: str) -> Iterator[None]:
    """An error in the block as a ValueError in one line: `path` (a file, or a part of one), the `problem`, the
    library's reason and the fix (the libraries that read these files raise many kinds of error)."""
    try:
        yield
    except Exception as error:
        raise ValueError(f"{path} {problem} ({first_line(error)}); {export_again(kind)}") from None


def import_installed(name: str, missing: str):
    """`importlib.import_module(name)` for an engine's package; an ImportError saying `missing` (how to install it)
    only where the package itself is not installed. An import that Ctrl-C interrupted raises KeyboardInterrupt (a
    compiled extension reports one as an ImportError caused by it); any other failure keeps its own reason."""
    try:
        return importlib.import_module(name)
    except ImportError as error:
        if interrupted(error):
            raise KeyboardInterrupt from error
        if isinstance(error, ModuleNotFoundError) and error.name == name.partition(".")[0]:
            raise ImportError(missing) from error
        raise ImportError(f"importing {name} failed: {first_line(error)}") from error


def interrupted(error: BaseException) -> bool:
    """Whether a KeyboardInterrupt is among the exceptions that caused `error`."""
    seen = set()
    while error is not None and id(error) not in seen:
        if isinstance(error, KeyboardInterrupt):
            return True
        seen.add(id(error))
        error = error.__cause__ or error.__context__
    return False


__all__ = [
    "EMBEDDINGS",
    "SETTINGS_FILE",
    "CTRANSLATE2_MODEL",
    "ENCODER",
    "DECODER",
    "QUANTIZED",
    "TRANSLATOR_FILES",
    "KINDS",
    "export_again",
    "export_kind",
    "check_kind",
    "check_files",
    "read_settings",
    "check_positive",
    "TranslatorFiles",
    "load_translator_files",
    "errors_naming",
    "import_installed",
]
