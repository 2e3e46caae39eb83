"""kafka_offsets_snapshot: snapshot every consumer group's offsets into the advisor DB.

Thin on purpose: schedule, params, retries and wiring. The work is
``rebalance_advisor.adapters.airflow_connections.run_snapshot``. When a snapshot lands the task emits the
``kafka_offsets_snapshot`` Asset (extra: snapshot id), which the advisor DAG is scheduled on.
Schedule: ``REBALANCE_ADVISOR_SNAPSHOT_SCHEDULE`` (cron; default every 5 minutes).
"""

from __future__ import annotations

import os
from datetime import datetime, timedelta

from airflow.sdk import dag, get_current_context, task
from rebalance_advisor.adapters.airflow_connections import SNAPSHOT_ASSET
from rebalance_advisor.dag_tasks.forms import dag_params
from rebalance_advisor.domain.parameters import SnapshotParams

SCHEDULE = os.environ.get("REBALANCE_ADVISOR_SNAPSHOT_SCHEDULE", "*/5 * * * *")


@dag(
    dag_id="kafka_offsets_snapshot",
    schedule=SCHEDULE,
    start_date=datetime(2025, 1, 1),
    catchup=False,
    max_active_runs=1,
    tags=["rebalance-advisor", "kafka"],
    default_args={
        "retries": 3,
        "retry_delay": timedelta(seconds=20),
        "retry_exponential_backoff": True,
        "max_retry_delay": timedelta(minutes=5),
        "execution_timeout": timedelta(minutes=10),
    },
    params=dag_params(SnapshotParams),
    doc_md=__doc__,
)
def kafka_offsets_snapshot() -> None:
    @task(outlets=[SNAPSHOT_ASSET])
    def take_snapshot() -> dict:
        from rebalance_advisor.adapters.airflow_connections import run_snapshot

        context = get_current_context()
        p = context["params"]
        result = run_snapshot(
            kafka_conn_id=p["kafka_conn_id"],
            db_conn_id=p["db_conn_id"],
            groups=p["groups"],
            exclude_groups=p["exclude_groups"],
            read_committed=bool(p["read_committed"]),
            retention_hours=float(p["retention_hours"]) or None,
            timeout_s=float(p["timeout_s"]),
            run_id=context["run_id"],
        )
        context["outlet_events"][SNAPSHOT_ASSET].extra = {"snapshot_id": result["snapshot_id"]}
        print(result["summary"])
        return result

    take_snapshot()


kafka_offsets_snapshot()
