"""Reading a saved model folder, one way for every command and tool: the model and its tokenizer, or one line that
names the folder, the file and the fix.

    model, tokenizer = load_model_folder("runs/en-ja/hub")

A missing or damaged file, a config value of the wrong type, code the user did not allow to run, weights that miss
or add tensors (the library would initialize missing ones at random and only warn), a value the model would compute
garbage from (NaN or infinity in the config or the weights), decoding settings that cannot be used (0 beams), a
tokenizer without its padding token, a serving export given for a model folder, and a folder of the parameter
layout before version 0.2 (converted by `tiny-transformer upgrade`) are each a `UsageError` naming the folder; a
command adds its flag (`errors.about`).
"""

import contextlib
import math
from pathlib import Path

from huggingface_hub.errors import HFValidationError
from huggingface_hub.utils import validate_repo_id

from .errors import UsageError, first_line
from .serving.files import CTRANSLATE2_MODEL, ENCODER

EXPORT_FILES = {CTRANSLATE2_MODEL: "CTranslate2", f"{ENCODER}.onnx": "ONNX"}  # a serving export's file -> its engine


def load_model_folder(name: str, trust_remote_code: bool = False, **model_kwargs):
    """The model and tokenizer saved in folder (or Hub repository) `name`, checked as the module says."""
    from transformers import AutoConfig, AutoModelForSeq2SeqLM, AutoTokenizer

    check_model_source(name)
    with quiet_transformers():
        config = load_part(AutoConfig, name, "config.json", trust_remote_code)
        tokenizer = load_part(AutoTokenizer, name, "tokenizer.json", trust_remote_code)
        model, info = load_part(
            AutoModelForSeq2SeqLM,
            name,
            "model.safetensors",
            trust_remote_code,
            config=config,
            output_loading_info=True,
            ignore_mismatched_sizes=True,
            **model_kwargs,
        )
    wrong = {kind: sorted(map(describe_key, info[f"{kind}_keys"])) for kind in ("missing", "unexpected", "mismatched")}
    listed = "; ".join(
        f"{kind}: {', '.join(keys[:3])}{' ...' if len(keys) > 3 else ''}" for kind, keys in wrong.items() if keys
    )
    if listed:
        raise UsageError(f"{name}: model.safetensors does not fit config.json ({listed}); save the model again")
    check_finite(name, model)
    check_decoding_settings(name, model.generation_config)
    if tokenizer.pad_token_id is None:
        raise UsageError(
            f"{name}: the tokenizer has no padding token (tokenizer_config.json is missing or names none); save the "
            "tokenizer again with save_pretrained"
        )
    return model, tokenizer


def check_decoding_settings(name: str, generation_config):
    """generation_config.json's beams, length penalty and lengths, as the translators check them when given."""
    from .text_tiny_transformer import generation_settings

    fields = ("num_beams", "length_penalty", "max_new_tokens")
    try:
        generation_settings(**{field: getattr(generation_config, field, None) for field in fields})
    except ValueError as error:
        raise UsageError(
            f"{name}: generation_config.json's {first_line(error)}; fix it there (training/tune_decoding.py writes "
            "good ones)"
        ) from None


def describe_key(key) -> str:
    """A tensor's name, or for a tensor of the wrong shape (name, saved shape, expected shape) a readable line."""
    if isinstance(key, tuple):
        name, saved, expected = key
        return f"{name} {tuple(saved)} saved, {tuple(expected)} expected"
    return key


def check_model_source(name: str):
    """A local path that does not exist is an error at once (not a Hub lookup with retries): a name that is not a
    Hub id, or one inside an existing local folder (`runs/en-ja` with `runs/` here). A file, a folder without
    config.json, a serving export and a folder of the old parameter layout are named as such."""
    folder = Path(name)
    in_a_local_folder = folder.parent != Path(".") and folder.parent.is_dir()
    if not folder.exists() and (in_a_local_folder or not is_hub_id(name)):
        raise UsageError(f"{name} does not exist; pass a folder saved with save_pretrained, or a Hub id")
    if folder.is_file():
        raise UsageError(f"{name} is a file; pass the model folder that holds it")
    if not folder.is_dir():
        return
    for weights, engine in EXPORT_FILES.items():
        if (folder / weights).is_file() and not (folder / "model.safetensors").is_file():
            article = "an" if engine[0] in "AEIOU" else "a"
            raise UsageError(
                f"{name} is {article} {engine} export, not a model folder; translate with it with the "
                f"{engine.lower()} engine (--engine {engine.lower()}), or pass the folder it was exported from"
            )
    if not (folder / "config.json").is_file():
        raise UsageError(f"{name} has no config.json; pass a folder saved with save_pretrained")
    refuse_old_layout(folder)


def refuse_old_layout(folder: Path):
    """Weights in the layout of version 0.1 (one `kv_proj` for keys and values): the library would load them with
    random keys and values and only warn."""
    weights_file = folder / "model.safetensors"
    if not weights_file.is_file():
        return
    from safetensors import SafetensorError, safe_open

    try:
        with safe_open(weights_file, framework="pt") as weights:
            old = any(key.endswith("kv_proj.weight") for key in weights.keys())
    except (OSError, SafetensorError):
        return  # damaged: the library's load reports it
    if old:
        raise UsageError(
            f"{folder} was saved with the parameter layout of hf-tiny-transformer 0.1 (kv_proj); convert it once, "
            f"in place, with: tiny-transformer upgrade {folder}"
        )


def load_part(auto_class, name: str, file: str, trust_remote_code: bool, **kwargs):
    """`auto_class.from_pretrained(name, ...)`, any error turned into a UsageError that names `file`."""
    try:
        return auto_class.from_pretrained(name, trust_remote_code=trust_remote_code, **kwargs)
    except Exception as error:  # the libraries raise many kinds; each is one line for the user
        if "trust_remote_code" in str(error):
            raise UsageError(
                f"{name} holds Python code of its own (config.json's auto_map); read it, then pass "
                "--trust_remote_code to run it (trust_remote_code=True in Python)"
            ) from None
        raise UsageError(
            f"{name}: {file} cannot be loaded ({first_line(error)}); save the model again or copy the folder anew"
        ) from None


def check_finite(name: str, model):
    """NaN or infinity in the config's numbers or in a weight: the model would translate into blanks or noise."""
    config = model.config.to_dict()
    bad = sorted(key for key, value in config.items() if isinstance(value, float) and not math.isfinite(value))
    if bad:
        raise UsageError(
            f"{name}: config.json's {', '.join(bad)} is not a finite number; fix it or save the model again"
        )
    import torch

    for weight_name, tensor in model.state_dict().items():
        if tensor.is_floating_point() and not bool(torch.isfinite(tensor).all()):
            raise UsageError(
                f"{name}: model.safetensors holds NaN or infinity in {weight_name}; save a trained model again "
                "(training may have diverged)"
            )


@contextlib.contextmanager
def quiet_transformers():
    """transformers' warnings (its load report) silenced while a block runs: the loader reports problems itself."""
    from transformers.utils import logging as transformers_logging

    level = transformers_logging.get_verbosity()
    transformers_logging.set_verbosity_error()
    try:
        yield
    finally:
        transformers_logging.set_verbosity(level)


def is_hub_id(name: str) -> bool:
    """Whether `name` has the form of a Hub repository id (`name` or `owner/name`)."""
    try:
        validate_repo_id(name)
    except HFValidationError:
        return False
    return True


__all__ = ["load_model_folder", "check_model_source", "refuse_old_layout", "quiet_transformers", "is_hub_id"]
