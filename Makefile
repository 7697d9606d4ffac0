# Two entry points: `make demo` and `make test`. Each creates .venv on first use.
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin

.PHONY: demo test lint bench clean

$(VENV)/.installed: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[dev]'
	touch $@

demo: $(VENV)/.installed
	$(BIN)/pivotal demo

lint: $(VENV)/.installed
	$(BIN)/ruff check src tests bench examples
	$(BIN)/ruff format --check src tests bench examples
	$(BIN)/mypy src/pivotal

test: lint
	$(BIN)/pytest

bench: $(VENV)/.installed
	$(BIN)/python bench/throughput.py

clean:
	rm -rf $(VENV) pivotal-demo .pytest_cache .mypy_cache .ruff_cache
