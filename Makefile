# The single entry point: `make demo` and `make test` each work on a fresh machine.
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
DEMO_STORE := $(VENV)/demo-sigs.parquet

.PHONY: demo test lint bench corpora clean

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip

# Marker files record which extras are installed, so a second run installs nothing.
$(VENV)/.installed: $(BIN)/python pyproject.toml
	$(BIN)/python -m pip install --quiet -e .
	touch $@

$(VENV)/.installed-test: $(VENV)/.installed
	$(BIN)/python -m pip install --quiet -e '.[test]'
	touch $@

$(VENV)/.installed-lint: $(VENV)/.installed
	$(BIN)/python -m pip install --quiet -e '.[lint]'
	touch $@

demo: $(VENV)/.installed
	$(BIN)/dedup sign sample_corpora --exclude SOURCE -o $(DEMO_STORE)
	$(BIN)/dedup find $(DEMO_STORE) --threshold 0.5 --bits 2

test: $(VENV)/.installed-test
	$(BIN)/python -m pytest -q

lint: $(VENV)/.installed-lint
	$(BIN)/ruff check dedup_cli tests
	$(BIN)/mypy dedup_cli

corpora:
	$(PYTHON) scripts/build_corpora.py --out sample_corpora

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache .hypothesis
