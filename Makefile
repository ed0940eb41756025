# `make demo` and `make test` create .venv on first use; nothing else is needed before them.
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
# The CPU build of PyTorch. Elsewhere than on this project's machines, add
# TORCH_INDEX="--index-url https://download.pytorch.org/whl/cpu" to get it instead of a CUDA build.
TORCH_SPEC ?= torch==2.13.0
TORCH_INDEX ?=
# The real English-Japanese corpus, small_parallel_enja: the copy `make data` fetches into data/ where there is one,
# else this project's shared copy; and extra flags for training/train.py.
CORPUS_DIR ?= $(firstword $(wildcard data/small_parallel_enja) $(wildcard ../shared/data/small_parallel_enja) data/small_parallel_enja)
CORPUS_REPOSITORY ?= https://github.com/odashi/small_parallel_enja.git
CORPUS_COMMIT ?= 312408a11c5fbcbc09443bebb18121f7efdcd61e
TRAIN_FLAGS ?=
# The memory allocator, chosen here and only here: gperftools' tcmalloc where the machine has it (Debian, Ubuntu:
# apt-get install libtcmalloc-minimal4), on which a bf16 step on a CPU keeps its speed as glibc's heap fragments with
# oneDNN's kernels (docs/bf16-on-cpus.md); make ... TCMALLOC= trains on glibc's.
TCMALLOC ?= $(shell $(PYTHON) -c "import ctypes.util as u; print(u.find_library('tcmalloc_minimal') or u.find_library('tcmalloc') or '')")
TRAIN := $(if $(TCMALLOC),LD_PRELOAD="$(TCMALLOC)$${LD_PRELOAD:+ $$LD_PRELOAD}" )$(PY) training/train.py

.PHONY: install test demo data train-en-ja train-ja-en app

install: $(VENV)/.installed

# The browser page's libraries (transformers.js, onnxruntime-web) come from npm, pinned by its lock file; no
# install scripts run (they would fetch onnxruntime-node's binaries, which the page does not use).
PAGE := hf_tiny_transformer/browser

$(VENV)/.installed: pyproject.toml $(PAGE)/package-lock.json
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet $(TORCH_INDEX) "$(TORCH_SPEC)"
	$(PY) -m pip install --quiet -e ".[dev]"
	if command -v npm >/dev/null; then npm ci --prefix $(PAGE) --ignore-scripts --no-audit --no-fund --loglevel=error; \
	else echo "npm not found: the browser page's libraries are not installed (its test is skipped)"; fi
	touch $@

# The suite, after the code's style: ruff's checks and its formatting, as configured in pyproject.toml.
test: install
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .
	$(PY) -m pytest -q

# The main job: a tokenizer and a small model trained from scratch on the built-in demo corpus, then
# translations of held-out sentences and their exact-match rate (the run fails below 95%).
demo: install
	$(PY) training/make_demo_data.py --output_dir runs/demo/data
	$(TRAIN) training/recipes/demo.json --overwrite_output_dir $(TRAIN_FLAGS)  # the demo starts anew each time
	$(PY) training/evaluate_model.py --model runs/demo/hub --source_file runs/demo/data/test.en \
		--reference_file runs/demo/data/test.ja --target_lang ja --num_beams 1 --show 10 --min_exact_match 95

# The corpus of the real models, at a pinned commit of its repository (needs git and the network, once; a folder that
# holds it already is left as it is, DATA_FLAGS=--overwrite fetches it again).
DATA_FLAGS ?=
data: install
	$(PY) training/get_corpus.py --output_dir data/small_parallel_enja --repository $(CORPUS_REPOSITORY) \
		--commit $(CORPUS_COMMIT) $(DATA_FLAGS)

# A real model: training (checkpoints averaged at the end), the beam size and length penalty chosen on the dev
# split, then the test split translated with them and scored; the scores go into the model card.
train-en-ja train-ja-en: train-%: install
	$(TRAIN) training/recipes/$*.json --corpus_dir $(CORPUS_DIR) $(TRAIN_FLAGS)
	$(PY) training/tune_decoding.py --model runs/$*/hub --corpus_dir $(CORPUS_DIR) \
		--source_lang $(firstword $(subst -, ,$*)) --target_lang $(lastword $(subst -, ,$*))
	$(PY) training/evaluate_model.py --model runs/$*/hub --corpus_dir $(CORPUS_DIR) --split test \
		--source_lang $(firstword $(subst -, ,$*)) --target_lang $(lastword $(subst -, ,$*)) \
		--show 10 --output_file runs/$*/test.hyp --update_model_card

# The demo page (tiny-transformer app) on http://127.0.0.1:7860: the shipped models, or a saved model (MODEL=runs/demo/hub)
MODEL ?=
app: install
	$(VENV)/bin/tiny-transformer app $(if $(MODEL),--model $(MODEL))
