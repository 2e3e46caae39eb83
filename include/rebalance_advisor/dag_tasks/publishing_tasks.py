"""Task bodies of the publishing DAGs (``kafka_static_members``, ``kafka_plan_approval``).

The DAG files only wire these; Airflow itself is not imported here, so the logic (including how
a human-in-the-loop answer becomes a decision) is testable without a running scheduler.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any, get_args

from rebalance_advisor.domain.parameters import ApprovalDecision
from rebalance_advisor.errors import AdvisorError

log = logging.getLogger(__name__)

#: the approval DAG's ``decision`` param: decide now, or ask a person (Airflow's HITL approval)
DECISIONS: tuple[str, ...] = get_args(ApprovalDecision)
#: the options of the HITL task, and what each means
HITL_OPTIONS = {"Approve": "approve", "Reject": "reject"}
ASK_TASK = "ask_a_person"
APPLY_TASK = "apply_decision"


def members_action(params: Mapping[str, Any]) -> dict[str, Any]:
    """``kafka_static_members``: add or remove one registered member; returns what changed."""
    from rebalance_advisor.adapters.airflow_connections import database_url
    from rebalance_advisor.services import static_members as registry
    from rebalance_advisor.store import db

    url = database_url(params["db_conn_id"])
    db.upgrade(url)
    group, member, action = params["group_id"], params["member_id"], params["action"]
    if action == "add":
        done = registry.add(group, member, params.get("topics") or [], url)
    elif action == "remove":
        done = registry.remove(group, member, url)
    else:
        raise AdvisorError(f"unknown action {action!r}: add or remove")
    members = [m.member_id for m in registry.list_members(group, url)]
    log.info("%s %s in group %s; registered now: %s", action, member, group, members)
    return {"action": action, **done.to_dict(), "registered": members}


def route(params: Mapping[str, Any]) -> str:
    """The branch: ask a person first, or apply the decision given with the trigger."""
    return ASK_TASK if params["decision"] == "ask" else APPLY_TASK


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
    from rebalance_advisor.adapters.airflow_connections import database_url, kafka_client_config
    from rebalance_advisor.services import plan_lifecycle as lifecycle

    url = database_url(params["db_conn_id"])
    plan_id = int(params["plan_id"])
    decision, who, note = decision_of(params, hitl)
    actor = who or triggered_by or "airflow"
    status, group, _ = lifecycle.status_of(plan_id, url)
    if decision == "reject":
        done = lifecycle.reject(plan_id, actor, url, airflow_run_id=airflow_run_id, note=note)
        return {"plan_id": plan_id, "group_id": group, "status": done.to_status, "actor": actor}
    if status == "recommended":
        lifecycle.approve(plan_id, actor, url, airflow_run_id=airflow_run_id, note=note)
    if not params.get("publish", True):
        return {"plan_id": plan_id, "group_id": group, "status": "approved", "actor": actor}
    published = lifecycle.publish(
        plan_id, kafka_client_config(params["kafka_conn_id"]), actor, url, airflow_run_id=airflow_run_id
    )
    return {"status": "published", "actor": actor, **published.to_dict()}
