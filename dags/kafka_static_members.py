"""kafka_static_members: register or remove a consumer instance of a manual-assign group.

Kafka cannot list consumers that use ``assign()``: the advisor plans such a group with the members
registered here, and publishes each of them a static assignment. Trigger with the form; the work is
``rebalance_advisor.dag_tasks.publishing_tasks.members_action``. Adding a registered member or removing
an unknown one fails the run at once with the reason; an unreachable database is retried.
"""

from __future__ import annotations

from datetime import datetime

from airflow.sdk import dag, task
from rebalance_advisor.dag_tasks import publishing_tasks
from rebalance_advisor.dag_tasks.error_policy import retry_args
from rebalance_advisor.dag_tasks.forms import dag_params
from rebalance_advisor.dag_tasks.schema_tasks import upgrade_schema_task
from rebalance_advisor.domain.parameters import StaticMemberParams


@dag(
    schedule=None,
    start_date=datetime(2025, 1, 1),
    catchup=False,
    tags=["rebalance-advisor", "kafka", "publishing"],
    default_args=retry_args(2, delay_s=20, backoff=False),
    params=dag_params(StaticMemberParams),
    doc_md=__doc__,
)
def kafka_static_members() -> None:
    @task
    def apply(params=None) -> dict:
        return publishing_tasks.members_action(params)

    upgrade_schema_task(StaticMemberParams) >> apply()


kafka_static_members()
