"""Shared builds: what tests of several files need and takes long to make (the demo corpus's trained model, its
exports, a checkpointed run), made once for the whole run, pytest-xdist's workers included. At the end of collection
a child forked from the first worker builds what the collected tests need, in the run's shared temporary folder,
while the tests that need none of it run first; a fixture waits for its build. A build the child was not asked for is
made by the first process that asks, the others waiting. Tests copy a build before they change it (copy_folder)."""

import fcntl
import json
import os
import shutil
import tempfile
import time
import traceback
from pathlib import Path

import pytest
import torch

import child_process
from running import ROOT, few_steps, run_script

SHARED_BUILDS = ("trained_demo_model", "demo_ct2", "demo_onnx", "demo_onnx_int8", "checkpointed_run", "shipped_onnx")
builder_pid: int | None = None  # the child this process forked to build, if it did


def pytest_collection_modifyitems(items):
    """The tests that need a shared build run last, each group in its order, so that the builds are done when the
    first of them starts."""
    items.sort(key=lambda item: any(name in item.fixturenames for name in SHARED_BUILDS))


def pytest_collection_finish(session):
    needed = [name for name in SHARED_BUILDS if any(name in item.fixturenames for item in session.items)]
    if needed and not session.config.option.collectonly:
        start_builder(shared_root(session.config), needed)


def pytest_sessionfinish(session):
    """A worker whose builds another worker may still wait for ends only when they are done."""
    if builder_pid is not None:
        os.waitpid(builder_pid, 0)


def shared_root(config) -> Path:
    """The run's temporary folder for shared builds: pytest-xdist's workers each have theirs below the run's."""
    base = config._tmp_path_factory.getbasetemp()
    folder = (base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base) / "shared"
    folder.mkdir(parents=True, exist_ok=True)
    return folder


def start_builder(root: Path, needed: list[str]):
    """Fork the child that makes the `needed` builds, unless another worker did; builder.json says which it makes."""
    global builder_pid
    try:
        os.close(os.open(root / "builder", os.O_CREAT | os.O_EXCL | os.O_WRONLY))
    except FileExistsError:
        return
    builder_pid = os.fork()
    if builder_pid == 0:  # the child: never returns into pytest
        try:
            with open(root / "builder.log", "w") as log:
                child_process.redirect_output(log.fileno(), log.fileno())
            torch.set_num_threads(1)
            for name in SHARED_BUILDS:  # the model before its exports
                if name in needed:
                    make_build(root, name)
        finally:
            os._exit(0)
    (root / "builder.json.tmp").write_text(json.dumps({"pid": builder_pid, "builds": needed}))
    os.replace(root / "builder.json.tmp", root / "builder.json")


def make_build(root: Path, name: str):
    """Make one build into root/name; root/name.done marks it made, root/name.failed holds why it was not."""
    try:
        BUILDS[name](root / name, root)
    except Exception:
        (root / f"{name}.failed").write_text(traceback.format_exc())
    else:
        (root / f"{name}.done").touch()


def shared_build(config, name: str) -> Path:
    """root/name once it is made: made by the builder child if it was asked to, else here (the first process to
    ask makes it, the others wait for it)."""
    root = shared_root(config)
    deadline = time.monotonic() + 1800
    while (root / "builder").exists() and not (root / "builder.json").exists():
        time.sleep(0.05)  # the worker that forked the builder is about to say what it makes
    builder = json.loads((root / "builder.json").read_text()) if (root / "builder.json").exists() else None
    if builder is None or name not in builder["builds"]:
        with open(root / f"{name}.lock", "w") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            if not (root / f"{name}.done").exists():
                shutil.rmtree(root / name, ignore_errors=True)
                (root / f"{name}.failed").unlink(missing_ok=True)
                make_build(root, name)
    while not (root / f"{name}.done").exists():
        if (root / f"{name}.failed").exists():
            raise AssertionError(f"building {name} failed:\n{(root / f'{name}.failed').read_text()[-3000:]}")
        if not alive(builder["pid"]) or time.monotonic() > deadline:
            log = (root / "builder.log").read_text()[-3000:]
            raise AssertionError(f"the builder of {name} ended without making it:\n{log}")
        time.sleep(0.1)
    return root / name


def alive(pid: int) -> bool:
    """Whether process `pid` still runs (not ended, nor ended and waiting to be reaped)."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(") ", 1)[1][0] != "Z"
    except (FileNotFoundError, ProcessLookupError):
        return False


def write_demo_files(folder: Path) -> Path:
    """The demo corpus as parallel text files: train (all), a 40-pair validation split, and test; written whole
    or not at all, so that processes may race to write it."""
    from hf_tiny_transformer.data.demo_corpus import make_demo_corpus

    if folder.exists():
        return folder
    staging = Path(tempfile.mkdtemp(dir=folder.parent, prefix=f".{folder.name}-"))
    corpus = make_demo_corpus(seed=0)
    splits = {"train": corpus["train"], "validation": corpus["test"][:40], "test": corpus["test"]}
    for split, pairs in splits.items():
        (staging / f"{split}.en").write_text("".join(p.english + "\n" for p in pairs), encoding="utf-8")
        (staging / f"{split}.ja").write_text("".join(p.japanese + "\n" for p in pairs), encoding="utf-8")
    try:
        staging.rename(folder)
    except OSError:  # another process wrote it first
        shutil.rmtree(staging)
    return folder


def build_trained_demo_model(folder: Path, root: Path):
    """A smaller `make demo`: d_model 64, 2+2 layers, 350 steps of 64 pairs (train.py's output folder)."""
    data = write_demo_files(root / "demo_data")
    larger = "d_model=64,encoder_ffn_dim=256,decoder_ffn_dim=256,encoder_layers=2,decoder_layers=2"
    larger += ",max_position_embeddings=64"
    arguments = few_steps(data, folder, "--config_overrides", larger, "--per_device_train_batch_size", "64",
                          "--max_steps", "350", "--warmup_steps", "100", "--learning_rate", "0.003")  # fmt: skip
    result = run_script("train.py", *arguments, timeout=1200)
    assert result.returncode == 0, result.stderr[-3000:]


def demo_model_folder(root: Path) -> Path:
    if not (root / "trained_demo_model.done").exists():
        raise AssertionError("the trained demo model was not made")
    return root / "trained_demo_model" / "hub"


def build_demo_ct2(folder: Path, root: Path):
    """The demo model's CTranslate2 exports, by quantization: float32/ and int8/."""
    from hf_tiny_transformer.serving.ctranslate2 import export_ctranslate2

    model, tokenizer = load_demo_model(demo_model_folder(root))
    before = {name: tensor.clone() for name, tensor in model.state_dict().items()}
    for quantization in ("float32", "int8"):
        export_ctranslate2(model, tokenizer, folder / quantization, quantization=quantization)
    for name, tensor in model.state_dict().items():  # the int8 export quantized copies, not the model
        assert torch.equal(tensor, before[name]), name


def build_demo_onnx(quantization: str):
    def build(folder: Path, root: Path):
        from hf_tiny_transformer.serving.onnx import export_onnx

        export_onnx(*load_demo_model(demo_model_folder(root)), folder, quantization=quantization)

    return build


def build_checkpointed_run(folder: Path, root: Path):
    """4 steps of the small model (few_steps) saving a checkpoint every 2 (train.py's output folder)."""
    data = write_demo_files(root / "demo_data")
    result = run_script("train.py", *few_steps(data, folder, "--save_strategy", "steps", "--save_steps", "2"))
    assert result.returncode == 0, result.stderr[-3000:]


def build_shipped_onnx(folder: Path, root: Path):
    """models/en-ja exported to ONNX in float32: the real recipes' shape and weights."""
    from hf_tiny_transformer.guards.loading import load_model_folder
    from hf_tiny_transformer.serving.onnx import export_onnx

    export_onnx(*load_model_folder(str(ROOT / "models" / "en-ja")), folder)


BUILDS = {
    "trained_demo_model": build_trained_demo_model,
    "demo_ct2": build_demo_ct2,
    "demo_onnx": build_demo_onnx("float32"),
    "demo_onnx_int8": build_demo_onnx("int8"),
    "checkpointed_run": build_checkpointed_run,
    "shipped_onnx": build_shipped_onnx,
}


def load_demo_model(folder: Path):
    """The model (in eval mode) and the tokenizer of a model folder, as transformers' Auto classes load them."""
    from transformers import AutoModelForSeq2SeqLM, AutoTokenizer

    return AutoModelForSeq2SeqLM.from_pretrained(folder).eval(), AutoTokenizer.from_pretrained(folder)


@pytest.fixture(scope="session")
def demo_files(request):
    """The demo corpus as parallel text files: train (all), a 40-pair validation split, and test."""
    return write_demo_files(shared_root(request.config) / "demo_data")


@pytest.fixture(scope="session")
def trained_demo_model(request, demo_files):
    """The hub folder of a model trained by training/train.py on the demo corpus: a smaller `make demo`
    (d_model 64, 2+2 layers, 350 steps of 64 pairs), shared by the tests that need a model that has really learned
    something. Tests copy it before they change it."""
    return shared_build(request.config, "trained_demo_model") / "hub"


@pytest.fixture(scope="session")
def demo_ct2(request, trained_demo_model) -> dict[str, Path]:
    """The trained demo model's CTranslate2 exports, by quantization (float32, int8); tests copy one before they
    change it."""
    folder = shared_build(request.config, "demo_ct2")
    return {quantization: folder / quantization for quantization in ("float32", "int8")}


@pytest.fixture(scope="session")
def demo_onnx(request, trained_demo_model) -> Path:
    """The trained demo model's ONNX export in float32; tests copy it before they change it."""
    pytest.importorskip("onnxruntime", reason="the [onnx] extra is not installed")
    return shared_build(request.config, "demo_onnx")


@pytest.fixture(scope="session")
def demo_onnx_int8(request, trained_demo_model) -> Path:
    """The trained demo model's ONNX export with int8 weights (its float32 graphs beside the int8 ones); tests copy
    it before they change it."""
    pytest.importorskip("onnxruntime", reason="the [onnx] extra is not installed")
    return shared_build(request.config, "demo_onnx_int8")


@pytest.fixture(scope="session")
def demo_browser_page(demo_onnx, tmp_path_factory) -> Path:
    """The browser page's folder written for the float32 ONNX export (skipped where the page's npm libraries are
    missing); tests copy it before they change it."""
    from hf_tiny_transformer.serving.browser import VENDOR, write_browser_page

    if not all(path.is_file() for path in VENDOR.values()):
        pytest.skip("the page's npm libraries are not installed")
    return write_browser_page(demo_onnx, tmp_path_factory.mktemp("page") / "site")


@pytest.fixture(scope="session")
def checkpointed_run(request, demo_files) -> Path:
    """The output folder of train.py after 4 steps of the small model (few_steps) that saved a checkpoint every 2:
    checkpoint-2 and checkpoint-4 (with their optimizer states), tokenizer/, hub/, metrics.json. Tests copy it
    (copy_folder) before they train into it or change it."""
    return shared_build(request.config, "checkpointed_run")


@pytest.fixture(scope="session")
def shipped_onnx(request) -> Path:
    """models/en-ja's ONNX export in float32; tests copy it before they change it."""
    pytest.importorskip("onnxruntime", reason="the [onnx] extra is not installed")
    return shared_build(request.config, "shipped_onnx")


def copy_folder(folder: Path, destination: Path) -> Path:
    """A copy of a folder a session fixture made, for a test that changes it."""
    return Path(shutil.copytree(folder, destination, symlinks=True))
