# Developer commands. `make install` once, then `make lint typecheck test`.
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin

.PHONY: install lint format typecheck test test-serial crash-all e2e-github e2e-gitlab e2e-jira e2e-linear bench \
	mutants mutants-actors ci tui-shot

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

# The README's test command: four workers (the tests mostly wait on subprocesses, so four keep
# two cores busy), a module's tests on one worker (its fixtures start once).
test:
	$(BIN)/python -m pytest -q -n 4 --dist loadscope --durations=25

# One test after another, in one process (for a debugger, or to rule out a neighbour).
test-serial:
	$(BIN)/python -m pytest -q --durations=25

# The crash suite at every crashpoint (the test target runs a subset chosen by the commit).
crash-all:
	CPE_CRASH_ALL=1 $(BIN)/python -m pytest -q tests/e2e/test_crash_consistency.py \
		tests/e2e/test_github_loop.py -k "crash or kill"

# The whole loop on GitHub (against the fake GitHub), with the request counts it prints.
e2e-github:
	$(BIN)/python -m pytest -q -s tests/e2e/test_github_loop.py

e2e-gitlab:
	$(BIN)/python -m pytest -q -s tests/e2e/test_gitlab_loop.py

# Jira's issues (the fake Jira, Cloud and Data Center) with the local forge's revisions, and
# every kill at a Jira write (the test target runs two, chosen by the commit).
e2e-jira:
	CPE_CRASH_ALL=1 $(BIN)/python -m pytest -q -s tests/e2e/test_jira_loop.py

# Linear's issues (the fake Linear) with pull requests on the fake GitHub, and every kill at a
# Linear write.
e2e-linear:
	CPE_CRASH_ALL=1 $(BIN)/python -m pytest -q -s tests/e2e/test_linear_loop.py

# Benchmarks are measurements, not tests: each script prints its figures (see README).
bench:
	@set -e; found=0; for script in bench/bench_*.py; do \
		[ -e "$$script" ] || continue; found=1; echo "== $$script"; $(BIN)/python "$$script"; \
	done; [ $$found = 1 ] || { echo "no benchmarks in bench/"; exit 1; }

# docs/tui-board.svg: the console's board after cpe demo (bench/tui_shot.py; --size, --text).
tui-shot:
	$(BIN)/python bench/tui_shot.py

# Mutation testing of domain/ (not in CI: the tests run once per mutant, some minutes here);
# [tool.mutmut] in pyproject.toml says what is mutated, docs/mutation.md has the last score.
mutants:
	$(BIN)/pip install -q -e '.[mutation]'
	$(BIN)/mutmut run
	$(BIN)/mutmut results

mutants-actors:  # a seeded sample of actors/' mutants (SAMPLE=400 SEED=1), see docs/mutation.md
	$(BIN)/pip install -q -e '.[mutation]'
	$(BIN)/python -m tests.support.mutation_sample --sample $(or $(SAMPLE),400) --seed $(or $(SEED),1)

ci:
	.ci/run
