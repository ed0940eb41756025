"""The names of the files a serving export writes, for the exporters, their translators and the commands that tell
an export from a model folder (loading.py, push-to-hub, browser-page). Only names: importing this loads no engine."""

SETTINGS_FILE = "hf_tiny_transformer.json"  # what a translator needs besides the engine's own files
CTRANSLATE2_MODEL = "model.bin"  # CTranslate2's weights
# the ONNX graphs, laid out as transformers.js and Optimum lay out an encoder-decoder (+ ".onnx")
ENCODER, DECODER = "onnx/encoder_model", "onnx/decoder_model_merged"
QUANTIZED = "_quantized"  # transformers.js's name for the int8 variant of a graph

__all__ = ["SETTINGS_FILE", "CTRANSLATE2_MODEL", "ENCODER", "DECODER", "QUANTIZED"]
