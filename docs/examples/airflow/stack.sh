#!/usr/bin/env bash
# The local Airflow stack's commands (docs/operations/airflow.md). tests/e2e/test_airflow_scheduler.py
# drives the same stack; tests/docs/test_examples.py checks these commands' options exist.
set -euo pipefail
# --8<-- [start:commands]
make airflow                                   # = make setup, then: .venv/bin/rebalance-advisor dev airflow start
.venv/bin/rebalance-advisor dev airflow status # what runs (exit 3 when something is down)
.venv/bin/rebalance-advisor dev airflow stop   # stops every process it started, by process group
# --8<-- [end:commands]
