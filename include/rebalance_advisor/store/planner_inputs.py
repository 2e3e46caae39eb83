"""Everything one planner run reads, in one transaction: the snapshot, the registry, the plan history.

Why one read unit and one write unit (:func:`rebalance_advisor.store.plans.write_run`) rather than one
transaction around the whole run: Spark plans between them for seconds to minutes, and holding a
transaction across it would hold SQLite's lock (snapshots could not be stored meanwhile) and pin a
PostgreSQL snapshot. The write re-checks what may have changed meanwhile (the cool-down against plans
stored by a concurrent run) under the plan-write lock, so the two units behave as one run.
See docs/architecture.md, "One planner run".
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from datetime import datetime, timedelta

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from rebalance_advisor.domain.decisions import StandingPlan
from rebalance_advisor.domain.estimates import RateParameters
from rebalance_advisor.domain.group_spec import RecentMove
from rebalance_advisor.domain.interval_evidence import IntervalObservation, interval_observations
from rebalance_advisor.domain.recent_moves import Owners, recent_moves
from rebalance_advisor.domain.spec_documents import (
    PublishedAssignments,
    PublishedRanges,
    SnapshotTables,
    StaticMember,
)
from rebalance_advisor.domain.timestamps import assume_utc
from rebalance_advisor.store import plans, static_members_table
from rebalance_advisor.store.models import GroupMemberRow, MemberAssignmentRow, SnapshotRow
from rebalance_advisor.store.plan_models import Plan, PlanAssignment, PlanTransition
from rebalance_advisor.store.snapshot_reader import same_cluster, snapshot_tables_in
from rebalance_advisor.store.snapshots import load_carried, snapshot_id_in


@dataclass(frozen=True)
class PlannerInputs:
    """What the planner's driver needs to build one document per group."""

    snapshot_id: int
    tables: SnapshotTables
    registry: list[StaticMember]
    published: PublishedAssignments
    published_ranges: PublishedRanges
    standing: dict[str, StandingPlan]


def read_planner_inputs(
    conn: Connection, snapshot_ref: str | int | None, replacing_airflow_run_id: str | None = None
) -> PlannerInputs:
    """The snapshot ``snapshot_ref`` (``latest`` or an id) and the state it is planned against."""
    snapshot_id = snapshot_id_in(conn, snapshot_ref)
    tables = snapshot_tables_in(conn, snapshot_id)
    published = plans.published_assignments(conn)
    return PlannerInputs(
        snapshot_id=snapshot_id,
        tables=dataclasses.replace(
            tables,
            interval=interval_evidence_in(conn, snapshot_id, tables, published),
            recent_moves=recent_moves_in(conn, snapshot_id),
        ),
        registry=static_members_table.static_member_specs(conn),
        published=published,
        published_ranges=plans.published_key_ranges(conn),
        standing=plans.standing_plans(conn, replacing_airflow_run_id),
    )


def interval_evidence_in(
    conn: Connection, snapshot_id: int, tables: SnapshotTables, published: PublishedAssignments
) -> dict[str, IntervalObservation]:
    """group -> the last interval's own evidence (domain/interval_evidence.py) between the cluster's
    previous stored snapshot and ``snapshot_id``. Members as plans name them; a group the snapshot
    lists without members holds what its published plan gave it."""
    s = SnapshotRow.__table__
    head = conn.execute(
        sa.select(s.c.cluster_id, s.c.bootstrap_servers, s.c.taken_at).where(s.c.id == snapshot_id)
    ).first()
    if head is None:
        return {}
    cluster_id, bootstrap_servers, taken_at = head
    previous = load_carried(conn, cluster_id, bootstrap_servers, before_id=snapshot_id)
    if previous is None:
        return {}
    members = {
        group_id: [(instance_id or member_id, held) for member_id, instance_id, _, held in live]
        for group_id, live in tables.members.items()
        if live
    }
    for group_id, plan in published.items():
        if group_id not in members:
            members[group_id] = [(name, tuple((t, p) for t, p in parts)) for name, parts in plan.items()]
    lag_ends = {tp: end for tp, (_, end) in tables.offsets.items()}
    return interval_observations(previous, assume_utc(taken_at), lag_ends, tables.committed, members)


def recent_moves_in(
    conn: Connection, snapshot_id: int, window_s: float | None = None
) -> dict[str, tuple[RecentMove, ...]]:
    """group -> its moves within ``window_s`` (default ``RateParameters.recent_moves_s``) before the
    snapshot (domain/recent_moves.py): from its published plans, and from the owners the cluster's
    snapshots observed. The hysteresis rule reads them from the group's document."""
    s = SnapshotRow.__table__
    head = conn.execute(
        sa.select(s.c.cluster_id, s.c.bootstrap_servers, s.c.taken_at).where(s.c.id == snapshot_id)
    ).first()
    if head is None:
        return {}
    cluster_id, bootstrap_servers, taken_at = head
    now = assume_utc(taken_at)
    window = RateParameters().recent_moves_s if window_s is None else window_s
    since = now - timedelta(seconds=window)
    published = _published_history(conn, since, now)
    observed = _observed_history(conn, cluster_id, bootstrap_servers, snapshot_id, since)
    return recent_moves((published, observed), now, window)


def _published_history(conn: Connection, since: datetime, now: datetime) -> list[tuple[datetime, Owners]]:
    """Owners after each publication within [since, now], and after each group's last one before it,
    oldest first: one history over every group (a group's owners stay as published until its next plan)."""
    t, p = PlanTransition.__table__, Plan.__table__
    published = sa.select(p.c.group_id, t.c.plan_id, t.c.at).join(p, p.c.id == t.c.plan_id)
    rows = [
        (g, i, assume_utc(at))
        for g, i, at in conn.execute(
            published.where(t.c.to_status == "published", t.c.at <= now).order_by(t.c.at, t.c.id)
        )
    ]
    inside = [r for r in rows if r[2] >= since]
    groups = {g for g, _, _ in inside}
    before = {g: (g, i, at) for g, i, at in rows if g in groups and at < since}
    chosen = sorted([*before.values(), *inside], key=lambda r: r[2])
    holders = _plan_holders(conn, [i for _, i, _ in chosen])
    history: list[tuple[datetime, Owners]] = []
    owners: dict[tuple[str, str, int], str] = {}
    for group_id, plan_id, at in chosen:
        owners = {k: v for k, v in owners.items() if k[0] != group_id}
        # a partition split into key ranges has several holders: no one member owns it
        owners.update({k: next(iter(v)) for k, v in holders.get(plan_id, {}).items() if len(v) == 1})
        history.append((at, owners))
    return history


def _plan_holders(conn: Connection, plan_ids: list[int]) -> dict[int, dict[tuple[str, str, int], set[str]]]:
    """plan -> (group, topic, partition) -> the members its assignment names for it."""
    p, a = Plan.__table__, PlanAssignment.__table__
    holders: dict[int, dict[tuple[str, str, int], set[str]]] = {}
    if not plan_ids:
        return holders
    for plan_id, group_id, member_id, topic, partition in conn.execute(
        sa.select(a.c.plan_id, p.c.group_id, a.c.member_id, a.c.topic, a.c.partition)
        .join(p, p.c.id == a.c.plan_id)
        .where(a.c.plan_id.in_(plan_ids))
    ):
        holders.setdefault(plan_id, {}).setdefault((group_id, topic, partition), set()).add(member_id)
    return holders


def _observed_history(
    conn: Connection, cluster_id: str | None, bootstrap_servers: str, snapshot_id: int, since: datetime
) -> list[tuple[datetime, Owners]]:
    """Owners each snapshot of the cluster observed within [since, the snapshot], and the one before."""
    s, m, a = SnapshotRow.__table__, GroupMemberRow.__table__, MemberAssignmentRow.__table__
    heads = conn.execute(
        same_cluster(sa.select(s.c.id, s.c.taken_at), cluster_id, bootstrap_servers)
        .where(s.c.id <= snapshot_id)
        .order_by(s.c.id.desc())
    )
    chosen: list[tuple[int, datetime]] = []
    for sid, at in heads:
        chosen.append((sid, assume_utc(at)))
        if chosen[-1][1] < since:
            break
    chosen.reverse()
    owners: dict[int, dict[tuple[str, str, int], str]] = {sid: {} for sid, _ in chosen}
    same_member = (
        (m.c.snapshot_id == a.c.snapshot_id)
        & (m.c.group_id == a.c.group_id)
        & (m.c.member_id == a.c.member_id)
    )
    for sid, group_id, member_id, instance_id, topic, partition in conn.execute(
        sa.select(
            a.c.snapshot_id, a.c.group_id, a.c.member_id, m.c.group_instance_id, a.c.topic, a.c.partition
        )
        .join(m, same_member)
        .where(a.c.snapshot_id.in_(list(owners)))
    ):
        owners[sid][(group_id, topic, partition)] = instance_id or member_id
    return [(at, owners[sid]) for sid, at in chosen]
