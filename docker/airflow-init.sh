#!/usr/bin/env bash
# One-shot init for the compose stack: migrate Airflow's metadata DB, migrate the plan DB, and
# write the SimpleAuthManager password file from $AIRFLOW_ADMIN_PASSWORD (nothing secret in code).
# Connections are not created here: they come from AIRFLOW_CONN_* environment variables.
set -euo pipefail

echo "airflow-init: migrating Airflow's metadata database"
airflow db migrate

echo "airflow-init: migrating the plan database"
rebalance-advisor db upgrade --db "${REBALANCE_ADVISOR_DB_URL:?REBALANCE_ADVISOR_DB_URL is not set}"

passwords_file="${AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_PASSWORDS_FILE:?not set}"
mkdir -p "$(dirname "$passwords_file")"
python - "$passwords_file" <<'PY'
import json
import os
import sys

user = os.environ.get("AIRFLOW_ADMIN_USER", "admin")
password = os.environ["AIRFLOW_ADMIN_PASSWORD"]
with open(sys.argv[1], "w", encoding="utf-8") as handle:
    json.dump({user: password}, handle)
os.chmod(sys.argv[1], 0o600)
PY
echo "airflow-init: done (UI user ${AIRFLOW_ADMIN_USER:-admin})"
