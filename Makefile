# `make run` sets up everything and starts the portal with demo data; `make test` runs the suite.
SHELL := /bin/bash
.DEFAULT_GOAL := help
PY := .venv/bin/python
HOST ?= 127.0.0.1
PORT ?= 8000

.PHONY: help setup services controlplane migrate run test lint fmt bench stop clean

help:
	@echo "make run    set up everything and start the portal with demo data"
	@echo "make test   set up what the tests need and run the whole suite"
	@echo "make lint   ruff, Django checks, migrations, import contracts"
	@echo "make bench  benchmarks under bench/"
	@echo "make stop   stop the local services and control plane"

setup:
	@bash hack/bootstrap.sh
	@bash hack/services.sh start
	@bash hack/controlplane.sh start
	@$(PY) manage.py migrate --noinput -v 0
	@$(PY) manage.py collectstatic --noinput -v 0

run: setup
	@bash hack/run.sh $(HOST) $(PORT)

test:
	@bash hack/test.sh

lint:
	$(PY) -m ruff check .
	$(PY) -m ruff format --check .
	$(PY) manage.py check --fail-level WARNING
	$(PY) manage.py makemigrations --check --dry-run
	.venv/bin/lint-imports
	$(PY) -m mypy

fmt:
	$(PY) -m ruff format .
	$(PY) -m ruff check --fix .

bench: setup
	@for b in bench/bench_*.py; do echo "== $$b"; $(PY) $$b || exit 1; done

stop:
	-@bash hack/oidc.sh stop
	@bash hack/controlplane.sh stop
	@bash hack/services.sh stop

clean: stop
	rm -rf .local
