#!/usr/bin/env bash
# Runs once, when the PostgreSQL volume is empty: two databases with their own owners,
# `airflow` (Airflow's metadata) and `advisor` (the plan database). Passwords come from .env.
set -euo pipefail
psql -v ON_ERROR_STOP=1 --username "$POSTGRES_USER" --dbname postgres \
  -v airflow_password="${AIRFLOW_DB_PASSWORD:?}" -v advisor_password="${ADVISOR_DB_PASSWORD:?}" <<'SQL'
CREATE ROLE airflow LOGIN PASSWORD :'airflow_password';
CREATE DATABASE airflow OWNER airflow;
CREATE ROLE advisor LOGIN PASSWORD :'advisor_password';
CREATE DATABASE advisor OWNER advisor;
SQL
