"""kafka_rebalance_advisor: plan the newest snapshot's groups, record the advice, keep published broker
plans fresh. Thin wiring; task bodies: ``dag_tasks/advisor_tasks.py``; flow: docs/architecture.md."""

from __future__ import annotations

from datetime import datetime, timedelta

from airflow.providers.standard.operators.empty import EmptyOperator
from airflow.sdk import dag, task
from rebalance_advisor.adapters.airflow_connections import SNAPSHOT_ASSET
from rebalance_advisor.dag_tasks import advisor_tasks
from rebalance_advisor.dag_tasks.capacity_pass_trigger import capacity_pass_triggers
from rebalance_advisor.dag_tasks.error_policy import retry_args
from rebalance_advisor.dag_tasks.forms import dag_params
from rebalance_advisor.dag_tasks.schema_tasks import upgrade_schema_task
from rebalance_advisor.domain.parameters import AdvisorParams


@dag(
    schedule=[SNAPSHOT_ASSET],
    start_date=datetime(2025, 1, 1),
    catchup=False,
    max_active_runs=1,
    tags=["rebalance-advisor", "kafka", "spark"],
    default_args=retry_args(2, delay_s=30, execution_timeout=timedelta(minutes=30)),
    params=dag_params(AdvisorParams),
    doc_md=__doc__,
)
def kafka_rebalance_advisor() -> None:
    @task
    def pick_snapshot(params=None, triggering_asset_events=None) -> int:
        return advisor_tasks.pick_snapshot(params, triggering_asset_events)

    @task.pyspark(**advisor_tasks.spark_task_args())
    def plan(snapshot_id: int, spark=None, params=None, run_id=None) -> dict:
        return advisor_tasks.plan_snapshot(spark, snapshot_id, params, run_id)

    @task
    def hand_to_publishing(result: dict, params=None, run_id=None) -> dict:
        return advisor_tasks.hand_to_publishing(result, params, run_id)

    @task(trigger_rule="none_failed_min_one_success")
    def summary(result: dict, params=None) -> str:
        return advisor_tasks.summarize_run(result, params)

    @task
    def refresh_broker_plans(params=None) -> list[str]:
        return advisor_tasks.refresh_broker_plans(params)

    any_group_flagged = task.branch(task_id="any_group_flagged")(advisor_tasks.choose_branch)
    snapshot_id = upgrade_schema_task(AdvisorParams) >> pick_snapshot()
    snapshot_id >> refresh_broker_plans()
    result = plan(snapshot_id)
    handed = hand_to_publishing(result)
    any_group_flagged(result) >> [EmptyOperator(task_id="no_group_flagged"), handed] >> summary(result)
    handed >> capacity_pass_triggers()  # docs/architecture.md, "The capacity pass"


kafka_rebalance_advisor()
