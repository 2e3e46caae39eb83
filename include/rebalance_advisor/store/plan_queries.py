"""Read queries of the web UI over the plan tables (advisor runs, outcomes, plans).

Rows come back typed (:mod:`.plan_records`), each function on the caller's connection so a page's
questions share one short transaction; the UI (``webui/queries.py``) composes them.
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from rebalance_advisor.domain.plan_identity import AssignmentRow, assignment_key
from rebalance_advisor.store.plan_models import AdvisorRun, GroupOutcome, Plan, PlanAssignment, PlanTransition
from rebalance_advisor.store.plan_records import OutcomeRecord, PlanRecord, PlanRef, record


def run_params(conn: Connection, run_id: int | None = None) -> dict[str, Any] | None:
    """The parameter document stored with advisor run ``run_id`` (default: the newest run), or None."""
    query = sa.select(AdvisorRun.params).order_by(AdvisorRun.id.desc()).limit(1)
    if run_id is not None:
        query = query.where(AdvisorRun.id == run_id)
    return conn.execute(query).scalar()


def latest_outcomes(conn: Connection, group_ids: Iterable[str] | None = None) -> dict[str, OutcomeRecord]:
    """The newest advisor outcome of every group (highest run id), with the run's snapshot id."""
    newest = (
        sa.select(GroupOutcome.group_id, sa.func.max(GroupOutcome.run_id).label("run_id"))
        .group_by(GroupOutcome.group_id)
        .subquery()
    )
    query = (
        sa.select(GroupOutcome.__table__, AdvisorRun.snapshot_id, AdvisorRun.finished_at.label("planned_at"))
        .join(
            newest,
            sa.and_(newest.c.group_id == GroupOutcome.group_id, newest.c.run_id == GroupOutcome.run_id),
        )
        .join(AdvisorRun, AdvisorRun.id == GroupOutcome.run_id)
    )
    if group_ids is not None:
        query = query.where(GroupOutcome.group_id.in_(list(group_ids)))
    return {r["group_id"]: record(OutcomeRecord, r) for r in conn.execute(query).mappings()}


def latest_plan_per_group(conn: Connection) -> dict[str, PlanRef]:
    """The newest non-skipped plan per group (the ``latest_plan_per_group`` view's rule)."""
    newest = (
        sa.select(Plan.group_id, sa.func.max(Plan.id).label("id"))
        .where(Plan.status != "skipped")
        .group_by(Plan.group_id)
        .subquery()
    )
    query = sa.select(Plan.id, Plan.group_id, Plan.status, Plan.strategy).join(newest, newest.c.id == Plan.id)
    return {r.group_id: PlanRef(*r) for r in conn.execute(query)}


def newest_plan_rows_of_group(conn: Connection, group_id: str, limit: int) -> list[PlanRecord]:
    """The group's newest ``limit`` plan rows, newest first."""
    rows = conn.execute(
        sa.select(Plan.__table__).where(Plan.group_id == group_id).order_by(Plan.id.desc()).limit(limit)
    )
    return [record(PlanRecord, r) for r in rows.mappings()]


def imbalance_by_run(conn: Connection, group_id: str) -> list[tuple[int, float | None, int]]:
    """(snapshot id, imbalance before, run id) of every outcome of the group, newest snapshot and run first."""
    rows = conn.execute(
        sa.select(AdvisorRun.snapshot_id, GroupOutcome.imbalance_before, GroupOutcome.run_id)
        .join(AdvisorRun, AdvisorRun.id == GroupOutcome.run_id)
        .where(GroupOutcome.group_id == group_id)
        .order_by(AdvisorRun.snapshot_id.desc(), GroupOutcome.run_id.desc())
    )
    return [(r[0], r[1], r[2]) for r in rows]


def plan_page(conn: Connection, *, group: str | None, status: str | None, strategy: str | None,
              page: int, page_size: int) -> tuple[int, list[PlanRecord]]:  # fmt: skip
    """(count of every match, one page of plan rows newest first), filtered."""
    query = sa.select(Plan.__table__)
    if group:
        query = query.where(Plan.group_id == group)
    if status:
        query = query.where(Plan.status == status)
    if strategy:
        query = query.where(Plan.strategy == strategy)
    total = conn.execute(sa.select(sa.func.count()).select_from(query.subquery())).scalar_one()
    rows = conn.execute(query.order_by(Plan.id.desc()).offset((page - 1) * page_size).limit(page_size))
    return total, [record(PlanRecord, r) for r in rows.mappings()]


def plan_table_row(conn: Connection, plan_id: int) -> PlanRecord | None:
    """One plan's row (with its metrics JSON), or None."""
    found = conn.execute(sa.select(Plan.__table__).where(Plan.id == plan_id)).mappings().first()
    return record(PlanRecord, found) if found is not None else None


def in_force_plan(conn: Connection, group_id: str) -> PlanRecord | None:
    """The group's plan in force: its ``published`` plan (publishing supersedes every other one;
    the highest epoch should two ever stand), or None."""
    found = (
        conn.execute(
            sa.select(Plan.__table__)
            .where(Plan.group_id == group_id, Plan.status == "published")
            .order_by(Plan.epoch.desc(), Plan.id.desc())
            .limit(1)
        )
        .mappings()
        .first()
    )
    return record(PlanRecord, found) if found is not None else None


def published_at(conn: Connection, plan_id: int) -> datetime | None:
    """When the plan was published (its newest ``-> published`` transition), or None."""
    return conn.execute(
        sa.select(sa.func.max(PlanTransition.at)).where(
            PlanTransition.plan_id == plan_id, PlanTransition.to_status == "published"
        )
    ).scalar()


def predecessor_in_force(conn: Connection, group_id: str, plan_id: int, epoch: int | None) -> int | None:
    """The published plan that ``plan_id`` was measured against: of the group's plans ever published
    (an epoch set), the one with the highest epoch below ``epoch`` (a published plan: what it
    replaced), or, for a plan never published, below none but made before it (lower id)."""
    query = sa.select(Plan.id).where(Plan.group_id == group_id, Plan.epoch.is_not(None), Plan.id != plan_id)
    query = query.where(Plan.epoch < epoch) if epoch is not None else query.where(Plan.id < plan_id)
    return conn.execute(query.order_by(Plan.epoch.desc(), Plan.id.desc()).limit(1)).scalar()


def assignment_keys(conn: Connection, plan_ids: Iterable[int]) -> dict[int, frozenset[AssignmentRow]]:
    """{plan id: its assignment key} (domain/plan_identity.py: two plans with one key are one plan)."""
    rows: dict[int, list[AssignmentRow]] = {}
    found = conn.execute(
        sa.select(PlanAssignment.plan_id, PlanAssignment.member_id, PlanAssignment.topic,
                  PlanAssignment.partition, PlanAssignment.key_hash_start, PlanAssignment.key_hash_end)
        .where(PlanAssignment.plan_id.in_(list(plan_ids)))
    )  # fmt: skip
    for plan_id, *row in found:
        rows.setdefault(plan_id, []).append(tuple(row))  # type: ignore[arg-type]
    return {plan_id: assignment_key(held) for plan_id, held in rows.items()}


def owners_of_plan(conn: Connection, plan_id: int) -> dict[tuple[str, int], str]:
    """{(topic, partition): member} of one plan's whole-partition rows (a split partition's first range)."""
    rows = conn.execute(
        sa.select(PlanAssignment.topic, PlanAssignment.partition, PlanAssignment.member_id)
        .where(PlanAssignment.plan_id == plan_id)
        .order_by(PlanAssignment.topic, PlanAssignment.partition, PlanAssignment.key_hash_start)
    )
    owners: dict[tuple[str, int], str] = {}
    for topic, partition, member in rows:
        owners.setdefault((topic, partition), member)
    return owners


def published_plans_applied_by(conn: Connection, apply_mode: str) -> dict[str, str]:
    """group -> the id (as the plan records carry it) of its newest ``published`` plan applied by
    ``apply_mode``: the plans the advisor stands by, which the broker plan refresh keeps alive."""
    query = (
        sa.select(Plan.group_id, sa.func.max(Plan.id))
        .where(Plan.status == "published", Plan.apply_mode == apply_mode)
        .group_by(Plan.group_id)
    )
    return {group_id: str(plan_id) for group_id, plan_id in conn.execute(query)}
