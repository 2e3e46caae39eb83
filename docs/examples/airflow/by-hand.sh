#!/usr/bin/env bash
# Airflow settings by hand (docs/operations/airflow.md). tests/docs/test_examples.py sources the
# part between the markers with REPO and VENV set and checks the settings and connections resolve.
REPO=${REPO:-/path/to/rebalance-advisor}
VENV=${VENV:-/path/to/venv}
# --8<-- [start:settings]
export AIRFLOW_HOME=~/.rebalance-advisor/airflow
export AIRFLOW__CORE__DAGS_FOLDER=$REPO/dags
export AIRFLOW__CORE__PLUGINS_FOLDER=$REPO/plugins
export AIRFLOW__CORE__LOAD_EXAMPLES=False
export AIRFLOW__CORE__PARALLELISM=4            # two task slots per core; the default 32 starves 2 cores
export PYSPARK_PYTHON=$VENV/bin/python
# the three connections (ids the DAGs use by default)
export AIRFLOW_CONN_KAFKA_DEFAULT='{"conn_type": "kafka", "extra": {"bootstrap.servers": "127.0.0.1:19092"}}'
export AIRFLOW_CONN_SPARK_DEFAULT='{"conn_type": "spark", "host": "local[*]"}'
export AIRFLOW_CONN_REBALANCE_ADVISOR_DB='{"conn_type": "generic", "extra": {"sqlalchemy_url": "sqlite:////home/you/.rebalance-advisor/advisor.db"}}'
# --8<-- [end:settings]
if [[ ${1:-} == start ]]; then airflow standalone; fi
