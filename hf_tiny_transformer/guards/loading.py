"""Reading a saved model folder, one way for every command: the model and its tokenizer, or one line naming the
folder, the file and the fix. Any error of the libraries while loading becomes that line; checked besides, where the
library would go on silently or at great cost: weights that miss or add tensors (it would initialize them at random
and only warn), NaN or infinity, a config far larger than its weights (built at that size before failing), decoding
settings and token ids generate() cannot use.

    model, tokenizer = load_model_folder("runs/en-ja/hub")
"""

import contextlib
import json
import math
import re
from pathlib import Path

from ..errors import UsageError, first_line, is_rust_panic

EXPORT_SETTINGS = "hf_tiny_transformer.json"  # what an export (CTranslate2, ONNX) holds beside the engine's files
CTRANSLATE2_MODEL = "model.bin"  # CTranslate2's weights
KINDS = {"onnx": "an ONNX", "ctranslate2": "a CTranslate2"}  # the settings file's `format` -> an export of it
TOKEN_IDS = ("decoder_start_token_id", "bos_token_id", "eos_token_id", "pad_token_id")


def load_model_folder(name: str, trust_remote_code: bool = False, **model_kwargs):
    """The model and tokenizer saved in folder (or Hub repository) `name`, checked as the module says."""
    from transformers import AutoConfig, AutoModelForSeq2SeqLM, AutoTokenizer
    from transformers.utils import logging as transformers_logging

    from ..auto_classes import register_auto_classes
    from ..text_tiny_transformer import generation_settings

    register_auto_classes()  # this package's folders load with its own classes, without their code
    check_model_source(name)
    level = transformers_logging.get_verbosity()
    transformers_logging.set_verbosity_error()  # its load report: the problems are said here
    try:
        config = load_part(AutoConfig, name, "config.json", trust_remote_code)
        check_sizes(name, config, trust_remote_code)
        tokenizer = load_part(AutoTokenizer, name, "tokenizer.json", trust_remote_code)
        settings = {"output_loading_info": True, "ignore_mismatched_sizes": True, "use_safetensors": True}
        model, info = load_part(AutoModelForSeq2SeqLM, name, "model.safetensors", trust_remote_code, config=config,
                                **settings, **model_kwargs)  # fmt: skip
    finally:
        transformers_logging.set_verbosity(level)
    misfit = {kind: sorted(map(_named, info[f"{kind}_keys"]))[:3] for kind in ("missing", "unexpected", "mismatched")}
    if listed := "; ".join(f"{kind}: {', '.join(keys)}" for kind, keys in misfit.items() if keys):
        raise UsageError(f"{name}: model.safetensors does not fit config.json ({listed}); save the model again")
    check_finite(name, model)
    generation = model.generation_config
    for key in TOKEN_IDS:  # a generation_config.json without them ({}, an older tool): config.json's, as saved
        if getattr(generation, key, None) is None and getattr(config, key, None) is not None:
            setattr(generation, key, getattr(config, key))
    if generation.decoder_start_token_id is None and generation.bos_token_id is None:
        raise UsageError(
            f"{name}: generation_config.json (and config.json) name no decoder_start_token_id; add it there"
        )
    try:
        generation_settings(
            **{key: getattr(generation, key, None) for key in ("num_beams", "length_penalty", "max_new_tokens")}
        )
    except ValueError as error:
        raise UsageError(f"{name}: generation_config.json's {first_line(error)}; fix it there") from None
    if tokenizer.pad_token_id is None:
        raise UsageError(f"{name}: the tokenizer has no padding token (tokenizer_config.json is missing or names "
                         "none); save the tokenizer again with save_pretrained")  # fmt: skip
    return model, tokenizer


def check_model_source(name: str):
    """A path that does not exist, a file, a folder without config.json or an export: one line at once (not a Hub
    lookup with retries)."""
    folder = Path(name)
    if folder.is_dir() and not (folder / "model.safetensors").is_file() and (kind := export_kind(folder)):
        raise UsageError(f"{name} is {KINDS[kind]} export, not a model folder; translate with it with its engine "
                         f"(--engine {kind}), or pass the folder it was exported from")  # fmt: skip
    if folder.is_dir() and not (folder / "config.json").is_file():
        raise UsageError(f"{name} has no config.json; pass a folder saved with save_pretrained")
    if folder.is_file():
        raise UsageError(f"{name} is a file; pass the model folder that holds it")
    hub_id = re.fullmatch(r"[\w.-]+(/[\w.-]+)?", name) and not (folder.parent != Path(".") and folder.parent.is_dir())
    if not folder.exists() and not hub_id:
        raise UsageError(f"{name} does not exist; pass a folder saved with save_pretrained, or a Hub id")


def export_kind(folder: Path) -> str | None:
    """The kind of export `folder` is: its settings file's `format`, else (that file gone or damaged) what its files
    say; None for no export."""
    with contextlib.suppress(OSError, ValueError, AttributeError):
        if (kind := json.loads((folder / EXPORT_SETTINGS).read_text(encoding="utf-8")).get("format")) in KINDS:
            return kind
    return "ctranslate2" if (folder / CTRANSLATE2_MODEL).is_file() else "onnx" if (folder / "onnx").is_dir() else None


def check_sizes(name: str, config, trust_remote_code: bool):
    """The tensors config.json asks for (the positional table too) against those model.safetensors holds (its
    header): over twice as many numbers refused before the model is built, naming the sizes the saved ones lack."""
    import torch
    from safetensors import SafetensorError, safe_open
    from transformers import AutoModelForSeq2SeqLM

    try:
        with safe_open(Path(name) / "model.safetensors", framework="pt") as weights:
            saved = [weights.get_slice(key).get_shape() for key in weights.keys()]
        with torch.device("meta"):  # takes no memory
            model = AutoModelForSeq2SeqLM.from_config(config, trust_remote_code=trust_remote_code)
    except (OSError, SafetensorError, ValueError, TypeError):  # the library's load says what is wrong
        return
    asked = [tensor.shape for tensor in (*model.parameters(), *model.buffers())]
    if sum(map(math.prod, asked)) > 2 * sum(map(math.prod, saved)):
        new = {size for shape in asked for size in shape} - {size for shape in saved for size in shape}
        fields = [f"{key} {value}" for key, value in config.to_dict().items() if type(value) is int and value in new]
        raise UsageError(f"{name}: config.json's {' or '.join(fields) or 'sizes'} does not fit model.safetensors; fix "
                         "config.json or save the model again")  # fmt: skip


def check_finite(name: str, model):
    """NaN or infinity in the config's numbers or in a weight: the model would translate into blanks or noise."""
    import torch

    config = model.config.to_dict()
    if bad := sorted(key for key, value in config.items() if isinstance(value, float) and not math.isfinite(value)):
        raise UsageError(
            f"{name}: config.json's {', '.join(bad)} is not a finite number; fix it or save the model again"
        )
    for weight, tensor in model.state_dict().items():
        if tensor.is_floating_point() and not bool(torch.isfinite(tensor).all()):
            raise UsageError(f"{name}: model.safetensors holds NaN or infinity in {weight}; save a trained model "
                             "again (training may have diverged)")  # fmt: skip


def load_part(auto_class, name: str, file: str, trust_remote_code: bool, **kwargs):
    """`auto_class.from_pretrained(name, ...)`, any error (a Rust panic too) one line naming the file it reads (for
    the tokenizer, the first of its files that is not JSON)."""
    try:
        return auto_class.from_pretrained(name, trust_remote_code=trust_remote_code, **kwargs)
    except BaseException as error:  # the libraries raise many kinds; each is one line for the user
        if not (isinstance(error, Exception) or is_rust_panic(error)):
            raise
        parts = {part: _read(name, part) for part in ("tokenizer_config.json", "special_tokens_map.json")}
        if "trust_remote_code" in str(error):
            own = file == "tokenizer.json" and "auto_map" in parts["tokenizer_config.json"]
            code = "tokenizer_config.json" if own else "config.json"
            raise UsageError(f"{name} holds Python code of its own ({code}'s auto_map); read it, then pass "
                             "--trust_remote_code to run it (trust_remote_code=True in Python)") from None  # fmt: skip
        if file == "tokenizer.json":
            file = next((part for part, text in parts.items() if text and not _is_json(text)), file)
        fix = "save the model again or copy the folder anew"
        if not Path(name).exists():
            fix = "check the Hub id and the network, or pass a local folder"
        raise UsageError(f"{name}: {file} cannot be loaded ({first_line(error)}); {fix}") from None


def _named(key) -> str:
    """A weight's name, or (name, saved shape, expected shape) for one of the wrong shape, for people."""
    return key if isinstance(key, str) else f"{key[0]} {tuple(key[1])} saved, {tuple(key[2])} expected"


def _read(name: str, file: str) -> str:
    try:
        return (Path(name) / file).read_text(encoding="utf-8")
    except (OSError, ValueError):
        return ""


def _is_json(text: str) -> bool:
    try:
        json.loads(text)
    except ValueError:
        return False
    return True


__all__ = ["load_model_folder", "check_model_source", "export_kind", "EXPORT_SETTINGS", "CTRANSLATE2_MODEL", "KINDS"]
