"""kafka_plan_approval: approve (and publish) or reject one plan; ``ask`` first describes it and waits
at ``ask_a_person`` (Airflow's human-in-the-loop) for a person's answer. Task bodies and retries:
``dag_tasks/publishing_tasks.py``; docs/protocol/static-groups.md; the capacity pass: docs/architecture.md."""

from __future__ import annotations

from datetime import datetime, timedelta

from airflow.providers.standard.operators.hitl import HITLOperator
from airflow.sdk import dag, task
from rebalance_advisor.dag_tasks import publishing_tasks
from rebalance_advisor.dag_tasks.capacity_pass_trigger import capacity_pass_triggers
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

    @task(task_id=publishing_tasks.DESCRIBE_TASK, retries=0)
    def describe_plan(params=None) -> dict:
        return publishing_tasks.approval_prompt(params)

    ask = HITLOperator(
        task_id=publishing_tasks.ASK_TASK,
        subject=publishing_tasks.PROMPT_SUBJECT,
        body=publishing_tasks.PROMPT_BODY,
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

    decided, described = apply_decision(), describe_plan()
    upgrade_schema_task(ApprovalParams) >> route() >> [described, decided]
    described >> ask >> decided
    decided >> capacity_pass_triggers(publishing_task_id="apply_decision", params_model=ApprovalParams)


kafka_plan_approval()
