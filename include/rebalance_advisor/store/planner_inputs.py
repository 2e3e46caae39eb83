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
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime, timedelta

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from rebalance_advisor.domain.decisions import StandingPlan
from rebalance_advisor.domain.estimates import Carried, RateParameters, cluster_key, member_key
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
from rebalance_advisor.store.models import (
    CommittedOffsetRow,
    GroupMemberRow,
    MemberAssignmentRow,
    PartitionOffsetRow,
    SnapshotRow,
)
from rebalance_advisor.store.plan_models import Plan, PlanAssignment, PlanTransition
from rebalance_advisor.store.planner_scope import GroupScope, scoped
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
    conn: Connection,
    snapshot_ref: str | int | None,
    replacing_airflow_run_id: str | None = None,
    scope: GroupScope | None = None,
) -> PlannerInputs:
    """The snapshot ``snapshot_ref`` (``latest`` or an id) and the state it is planned against; of the
    groups of ``scope`` only when given (an executor's share of a run: store/planner_scope.py)."""
    snapshot_id = snapshot_id_in(conn, snapshot_ref)
    published = plans.published_assignments(conn, scope)
    published_ranges = plans.published_key_ranges(conn, scope)
    registry = static_members_table.static_member_specs(conn, scope)
    extra = {t for s in registry for t in s.topics} | {
        t for held in published.values() for parts in held.values() for t, _ in parts
    }
    tables = snapshot_tables_in(conn, snapshot_id, scope, extra)
    return PlannerInputs(
        snapshot_id=snapshot_id,
        tables=dataclasses.replace(
            tables,
            interval=interval_evidence_in(conn, snapshot_id, tables, published, scope),
            recent_moves=recent_moves_in(conn, snapshot_id, scope=scope),
        ),
        registry=registry,
        published=published,
        published_ranges=published_ranges,
        standing=plans.standing_plans(conn, replacing_airflow_run_id, scope),
    )


def interval_evidence_in(
    conn: Connection,
    snapshot_id: int,
    tables: SnapshotTables,
    published: PublishedAssignments,
    scope: GroupScope | None = None,
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
    if scope is None:
        previous = load_carried(conn, cluster_id, bootstrap_servers, before_id=snapshot_id)
    else:  # only the scope's groups and the partitions it reads (tables.offsets)
        previous = carried_in_scope(conn, cluster_id, bootstrap_servers, snapshot_id, scope, tables.offsets)
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
    conn: Connection, snapshot_id: int, window_s: float | None = None, scope: GroupScope | None = None
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
    published = _published_history(conn, since, now, scope)
    observed = _observed_history(conn, cluster_id, bootstrap_servers, snapshot_id, since, scope)
    return recent_moves((published, observed), now, window)


def _published_history(
    conn: Connection, since: datetime, now: datetime, scope: GroupScope | None
) -> list[tuple[datetime, Owners]]:
    """Owners after each publication within [since, now], and after each group's last one before it,
    oldest first: one history over every group (a group's owners stay as published until its next plan)."""
    t, p = PlanTransition.__table__, Plan.__table__
    published = scoped(
        sa.select(p.c.group_id, t.c.plan_id, t.c.at).join(p, p.c.id == t.c.plan_id), p.c.group_id, scope
    )
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
    conn: Connection,
    cluster_id: str | None,
    bootstrap_servers: str,
    snapshot_id: int,
    since: datetime,
    scope: GroupScope | None,
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
        scoped(
            sa.select(
                a.c.snapshot_id, a.c.group_id, a.c.member_id, m.c.group_instance_id, a.c.topic, a.c.partition
            ),
            a.c.group_id,
            scope,
        )
        .join(m, same_member)
        .where(a.c.snapshot_id.in_(list(owners)))
    ):
        owners[sid][(group_id, topic, partition)] = instance_id or member_id
    return [(at, owners[sid]) for sid, at in chosen]


def carried_in_scope(
    conn: Connection,
    cluster_id: str | None,
    bootstrap_servers: str,
    before_id: int,
    scope: GroupScope,
    partitions: Iterable[tuple[str, int]],
) -> Carried | None:
    """What the interval evidence reads of the cluster's previous snapshot (before ``before_id``),
    for ``scope``'s groups and ``partitions`` only: its time, lag ends, committed offsets and owners.

    The same values as :func:`rebalance_advisor.store.snapshots.load_carried` for those keys (owners
    as the broker listed them; the interval evidence never passes manual-assign plans), without
    reading the rest of a large snapshot in every executor.
    """
    s = SnapshotRow.__table__
    head = conn.execute(
        same_cluster(sa.select(s.c.id, s.c.taken_at, s.c.isolation_level), cluster_id, bootstrap_servers)
        .where(s.c.id < before_id)
        .order_by(s.c.id.desc())
        .limit(1)
    ).first()
    if head is None:
        return None
    previous_id, taken_at, isolation = head
    c = CommittedOffsetRow.__table__
    committed = {
        (g, t, n): offset
        for g, t, n, offset in conn.execute(
            scoped(
                sa.select(c.c.group_id, c.c.topic, c.c.partition, c.c.committed_offset), c.c.group_id, scope
            ).where(c.c.snapshot_id == previous_id)
        )
    }
    return Carried(
        cluster=cluster_key(cluster_id, bootstrap_servers),
        taken_at=assume_utc(taken_at),
        log_ends={},
        lag_ends=_lag_ends_in(conn, previous_id, isolation, set(partitions)),
        produce={},
        committed=committed,
        consume={},
        owners=_owners_in(conn, previous_id, scope),
        snapshot_id=previous_id,
    )


def _owners_in(conn: Connection, snapshot_id: int, scope: GroupScope) -> dict[tuple[str, str, int], str]:
    """(group, topic, partition) -> its owner's member key, as the broker listed the scope's members."""
    m, a = GroupMemberRow.__table__, MemberAssignmentRow.__table__
    keys = {
        (g, member): member_key(member, instance)
        for g, member, instance in conn.execute(
            scoped(sa.select(m.c.group_id, m.c.member_id, m.c.group_instance_id), m.c.group_id, scope).where(
                m.c.snapshot_id == snapshot_id
            )
        )
    }
    return {
        (g, t, n): keys.get((g, member), member)
        for g, member, t, n in conn.execute(
            scoped(
                sa.select(a.c.group_id, a.c.member_id, a.c.topic, a.c.partition), a.c.group_id, scope
            ).where(a.c.snapshot_id == snapshot_id)
        )
    }


def _lag_ends_in(
    conn: Connection, snapshot_id: int, isolation: str, wanted: set[tuple[str, int]]
) -> dict[tuple[str, int], int | None]:
    """(topic, partition) -> the end lags were against at ``snapshot_id`` (log end, or the LSO under
    read_committed), for the ``wanted`` partitions (read by topic, in chunks: an IN list has limits)."""
    p = PartitionOffsetRow.__table__
    lag_ends: dict[tuple[str, int], int | None] = {}
    topics = sorted({t for t, _ in wanted})
    for start in range(0, len(topics), 500):
        for topic, partition, end, stable in conn.execute(
            sa.select(p.c.topic, p.c.partition, p.c.log_end_offset, p.c.last_stable_offset).where(
                p.c.snapshot_id == snapshot_id, p.c.topic.in_(topics[start : start + 500])
            )
        ):
            if (topic, partition) in wanted:
                lag_ends[(topic, partition)] = (
                    stable if isolation == "read_committed" and stable is not None else end
                )
    return lag_ends
