"""Approve or reject a plan from the UI: the one place the web app writes.

Only a ``recommended`` plan can be decided; anything else is a conflict with the reason (already
approved, superseded by a newer plan, ...). The rules, the transition row and the row lock are the
plan lifecycle's (``rebalance_advisor.services.plan_lifecycle``); this module maps its refusals to HTTP.
"""

from __future__ import annotations

from typing import Literal

from rebalance_advisor.errors import AdvisorError
from rebalance_advisor.store import db
from rebalance_advisor.webui.queries import NotFound, plan_row, plan_summary
from rebalance_advisor.webui.schemas import PlanSummary

Action = Literal["approve", "reject"]
TARGET: dict[str, str] = {"approve": "approved", "reject": "rejected"}


class Conflict(AdvisorError):
    """The plan is not in a state that allows this decision (HTTP 409 with this message)."""


def decide_from_ui(
    url: str, plan_id: int, action: Action, actor: str, note: str | None = None
) -> PlanSummary:
    """Move plan ``plan_id`` from ``recommended`` to approved/rejected; return the updated row."""
    from rebalance_advisor.services import plan_lifecycle

    with db.connect(url) as conn:
        try:
            plan_lifecycle.transition(
                conn, plan_id, TARGET[action], actor, note=note, expect=("recommended",)
            )
        except plan_lifecycle.UnknownPlan as error:
            raise NotFound(str(error)) from error
        except plan_lifecycle.IllegalTransition as error:
            raise Conflict(str(error)) from error
        plan = plan_row(conn, plan_id)
    return plan_summary(plan)
