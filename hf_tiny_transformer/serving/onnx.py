"""ONNX export of a saved model, and onnxruntime as the third engine of the translator interface.

    folder = export_onnx(model, tokenizer, "runs/demo/onnx", quantization="int8")
    translator = OnnxTranslator("runs/demo/onnx")            # or load_translator(folder, engine="onnx")
    translator.translate(["I like green tea."], num_beams=4)

The folder is laid out as transformers.js and Optimum lay out an encoder-decoder for onnxruntime:
`onnx/encoder_model.onnx` (input_ids, attention_mask -> last_hidden_state) and `onnx/decoder_model_merged.onnx`
(one decoder step over the new tokens: input_ids, encoder_attention_mask, encoder_hidden_states and the keys and
values of the earlier steps, `past_key_values.{i}.decoder.key|value`, which are empty at the first step -> logits
and `present.{i}.decoder.*`, `present.{i}.encoder.*`), with `_quantized` variants (onnxruntime's dynamic int8
quantization of the weights) where asked; batch and lengths are dynamic. "Merged": one graph serves the first step
and the later ones (it recomputes the cross-attention keys and values from the encoder output at every step, a
small cost at these sizes, rather than branching). Beside them: the tokenizer, the generation config, a config.json
that names the architecture as transformers.js knows it (`marian`: MarianMTModel is this architecture,
hf_tiny_transformer.marian converts exactly), and this package's settings (hf_tiny_transformer.json: the kind of
export, the model's config, the quantization). The graphs are traced from the model's own code (the eager attention
path, float32) with torch.onnx's exporter, and the folder is written all or nothing. Needs the [onnx] extra (onnx,
onnxscript, onnxruntime). The translator and the browser page check a folder before any work (`check_onnx_export`):
a missing, cut or other-shaped file is one ValueError naming it, not the runtime's traceback mid-translation.

In Python the export translates through transformers' own `generate()`: `OnnxSeq2SeqLM` is a model whose forward
runs the two graphs, so greedy search, beam search and sampling are the library's, and the tokens equal those of
the model in PyTorch (tests/test_onnx.py).
"""

import copy
import json
import os
from pathlib import Path

import torch
from transformers import AutoTokenizer, GenerationConfig, GenerationMixin, PreTrainedModel
from transformers.cache_utils import DynamicCache, EncoderDecoderCache
from transformers.modeling_outputs import BaseModelOutput, Seq2SeqLMOutput

from ..configuration_tiny_transformer import TinyTransformerConfig
from ..guards.writing import staged_folder
from .files import (
    DECODER,
    EMBEDDINGS,
    ENCODER,
    QUANTIZED,
    SETTINGS_FILE,
    TranslatorFiles,
    check_files,
    errors_naming,
    export_again,
    import_installed,
    open_export,
    read_settings,
    starts,
    vocabulary_digest,
)
from .translator import TransformersTranslator

# config.json's fields for transformers.js, taken from the model's config as they are (Marian's names are ours)
MARIAN_FIELDS = (
    "vocab_size d_model encoder_layers decoder_layers encoder_attention_heads decoder_attention_heads encoder_ffn_dim "
    "decoder_ffn_dim max_position_embeddings scale_embedding pad_token_id bos_token_id eos_token_id "
    "decoder_start_token_id"
).split()


def onnx_packages():
    """onnx and onnxruntime, or an ImportError that says how to install them where one is not installed
    (files.import_installed)."""
    missing = "The ONNX export needs onnx and onnxruntime: pip install 'hf-tiny-transformer[onnx]'."
    return import_installed("onnx", missing), import_installed("onnxruntime", missing)


class EncoderGraph(torch.nn.Module):
    """What encoder_model.onnx computes: the encoder's last hidden state (B, S, D)."""

    def __init__(self, model):
        super().__init__()
        self.encoder = model.model.encoder

    def forward(self, input_ids, attention_mask):
        return self.encoder(input_ids=input_ids, attention_mask=attention_mask).last_hidden_state


class DecoderStepGraph(torch.nn.Module):
    """What decoder_model_merged.onnx computes: one step of the decoder over the new tokens (B, t), given the keys
    and values of the earlier steps (B, H, past, Dh) per layer: the logits (B, t, V) and every layer's keys and
    values after the step, the self-attention's (B, H, past + t, Dh) and the cross-attention's (B, H, S, Dh)."""

    def __init__(self, model):
        super().__init__()
        self.config, self.decoder, self.lm_head = model.config, model.model.decoder, model.lm_head

    def forward(self, input_ids, encoder_attention_mask, encoder_hidden_states, *past):
        layers = self.config.decoder_layers
        earlier = DynamicCache(config=self.config)
        for layer in range(layers):
            earlier.update(past[2 * layer], past[2 * layer + 1], layer)
        cache = EncoderDecoderCache(earlier, DynamicCache(config=self.config))
        hidden = self.decoder(
            input_ids=input_ids,
            encoder_hidden_states=encoder_hidden_states,
            encoder_attention_mask=encoder_attention_mask,
            cache=cache,
            use_cache=True,
        ).last_hidden_state  # (B, t, D)
        present = [
            tensor
            for stack in (cache.self_attention_cache, cache.cross_attention_cache)
            for layer in stack.layers
            for tensor in (layer.keys, layer.values)
        ]
        return (self.lm_head(hidden), *present)


def cache_names(prefix: str, layers: int, parts: tuple[str, ...] = ("decoder",)) -> list[str]:
    """past_key_values.0.decoder.key, past_key_values.0.decoder.value, ... (transformers.js's names)."""
    return [f"{prefix}.{layer}.{part}.{kind}" for part in parts for layer in range(layers) for kind in ("key", "value")]


def export_graphs(model, folder: Path):
    """The two graphs, traced from a float32 copy of `model` with its eager attention (sdpa's causal flag is a
    Python bool, which tracing cannot follow)."""
    import logging
    import warnings

    model = copy.deepcopy(model).float().eval()
    model.set_attn_implementation("eager")
    (folder / "onnx").mkdir(parents=True)
    exporter_log = logging.getLogger("torch.onnx")
    level = exporter_log.level
    exporter_log.setLevel(logging.ERROR)  # its notes on operators of libraries the model does not use (torchvision)
    try:
        with warnings.catch_warnings():
            warnings.filterwarnings("ignore", module=r"torch\.onnx")  # the exporter's notes on how it named the axes
            warnings.filterwarnings("ignore", message=".*LeafSpec", category=FutureWarning)  # torch's own, internal
            export_encoder(model, folder / f"{ENCODER}.onnx")
            export_decoder_step(model, folder / f"{DECODER}.onnx")
    finally:
        exporter_log.setLevel(level)


def example_source(config) -> tuple[torch.Tensor, torch.Tensor]:
    """Token ids (2, 4) and their mask: lengths above 1, so that the tracer takes no length for a constant."""
    input_ids = torch.tensor([[5, 6, 7, 2], [8, 9, 2, 0]]) % config.vocab_size
    return input_ids, (input_ids != config.pad_token_id).long()


def axes():
    """The dynamic axes: batch, source length, new target tokens, earlier target tokens (0 at the first step)."""
    from torch.export import Dim

    return (Dim("batch_size"), Dim("encoder_sequence_length"), Dim("decoder_sequence_length"),
            Dim("past_sequence_length", min=0))  # fmt: skip


def export_encoder(model, path: Path):
    batch, source, _, _ = axes()
    torch.onnx.export(
        EncoderGraph(model).eval(), example_source(model.config), path, dynamo=True, external_data=False,
        verbose=False,
        input_names=["input_ids", "attention_mask"], output_names=["last_hidden_state"],
        dynamic_shapes={"input_ids": {0: batch, 1: source}, "attention_mask": {0: batch, 1: source}},
    )  # fmt: skip


def export_decoder_step(model, path: Path):
    config = model.config
    heads, layers = config.decoder_attention_heads, config.decoder_layers
    batch, source, target, past_length = axes()
    input_ids, attention_mask = example_source(config)
    with torch.no_grad():
        memory = EncoderGraph(model)(input_ids, attention_mask)  # (B, S, D)
    past = [torch.zeros(2, heads, 3, config.d_model // heads) for _ in range(2 * layers)]  # (B, H, past, Dh)
    decoder_ids = torch.tensor([[1, 5], [1, 6]]) % config.vocab_size  # (B, t)
    inputs = ["input_ids", "encoder_attention_mask", "encoder_hidden_states", *cache_names("past_key_values", layers)]
    torch.onnx.export(
        DecoderStepGraph(model).eval(), (decoder_ids, attention_mask, memory, *past), path, dynamo=True,
        external_data=False, verbose=False,
        input_names=inputs, output_names=["logits", *cache_names("present", layers, ("decoder", "encoder"))],
        dynamic_shapes={"input_ids": {0: batch, 1: target}, "encoder_attention_mask": {0: batch, 1: source},
                        "encoder_hidden_states": {0: batch, 1: source},
                        "past": tuple({0: batch, 2: past_length} for _ in range(2 * layers))},
    )  # fmt: skip


def quantize_graphs(folder: Path):
    """The `_quantized` variant of each graph: onnxruntime's dynamic quantization, int8 weights."""
    import logging

    from onnxruntime.quantization import QuantType, quantize_dynamic

    root = logging.getLogger()
    level = root.level
    root.setLevel(logging.ERROR)  # its advice to pre-process the graphs first goes to the root logger
    try:
        for graph in (ENCODER, DECODER):
            quantize_dynamic(folder / f"{graph}.onnx", folder / f"{graph}{QUANTIZED}.onnx", weight_type=QuantType.QInt8)
    finally:
        root.setLevel(level)


def share_embedding_table(folder: Path, config, suffix: str = ""):
    """Store the tied embedding table once: both graphs hold it (the encoder for its input, the decoder for its
    input and its output projection, as a float32 table or, in the `_quantized` pair, an int8 one), so the (V, D)
    tensor the two hold with the same values moves into `onnx/embeddings{suffix}.onnx_data`, which both then
    reference. onnxruntime reads it beside the graphs; the page hands it to both sessions (translate.js)."""
    import numpy
    from onnx import TensorProto, external_data_helper, numpy_helper

    onnx, _ = onnx_packages()
    paths = [folder / f"{graph}{suffix}.onnx" for graph in (ENCODER, DECODER)]
    graphs = [onnx.load(str(path)) for path in paths]
    table = [config.vocab_size, config.d_model]
    tables = [[tensor for tensor in graph.graph.initializer if list(tensor.dims) == table] for graph in graphs]
    encoder_tables = {numpy_helper.to_array(tensor).tobytes(): tensor for tensor in tables[0]}
    shared = [
        (encoder_tables[data], tensor)
        for tensor in tables[1]
        if (data := numpy_helper.to_array(tensor).tobytes()) in encoder_tables
    ]
    location = f"{EMBEDDINGS}{suffix}.onnx_data"
    with open(folder / "onnx" / location, "wb") as data_file:
        for pair in shared:
            data = numpy.ascontiguousarray(numpy_helper.to_array(pair[0])).tobytes()
            offset = data_file.tell()
            data_file.write(data)
            for tensor in pair:
                external_data_helper.set_external_data(tensor, location, offset, len(data))
                tensor.ClearField("raw_data")
                tensor.data_location = TensorProto.EXTERNAL
    for graph, path in zip(graphs, paths):
        onnx.save_model(graph, str(path))


def transformers_js_config(config) -> dict:
    """config.json for transformers.js: the architecture under the name it knows (marian), with our sizes."""
    fields = {name: getattr(config, name) for name in MARIAN_FIELDS}
    return {"model_type": "marian", "architectures": ["MarianMTModel"], "is_encoder_decoder": True, **fields}


def export_onnx(model, tokenizer, output_dir: str | os.PathLike, quantization: str | None = None) -> Path:
    """Write `model` as an ONNX folder (see the module), with its tokenizer and generation config, all or nothing.

    Args:
        quantization: None or "float32" (the graphs as traced), or "int8" (the `_quantized` variants too).

    Raises:
        ValueError: the model is not this package's, or `quantization` is not one of those.
    """
    onnx_packages()
    if getattr(model.config, "model_type", None) != TinyTransformerConfig.model_type:
        raise ValueError(f"export_onnx exports hf-tiny-transformer models, not {type(model).__name__}")
    if not starts(model.generation_config):
        raise ValueError("the model's generation config names no decoder_start_token_id; set it (config.json has it)")
    if quantization not in (None, "float32", "int8"):
        raise ValueError(f"quantization must be float32 or int8, not {quantization!r}")
    config = model.config
    with staged_folder(output_dir) as staging:
        export_graphs(model, staging)
        if quantization == "int8":
            quantize_graphs(staging)
            share_embedding_table(staging, config, QUANTIZED)
        share_embedding_table(staging, config)
        tokenizer.save_pretrained(staging)
        model.generation_config.save_pretrained(staging)
        (staging / "config.json").write_text(json.dumps(transformers_js_config(config), indent=2) + "\n")
        settings = {
            "format": "onnx",
            "config": config.to_dict(),
            "quantization": quantization or "float32",
            "vocabulary": vocabulary_digest(tokenizer),
        }
        (staging / SETTINGS_FILE).write_text(json.dumps(settings, indent=2) + "\n")
    return Path(output_dir)


class EncoderSession(torch.nn.Module):
    """The encoder graph as generate() calls an encoder: BaseModelOutput(last_hidden_state (B, S, D))."""

    main_input_name = "input_ids"

    def __init__(self, session):
        super().__init__()
        self.session = session

    def forward(self, input_ids=None, attention_mask=None, **kwargs) -> BaseModelOutput:
        feeds = {"input_ids": input_ids.cpu().numpy(), "attention_mask": attention_mask.cpu().numpy()}
        return BaseModelOutput(last_hidden_state=torch.from_numpy(self.session.run(None, feeds)[0]))


class OnnxSeq2SeqLM(PreTrainedModel, GenerationMixin):
    """A model whose forward runs the exported graphs, so that transformers' generate() decodes with them. The
    keys and values of the earlier steps travel in the library's own cache (beam search reorders them there)."""

    config_class = TinyTransformerConfig
    base_model_prefix = "model"
    main_input_name = "input_ids"
    _supports_sdpa = True  # the library asks; the graphs have their attention inside

    def __init__(self, config, encoder_session, decoder_session):
        super().__init__(config)
        self.encoder = EncoderSession(encoder_session)
        self.decoder_session = decoder_session
        self.past_names = [item.name for item in decoder_session.get_inputs()][3:]
        # no weights here: a parameter of no size gives the library the device and dtype of the outputs
        self.placeholder = torch.nn.Parameter(torch.zeros(0), requires_grad=False)
        self.post_init()

    def get_encoder(self):
        return self.encoder

    def forward(self, input_ids=None, attention_mask=None, decoder_input_ids=None, encoder_outputs=None, cache=None,
                use_cache=None, **kwargs) -> Seq2SeqLMOutput:  # fmt: skip
        """One decoder step over `decoder_input_ids` (B, t): the logits (B, t, V) and the cache after it."""
        if encoder_outputs is None:
            encoder_outputs = self.encoder(input_ids=input_ids, attention_mask=attention_mask)
        config = self.config
        heads = config.decoder_attention_heads
        batch = decoder_input_ids.shape[0]
        if cache is not None and cache.get_seq_length() > 0:
            layers = cache.self_attention_cache.layers
            past = [tensor.numpy() for layer in layers for tensor in (layer.keys, layer.values)]
        else:  # the first step: no earlier keys and values
            past = [torch.zeros(batch, heads, 0, config.d_model // heads).numpy() for _ in self.past_names]
        feeds = {
            "input_ids": decoder_input_ids.cpu().numpy(),
            "encoder_attention_mask": attention_mask.cpu().numpy(),
            "encoder_hidden_states": encoder_outputs.last_hidden_state.cpu().numpy(),
            **dict(zip(self.past_names, past)),
        }
        logits, *present = (torch.from_numpy(array) for array in self.decoder_session.run(None, feeds))
        layers = config.decoder_layers
        earlier, cross = DynamicCache(config=config), DynamicCache(config=config)
        for layer in range(layers):
            earlier.update(present[2 * layer], present[2 * layer + 1], layer)
            cross.update(present[2 * (layers + layer)], present[2 * (layers + layer) + 1], layer)
        return Seq2SeqLMOutput(logits=logits, cache=EncoderDecoderCache(earlier, cross))


def check_onnx_export(folder: str | os.PathLike) -> TranslatorFiles:
    """What OnnxTranslator reads from `folder` besides the graphs, after checking it: an export of this kind, its
    settings file (a valid config, a quantization), every graph it must hold readable and of the settings' shape,
    the tokenizer and generation config loaded. Raises a ValueError naming the file and the fix."""
    folder = Path(folder)
    loaders = (AutoTokenizer.from_pretrained, GenerationConfig.from_pretrained)
    files = open_export(folder, "onnx", ("config", "quantization"), (), *loaders)
    config = settings_config(folder, files.settings)
    graphs = graph_files(folder, files.settings["quantization"])
    check_files(folder, graphs, "onnx")
    for graph in graphs:
        check_graph(folder / graph, config)
    return files


def check_page_config(folder: str | os.PathLike):
    """The export's config.json, which the browser page (transformers.js) reads for the graphs' sizes, against the
    settings file the graphs were checked with: a ValueError naming the field and the fix where they differ."""
    folder = Path(folder)
    expected = transformers_js_config(
        settings_config(folder, read_settings(folder, "onnx", ("config", "quantization")))
    )
    path = folder / "config.json"
    with errors_naming(path, "is not valid JSON", "onnx"):
        saved = json.loads(path.read_text(encoding="utf-8"))
    if not isinstance(saved, dict):
        raise ValueError(f"{path} is not a JSON object; {export_again('onnx')}")
    for name, value in expected.items():
        if saved.get(name) != value:
            raise ValueError(
                f"{path}'s {name} is {saved.get(name)!r}, but the graphs' is {value!r} ({SETTINGS_FILE}); "
                f"{export_again('onnx')}"
            )


def settings_config(folder: Path, settings: dict) -> TinyTransformerConfig:
    """The model's config in the settings, checked as the library checks a config, and the quantization beside it."""
    path = folder / SETTINGS_FILE
    if settings["quantization"] not in ("float32", "int8"):
        raise ValueError(
            f"{path}'s quantization must be float32 or int8, not {settings['quantization']!r}; {export_again('onnx')}"
        )
    with errors_naming(f"{path}'s config", "is not one the model can have", "onnx"):
        if not isinstance(settings["config"], dict):
            raise TypeError(f"config is {settings['config']!r}, not an object")
        return TinyTransformerConfig.from_dict(settings["config"])


def graph_files(folder: Path, quantization: str) -> list[str]:
    """The graphs the export must hold: both as traced, and the int8 pair where the settings say int8 or one of it
    is there (the translator and the page take int8 wherever they find it)."""
    names = [ENCODER, DECODER]
    if quantization == "int8" or any((folder / f"{name}{QUANTIZED}.onnx").exists() for name in names):
        names += [f"{name}{QUANTIZED}" for name in names]
    return [f"{name}.onnx" for name in names]


def check_graph(path: Path, config: TinyTransformerConfig):
    """One graph, parsed (a cut file is a ValueError, not the runtime's traceback) and compared with the config:
    the model width, the decoder's layers and heads, the vocabulary and the positional table, as far as the graph
    says them (a size the exporter left symbolic is not compared)."""
    onnx, _ = onnx_packages()
    with errors_naming(path, "is not a whole ONNX file", "onnx"):
        graph = onnx.load(str(path), load_external_data=False).graph
    if not graph.node:  # an empty file parses as a model without a graph
        raise ValueError(f"{path} is not a whole ONNX file (it holds no graph); {export_again('onnx')}")
    check_external_data(path, graph)
    shapes = {value.name: dims(value) for value in (*graph.input, *graph.output)}
    width = (shapes.get("last_hidden_state") or shapes.get("encoder_hidden_states") or [None])[-1]
    compare(path, "computes d_model {}", width, "d_model", config.d_model)
    if "logits" in shapes:  # the decoder
        past = [shapes[name] for name in shapes if name.startswith("past_key_values.")]  # (B, H, past, Dh) each
        heads = config.decoder_attention_heads
        compare(path, "takes the keys and values of {} decoder layers", len(past) // 2, "decoder_layers",
                config.decoder_layers)  # fmt: skip
        for _, graph_heads, _, head_size in past:
            compare(path, "takes keys and values of {} heads", graph_heads, "decoder_attention_heads", heads)
            compare(path, "takes keys and values {} wide", head_size, "d_model / heads", config.d_model // heads)
        compare(path, "gives scores for {} tokens", shapes["logits"][-1], "vocab_size", config.vocab_size)
    compare(path, "has positions for {} tokens", positional_rows(graph, config.d_model), "max_position_embeddings",
            config.max_position_embeddings)  # fmt: skip


def check_external_data(path: Path, graph):
    """The files a graph's tensors are stored in beside it (the shared embedding table), present and long enough."""
    from onnx import TensorProto

    for tensor in graph.initializer:
        if tensor.data_location != TensorProto.EXTERNAL:
            continue
        info = {entry.key: entry.value for entry in tensor.external_data}
        data_file = path.parent / info.get("location", "")
        end = int(info.get("offset", 0)) + int(info.get("length", 0))
        if not data_file.is_file():
            raise ValueError(f"{data_file}, which {path.name} reads, is missing; {export_again('onnx')}")
        if data_file.stat().st_size < end:
            raise ValueError(f"{data_file} is cut short (shorter than {path.name} reads); {export_again('onnx')}")


def dims(value) -> list[int | None]:
    """The sizes of a graph input's or output's axes, None for a symbolic one (batch, lengths)."""
    return [axis.dim_value if axis.HasField("dim_value") else None for axis in value.type.tensor_type.shape.dim]


def positional_rows(graph, d_model: int) -> int | None:
    """The rows of the sinusoidal positional table among the graph's constants: the float matrix of d_model columns
    whose first row is position 0's encoding (sin 0 in the even columns, cos 0 in the odd ones); None where the
    exporter kept it elsewhere."""
    import numpy as np
    from onnx import TensorProto, numpy_helper

    position_zero = (np.arange(d_model) % 2).astype(np.float32)
    for tensor in graph.initializer:
        if tensor.data_location == TensorProto.EXTERNAL:  # the shared embedding table
            continue
        if tensor.data_type == TensorProto.FLOAT and list(tensor.dims[1:]) == [d_model] and len(tensor.dims) == 2:
            if np.array_equal(numpy_helper.to_array(tensor)[0], position_zero):
                return tensor.dims[0]
    return None


def compare(path: Path, graph_has: str, found: int | None, key: str, expected: int):
    """A ValueError where the graph's size `found` (None where the graph leaves it open) is not the settings'
    `expected`; `graph_has` says what the size is ("takes {} decoder layers")."""
    if found is not None and found != expected:
        raise ValueError(
            f"{path} {graph_has.format(found)}, not {key} {expected} as {SETTINGS_FILE} says; {export_again('onnx')}"
        )


def sessions(folder: Path, int8: bool, threads: int = 0):
    """onnxruntime sessions of the encoder and decoder graphs (the `_quantized` ones with `int8`); a graph the
    runtime refuses is a ValueError naming it. Their threads wait without spinning: between two steps of a
    translation, generate() runs in torch on the same cores, and spinning threads took the cores from it (a third of
    the speed at batch 32 on two cores)."""
    _, onnxruntime = onnx_packages()
    options = onnxruntime.SessionOptions()
    options.intra_op_num_threads = threads
    options.add_session_config_entry("session.intra_op.allow_spinning", "0")
    suffix = QUANTIZED if int8 else ""
    loaded = []
    for graph in (ENCODER, DECODER):
        path = folder / f"{graph}{suffix}.onnx"
        with errors_naming(path, "did not load in onnxruntime", "onnx"):
            loaded.append(onnxruntime.InferenceSession(str(path), options, providers=["CPUExecutionProvider"]))
    return loaded


class OnnxTranslator(TransformersTranslator):
    """Translate with an export_onnx folder in onnxruntime (see `Translator` for what every translator does).

    Args:
        folder: a folder written by `export_onnx` (checked first: `check_onnx_export`).
        device: "cpu" (onnxruntime's CPU provider).
        compute_type: "float32" or "int8" (the `_quantized` graphs, where the folder has them); "auto": int8 where
            the folder has it, as the browser page takes it, else float32; "default": the folder's own.
        intra_threads: threads a translation uses (0: onnxruntime's default).
    """

    def __init__(
        self, folder: str | os.PathLike, device: str = "cpu", compute_type: str = "auto", intra_threads: int = 0
    ):
        folder = Path(folder)
        settings, tokenizer, generation_config = check_onnx_export(folder)
        if torch.device(device).type != "cpu":
            raise ValueError(f"the onnx engine runs on the CPU here, not {device!r}; pass --device cpu")
        has_int8 = (folder / f"{ENCODER}{QUANTIZED}.onnx").is_file()
        if compute_type in ("auto", "default"):
            compute_type = (
                "int8" if has_int8 and (compute_type == "auto" or settings["quantization"] == "int8") else "float32"
            )
        if compute_type not in ("float32", "int8") or (compute_type == "int8" and not has_int8):
            available = "float32 or int8" if has_int8 else "float32 (it was exported without --quantization int8)"
            raise ValueError(f"compute type {compute_type!r} is not one {folder} has; pass {available}")
        self.compute_type = compute_type
        config = TinyTransformerConfig.from_dict(settings["config"])
        model = OnnxSeq2SeqLM(config, *sessions(folder, compute_type == "int8", intra_threads))
        model.generation_config = generation_config
        super().__init__(model, tokenizer)


__all__ = ["export_onnx", "check_onnx_export", "check_page_config", "OnnxTranslator", "OnnxSeq2SeqLM"]
