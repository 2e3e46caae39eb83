# Two commands for a fresh machine: `make demo` and `make test`. Everything they need is set up here.
SHELL := /bin/bash
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
export PATH := $(abspath $(BIN)):$(PATH)
export PYSPARK_PYTHON := $(abspath $(BIN))/python
export PYSPARK_DRIVER_PYTHON := $(abspath $(BIN))/python

.PHONY: setup demo airflow test test-fast test-airflow test-open lint format docs docs-serve docs-check kafka-jars system-deps bench clean

setup: system-deps $(STAMP) kafka-jars

$(STAMP): requirements.txt constraints.txt pyproject.toml clients/python/pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	$(BIN)/pip install -q -r requirements.txt -c constraints.txt
	$(BIN)/pip install -q --no-deps -e clients/python
	$(BIN)/pip install -q --no-deps -e .
	touch $(STAMP)

kafka-jars: $(STAMP)
	$(BIN)/rebalance-advisor dev kafka fetch >/dev/null

system-deps:
	@bash scripts/system-deps.sh

demo: setup
	$(BIN)/rebalance-advisor demo

# A real Airflow 3 (standalone) with the DAGs, the UI plugin, a local broker and the demo load, in
# the background; `rebalance-advisor dev airflow stop` ends it all. Ports, each optional:
#   make airflow AIRFLOW_PORT=18080 KAFKA_PORT=19093 POSTGRES_PORT=19433 WORKER_LOG_PORT=18793 TRIGGER_LOG_PORT=18794
# LIVE=1 adds the live group (live traffic: rates, time lags and predicted catch-up on the pages).
AIRFLOW_START_ARGS = $(if $(AIRFLOW_PORT),--port $(AIRFLOW_PORT)) $(if $(AIRFLOW_HOST),--host $(AIRFLOW_HOST)) \
	$(if $(KAFKA_PORT),--kafka-port $(KAFKA_PORT)) $(if $(POSTGRES_PORT),--postgres-port $(POSTGRES_PORT)) \
	$(if $(WORKER_LOG_PORT),--worker-log-port $(WORKER_LOG_PORT)) \
	$(if $(TRIGGER_LOG_PORT),--trigger-log-port $(TRIGGER_LOG_PORT)) $(if $(LIVE),--live)
airflow: setup
	$(BIN)/rebalance-advisor dev airflow start $(AIRFLOW_START_ARGS)

lint: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .

format: $(STAMP)
	$(BIN)/ruff format .
	$(BIN)/ruff check --fix .

# Test lanes by cost. tests/unit: pure and in-process (no broker, no PostgreSQL, no Spark, no child
# processes but the layers test's one interpreter), so pytest-xdist runs it on XDIST workers, a whole
# file per worker (module fixtures such as the Airflow DagBag are set up once per file). The rest
# (tests/integration, tests/e2e: broker, PostgreSQL, Spark, Airflow) runs on INTEGRATION_XDIST
# workers, a whole file each: every worker starts its own session broker, PostgreSQL and Spark
# cluster on free ports, and the tests wait on the system, not on the CPU, so two workers on two
# cores finish in about two thirds of one worker's time (docs/operations/testing.md, "Test lanes").
XDIST ?= auto
INTEGRATION_XDIST ?= 2
UNIT_LANE = $(BIN)/pytest -n $(XDIST) --dist loadfile tests/unit
INTEGRATION_LANE = $(BIN)/pytest -n $(INTEGRATION_XDIST) --dist loadfile --no-loadscope-reorder --ignore=tests/unit

# The whole gate (what CI runs): lint, the unit lane in parallel, then everything else.
test: setup lint docs-check
	$(UNIT_LANE) $(PYTEST_ARGS)
	$(INTEGRATION_LANE) $(PYTEST_ARGS)

# The inner loop: the unit lane alone (property tests with the repeatable profile's few examples;
# HYPOTHESIS_PROFILE=explore make test-fast draws many fresh ones).
test-fast: setup
	$(UNIT_LANE) $(PYTEST_ARGS)

# The docs site (mkdocs.yml, docs/): `docs` builds it into site/ (ignored by git), `docs-serve` serves it
# at http://127.0.0.1:8000 with live reload, `docs-check` (part of `make test`) builds it with --strict
# into a temporary directory: a broken link or anchor, a missing snippet file or a page left out of
# the navigation fails it. Its examples are files under docs/examples/, run by tests/docs/.
DOCS_ENV := NO_MKDOCS_2_WARNING=1
docs: $(STAMP)
	$(DOCS_ENV) $(BIN)/mkdocs build --strict

docs-serve: $(STAMP)
	$(DOCS_ENV) $(BIN)/mkdocs serve --dev-addr 127.0.0.1:8000

docs-check: $(STAMP)
	@out=$$(mktemp -d) && trap 'rm -rf "$$out"' EXIT && $(DOCS_ENV) $(BIN)/mkdocs build --strict --site-dir "$$out"

# Only the real `airflow standalone` driven through its scheduler and REST API (also in `make test`).
test-airflow: setup
	$(BIN)/pytest -m airflow_scheduler tests/e2e/test_airflow_scheduler.py $(PYTEST_ARGS)

# The tests kept out of `make test`: the known_failing ones, which reproduce open defects.
test-open: setup
	$(BIN)/pytest -m known_failing $(PYTEST_ARGS); rc=$$?; if [ $$rc -eq 5 ]; then echo 'no known-failing tests'; else exit $$rc; fi

bench: setup
	$(BIN)/python bench/assignors.py --quick

clean:
	rm -rf $(VENV) .pytest_cache .ruff_cache .hypothesis site
