"""Staged plans in their final form, and the finalize's set-based part that moves them.

Executors stage each recommended plan as the ``plans`` row it will be (its numbers, metrics JSON,
situation, apply mode) and its assignment rows (``planner_staged_plans``,
``planner_staged_assignments``; migration 0018). Under the plan-write lock the finalize
(store/plans.write_staged_run) then inserts, with a few ``INSERT ... SELECT`` statements, the plans
of every group none of the write's rules can change: a group with no recommended, approved or
rejected plan (identity and rejection rules, supersession), no standing plan at all while a
cool-down applies (the concurrent cool-down re-check), and registered in the static-member registry
exactly when the executor saw it registered (its apply mode). Only the other groups' staged advice
is parsed and written row by row, with the same rules as ``write_run``. Why: parsing and writing each
plan in the driver cost about a millisecond per group at 100,000 groups, serially, after the
executors (docs/benchmarks/sizing.md, "Set-based finalize").
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from rebalance_advisor.domain.apply_mode import STATIC
from rebalance_advisor.domain.decisions import STANDING_STATUSES
from rebalance_advisor.store.models import CommittedOffsetRow, StaticMemberRow
from rebalance_advisor.store.plan_models import (
    GroupOutcome,
    Plan,
    PlanAssignment,
    PlannerStagedAssignment,
    PlannerStagedPlan,
    PlannerStaging,
    PlanTransition,
)

#: ``planner_staged_plans``' columns that are not the plan's numbers: the staging key and the
#: columns the finalize writes from elsewhere or as they are (``group_id``, ``status``, ...)
_STAGING_COLUMNS = frozenset(
    {"run_key", "group_id", "scope", "staged_at", "status", "apply_mode", "situation"}
)

#: the plan columns a run computes per plan (store/plans.plan_numbers' keys), staged as columns:
#: read off the staged table's model, so that a number column is listed once, in the models
PLAN_NUMBER_COLUMNS = tuple(
    c.name for c in PlannerStagedPlan.__table__.columns if c.name not in _STAGING_COLUMNS
)

#: statuses of a group's plans that make a write rule apply to its new recommendation: identity
#: (recommended, approved), supersession (recommended), rejection (rejected)
RULED_STATUSES = ("recommended", "approved", "rejected")


@dataclass(frozen=True)
class RunStamp:
    """What every row of one run's write shares (store/plans._RunWrite's head)."""

    run_id: int
    snapshot_id: int
    now: datetime
    created_by: str
    airflow_run_id: str | None
    cooldown_minutes: float


def staged_plan_rows(
    run_key: str, scope: int, staged_at: datetime, plans: Iterable[tuple[str, dict[str, Any]]]
) -> list[dict[str, Any]]:
    """``planner_staged_plans`` rows of (group, plan columns) pairs (every row names every column:
    an executemany takes its columns from the first row)."""
    return [
        {"run_key": run_key, "group_id": group_id, "scope": scope, "staged_at": staged_at, **columns}
        for group_id, columns in plans
    ]


def delete_scope(conn: Connection, run_key: str, scope: int) -> None:
    """A retried scope's earlier attempt, gone (its staged plans and assignment rows)."""
    for table in (PlannerStagedPlan.__table__, PlannerStagedAssignment.__table__):
        conn.execute(sa.delete(table).where(table.c.run_key == run_key, table.c.scope == scope))


def drop(conn: Connection, run_key: str, older_than: datetime | None = None) -> None:
    """A run's staged plans and assignment rows, and with ``older_than`` every run's staged before it."""
    for table in (PlannerStagedPlan.__table__, PlannerStagedAssignment.__table__):
        conn.execute(sa.delete(table).where(table.c.run_key == run_key))
        if older_than is not None:
            conn.execute(sa.delete(table).where(table.c.staged_at < older_than))


def _unruled(sp: sa.Table, cooldown_minutes: float) -> sa.ColumnElement[bool]:
    """SQL: no write rule can change the staged plan of ``sp``'s group (module docstring)."""
    statuses = RULED_STATUSES + (tuple(STANDING_STATUSES) if cooldown_minutes > 0 else ())
    ruled = sa.exists().where(Plan.group_id == sp.c.group_id, Plan.status.in_(sorted(set(statuses))))
    registered = sa.exists().where(StaticMemberRow.group_id == sp.c.group_id)
    seen_static = sp.c.apply_mode == STATIC
    return sa.and_(
        sa.not_(ruled), sa.or_(sa.and_(seen_static, registered), sa.and_(~seen_static, ~registered))
    )


def insert_unruled(conn: Connection, run_key: str, run: RunStamp) -> None:
    """The plans no rule re-checks, in group order, with their assignment rows, first transitions and
    outcome rows: four statements. Run before any other plan of the run exists (they find their
    plans by the run id)."""
    sp, plans = PlannerStagedPlan.__table__, Plan.__table__
    furthest = (
        sa.select(sa.func.max(CommittedOffsetRow.time_lag_s))
        .where(
            CommittedOffsetRow.snapshot_id == run.snapshot_id, CommittedOffsetRow.group_id == sp.c.group_id
        )
        .scalar_subquery()
    )
    head = {
        "run_id": sa.literal(run.run_id, sa.Integer),
        "snapshot_id": sa.literal(run.snapshot_id, sa.Integer),
        "created_at": sa.literal(run.now, plans.c.created_at.type),
        "created_by": sa.literal(run.created_by, plans.c.created_by.type),
        "group_max_time_lag_s": furthest,
    }
    own = ("group_id", "status", "apply_mode", "situation", *PLAN_NUMBER_COLUMNS)
    rows = (
        sa.select(*head.values(), *(sp.c[c] for c in own))
        .where(sp.c.run_key == run_key, _unruled(sp, run.cooldown_minutes))
        .order_by(sp.c.group_id)
    )
    conn.execute(plans.insert().from_select([*head, *own], rows))
    _insert_run_children(conn, run_key, run)


def _insert_run_children(conn: Connection, run_key: str, run: RunStamp) -> None:
    """Assignment rows, first transitions and outcome rows of the run's plans inserted so far."""
    plans, sa_, st = Plan.__table__, PlannerStagedAssignment.__table__, PlannerStaging.__table__
    mine = plans.c.run_id == run.run_id
    columns = ("member_id", "topic", "partition", "lag", "key_hash_start", "key_hash_end")
    assignments = (
        sa.select(plans.c.id, *(sa_.c[c] for c in columns))
        .join(plans, sa.and_(mine, plans.c.group_id == sa_.c.group_id))
        .where(sa_.c.run_key == run_key)
    )
    conn.execute(PlanAssignment.__table__.insert().from_select(["plan_id", *columns], assignments))
    transitions = (
        sa.select(
            plans.c.id,
            sa.null(),
            plans.c.status,
            sa.literal(run.created_by, PlanTransition.actor.type),
            sa.literal(run.airflow_run_id, PlanTransition.airflow_run_id.type),
            sa.literal(run.now, PlanTransition.at.type),
            plans.c.reason,
        )
        .where(mine)
        .order_by(plans.c.id)
    )
    conn.execute(
        PlanTransition.__table__.insert().from_select(
            ["plan_id", "from_status", "to_status", "actor", "airflow_run_id", "at", "note"], transitions
        )
    )
    outcome = ("group_id", *STAGED_OUTCOME_COLUMNS)
    outcomes = (
        sa.select(sa.literal(run.run_id, sa.Integer), *(st.c[c] for c in outcome), plans.c.id)
        .join(plans, sa.and_(mine, plans.c.group_id == st.c.group_id))
        .where(st.c.run_key == run_key)
    )
    conn.execute(GroupOutcome.__table__.insert().from_select(["run_id", *outcome, "plan_id"], outcomes))


#: the outcome columns an executor stages per group: ``group_outcomes``' own (the plan's status aside)
STAGED_OUTCOME_COLUMNS = (
    "outcome",
    "reason",
    "total_lag",
    "max_lag_before",
    "max_lag_after",
    "imbalance_before",
    "imbalance_after",
    "moves",
    "best_strategy",
)


def ruled_filter(st: sa.Table, run_id: int) -> sa.ColumnElement[bool]:
    """SQL: the staged group has no plan of run ``run_id`` yet (what :func:`insert_unruled` left)."""
    return ~sa.exists().where(Plan.run_id == run_id, Plan.group_id == st.c.group_id)


def numbers_of(row: Mapping[str, Any]) -> dict[str, Any]:
    """store/plans.plan_numbers as staged: the plan number columns of a staged plan row."""
    return {c: row[c] for c in PLAN_NUMBER_COLUMNS}


def assignment_values(plan_rows: Sequence[tuple]) -> list[dict[str, Any]]:
    """``planner_staged_assignments``' own columns of (member, topic, partition, lag, lo, hi) rows."""
    return [
        {"member_id": m, "topic": t, "partition": p, "lag": lag, "key_hash_start": lo, "key_hash_end": hi}
        for m, t, p, lag, lo, hi in plan_rows
    ]
