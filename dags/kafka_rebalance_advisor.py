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

from airflow.sdk import Param, dag, get_current_context, task
from rebalance_advisor.adapters.airflow_connections import DEFAULT_KAFKA_CONN_ID, SNAPSHOT_ASSET
from rebalance_advisor.adapters.spark_session import DEFAULT_CONF

#: the assignor names (kept literal so parsing imports no NumPy; a test checks the registry)
STRATEGIES = ["range", "roundrobin", "sticky", "lag_aware", "lag_aware_sticky"]


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
    params={
        "snapshot": Param(
            "latest",
            type="string",
            pattern="^(latest|[0-9]+)$",
            description="snapshot id, or 'latest' (the triggering snapshot when scheduled)",
        ),
        "group_regex": Param(
            None,
            type=["null", "string"],
            format="regex",
            maxLength=1000,
            description="only groups whose id fully matches this regex (empty: all)",
        ),
        "strategies": Param(
            STRATEGIES,
            type="array",
            minItems=1,
            uniqueItems=True,
            items={"type": "string", "enum": STRATEGIES},
            description="candidate strategies; ties prefer lag_aware, then lag_aware_sticky",
        ),
        "imbalance_threshold": Param(
            1.25,
            type="number",
            minimum=1.0,
            maximum=100.0,
            description="flag a group when max / mean member lag >= this",
        ),
        "lag_floor": Param(
            1000,
            type="integer",
            minimum=0,
            maximum=10**15,
            description="flag only groups whose total lag is at least this many messages",
        ),
        "min_improvement": Param(
            0.10,
            type="number",
            minimum=0.0,
            maximum=0.99,
            description="recommend only if the max member lag drops by this fraction",
        ),
        "move_budget": Param(
            None,
            type=["null", "integer"],
            minimum=0,
            maximum=1_000_000,
            description="most partitions a plan may move (empty: unlimited)",
        ),
        "cooldown_minutes": Param(
            30,
            type="number",
            minimum=0,
            maximum=10080,
            description="no new recommendation for a group within this many minutes",
        ),
        "publish_mode": Param(
            "recommend",
            type="string",
            enum=["recommend", "static"],
            description="recommend: record plans; static: also approve and publish them",
        ),
        "dry_run": Param(False, type="boolean", description="plan and log, write nothing"),
        "weight": Param(
            "lag",
            type="string",
            enum=["lag", "drain_ms"],
            description="partition weight: lag messages, or time to drain at the consume rate",
        ),
        "reset_policy": Param(
            None,
            type=["null", "string"],
            maxLength=2000,
            description="auto.offset.reset per group, e.g. 'orders-.*=earliest,latest'",
        ),
        "db_conn_id": Param(
            "rebalance_advisor_db", type="string", minLength=1, description="advisor DB connection"
        ),
        "kafka_conn_id": Param(
            DEFAULT_KAFKA_CONN_ID,
            type="string",
            minLength=1,
            description="Kafka connection that publish mode static writes the assignments through",
        ),
    },  # fmt: skip
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
