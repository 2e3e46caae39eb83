"""Approve or reject a plan from the UI: the one place the web app writes.

Only a ``recommended`` plan can be decided; anything else is a conflict with the reason (already
approved, superseded by a newer plan, ...). The status change and its ``plan_transitions`` row are
written in one transaction, with the plan row locked on PostgreSQL so two clicks cannot both win.

NOTE for the lead: this is the UI's own minimal lifecycle (recommended -> approved | rejected).
When ``rebalance_advisor.publish.lifecycle`` lands, :func:`decide` should delegate to it.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any, Literal

import sqlalchemy as sa

from rebalance_advisor.errors import AdvisorError
from rebalance_advisor.store import db
from rebalance_advisor.store.plan_models import Plan, PlanTransition
from rebalance_advisor.webui.queries import plan_row

Action = Literal["approve", "reject"]
TARGET: dict[str, str] = {"approve": "approved", "reject": "rejected"}


class Conflict(AdvisorError):
    """The plan is not in a state that allows this decision (HTTP 409 with this message)."""


def decide(url: str, plan_id: int, action: Action, actor: str, note: str | None = None) -> dict[str, Any]:
    """Move plan ``plan_id`` from ``recommended`` to approved/rejected; return the updated row."""
    target = TARGET[action]
    with db.connect(url) as conn:
        locked = conn.execute(sa.select(Plan.status).where(Plan.id == plan_id).with_for_update()).first()
        plan = plan_row(conn, plan_id)  # 404 when missing
        status = locked[0] if locked else plan["status"]
        if status != "recommended":
            raise Conflict(
                f"plan {plan_id} is {status!r}, not 'recommended': only a recommended plan can be {target}"
                + (" (a newer plan replaced it)" if status == "superseded" else "")
            )
        now = datetime.now(UTC)
        conn.execute(sa.update(Plan).where(Plan.id == plan_id).values(status=target))
        conn.execute(
            sa.insert(PlanTransition).values(
                plan_id=plan_id, from_status=status, to_status=target, actor=actor,
                airflow_run_id=None, at=now, note=note,
            )
        )  # fmt: skip
        plan = plan_row(conn, plan_id)
    return {k: v for k, v in plan.items() if k != "metrics"}
