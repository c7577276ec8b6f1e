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

.PHONY: setup browser run test lint typecheck pytest bench screenshots clean

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -e '.[dev]'
	touch $(STAMP)

$(HERMES_STAMP):
	$(PYTHON) -m venv $(HERMES_VENV)
	$(HERMES_VENV)/bin/pip install --quiet hermes-agent==0.19.0
	touch $(HERMES_STAMP)

# Debian's chromium and its driver for the review desk's browser tests (tests/ui); a test tool's
# own browser download does not work here. Installed with apt-get when missing (root only).
browser:
	@if [ ! -x /usr/bin/chromium ] || [ ! -x /usr/bin/chromedriver ]; then \
	  if [ "$$(id -u)" = 0 ]; then \
	    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq \
	      --no-install-recommends chromium chromium-driver fonts-dejavu-core >/dev/null; \
	  else \
	    echo "tests/ui need Debian's chromium and chromium-driver: sudo apt-get install chromium chromium-driver" >&2; \
	  fi; \
	fi

setup: $(STAMP) $(HERMES_STAMP) browser

run: $(STAMP)
	$(BIN)/pal serve

lint: $(STAMP)
	$(BIN)/ruff check src tests bench

typecheck: $(STAMP)
	$(BIN)/mypy

pytest: $(STAMP) $(HERMES_STAMP) browser
	$(BIN)/pytest -q

test: lint typecheck pytest

# The review desk's screenshots in docs/review-desk/ (taken by tests/ui in headless Chromium).
screenshots: $(STAMP) browser
	PAL_DESK_SCREENSHOTS=docs/review-desk $(BIN)/pytest -q tests/ui

bench: $(STAMP)
	$(BIN)/python bench/repo_memory.py

clean:
	rm -rf $(VENV) $(HERMES_VENV) build src/*.egg-info .pytest_cache .mypy_cache .ruff_cache
