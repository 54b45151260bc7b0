# Everything a fresh clone needs: python3 (>= 3.11) and the package registries.
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed

.PHONY: demo test lint unit fuzz install clean

# Hostile-input cases for `make fuzz` (not part of `make test`, which runs a few hundred).
FUZZ_CASES ?= 10000

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[dev]'
	touch $(STAMP)

install: $(STAMP)

demo: $(STAMP)
	$(BIN)/fabricplan scenario show examples/llama3-70b-512-h100.yaml
	$(BIN)/fabricplan topology --scenario examples/llama3-70b-512-h100.yaml
	$(BIN)/fabricplan step examples/llama3-70b-512-h100.yaml
	$(BIN)/fabricplan advise examples/llama3-70b-512-h100.yaml

lint: $(STAMP)
	$(BIN)/ruff check src tests benchmarks
	$(BIN)/ruff format --check src tests benchmarks

unit: $(STAMP)
	$(BIN)/pytest

test: lint unit

fuzz: $(STAMP)
	$(BIN)/python tests/fuzz --cases $(FUZZ_CASES)

clean:
	rm -rf $(VENV) .pytest_cache .ruff_cache build dist
