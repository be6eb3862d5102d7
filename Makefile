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
.PHONY: help venv run lint format migrations-check test clean bench

help: ## List the targets
	@echo "Targets (variables: PYTHON=$(PYTHON) VENV=$(VENV) HOST=$(HOST) PORT=$(PORT) PYTEST_ARGS=...):"
	@grep -E '^[a-zA-Z_-]+:.*## ' $(firstword $(MAKEFILE_LIST)) \
		| awk 'BEGIN {FS = ":.*## "}; {printf "  %-18s %s\n", $$1, $$2}'

$(VENV)/.installed: requirements.txt requirements-dev.txt pyproject.toml
	@test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install -r requirements-dev.txt
	$(BIN)/python -m pip install -e . --no-deps
	@touch $@

venv: $(VENV)/.installed ## Create the virtualenv and install the pinned requirements

run: venv ## Migrate the SQLite db and serve project/ with daphne on HOST:PORT
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

clean: ## Remove virtualenvs, caches, build output and db.sqlite3
	rm -rf .venv .venv-* .pytest_cache .ruff_cache .hypothesis .mypy_cache .import_linter_cache build dist *.egg-info
	rm -f db.sqlite3 db.sqlite3-journal db.sqlite3-wal db.sqlite3-shm
	find . -path ./node_modules -prune -o -type d -name __pycache__ -prune -exec rm -rf {} +

$(VENV)/.bench-installed: requirements-bench.txt $(VENV)/.installed
	$(BIN)/python -m pip install -r requirements-bench.txt
	@touch $@

bench: venv $(VENV)/.bench-installed ## Benchmark vs a2a-sdk (needs PostgreSQL + Redis; BENCH_ARGS=--quick)
	$(BIN)/python -m bench.run $(BENCH_ARGS)
