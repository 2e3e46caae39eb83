#!/usr/bin/env bash
# Bringing up the compose stack (docs/operations/compose.md). Needs a Docker engine, which the test
# machines lack: tests/integration/test_compose.py checks docker-compose.yaml offline instead, and
# tests/docs/test_examples.py runs docker/generate-env.sh and checks its .env against .env.example.
set -euo pipefail
# --8<-- [start:commands]
docker/generate-env.sh > .env      # random secrets; or: cp .env.example .env and fill in the empty values
docker compose up -d --build
docker compose ps                  # every service healthy; airflow-init exited 0
# --8<-- [end:commands]
