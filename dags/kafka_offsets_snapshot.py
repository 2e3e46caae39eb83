"""kafka_offsets_snapshot: snapshot every consumer group's offsets into the advisor DB.

Thin on purpose: schedule, generated params, wiring. Tasks: upgrade_schema -> take_snapshot
(``rebalance_advisor.dag_tasks.snapshot_tasks``), which emits the ``kafka_offsets_snapshot`` Asset
(extra: snapshot id) the advisor DAG is scheduled on. User errors (a bad regex, a missing Kafka
connection) fail at once; an unreachable broker or database is retried.
Schedule: ``REBALANCE_ADVISOR_SNAPSHOT_SCHEDULE`` (cron; default every 5 minutes).
"""

from __future__ import annotations

from datetime import datetime, timedelta

from airflow.sdk import dag, task
from rebalance_advisor import settings
from rebalance_advisor.adapters.airflow_connections import SNAPSHOT_ASSET
from rebalance_advisor.dag_tasks import snapshot_tasks
from rebalance_advisor.dag_tasks.error_policy import retry_args
from rebalance_advisor.dag_tasks.forms import dag_params
from rebalance_advisor.dag_tasks.schema_tasks import upgrade_schema_task
from rebalance_advisor.domain.parameters import SnapshotParams


@dag(
    schedule=settings.snapshot_schedule(),
    start_date=datetime(2025, 1, 1),
    catchup=False,
    max_active_runs=1,
    tags=["rebalance-advisor", "kafka"],
    default_args=retry_args(
        3, delay_s=20, max_retry_delay=timedelta(minutes=5), execution_timeout=timedelta(minutes=10)
    ),
    params=dag_params(SnapshotParams),
    doc_md=__doc__,
)
def kafka_offsets_snapshot() -> None:
    @task(outlets=[SNAPSHOT_ASSET])
    def take_snapshot(params=None, run_id=None, outlet_events=None) -> dict:
        result = snapshot_tasks.take_snapshot(params, run_id)
        outlet_events[SNAPSHOT_ASSET].extra = {"snapshot_id": result["snapshot_id"]}
        print(result["summary"])
        return result

    upgrade_schema_task(SnapshotParams) >> take_snapshot()


kafka_offsets_snapshot()
