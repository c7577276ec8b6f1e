# Two commands do all their own set-up on a fresh machine:
#   make run   - set up and start the memory service on its embedded default store
#   make test  - set up and run the whole test suite (lint, types, tests), installing
#                Debian's postgresql, chromium and chromium-driver packages when missing (as
#                root, e.g. in CI)
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
# `make install` links the venv's `pal` here (a directory on your PATH); `make uninstall` removes it.
BINDIR ?= $(HOME)/.local/bin
# hermes-agent 0.19.0 for the Hermes integration test, isolated from the project's dependencies
# (exact pins, generic top-level package names); tests/hermes finds it here or at $PAL_HERMES_VENV.
HERMES_VENV ?= .venv-hermes
HERMES_STAMP := $(HERMES_VENV)/.installed

.PHONY: setup run test lint typecheck pytest debian-packages install uninstall bench fuzz screenshots clean

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

# Debian packages the tests use: PostgreSQL for throwaway clusters (tests/pgcluster.py),
# chromium for the browser tests and chromium-driver for the review desk's (tests/ui drive it with
# Selenium; a test tool's own browser download does not work here); installed with apt-get when
# missing (as root, e.g. in CI).
DEBS_NEEDED = $(if $(wildcard /usr/lib/postgresql/*/bin/initdb),,postgresql) \
              $(if $(shell command -v chromium),,chromium fonts-dejavu-core) \
              $(if $(wildcard /usr/bin/chromedriver),,chromium-driver)
debian-packages:
	@if [ -n "$(strip $(DEBS_NEEDED))" ]; then \
	  if [ "$$(id -u)" = 0 ]; then \
	    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $(DEBS_NEEDED); \
	  else \
	    echo "missing Debian packages: sudo apt-get install -y $(DEBS_NEEDED), then make test" >&2; \
	    exit 1; \
	  fi; \
	fi

pytest: $(STAMP) $(HERMES_STAMP) debian-packages
	$(BIN)/pytest -q

install: $(STAMP)
	mkdir -p $(BINDIR)
	ln -sf $(CURDIR)/$(BIN)/pal $(BINDIR)/pal
	@case ":$$PATH:" in *":$(BINDIR):"*) echo "pal -> $(BINDIR)/pal";; \
	  *) echo "pal -> $(BINDIR)/pal; $(BINDIR) is not on your PATH: add it (export PATH=\"$(BINDIR):\$$PATH\")";; esac

uninstall:
	rm -f $(BINDIR)/pal

test: lint typecheck pytest

# The review desk's screenshots in docs/review-desk/ (taken by tests/ui in headless Chromium).
screenshots: $(STAMP) debian-packages
	PAL_DESK_SCREENSHOTS=docs/review-desk $(BIN)/pytest -q tests/ui

bench: $(STAMP)
	$(BIN)/python bench/repo_memory.py

# Long fuzzing (make test runs every target for a bounded number of iterations): every target
# for FUZZ_SECONDS each, one after another; corpus and findings stay in .fuzz/<target>/.
FUZZ_SECONDS ?= 300
fuzz: $(STAMP)
	$(BIN)/python -m tests.fuzz run --all --seconds $(FUZZ_SECONDS)

clean:
	rm -rf $(VENV) $(HERMES_VENV) build src/*.egg-info .pytest_cache .mypy_cache .ruff_cache .fuzz
