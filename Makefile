# Developer commands. `make install` once, then `make lint typecheck test`.
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin

.PHONY: install lint format typecheck test bench ci

install:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install -q -e '.[dev]'
	npm ci --prefix tests/tools --no-audit --no-fund  # the real codex CLI the tests run

lint:
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .

format:
	$(BIN)/ruff check --fix .
	$(BIN)/ruff format .

typecheck:
	$(BIN)/mypy

test:
	$(BIN)/python -m pytest -q

# Benchmarks are measurements, not tests: each script prints its figures (see README).
bench:
	@set -e; found=0; for script in bench/bench_*.py; do \
		[ -e "$$script" ] || continue; found=1; echo "== $$script"; $(BIN)/python "$$script"; \
	done; [ $$found = 1 ] || { echo "no benchmarks in bench/"; exit 1; }

ci:
	.ci/run
