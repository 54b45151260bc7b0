# Everything a fresh clone needs: python3 (>= 3.11) and the package registries.
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed
KERNELS := $(VENV)/.kernels

.PHONY: demo test lint unit fuzz install browser clean

# Hostile-input cases for `make fuzz` (not part of `make test`, which runs a few hundred).
FUZZ_CASES ?= 10000

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[dev]'
	touch $(STAMP)

# The flow simulator's compiled kernels: again after any change to its modules (a kept kernel
# is checked against its own module only; precompile drops them all when the package changed).
$(KERNELS): $(STAMP) $(wildcard src/fabricplan/congestion/*.py)
	$(BIN)/python -m fabricplan.congestion.precompile
	touch $(KERNELS)

install: $(KERNELS)

# Headless Chromium prints `fabricplan report --pdf` (and drives the web planner's tests): Debian's
# chromium and chromium-driver, installed once, as root or with sudo; otherwise a warning, and the
# PDF and browser tests are skipped.
BROWSER_PKGS := chromium chromium-driver
browser:
	@if command -v chromium >/dev/null 2>&1 && command -v chromedriver >/dev/null 2>&1; then \
		:; \
	elif ! command -v apt-get >/dev/null 2>&1; then \
		echo "warning: no apt-get: install Chromium and its driver yourself for PDF reports" >&2; \
	elif [ "$$(id -u)" = 0 ]; then \
		apt-get update && DEBIAN_FRONTEND=noninteractive apt-get install -y $(BROWSER_PKGS); \
	elif command -v sudo >/dev/null 2>&1; then \
		sudo apt-get update && sudo DEBIAN_FRONTEND=noninteractive apt-get install -y $(BROWSER_PKGS); \
	else \
		echo "warning: chromium is missing and installing it needs root or sudo" \
			"(apt-get install $(BROWSER_PKGS)): PDF reports and their tests are skipped" >&2; \
	fi

demo: $(KERNELS) browser
	$(BIN)/fabricplan scenario show examples/llama3-70b-512-h100.yaml
	$(BIN)/fabricplan topology --scenario examples/llama3-70b-512-h100.yaml
	$(BIN)/fabricplan step examples/llama3-70b-512-h100.yaml
	$(BIN)/fabricplan advise examples/llama3-70b-512-h100.yaml
	@mkdir -p reports
	$(BIN)/fabricplan report examples/llama3-70b-512-h100.yaml -o reports/llama3-70b-512-h100.html

lint: $(STAMP)
	$(BIN)/ruff check src tests benchmarks
	$(BIN)/ruff format --check src tests benchmarks

# The suite on this many worker processes (pytest-xdist): the CI machine has 2 cores.
TEST_WORKERS ?= 2

unit: $(KERNELS)
	$(BIN)/pytest -n $(TEST_WORKERS)

test: browser lint unit

fuzz: $(KERNELS)
	$(BIN)/python tests/fuzz --cases $(FUZZ_CASES)

clean:
	rm -rf $(VENV) .pytest_cache .ruff_cache build dist
