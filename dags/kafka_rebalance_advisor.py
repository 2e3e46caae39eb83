"""kafka_rebalance_advisor: plan every group of the newest snapshot and record the advice.

Thin on purpose: schedule, params and wiring; the work is ``rebalance_advisor.planner``
(task bodies in ``rebalance_advisor.dag_tasks.advisor_tasks``). Scheduled on the snapshot DAG's
Asset and triggerable with a validated form. Tasks: pick_snapshot -> plan (Spark, connection
``spark_default``) -> branch: no_group_flagged | hand_to_publishing -> summary (outcomes table).
User errors (unknown snapshot, invalid params) fail a task at once; an unreachable database or a
Spark failure is retried.
"""

from __future__ import annotations

from datetime import datetime, timedelta

from airflow.sdk import dag, get_current_context, task
from rebalance_advisor.adapters.airflow_connections import SNAPSHOT_ASSET
from rebalance_advisor.adapters.spark_session import DEFAULT_CONF
from rebalance_advisor.dag_tasks.forms import dag_params
from rebalance_advisor.domain.parameters import AdvisorParams


def _spark_env(context) -> None:
    from rebalance_advisor.dag_tasks.advisor_tasks import prepare_spark_env

    prepare_spark_env(context)


@dag(
    dag_id="kafka_rebalance_advisor",
    schedule=[SNAPSHOT_ASSET],
    start_date=datetime(2025, 1, 1),
    catchup=False,
    max_active_runs=1,
    tags=["rebalance-advisor", "kafka", "spark"],
    default_args={
        "retries": 2,
        "retry_delay": timedelta(seconds=30),
        "retry_exponential_backoff": True,
        "execution_timeout": timedelta(minutes=30),
    },
    params=dag_params(AdvisorParams),
    doc_md=__doc__,
)
def kafka_rebalance_advisor() -> None:
    @task
    def pick_snapshot() -> int:
        from rebalance_advisor.dag_tasks.advisor_tasks import fail_permanent_errors
        from rebalance_advisor.dag_tasks.advisor_tasks import pick_snapshot as pick

        context = get_current_context()
        events = context.get("triggering_asset_events") or {}
        extras = [dict(e.extra or {}) for evs in events.values() for e in evs]
        with fail_permanent_errors():  # unknown snapshot: fail now; database down: retried
            return pick(context["params"], extras)

    @task.pyspark(conn_id="spark_default", config_kwargs=dict(DEFAULT_CONF), on_execute_callback=_spark_env)
    def plan(snapshot_id: int, spark=None) -> dict:
        from rebalance_advisor.dag_tasks.advisor_tasks import fail_permanent_errors, plan_snapshot

        context = get_current_context()
        with fail_permanent_errors():  # bad params: fail now; database down or Spark failure: retried
            return plan_snapshot(spark, snapshot_id, context["params"], context["run_id"])

    @task.branch
    def any_group_flagged(result: dict) -> str:
        from rebalance_advisor.dag_tasks.advisor_tasks import choose_branch

        return choose_branch(result)

    @task
    def no_group_flagged() -> None:
        print("no group flagged: nothing to publish")

    @task
    def hand_to_publishing(result: dict) -> dict:
        from rebalance_advisor.dag_tasks.advisor_tasks import fail_permanent_errors
        from rebalance_advisor.dag_tasks.advisor_tasks import hand_to_publishing as hand

        context = get_current_context()
        with fail_permanent_errors():
            return hand(result, context["params"], context["run_id"])

    @task(trigger_rule="none_failed_min_one_success")
    def summary(result: dict) -> str:
        from rebalance_advisor.dag_tasks.advisor_tasks import summarize

        return summarize(result, get_current_context()["params"])

    result = plan(pick_snapshot())
    branch = any_group_flagged(result)
    branch >> [no_group_flagged(), hand_to_publishing(result)] >> summary(result)


kafka_rebalance_advisor()
