"""Write the page that translates in the browser (HTML and JavaScript, no server-side code) for an ONNX export.

    tiny-transformer browser-page --model models/en-ja --output_dir runs/page     # a model folder: exported first
    tiny-transformer export-onnx --model runs/demo/hub --output_dir runs/demo/onnx --quantization int8
    tiny-transformer browser-page --model runs/demo/onnx --output_dir runs/demo/page
    python -m http.server --directory runs/demo/page 8000        # then open http://localhost:8000

The folder holds the page, transformers.js and onnxruntime-web (from npm, pinned: `npm ci --prefix
hf_tiny_transformer/browser --ignore-scripts`, which make runs) and the model; it translates offline once loaded,
and can be uploaded as a static Hugging Face Space as it is (its README.md has the header). Written all or nothing.
"""

import tempfile
from pathlib import Path

from ..errors import ArgumentParser, UsageError, about, first_line
from ..guards.loading import load_model_folder
from .flags import check_output_folder


def parse_args(argv=None):
    parser = ArgumentParser(prog="tiny-transformer browser-page", description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--model",
        required=True,
        help="a folder written by tiny-transformer export-onnx, or a saved model folder (exported to ONNX int8 first)",
    )
    parser.add_argument("--output_dir", required=True, help="the folder for the page")
    parser.add_argument("--overwrite", action="store_true", help="replace a page already in --output_dir")
    args = parser.parse_args(argv)
    from ..serving.browser import PAGE_WRITES

    check_output_folder(args, PAGE_WRITES)
    args.exported = None  # a model folder, loaded: exported in main
    if is_model_folder(Path(args.model)):
        with about("--model"):
            args.exported = load_model_folder(args.model)
    else:
        check_servable(Path(args.model))
    return args


def is_model_folder(folder: Path) -> bool:
    return (folder / "config.json").is_file() and (folder / "model.safetensors").is_file()


def check_servable(folder: Path):
    """A UsageError in one line, before anything is written, where the page could not serve `folder`: the export's
    own check (serving.onnx.check_onnx_export), and the files the page reads that the translator does not."""
    from ..serving.browser import MODEL_FILES
    from ..serving.files import check_files, export_kind
    from ..serving.onnx import check_onnx_export, check_page_config

    if not folder.exists():
        raise UsageError(
            f"--model {folder} does not exist; pass a folder written by tiny-transformer export-onnx, or a saved model"
        )
    if folder.is_dir() and export_kind(folder) == "ctranslate2":
        raise UsageError(
            f"--model {folder} is a CTranslate2 export; the page runs ONNX graphs: export the model with "
            "tiny-transformer export-onnx and pass that folder"
        )
    try:
        check_onnx_export(folder)
        check_files(folder, MODEL_FILES, "onnx")
        check_page_config(folder)
    except (ImportError, ValueError) as error:
        raise UsageError(f"--model {folder}: {first_line(error)}") from None


def main(argv=None) -> int:
    from ..serving.browser import write_browser_page

    args = parse_args(argv)
    if args.exported:
        from ..serving.onnx import export_onnx

        with tempfile.TemporaryDirectory() as scratch:
            export = export_onnx(*args.exported, Path(scratch) / "onnx", quantization="int8")
            folder = write_browser_page(export, args.output_dir)
    else:
        folder = write_browser_page(args.model, args.output_dir)
    print(f"wrote the page to {folder}; serve it with: python -m http.server --directory {folder} 8000")
    return 0
