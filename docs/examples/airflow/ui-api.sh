#!/usr/bin/env bash
# The UI plugin's JSON API with Airflow's token (docs/operations/airflow-ui.md).
# tests/docs/test_examples.py checks that each path called here is a route of the plugin's app.
set -euo pipefail
PASSWORD=${PASSWORD:?the admin password}
# --8<-- [start:calls]
TOKEN=$(curl -s -X POST localhost:8080/auth/token -H 'Content-Type: application/json' \
  -d '{"username":"admin","password":"'"$PASSWORD"'"}' | jq -r .access_token)
curl -s -H "Authorization: Bearer $TOKEN" 'localhost:8080/rebalance-advisor/api/groups?flagged=true'
curl -s -X POST -H "Authorization: Bearer $TOKEN" localhost:8080/rebalance-advisor/api/plans/1/approve
# --8<-- [end:calls]
