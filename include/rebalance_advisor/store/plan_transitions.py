"""SQL of plan status changes: the row lock, the conditional status update, the ``plan_transitions``
rows, and the reads publishing needs. The rules (which change is legal, who may publish) are in
:mod:`rebalance_advisor.services.plan_lifecycle`; every function runs on the caller's connection,
so a check and its write share one transaction.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from datetime import datetime
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from rebalance_advisor.domain.decisions import STANDING_STATUSES
from rebalance_advisor.store.plan_models import AdvisorRun, Plan, PlanAssignment, PlanTransition
from rebalance_advisor.store.static_members_table import member_ids


def lock_plan_status(conn: Connection, plan_id: int) -> tuple[str, str] | None:
    """(status, group id) of the plan, its row locked until the transaction ends (PostgreSQL)."""
    row = conn.execute(
        sa.select(Plan.status, Plan.group_id).where(Plan.id == plan_id).with_for_update()
    ).first()
    return None if row is None else (row[0], row[1])


def plan_status_row(conn: Connection, plan_id: int) -> tuple[str, str, int | None] | None:
    """(status, group id, epoch) of one plan, unlocked, or None."""
    row = conn.execute(sa.select(Plan.status, Plan.group_id, Plan.epoch).where(Plan.id == plan_id)).first()
    return None if row is None else (row[0], row[1], row[2])


def set_plan_status(
    conn: Connection, plan_id: int, from_status: str, to_status: str, values: Mapping[str, Any] | None = None
) -> bool:
    """``UPDATE ... WHERE status = from_status``: False when another writer changed it meanwhile."""
    done = conn.execute(
        sa.update(Plan)
        .where(Plan.id == plan_id, Plan.status == from_status)
        .values(status=to_status, **dict(values or {}))
    )
    return done.rowcount == 1


def insert_transition_row(
    conn: Connection,
    plan_id: int,
    from_status: str,
    to_status: str,
    actor: str,
    airflow_run_id: str | None,
    at: datetime,
    note: str | None,
) -> None:
    conn.execute(
        sa.insert(PlanTransition).values(
            plan_id=plan_id,
            from_status=from_status,
            to_status=to_status,
            actor=actor,
            airflow_run_id=airflow_run_id,
            at=at,
            note=note,
        )
    )


def publish_inputs(conn: Connection, group_id: str) -> tuple[list[str], int]:
    """(members that may hold partitions now, the group's highest stored epoch)."""
    current = sa.select(Plan.id).where(Plan.group_id == group_id, Plan.status == "published")
    holders = set(
        conn.execute(
            sa.select(PlanAssignment.member_id).where(PlanAssignment.plan_id.in_(current)).distinct()
        ).scalars()
    )
    holders |= set(member_ids(conn, group_id))
    top = conn.execute(
        sa.select(sa.func.max(Plan.epoch)).where(Plan.group_id == group_id)
    ).scalar_one_or_none()
    return sorted(holders), int(top or 0)


def other_standing_plan_ids(conn: Connection, group_id: str, plan_id: int) -> list[int]:
    """The group's standing plans other than ``plan_id``, older or newer, by id: superseded when
    ``plan_id`` is published (docs/operations/plan-lifecycle.md, "Publishing supersedes").

    Why newer ones too: a recommendation made after ``plan_id`` was approved was measured against the
    assignment in force before the publish; left standing, it sat next to the published plan with
    moves and numbers that no longer describe the group.
    """
    return list(
        conn.execute(
            sa.select(Plan.id)
            .where(Plan.group_id == group_id, Plan.id != plan_id, Plan.status.in_(STANDING_STATUSES))
            .order_by(Plan.id)
        ).scalars()
    )


def standing_plan_ids_of_airflow_run(conn: Connection, airflow_run_id: str | None) -> list[int]:
    """The standing plans written or confirmed by the advisor run(s) of one Airflow run (a run that
    arrives at a standing plan's assignment keeps that plan: its ``run_id`` is the first run's)."""
    runs = sa.select(AdvisorRun.id).where(AdvisorRun.airflow_run_id == airflow_run_id)
    return list(
        conn.execute(
            sa.select(Plan.id)
            .where(
                sa.or_(Plan.run_id.in_(runs), Plan.last_confirmed_run_id.in_(runs)),
                Plan.status.in_(STANDING_STATUSES),
            )
            .order_by(Plan.id)
        ).scalars()
    )


def plan_groups_and_statuses(conn: Connection, plan_ids: Iterable[int]) -> Sequence[tuple[int, str, str]]:
    """(plan id, group id, status) of the given plans, by plan id."""
    rows = conn.execute(sa.select(Plan.id, Plan.group_id, Plan.status).where(Plan.id.in_(list(plan_ids))))
    return sorted(((r[0], r[1], r[2]) for r in rows), key=lambda r: r[0])
