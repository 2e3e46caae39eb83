"""kafka_static_members: register or remove a consumer instance of a manual-assign group.

Kafka cannot list consumers that use ``assign()``: the advisor plans such a group with the members
registered here, and publishes each of them a static assignment. Trigger with the form; the work is
``rebalance_advisor.dag_tasks.publishing_tasks.members_action``. Adding a registered member or removing
an unknown one fails the run with the reason.
"""

from __future__ import annotations

from datetime import datetime

from airflow.sdk import dag, get_current_context, task
from rebalance_advisor.dag_tasks.forms import dag_params
from rebalance_advisor.domain.parameters import StaticMemberParams


@dag(
    dag_id="kafka_static_members",
    schedule=None,
    start_date=datetime(2025, 1, 1),
    catchup=False,
    tags=["rebalance-advisor", "kafka", "publishing"],
    params=dag_params(StaticMemberParams),
    doc_md=__doc__,
)
def kafka_static_members() -> None:
    @task(retries=0)
    def apply() -> dict:
        from rebalance_advisor.dag_tasks.publishing_tasks import members_action

        return members_action(get_current_context()["params"])

    apply()


kafka_static_members()
