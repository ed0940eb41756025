"""Reading a saved model folder, one way for every command and tool: the model and its tokenizer, or one line that
names the folder, the file and the fix.

    model, tokenizer = load_model_folder("runs/en-ja/hub")

A missing or damaged file, a config value of the wrong type, code the user did not allow to run (named by the file
whose auto_map names it), weights that miss or add tensors (the library would initialize missing ones at random and
only warn), a value the model would compute garbage from (NaN or infinity in the config or the weights), decoding
settings that cannot be used (0 beams), a tokenizer without its padding token, a serving export given for a model
folder, and a folder of the parameter layout before version 0.2 (converted by `tiny-transformer upgrade`) are each a
`UsageError` naming the folder; a command adds its flag (`errors.about`).

What would cost before failing is checked first: a config that needs far more parameters than model.safetensors
holds (the library would build the model at that size), a tokenizer whose Rust code panics on ordinary text, a Hub
id that cannot be downloaded (the library would retry for half a minute). A folder holding only a pickled
checkpoint is refused: a pickle can run code when loaded, and the package loads safetensors only.
"""

import contextlib
import json
import math
import os
import re
import sys
from pathlib import Path

from huggingface_hub.errors import HFValidationError
from huggingface_hub.utils import validate_repo_id

from .auto_classes import register_auto_classes
from .errors import UsageError, first_line, is_rust_panic
from .serving.files import CTRANSLATE2_MODEL, ENCODER

EXPORT_FILES = {CTRANSLATE2_MODEL: "CTranslate2", f"{ENCODER}.onnx": "ONNX"}  # a serving export's file -> its engine
# What the tokenizer is tried on once loaded: a sentence of a common length (a regex that backtracks without end on
# text like this would panic on the first sentence translated).
ORDINARY_TEXT = "An ordinary sentence of a common length, with commas, as a translation would give it to the tokenizer."


def load_model_folder(name: str, trust_remote_code: bool = False, **model_kwargs):
    """The model and tokenizer saved in folder (or Hub repository) `name`, checked as the module says."""
    from transformers import AutoConfig, AutoModelForSeq2SeqLM, AutoTokenizer

    register_auto_classes()  # this package's folders load with its own classes, without their code
    check_model_source(name)
    check_hub_reachable(name)
    with quiet_transformers():
        config = load_part(AutoConfig, name, "config.json", trust_remote_code)
        check_weights_fit(name, config, trust_remote_code)
        tokenizer = load_part(AutoTokenizer, name, "tokenizer.json", trust_remote_code)
        check_tokenizer_runs(name, tokenizer)
        model, info = load_part(
            AutoModelForSeq2SeqLM,
            name,
            "model.safetensors",
            trust_remote_code,
            config=config,
            output_loading_info=True,
            ignore_mismatched_sizes=True,
            use_safetensors=True,
            **model_kwargs,
        )
    if listed := misfits({kind: info[f"{kind}_keys"] for kind in ("missing", "unexpected", "mismatched")}):
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


def misfits(keys: dict[str, list]) -> str:
    """The tensors that do not fit, a few of each kind (`missing: a, b; mismatched: c (5, 32) saved, (64, 32)
    expected`): "" where all fit. `keys`: the kind -> the library's loading info for it."""
    wrong = {kind: sorted(map(describe_key, found)) for kind, found in keys.items()}
    return "; ".join(
        f"{kind}: {', '.join(found[:3])}{' ...' if len(found) > 3 else ''}" for kind, found in wrong.items() if found
    )


def describe_key(key) -> str:
    """A tensor's name, or for a tensor of the wrong shape (name, saved shape, expected shape) a readable line."""
    if isinstance(key, tuple):
        name, saved, expected = key
        return f"{name} {tuple(saved)} saved, {tuple(expected)} expected"
    return key


def check_model_source(name: str):
    """A local path that does not exist is an error at once (not a Hub lookup with retries): a name that is not a
    Hub id, or one inside an existing local folder (`runs/en-ja` with `runs/` here). A file, a folder without
    config.json, a serving export, a folder with only a pickled checkpoint and a folder of the old parameter layout
    are named as such."""
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
    refuse_pickles(folder)
    refuse_old_layout(folder)


def refuse_pickles(folder: Path):
    """A folder whose weights are only pickled (pytorch_model.bin): unpickling can run code, and the package loads
    safetensors only; the conversion is the owner's to make, in a session that trusts the file."""
    pickles = sorted(folder.glob("pytorch_model*.bin"))
    if pickles and not any(folder.glob("model*.safetensors*")):
        raise UsageError(
            f"{folder} holds only a pickled checkpoint ({pickles[0].name}), which this package does not load (a "
            "pickle can run code); from_pretrained it in a session you trust and save_pretrained it, which writes "
            "model.safetensors"
        )


def check_hub_reachable(name: str):
    """A Hub id not downloaded before while nothing answers from the Hub (offline mode, no network): one line at
    once, where the library would retry for half a minute, a line of warning a try. A Hub that answers (no such
    repository, a gated one) is left to the library's own error."""
    if Path(name).exists() or not is_hub_id(name):
        return
    from huggingface_hub import get_hf_file_metadata, hf_hub_url, try_to_load_from_cache
    from huggingface_hub.errors import HfHubHTTPError

    if isinstance(try_to_load_from_cache(name, "config.json"), str):
        return  # in the cache: the library loads it offline
    try:
        get_hf_file_metadata(hf_hub_url(name, "config.json"))  # one try, no retries
    except HfHubHTTPError:
        return
    except Exception as error:  # the library's offline mode, no network, a timeout: nothing answered
        raise UsageError(
            f"{name} could not be downloaded ({first_line(error)}); go online, or download it once with "
            f"`hf download {name}`, or pass a local folder"
        ) from None


def check_weights_fit(name: str, config, trust_remote_code: bool):
    """A config that needs far more parameters than model.safetensors holds (d_model raised by hand) is refused
    before the model is built: the library would build it at that size, gigabytes, before finding that the weights
    do not fit. The file's header gives the saved shapes; the model built on the meta device, which takes no memory,
    the config's. Up to twice what the file holds costs no more than loading the model: the load's own check names
    what does not fit (a damaged file)."""
    saved = saved_shapes(Path(name) / "model.safetensors")
    if saved:
        check_layer_counts(name, config, saved)  # before the model is built: a count of millions takes hours
    expected = config_shapes(config, trust_remote_code) if saved else None
    if not expected or sum(map(math.prod, expected.values())) <= 2 * sum(map(math.prod, saved.values())):
        return
    mismatched = [(key, saved[key], shape) for key, shape in expected.items() if saved.get(key, shape) != shape]
    listed = misfits(
        {
            "missing": [key for key in expected if key not in saved],
            "unexpected": [key for key in saved if key not in expected],
            "mismatched": mismatched,
        }
    )
    raise UsageError(f"{name}: {fields_behind(config, mismatched)} ({listed}); fix config.json or save the model again")


LAYER = re.compile(r"\b(encoder|decoder)\.layers\.(\d+)\.")  # a stack's layer i in a weight's name


def check_layer_counts(name: str, config, saved: dict[str, tuple[int, ...]]):
    """config.json's encoder_layers and decoder_layers against the layers model.safetensors holds."""
    counts: dict[str, int] = {}
    for key in saved:
        if match := LAYER.search(key):
            counts[match[1]] = max(counts.get(match[1], 0), int(match[2]) + 1)
    for stack, count in counts.items():
        value = getattr(config, f"{stack}_layers", None)
        if isinstance(value, int) and value != count:
            raise UsageError(
                f"{name}: config.json's {stack}_layers {value} does not fit model.safetensors, which holds {count} "
                f"{stack} layers; fix config.json or save the model again"
            )


def saved_shapes(weights_file: Path) -> dict[str, tuple[int, ...]] | None:
    """Each tensor's name and shape in a safetensors file, from its header; None where it is missing or damaged
    (the library's load reports it)."""
    if not weights_file.is_file():
        return None
    from safetensors import SafetensorError, safe_open

    try:
        with safe_open(weights_file, framework="pt") as weights:
            return {key: tuple(weights.get_slice(key).get_shape()) for key in weights.keys()}
    except (OSError, SafetensorError):
        return None


def config_shapes(config, trust_remote_code: bool) -> dict[str, tuple[int, ...]] | None:
    """Each parameter's name and shape (tied ones once) in the model `config` describes, built on the meta device;
    None for a quantized config (its weights are stored packed) or one that cannot be built so (the library's load
    reports it)."""
    import torch
    from transformers import AutoModelForSeq2SeqLM

    if getattr(config, "quantization_config", None):
        return None
    try:
        with torch.device("meta"):
            model = AutoModelForSeq2SeqLM.from_config(config, trust_remote_code=trust_remote_code)
    except Exception:
        return None
    return {key: tuple(parameter.shape) for key, parameter in model.named_parameters()}


def fields_behind(config, mismatched: list[tuple[str, tuple, tuple]]) -> str:
    """`config.json's d_model 8192 does not fit model.safetensors`: the config fields whose value is a size the saved
    tensors lack, where there are such; else `config.json does not fit model.safetensors`."""
    sizes = {size for _, saved, expected in mismatched for size, held in zip(expected, saved) if size != held}
    numbers = {field: value for field, value in config.to_dict().items() if type(value) is int}
    fields = [f"{field} {value}" for field, value in numbers.items() if value in sizes]
    named = "'s " + " or ".join(fields) if fields else ""
    return f"config.json{named} does not fit model.safetensors"


def check_tokenizer_runs(name: str, tokenizer):
    """The tokenizer tried on ordinary text: one whose Rust code panics there (a normalizer regex that backtracks
    without end) is one line now, not a panic on the first sentence translated. The panic's own message, which the
    Rust code writes on stderr, is silenced while it is tried."""
    try:
        with stderr_silenced():
            tokenizer(ORDINARY_TEXT)
    except BaseException as error:
        if not (isinstance(error, Exception) or is_rust_panic(error)):
            raise
        raise UsageError(
            f"{name}: tokenizer.json fails on ordinary text ({first_line(error)}); fix its normalizer and "
            "pre-tokenizer, or save the tokenizer again"
        ) from None


@contextlib.contextmanager
def stderr_silenced():
    """File descriptor 2 sent to the null device while a block runs: what native code writes there too."""
    sys.stderr.flush()
    saved = os.dup(2)
    null = os.open(os.devnull, os.O_WRONLY)
    os.dup2(null, 2)
    os.close(null)
    try:
        yield
    finally:
        os.dup2(saved, 2)
        os.close(saved)


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
    """`auto_class.from_pretrained(name, ...)`, any error (a Rust library's panic too) turned into a UsageError that
    names `file`."""
    try:
        return auto_class.from_pretrained(name, trust_remote_code=trust_remote_code, **kwargs)
    except BaseException as error:  # the libraries raise many kinds; each is one line for the user
        if not (isinstance(error, Exception) or is_rust_panic(error)):
            raise
        if "trust_remote_code" in str(error):
            raise UsageError(
                f"{name} holds Python code of its own ({code_naming_file(name, file)}'s auto_map); read it, then "
                "pass --trust_remote_code to run it (trust_remote_code=True in Python)"
            ) from None
        fix = "save the model again or copy the folder anew" if Path(name).exists() else "check the Hub id"
        raise UsageError(f"{name}: {file} cannot be loaded ({first_line(error)}); {fix}") from None


def code_naming_file(name: str, file: str) -> str:
    """The file whose auto_map names the code the library would run: the tokenizer's own tokenizer_config.json
    where it has one, else config.json."""
    tokenizer_config = {}
    with contextlib.suppress(OSError, ValueError):  # missing, or not JSON: the library said what it found
        tokenizer_config = json.loads((Path(name) / "tokenizer_config.json").read_text(encoding="utf-8"))
    has_code = isinstance(tokenizer_config, dict) and "auto_map" in tokenizer_config
    return "tokenizer_config.json" if file == "tokenizer.json" and has_code else "config.json"


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
