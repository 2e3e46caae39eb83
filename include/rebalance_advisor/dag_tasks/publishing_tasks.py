"""Task bodies of the publishing DAGs (``kafka_static_members``, ``kafka_plan_approval``).

The DAG files only wire these; each takes the run's params as an argument and runs under the one
error policy (:mod:`.error_policy`). Airflow itself is not imported here, so the logic (including
how a human-in-the-loop answer becomes a decision) is testable without a running scheduler.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any, get_args

from rebalance_advisor.dag_tasks.error_policy import under_error_policy
from rebalance_advisor.domain.parameters import ApprovalDecision
from rebalance_advisor.errors import AdvisorError

log = logging.getLogger(__name__)

#: the approval DAG's ``decision`` param: decide now, or ask a person (Airflow's HITL approval)
DECISIONS: tuple[str, ...] = get_args(ApprovalDecision)
#: the options of the HITL task, and what each means
HITL_OPTIONS = {"Approve": "approve", "Reject": "reject"}
ASK_TASK = "ask_a_person"
APPLY_TASK = "apply_decision"
#: reads the plan for the person asked: its group, moves and predicted effect (the HITL prompt)
DESCRIBE_TASK = "describe_plan"
#: the HITL task's templates: what :func:`approval_prompt` returned
PROMPT_SUBJECT = "{{ ti.xcom_pull(task_ids='" + DESCRIBE_TASK + "')['subject'] }}"
PROMPT_BODY = "{{ ti.xcom_pull(task_ids='" + DESCRIBE_TASK + "')['body'] }}"


@under_error_policy
def members_action(params: Mapping[str, Any]) -> dict[str, Any]:
    """``kafka_static_members``: add or remove one registered member; returns what changed."""
    from rebalance_advisor.adapters.airflow_connections import database_url_from_connection
    from rebalance_advisor.domain.parameters import StaticMemberParams
    from rebalance_advisor.services import static_members

    p = StaticMemberParams.parse(params)
    url = database_url_from_connection(p.db_conn_id)
    group, member, action = p.group_id, p.member_id, p.action
    if action == "add":
        done = static_members.add(group, member, p.topics, url, share_keys=p.share_keys)
    else:
        done = static_members.remove(group, member, url)
    members = [m.member_id for m in static_members.list_members(group, url)]
    log.info("%s %s in group %s; registered now: %s", action, member, group, members)
    return {"action": action, **done.to_dict(), "registered": members}


def route(params: Mapping[str, Any]) -> str:
    """The branch: describe the plan and ask a person first, or apply the decision given with the trigger."""
    return DESCRIBE_TASK if params["decision"] == "ask" else APPLY_TASK


@under_error_policy
def approval_prompt(params: Mapping[str, Any]) -> dict[str, str]:
    """The HITL task's subject and Markdown body: the plan's group, its moves and its predicted
    effect (services/plan_report.py). An unknown plan fails here, before anyone is asked."""
    from rebalance_advisor.adapters.airflow_connections import database_url_from_connection
    from rebalance_advisor.domain.parameters import ApprovalParams
    from rebalance_advisor.services import plan_report

    p = ApprovalParams.parse(params)
    plan, moves = plan_report.moves_of(p.plan_id, database_url_from_connection(p.db_conn_id))
    prompt = plan_report.approval_prompt(plan, moves)
    return {"subject": prompt.subject, "body": prompt.body}


def decision_of(
    params: Mapping[str, Any], hitl: Mapping[str, Any] | None
) -> tuple[str, str | None, str | None]:
    """(approve|reject, who, note): from the trigger's params, or from the HITL task's answer."""
    if params["decision"] != "ask":
        return params["decision"], None, params.get("note")
    if not hitl or not hitl.get("chosen_options"):
        raise AdvisorError("decision 'ask' but the approval task returned no answer")
    (chosen,) = hitl["chosen_options"]
    user = hitl.get("responded_by_user") or {}
    who = user.get("name") or user.get("id") if isinstance(user, Mapping) else str(user)
    note = (hitl.get("params_input") or {}).get("note") or params.get("note")
    return HITL_OPTIONS[chosen], who, note


@under_error_policy
def apply_decision(
    params: Mapping[str, Any],
    airflow_run_id: str,
    triggered_by: str | None,
    hitl: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """``kafka_plan_approval``: approve (and publish) or reject one plan.

    An already approved plan is published without approving again, so a retry after a Kafka
    outage completes the publish; an already published one is a no-op.
    """
    from rebalance_advisor.adapters.airflow_connections import (
        database_url_from_connection,
        kafka_client_config,
    )
    from rebalance_advisor.domain.parameters import ApprovalParams
    from rebalance_advisor.services import plan_lifecycle

    p = ApprovalParams.parse(params)
    url = database_url_from_connection(p.db_conn_id)
    plan_id = p.plan_id
    decision, who, note = decision_of(p.model_dump(), hitl)
    actor = who or triggered_by or "airflow"
    status, group, _ = plan_lifecycle.status_of(plan_id, url)
    if decision == "reject":
        done = plan_lifecycle.reject(plan_id, actor, url, airflow_run_id=airflow_run_id, note=note)
        return {"plan_id": plan_id, "group_id": group, "status": done.to_status, "actor": actor}
    if status == "recommended":
        plan_lifecycle.approve(plan_id, actor, url, airflow_run_id=airflow_run_id, note=note)
    if not p.publish:
        return {"plan_id": plan_id, "group_id": group, "status": "approved", "actor": actor}
    published = plan_lifecycle.publish(
        plan_id, kafka_client_config(p.kafka_conn_id), actor, url, airflow_run_id=airflow_run_id
    )
    return {"status": "published", "actor": actor, **published.to_dict()}
