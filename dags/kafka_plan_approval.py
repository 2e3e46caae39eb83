"""kafka_plan_approval: approve (and publish) or reject one plan; optionally ask a person first.

Trigger with the plan id. ``decision``: ``approve`` or ``reject`` apply at once (the triggering
user is recorded as the actor); ``ask`` parks the run at ``ask_a_person``, Airflow's
human-in-the-loop approval, until someone answers Approve or Reject in the UI (that user is
recorded). Approve publishes the plan as static assignments through the Kafka connection; if the
broker is down the plan stays ``approved`` and the task's retry completes it. Task bodies:
``rebalance_advisor.dag_tasks.publishing_tasks``.
"""

from __future__ import annotations

from datetime import datetime, timedelta

from airflow.providers.standard.operators.hitl import HITLOperator
from airflow.sdk import dag, get_current_context, task
from rebalance_advisor.dag_tasks.forms import dag_params
from rebalance_advisor.dag_tasks.publishing_tasks import HITL_OPTIONS
from rebalance_advisor.domain.parameters import ApprovalParams


@dag(
    dag_id="kafka_plan_approval",
    schedule=None,
    start_date=datetime(2025, 1, 1),
    catchup=False,
    tags=["rebalance-advisor", "kafka", "publishing"],
    default_args={"retries": 3, "retry_delay": timedelta(seconds=30), "retry_exponential_backoff": True},
    params=dag_params(ApprovalParams),
    doc_md=__doc__,
)
def kafka_plan_approval() -> None:
    @task.branch(retries=0)
    def route() -> str:
        from rebalance_advisor.dag_tasks.publishing_tasks import route as choose

        return choose(get_current_context()["params"])

    ask = HITLOperator(
        task_id="ask_a_person",
        subject="Approve rebalance plan {{ params.plan_id }}?",
        body="Plan {{ params.plan_id }}: approve publishes its static assignments; reject discards it.",
        options=list(HITL_OPTIONS),
        response_timeout=timedelta(days=7),
        retries=0,
    )

    @task(trigger_rule="none_failed_min_one_success")
    def apply_decision() -> dict:
        from airflow.sdk.exceptions import AirflowFailException
        from rebalance_advisor.adapters.assignment_topic import KafkaUnavailable
        from rebalance_advisor.dag_tasks.publishing_tasks import apply_decision as apply
        from rebalance_advisor.errors import AdvisorError

        context = get_current_context()
        params = context["params"]
        hitl = context["ti"].xcom_pull(task_ids="ask_a_person") if params["decision"] == "ask" else None
        user = getattr(context["dag_run"], "triggering_user_name", None)
        try:
            return apply(params, context["run_id"], user, hitl)
        except AdvisorError as error:
            if isinstance(error, KafkaUnavailable):
                raise  # retried: the plan stays approved and the retry publishes it
            raise AirflowFailException(str(error)) from error  # unknown plan, refused transition

    decided = apply_decision()
    branch = route()
    branch >> [ask, decided]
    ask >> decided


kafka_plan_approval()
