# Developer and CI entry points for the a2a_endpoint app and the sample project.
# Usage: make help

PYTHON ?= python3
VENV ?= .venv
BIN = $(VENV)/bin
HOST ?= 127.0.0.1
PORT ?= 8000
PYTEST_ARGS ?=
BENCH_ARGS ?=

.DEFAULT_GOAL := help
.PHONY: help venv run lint format migrations-check test package-check clean bench

help: ## List the targets
	@echo "Targets (variables: PYTHON=$(PYTHON) VENV=$(VENV) HOST=$(HOST) PORT=$(PORT) PYTEST_ARGS=...):"
	@grep -E '^[a-zA-Z_-]+:.*## ' $(firstword $(MAKEFILE_LIST)) \
		| awk 'BEGIN {FS = ":.*## "}; {printf "  %-18s %s\n", $$1, $$2}'

# The full toolchain (requirements-dev.txt includes requirements.txt), so the demo's too.
$(VENV)/.installed: requirements.txt requirements-dev.txt pyproject.toml
	@test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install -r requirements-dev.txt
	$(BIN)/python -m pip install -e . --no-deps
	@touch $@ $(VENV)/.run-installed

# What the demo needs, and no test or lint tool: the runtime pins and the package itself.
# --no-compile: byte-compiling every installed file took a third of the install's CPU; the
# modules the demo imports are compiled (and cached) when it first imports them.
$(VENV)/.run-installed: requirements.txt pyproject.toml
	@test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --no-compile -r requirements.txt
	$(BIN)/python -m pip install -e . --no-deps
	@touch $@

venv: $(VENV)/.installed ## Create the virtualenv and install the pinned requirements and tools

run: $(VENV)/.run-installed ## Migrate the SQLite db and serve project/ with daphne on HOST:PORT
	$(BIN)/python manage.py migrate --noinput
	$(BIN)/daphne -b $(HOST) -p $(PORT) project.asgi:application

lint: venv ## ruff check, ruff format --check, import-linter contracts
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/lint-imports

format: venv ## Reformat and autofix with ruff
	$(BIN)/ruff format .
	$(BIN)/ruff check --fix .

migrations-check: venv ## Fail if a2a_endpoint models have changes without a migration
	$(BIN)/python manage.py makemigrations --check --dry-run a2a_endpoint

test: venv lint migrations-check ## lint + migrations-check + pytest (PYTEST_ARGS=... passed on)
	$(BIN)/pytest $(PYTEST_ARGS)

package-check: venv ## Build the wheel and sdist, install each in a fresh virtualenv, smoke-test them
	$(BIN)/python .ci/package_smoke.py

clean: ## Remove virtualenvs, caches, build output and db.sqlite3
	rm -rf .venv .venv-* .pytest_cache .ruff_cache .hypothesis .mypy_cache .import_linter_cache build dist *.egg-info
	rm -f db.sqlite3 db.sqlite3-journal db.sqlite3-wal db.sqlite3-shm
	find . -path ./node_modules -prune -o -type d -name __pycache__ -prune -exec rm -rf {} +

$(VENV)/.bench-installed: requirements-bench.txt $(VENV)/.installed
	$(BIN)/python -m pip install -r requirements-bench.txt
	@touch $@

bench: venv $(VENV)/.bench-installed ## Benchmark vs a2a-sdk (needs PostgreSQL + Redis; BENCH_ARGS=--quick)
	$(BIN)/python -m bench.run $(BENCH_ARGS)
