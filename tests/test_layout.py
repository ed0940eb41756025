"""The project's layout, pinned: the top level the design card names, the layers a newcomer can state in one line
each (each module imports only its own layer and the ones below: read with `ast`), no import cycle in the library,
and a saved model that carries only what loading it needs."""

import ast
import json
import subprocess
from collections import defaultdict
from pathlib import Path

from conftest import HUB_FOLDER_FILES, MODEL_FOLDER_FILES, tiny_model
from running import ROOT

PACKAGE = ROOT / "hf_tiny_transformer"
# The layers from the bottom; a module of layer n may import modules of layers 0..n only.
LAYERS = ("errors", "model", "guards", "tools", "trainer and serving", "app", "commands", "training scripts")
# What a saved model carries (the files save_pretrained copies), with what registers it and the shapes it comes in.
MODEL = {"configuration_tiny_transformer.py", "modeling_tiny_transformer.py", "pipeline_tiny_transformer.py",
         "text_tiny_transformer.py", "auto_classes.py"}  # fmt: skip


def layer_of(path: Path) -> str:
    if path.is_relative_to(ROOT / "training"):
        return "training scripts"
    module = path.relative_to(PACKAGE)
    if module == Path("errors.py"):
        return "errors"
    if module.name in MODEL or module.parts[0] == "shapes":
        return "model"
    layers = {"guards": "guards", "trainer": "trainer and serving", "serving": "trainer and serving", "app": "app"}
    return {**layers, "commands": "commands"}.get(module.parts[0], "tools")  # tools: data/, evaluation, hub, ...


def module_name(path: Path) -> str:
    """hf_tiny_transformer.serving.engines for hf_tiny_transformer/serving/engines.py."""
    parts = path.relative_to(ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def package_imports(path: Path) -> set[str]:
    """The hf_tiny_transformer modules a file imports (relative imports resolved), anywhere in it."""
    name = module_name(path)
    package = name if path.name == "__init__.py" else name.rsplit(".", 1)[0]
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found |= {alias.name for alias in node.names if alias.name.startswith("hf_tiny_transformer")}
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*anchor, *([base] if base else [])])
            if base.startswith("hf_tiny_transformer"):
                found |= {f"{base}.{alias.name}" if is_module(f"{base}.{alias.name}") else base for alias in node.names}
    return {resolve(module) for module in found}


def is_module(name: str) -> bool:
    path = ROOT / Path(*name.split("."))
    return path.with_suffix(".py").is_file() or (path / "__init__.py").is_file()


def resolve(name: str) -> str:
    """The module a dotted name is (the package itself for a name it exports)."""
    while not is_module(name):
        name = name.rsplit(".", 1)[0]
    return name


def path_of(name: str) -> Path:
    path = ROOT / Path(*name.split("."))
    return path.with_suffix(".py") if path.with_suffix(".py").is_file() else path / "__init__.py"


SOURCES = sorted([*PACKAGE.rglob("*.py"), *(ROOT / "training").glob("*.py")])


def test_the_top_level_is_the_design_cards():
    """The card's six entries, and docs/, benchmarks/, notebooks/ (the walkthrough), models/ (the shipped models)
    and the Makefile (what git holds; dot files aside)."""
    tracked = subprocess.run(["git", "ls-files"], cwd=ROOT, capture_output=True, text=True, check=True).stdout
    entries = {line.split("/")[0] for line in tracked.splitlines() if not line.startswith(".")}
    card = {"pyproject.toml", "hf_tiny_transformer", "training", "tests", "model_card.md", "README.md"}
    assert entries == card | {"docs", "benchmarks", "notebooks", "models", "Makefile"}


def test_the_training_scripts_are_read_not_imported():
    assert not (ROOT / "training" / "__init__.py").exists()
    assert {path.name for path in (ROOT / "training" / "recipes").iterdir()} == {
        "demo.json",
        "en-ja.json",
        "ja-en.json",
        "fine-tune.json",
    }


def test_each_layer_imports_only_itself_and_the_layers_below():
    wrong = []
    for path in SOURCES:
        mine = LAYERS.index(layer_of(path))
        for imported in package_imports(path):
            if imported != "hf_tiny_transformer" and LAYERS.index(layer_of(path_of(imported))) > mine:
                wrong.append(f"{path.relative_to(ROOT)} ({LAYERS[mine]}) imports {imported}")
    assert wrong == []


def test_the_error_contract_imports_nothing_of_the_package():
    assert package_imports(PACKAGE / "errors.py") == set()


def test_the_library_has_no_import_cycle():
    graph = defaultdict(set)
    for path in SOURCES:
        if layer_of(path) not in ("commands", "training scripts") and path.name != "__init__.py":
            graph[module_name(path)] = {
                name
                for name in package_imports(path)
                if name != "hf_tiny_transformer" and not name.endswith("__init__")
            }
    cycles = []

    def visit(node, trail):
        for following in graph.get(node, ()):
            if following in trail:
                cycles.append(" -> ".join([*trail[trail.index(following) :], following]))
            elif len(trail) < 12:
                visit(following, [*trail, following])

    for start in list(graph):
        visit(start, [start])
    assert cycles == []


def test_a_saved_model_carries_only_what_loading_it_needs(tmp_path):
    """A plain save: config, modeling, the pipeline and the text handling it imports, AutoModel in auto_map; no folder
    writer, no ctypes. The Hub folder adds the tokenizer and the card."""
    from hf_tiny_transformer import model_card, save_for_hub
    from hf_tiny_transformer.data.tokenizer import train_tokenizer

    model = tiny_model()
    model.save_pretrained(tmp_path / "plain")
    assert {path.name for path in (tmp_path / "plain").iterdir()} == MODEL_FOLDER_FILES
    tokenizer = train_tokenizer(["I like tea.", "お茶が好き。"] * 20, vocab_size=300, model_max_length=64)
    model = tiny_model(vocab_size=len(tokenizer))
    card = model_card(model, source_lang="en", target_lang="ja", training_data="two sentences")
    save_for_hub(model, tokenizer, tmp_path / "hub", card)
    assert {path.name for path in (tmp_path / "hub").iterdir()} == HUB_FOLDER_FILES
    for code in (tmp_path / "hub").glob("*.py"):
        imported = {
            alias.name.split(".")[0]
            for node in ast.walk(ast.parse(code.read_text()))
            if isinstance(node, ast.Import | ast.ImportFrom)
            for alias in (node.names if isinstance(node, ast.Import) else [ast.alias(node.module or "")])
        }
        assert "ctypes" not in imported, code.name
    config = json.loads((tmp_path / "hub" / "config.json").read_text())
    assert config["custom_pipelines"]["translation"]["impl"] == "pipeline_tiny_transformer.TranslationPipeline"
    assert set(config["auto_map"]) == {"AutoConfig", "AutoModel", "AutoModelForSeq2SeqLM"}
    plain = json.loads((tmp_path / "plain" / "config.json").read_text())
    assert set(plain["auto_map"]) == {"AutoConfig", "AutoModel", "AutoModelForSeq2SeqLM"} and plain["custom_pipelines"]
