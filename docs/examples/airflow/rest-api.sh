#!/usr/bin/env bash
# Airflow's REST API with the project's DAGs (docs/operations/airflow.md). Not run by the tests:
# tests/e2e/test_airflow_scheduler.py makes the same calls from Python against a real Airflow.
set -euo pipefail
PASSWORD=${PASSWORD:?the admin password}
# --8<-- [start:calls]
TOKEN=$(curl -s -X POST 127.0.0.1:8080/auth/token -H 'Content-Type: application/json' \
  -d '{"username": "admin", "password": "'"$PASSWORD"'"}' | jq -r .access_token)
curl -s -X PATCH -H "Authorization: Bearer $TOKEN" -H 'Content-Type: application/json' \
  127.0.0.1:8080/api/v2/dags/kafka_offsets_snapshot -d '{"is_paused": false}'
curl -s -X POST -H "Authorization: Bearer $TOKEN" -H 'Content-Type: application/json' \
  127.0.0.1:8080/api/v2/dags/kafka_rebalance_advisor/dagRuns \
  -d '{"logical_date": null, "conf": {"strategies": ["lag_aware", "sticky"]}}'   # a bad conf: HTTP 400, no run
# --8<-- [end:calls]
