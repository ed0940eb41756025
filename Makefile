# `make test` and `make demo` create .venv on first use; nothing else is needed before them.
PYTHON ?= python3
VENV := .venv
# The CPU build of PyTorch. Elsewhere than on this project's machines, add
# TORCH_INDEX="--index-url https://download.pytorch.org/whl/cpu" to get it instead of a CUDA build.
TORCH_SPEC ?= torch==2.13.0
TORCH_INDEX ?=

.PHONY: install test

install: $(VENV)/.installed

$(VENV)/.installed: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(VENV)/bin/python -m pip install --quiet --upgrade pip
	$(VENV)/bin/python -m pip install --quiet $(TORCH_INDEX) "$(TORCH_SPEC)"
	$(VENV)/bin/python -m pip install --quiet -e ".[dev]"
	touch $@

test: install
	$(VENV)/bin/python -m pytest -q
