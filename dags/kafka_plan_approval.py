"""kafka_plan_approval: approve (and publish) or reject one plan; optionally ask a person first.

Trigger with the plan id. ``decision``: ``approve`` or ``reject`` apply at once (the triggering
user is recorded as the actor); ``ask`` parks the run at ``ask_a_person``, Airflow's
human-in-the-loop approval, until someone answers Approve or Reject in the UI (that user is
recorded). Approve publishes the plan as static assignments through the Kafka connection; if the
broker or the database is down the task's retry completes it (the plan stays ``approved``); an
unknown plan or a refused transition fails at once. Task bodies: ``rebalance_advisor.dag_tasks.publishing_tasks``.
"""

from __future__ import annotations

from datetime import datetime, timedelta

from airflow.providers.standard.operators.hitl import HITLOperator
from airflow.sdk import dag, task
from rebalance_advisor.dag_tasks import publishing_tasks
from rebalance_advisor.dag_tasks.error_policy import retry_args
from rebalance_advisor.dag_tasks.forms import dag_params
from rebalance_advisor.dag_tasks.schema_tasks import upgrade_schema_task
from rebalance_advisor.domain.parameters import ApprovalParams


@dag(
    schedule=None,
    start_date=datetime(2025, 1, 1),
    catchup=False,
    tags=["rebalance-advisor", "kafka", "publishing"],
    default_args=retry_args(3, delay_s=30),
    params=dag_params(ApprovalParams),
    doc_md=__doc__,
)
def kafka_plan_approval() -> None:
    @task.branch(retries=0)
    def route(params=None) -> str:
        return publishing_tasks.route(params)

    ask = HITLOperator(
        task_id=publishing_tasks.ASK_TASK,
        subject="Approve rebalance plan {{ params.plan_id }}?",
        body="Plan {{ params.plan_id }}: approve publishes its static assignments; reject discards it.",
        options=list(publishing_tasks.HITL_OPTIONS),
        response_timeout=timedelta(days=7),
        retries=0,
    )

    @task(trigger_rule="none_failed_min_one_success")
    def apply_decision(params=None, run_id=None, dag_run=None, ti=None) -> dict:
        hitl = ti.xcom_pull(task_ids=publishing_tasks.ASK_TASK) if params["decision"] == "ask" else None
        return publishing_tasks.apply_decision(
            params, run_id, getattr(dag_run, "triggering_user_name", None), hitl
        )

    decided = apply_decision()
    upgrade_schema_task() >> route() >> [ask, decided]
    ask >> decided


kafka_plan_approval()
