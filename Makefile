# Two commands do all their own set-up on a fresh machine:
#   make run   - set up and start the memory service on its embedded default store
#   make test  - set up and run the whole test suite (lint, types, tests)
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
# hermes-agent 0.19.0 for the Hermes integration test, isolated from the project's dependencies
# (exact pins, generic top-level package names); tests/hermes finds it here or at $PAL_HERMES_VENV.
HERMES_VENV ?= .venv-hermes
HERMES_STAMP := $(HERMES_VENV)/.installed

.PHONY: setup run test lint typecheck pytest bench fuzz clean

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -e '.[dev]'
	touch $(STAMP)

$(HERMES_STAMP):
	$(PYTHON) -m venv $(HERMES_VENV)
	$(HERMES_VENV)/bin/pip install --quiet hermes-agent==0.19.0
	touch $(HERMES_STAMP)

setup: $(STAMP) $(HERMES_STAMP)

run: $(STAMP)
	$(BIN)/pal serve

lint: $(STAMP)
	$(BIN)/ruff check src tests bench

typecheck: $(STAMP)
	$(BIN)/mypy

pytest: $(STAMP) $(HERMES_STAMP)
	$(BIN)/pytest -q

test: lint typecheck pytest

bench: $(STAMP)
	$(BIN)/python bench/repo_memory.py

# Long fuzzing (make test runs every target for a bounded number of iterations): every target
# for FUZZ_SECONDS each, one after another; corpus and findings stay in .fuzz/<target>/.
FUZZ_SECONDS ?= 300
fuzz: $(STAMP)
	$(BIN)/python -m tests.fuzz run --all --seconds $(FUZZ_SECONDS)

clean:
	rm -rf $(VENV) $(HERMES_VENV) build src/*.egg-info .pytest_cache .mypy_cache .ruff_cache .fuzz
