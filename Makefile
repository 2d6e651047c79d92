# A fresh machine needs python3 (with venv and pip), node/npm and make; nothing else.
#   make setup   .venv with the project and dev tools, plus the pinned Restate binaries
#   make test    the whole test suite (starts real restate-server / hypercorn processes)
#   make up      the local stack on :8080 (ingress) :9070 (admin) :9080 (service) :9100 (world)
#   make down    stop it (Restate's data in .stack/ stays, so the next `up` resumes)
# Pass stack options with STACK_ARGS, e.g. make up STACK_ARGS="--day-seconds 2 --catalogue demo",
# and pytest options with PYTEST_ARGS, e.g. make test PYTEST_ARGS="-k stack -x".

SHELL := /bin/bash
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
# Re-install when the dependencies change, not on every run.
INSTALLED := $(VENV)/.installed-pyproject
STACK_ARGS ?=
PYTEST_ARGS ?=

export PIP_DISABLE_PIP_VERSION_CHECK := 1

.PHONY: setup restate demo test up down status lint clean

setup: $(INSTALLED) restate

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)

$(INSTALLED): pyproject.toml | $(BIN)/python
	$(BIN)/python -m pip install --quiet -e '.[dev]'
	touch $@

# Cheap when already installed: it only checks the cached binaries' version.
restate: $(INSTALLED)
	$(BIN)/python -m replenisher.stack.install

demo: setup
	$(BIN)/replenisher demo

# pytest exits 5 when it collected nothing; say so, and fail, rather than pass quietly.
test: setup
	@$(BIN)/pytest -q -ra $(PYTEST_ARGS); status=$$?; \
	if [ $$status -eq 5 ]; then echo "error: pytest collected no tests" >&2; fi; \
	exit $$status

up: setup
	$(BIN)/python -m replenisher.stack up $(STACK_ARGS)

down: $(INSTALLED)
	$(BIN)/python -m replenisher.stack down $(STACK_ARGS)

status: $(INSTALLED)
	$(BIN)/python -m replenisher.stack status $(STACK_ARGS)

lint: $(INSTALLED)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .

# Stop a running stack first: deleting .stack under live processes would orphan them.
clean:
	@if [ -x $(BIN)/python ] && [ -f .stack/stack.json ]; then $(BIN)/python -m replenisher.stack down; fi
	rm -rf $(VENV) .stack
