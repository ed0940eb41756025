"""Fast serving with CTranslate2 (the engine behind OpenNMT and many Marian deployments): export and translate.

    from hf_tiny_transformer.serving.ctranslate2 import CTranslate2Translator, export_ctranslate2
    export_ctranslate2(model, tokenizer, "runs/en-ja/ct2-int8", quantization="int8")
    translate = CTranslate2Translator("runs/en-ja/ct2-int8")
    translate("I like green tea.")                         # [{"translation_text": "..."}]
    translate(["I like cats.", "I like books."], num_beams=4, batch_size=32)

The export is built with ctranslate2's own model specification (`TransformerSpec`) and converter base class: the
paper's post-LN encoder-decoder with relu, the model's own interleaved sinusoidal table and sqrt(d_model)
embedding scale, one vocabulary shared by source, target and the output projection, and the special tokens
`<pad>` 0, `<s>` 1 (decoding starts from it), `</s>` 2, `<unk>` 3. The folder also holds the model's tokenizer
and generation config, which the translator uses, and this package's settings (hf_tiny_transformer.json: the kind
of export, the positional table's length). The translator checks a folder before any work
(`check_ctranslate2_export`): a missing or damaged file is one ValueError naming it. Needs the `[serve]` extra
(`pip install "hf-tiny-transformer[serve]"`).
"""

import json
import logging
import math
import os
import sys
from collections.abc import Callable
from pathlib import Path
from types import SimpleNamespace

from ..errors import first_line
from ..guards.writing import staged_folder
from ..hardware import cpu_cores, ctranslate2_compute_type
from .files import (
    CTRANSLATE2_MODEL,
    SETTINGS_FILE,
    VOCABULARY,
    TranslatorFiles,
    errors_naming,
    export_again,
    import_installed,
    open_export,
    starts,
)
from .translator import Translator, generation_limit, hypothesis_bytes, within_own_limits

logger = logging.getLogger(__name__)


def ctranslate2(converters: bool = True):
    """The ctranslate2 module (with its converters, for an export), or an ImportError that says how to install it
    where it is not installed (files.import_installed). Translating needs neither torch nor transformers."""
    missing = "Serving needs CTranslate2: pip install 'hf-tiny-transformer[serve]'."
    module = import_installed("ctranslate2", missing)
    if converters:
        import_installed("ctranslate2.converters", missing)
    return module


def copy(tensor):
    """A float32 copy: the converter quantizes the spec's arrays in place, which must not change the model."""
    import torch

    return tensor.detach().to(torch.float32, copy=True).cpu()


def fill_linear(spec, module):
    spec.weight = copy(module.weight)
    if module.bias is not None:
        spec.bias = copy(module.bias)


def fill_layer_norm(spec, module):
    spec.gamma, spec.beta = copy(module.weight), copy(module.bias)


def fill_attention(spec, attention, *, self_attention: bool):
    """Self-attention: Q, K, V projections fused into one matrix; cross-attention: Q, then K and V fused."""
    ct2 = ctranslate2()
    q, k, v = (ct2.specs.common_spec.LinearSpec() for _ in range(3))
    for linear_spec, module in ((q, attention.q_proj), (k, attention.k_proj), (v, attention.v_proj)):
        fill_linear(linear_spec, module)
    fuse = ct2.converters.utils.fuse_linear
    if self_attention:
        fuse(spec.linear[0], [q, k, v])
    else:
        fuse(spec.linear[0], [q])
        fuse(spec.linear[1], [k, v])
    fill_linear(spec.linear[-1], attention.out_proj)


def fill_stack(spec, stack, layers_with_cross_attention: bool):
    spec.scale_embeddings = stack.embed_scale
    spec.position_encodings.encodings = copy(stack.embed_positions.pe)
    embeddings = spec.embeddings[0] if isinstance(spec.embeddings, list) else spec.embeddings
    embeddings.weight = copy(stack.embed_tokens.weight)
    if stack.layer_norm is not None:  # pre-LN's final LayerNorm
        fill_layer_norm(spec.layer_norm, stack.layer_norm)
    for layer_spec, layer in zip(spec.layer, stack.layers):
        fill_attention(layer_spec.self_attention, layer.self_attn, self_attention=True)
        fill_layer_norm(layer_spec.self_attention.layer_norm, layer.self_attn_residual.layer_norm)
        if layers_with_cross_attention:
            fill_attention(layer_spec.attention, layer.encoder_attn, self_attention=False)
            fill_layer_norm(layer_spec.attention.layer_norm, layer.encoder_attn_residual.layer_norm)
        fill_linear(layer_spec.ffn.linear_0, layer.feed_forward.fc1)
        fill_linear(layer_spec.ffn.linear_1, layer.feed_forward.fc2)
        fill_layer_norm(layer_spec.ffn.layer_norm, layer.feed_forward_residual.layer_norm)


def check_exportable(model):
    """Only this package's model is exported; its activation must be one CTranslate2 has."""
    if (
        type(model).__name__ != "TinyTransformerForConditionalGeneration"
        or getattr(model.config, "model_type", None) != "tiny_transformer"
    ):
        raise ValueError(
            f"export_ctranslate2 exports hf-tiny-transformer models, not {type(model).__name__}; for other models "
            "use ctranslate2's own ct2-transformers-converter"
        )
    activations = ctranslate2().converters.transformers._SUPPORTED_ACTIVATIONS
    if model.config.activation_function not in activations:
        raise ValueError(f"CTranslate2 has no {model.config.activation_function!r} activation")


def model_spec(model, vocabulary: list[str]):
    """ctranslate2's TransformerSpec of `model`, with copies of its weights and `vocabulary` (tokens by id)."""
    ct2 = ctranslate2()
    config = model.config
    spec = ct2.specs.TransformerSpec.from_config(
        (config.encoder_layers, config.decoder_layers),
        config.encoder_attention_heads,
        pre_norm=config.normalize_before,
        no_final_norm=not config.normalize_before,
        activation=ct2.converters.transformers._SUPPORTED_ACTIVATIONS[config.activation_function],
    )
    fill_stack(spec.encoder, model.model.encoder, layers_with_cross_attention=False)
    fill_stack(spec.decoder, model.model.decoder, layers_with_cross_attention=True)
    fill_linear(spec.decoder.projection, model.lm_head)
    spec.config.layer_norm_epsilon = config.layer_norm_eps
    spec.config.bos_token, spec.config.eos_token = vocabulary[config.bos_token_id], vocabulary[config.eos_token_id]
    spec.config.unk_token = "<unk>" if "<unk>" in vocabulary else vocabulary[config.eos_token_id]
    spec.config.decoder_start_token = vocabulary[config.decoder_start_token_id]
    spec.register_source_vocabulary(vocabulary)
    spec.register_target_vocabulary(vocabulary)
    return spec


def convert(spec, output_dir: Path, quantization: str | None):
    """ctranslate2's own conversion steps for a spec built here: validate, quantize, save into `output_dir`."""

    class SpecConverter(ctranslate2().converters.Converter):
        def _load(self):
            return spec

    SpecConverter().convert(str(output_dir), quantization=quantization, force=True)  # into an empty staging folder


def share_per_translator(batch_size: int, inter_threads: int) -> int:
    """translate_batch's max_batch_size for a batch shared evenly between the `inter_threads` translators that run at
    once (CTranslate2's replicas): each gets its share, none waits idle."""
    return math.ceil(batch_size / inter_threads)


def tokens_by_id(tokenizer) -> list[str]:
    """The tokenizer's tokens in id order."""
    return [token for token, _ in sorted(tokenizer.get_vocab().items(), key=lambda item: item[1])]


def vocabulary_of(tokenizer, size: int) -> list[str]:
    """The tokenizer's tokens in id order, as many as the model's vocabulary has."""
    tokens = tokens_by_id(tokenizer)
    if len(tokens) < size:
        raise ValueError(
            f"the tokenizer has {len(tokens)} tokens but the model {size}; export it with its own tokenizer"
        )
    return tokens[:size]


def export_ctranslate2(model, tokenizer, output_dir: str | os.PathLike, quantization: str | None = None) -> Path:
    """Write `model` as a CTranslate2 model folder, with its tokenizer and generation config, all or nothing (an
    existing folder is replaced whole).

    Args:
        quantization: the stored weights' type: None or "float32" (as trained), "int8", "int8_float32",
            "bfloat16" (ctranslate2's names; int8 keeps a float32 scale per row).

    Raises:
        ValueError: the model is not this package's, or its activation is not one CTranslate2 has.
    """
    check_exportable(model)
    if not starts(model.generation_config):
        raise ValueError("the model's generation config names no decoder_start_token_id; set it (config.json has it)")
    spec = model_spec(model, vocabulary_of(tokenizer, model.config.vocab_size))
    with staged_folder(output_dir) as staging:
        convert(spec, staging, quantization)
        tokenizer.save_pretrained(staging)
        model.generation_config.save_pretrained(staging)
        config = model.config
        settings = {
            "format": "ctranslate2",
            "max_position_embeddings": config.max_position_embeddings,
            "quantization": quantization or "float32",
            "hypothesis_bytes": hypothesis_bytes(
                config.vocab_size, config.max_position_embeddings, config.decoder_layers, config.d_model
            ),
        }
        (staging / SETTINGS_FILE).write_text(json.dumps(settings, indent=2) + "\n")
    return Path(output_dir)


# The translator reads its export without transformers (or torch): what makes the command's first translation quick.
class TokenizerFile:
    """An export's tokenizer.json read by the `tokenizers` library alone (no transformers, no torch: the fast path
    of `tiny-transformer translate`), with what a translator calls of a transformers tokenizer; the same ids."""

    def __init__(self, folder: Path):
        from tokenizers import Tokenizer

        self.backend_tokenizer = Tokenizer.from_file(str(folder / "tokenizer.json"))
        eos = json.loads((folder / "tokenizer_config.json").read_text(encoding="utf-8")).get("eos_token", "</s>")
        self.eos_token_id = self.backend_tokenizer.token_to_id(eos["content"] if isinstance(eos, dict) else eos)

    def __call__(self, text, truncation: bool = False, max_length: int | None = None, verbose: bool = True) -> dict:
        ids = [
            encoding.ids for encoding in self.backend_tokenizer.encode_batch([text] if isinstance(text, str) else text)
        ]
        if truncation:  # as transformers truncates: the end token kept
            ids = [row[: max_length - 1] + row[-1:] if len(row) > max_length else row for row in ids]
        return {"input_ids": ids[0] if isinstance(text, str) else ids}

    def batch_decode(self, rows: list[list[int]], skip_special_tokens: bool = False) -> list[str]:
        return self.backend_tokenizer.decode_batch(rows, skip_special_tokens=skip_special_tokens)

    def get_vocab(self) -> dict[str, int]:
        return self.backend_tokenizer.get_vocab()

    def __len__(self) -> int:
        return self.backend_tokenizer.get_vocab_size()


def generation_config_file(folder: Path) -> SimpleNamespace:
    """generation_config.json's settings as attributes (what a translator reads), without transformers."""
    settings = json.loads((folder / "generation_config.json").read_text(encoding="utf-8"))
    if not isinstance(settings, dict):
        raise ValueError(f"not a JSON object but {type(settings).__name__}")
    defaults = dict.fromkeys(("decoder_start_token_id", "bos_token_id", "num_beams", "length_penalty"))
    return SimpleNamespace(**{**defaults, **settings})


def check_ctranslate2_export(folder: str | os.PathLike) -> TranslatorFiles:
    """What CTranslate2Translator reads from `folder` besides the engine's model, after checking it: an export of
    this kind, its settings file and the numbers in it, the engine's files there, its vocabulary the tokenizer's
    tokens, the tokenizer and generation config loaded. Raises a ValueError naming the file and the fix."""
    folder = Path(folder)
    engine_files = (CTRANSLATE2_MODEL, "config.json", VOCABULARY)
    files = open_export(folder, "ctranslate2", ("max_position_embeddings",), engine_files, TokenizerFile,
                        generation_config_file)  # fmt: skip
    for key in ("max_position_embeddings", "hypothesis_bytes"):  # exports before 0.2 did not record the latter
        value = files.settings.get(key, 1)
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise ValueError(f"{folder / SETTINGS_FILE}'s {key} must be a positive whole number, not {value!r}; "
                             f"{export_again('ctranslate2')}")  # fmt: skip
    check_vocabulary(folder, tokens_by_id(files.tokenizer))
    return files


def check_vocabulary(folder: Path, tokens: list[str]):
    """The engine's vocabulary is the tokenizer's first tokens in id order (the engine takes tokens, the tokenizer
    gives ids: another tokenizer would translate into other words without an error)."""
    path = folder / VOCABULARY
    with errors_naming(path, "cannot be read", "ctranslate2"):
        vocabulary = json.loads(path.read_text(encoding="utf-8"))
    if not isinstance(vocabulary, list):
        raise ValueError(f"{path} is not a list of tokens; {export_again('ctranslate2')}")
    if len(vocabulary) > len(tokens):
        raise ValueError(
            f"{path} does not match tokenizer.json: {len(vocabulary)} tokens there, {len(tokens)} in the tokenizer; "
            f"{export_again('ctranslate2')}"
        )
    for index, (token, expected) in enumerate(zip(vocabulary, tokens)):
        if token != expected:
            raise ValueError(
                f"{path} does not match tokenizer.json: token {index} is {token!r} there and {expected!r} in the "
                f"tokenizer; {export_again('ctranslate2')}"
            )


class CTranslate2Translator(Translator):
    """Translate with an exported folder (see `Translator` for what every translator does with texts).

    Args:
        folder: a folder written by `export_ctranslate2` (checked first: `check_ctranslate2_export`).
        device: "cpu" or "cuda".
        compute_type: ctranslate2's compute type; "auto" (the default) is the fastest this machine runs within 0.5
            BLEU of float32 (`hardware.ctranslate2_compute_type`: int8 on x86 CPUs), logged with the reason;
            "default" is the one the folder was exported with.
        inter_threads: translations run at once, each on its share of a batch (CTranslate2's replicas); 0: one per
            CPU core on the CPU, one on CUDA.
        intra_threads: threads each of them uses (0: ctranslate2's default). On the CPU, one thread per core, each
            with its share of the batch, is several times faster than every core on one batch: the matrices of
            these models are too small to share out.
    """

    def __init__(
        self,
        folder: str | os.PathLike,
        device: str = "cpu",
        compute_type: str = "auto",
        inter_threads: int = 0,
        intra_threads: int = 1,
    ):
        folder = Path(folder)
        settings, tokenizer, generation_config = check_ctranslate2_export(folder)
        max_positions = settings["max_position_embeddings"]
        # exports before 0.2 did not record it: a hypothesis of the largest shape the project trains (paper-base)
        size = settings.get("hypothesis_bytes") or hypothesis_bytes(len(tokenizer), max_positions, 6, 512)
        super().__init__(tokenizer, generation_config, max_positions, size, device)
        if compute_type == "auto":
            choice = ctranslate2_compute_type(device)
            logger.info("CTranslate2 compute type %s", choice.reason)
            compute_type = choice.compute_type
        self.compute_type = compute_type
        self.inter_threads = inter_threads or (cpu_cores() if device == "cpu" else 1)
        # translate_batch works in the background: with batches queued, a translator done with its share of one
        # batch takes a share of the next instead of waiting for the others
        self.in_flight = 2 * self.inter_threads
        engine = ctranslate2(converters=False)
        torch = sys.modules.get("torch")  # imported by the caller, or not at all (the command's fast path)
        threads = torch.get_num_threads() if torch else None
        try:
            self.translator = engine.Translator(
                str(folder),
                device=device,
                compute_type=compute_type,
                inter_threads=self.inter_threads,
                intra_threads=intra_threads,
            )
        except RuntimeError as error:  # a damaged model.bin (a bad compute type is a ValueError, said as it is)
            raise ValueError(
                f"{folder / CTRANSLATE2_MODEL} did not load in CTranslate2 ({first_line(error)}); "
                f"{export_again('ctranslate2')}"
            ) from None
        finally:  # CTranslate2 sets the OpenMP threads it shares with torch: the process keeps its own
            if torch:
                torch.set_num_threads(threads)
        # ids <-> tokens by lookup: the tokenizer's own conversions are a Python call per token
        self.tokens = tokens_by_id(tokenizer)
        self.ids = {token: index for index, token in enumerate(self.tokens)}
        self.check_positions(folder)

    def check_positions(self, folder: Path):
        """model.bin's positional table must have the settings' max_position_embeddings rows, no more and no fewer:
        a source that long is translated, one token longer is refused (a longer source would end in the engine's
        error mid-translation, a shorter table cut texts into needlessly small pieces)."""
        token = self.tokens[self.tokenizer.eos_token_id]
        fits = []
        for length in (self.max_positions, self.max_positions + 1):
            try:
                self.translator.translate_batch([[token] * length], beam_size=1, max_decoding_length=1)
                fits.append(True)
            except RuntimeError:
                fits.append(False)
        if fits != [True, False]:
            raise ValueError(
                f"{folder / CTRANSLATE2_MODEL} has positions for {'fewer' if not fits[0] else 'more'} tokens than "
                f"{SETTINGS_FILE}'s max_position_embeddings ({self.max_positions}); {export_again('ctranslate2')}"
            )

    def translate_ids(self, batch, num_beams=None, length_penalty=None, max_new_tokens=None) -> list[str]:
        return self.submit_ids(batch, num_beams, length_penalty, max_new_tokens)()

    def submit_ids(self, batch, num_beams=None, length_penalty=None, max_new_tokens=None) -> Callable[[], list[str]]:
        tokens = [[self.tokens[i] for i in ids] for ids in batch]
        beams, penalty = self.decoding(num_beams, length_penalty)
        pending = self.translator.translate_batch(
            tokens,
            beam_size=beams,
            length_penalty=penalty,
            max_decoding_length=generation_limit(max(map(len, tokens)), self.max_positions, max_new_tokens),
            max_input_length=0,
            max_batch_size=share_per_translator(len(tokens), self.inter_threads),
            asynchronous=True,
        )

        def translations() -> list[str]:
            ids = [[self.ids[token] for token in result.result().hypotheses[0]] for result in pending]
            rows = within_own_limits(ids, batch, self.max_positions, max_new_tokens, start=0)
            return self.tokenizer.batch_decode(rows, skip_special_tokens=True)

        return translations


__all__ = [
    "export_ctranslate2",
    "check_ctranslate2_export",
    "CTranslate2Translator",
    "model_spec",
    "convert",
    "share_per_translator",
]
