"""kafka_static_members: register or remove a consumer instance of a manual-assign group.

Kafka cannot list consumers that use ``assign()``: the advisor plans such a group with the members
registered here, and publishes each of them a static assignment. Trigger with the form; the work is
``rebalance_advisor.dag_tasks.publishing_tasks.members_action``. Adding a registered member or removing
an unknown one fails the run with the reason.
"""

from __future__ import annotations

from datetime import datetime

from airflow.sdk import Param, dag, get_current_context, task

ID_PATTERN = r"^\S(.*\S)?$"  # no leading/trailing whitespace
TOPIC_PATTERN = r"^[A-Za-z0-9._-]{1,249}$"


@dag(
    dag_id="kafka_static_members",
    schedule=None,
    start_date=datetime(2025, 1, 1),
    catchup=False,
    tags=["rebalance-advisor", "kafka", "publishing"],
    params={
        "action": Param("add", type="string", enum=["add", "remove"], description="register or unregister"),
        "group_id": Param(
            type="string", minLength=1, maxLength=255, pattern=ID_PATTERN, description="consumer group id"
        ),
        "member_id": Param(
            type="string",
            minLength=1,
            maxLength=255,
            pattern=ID_PATTERN,
            description="member id: what the consumer passes to AssignedConsumer",
        ),
        "topics": Param(
            [],
            type="array",
            uniqueItems=True,
            items={"type": "string", "pattern": TOPIC_PATTERN},
            description="topics the member consumes (needed for add, ignored for remove)",
        ),
        "db_conn_id": Param(
            "rebalance_advisor_db", type="string", minLength=1, description="advisor DB connection"
        ),
    },
    doc_md=__doc__,
)
def kafka_static_members() -> None:
    @task(retries=0)
    def apply() -> dict:
        from rebalance_advisor.dag_tasks.publishing_tasks import members_action

        return members_action(get_current_context()["params"])

    apply()


kafka_static_members()
