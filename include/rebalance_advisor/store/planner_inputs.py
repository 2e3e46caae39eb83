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

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from rebalance_advisor.domain.decisions import StandingPlan
from rebalance_advisor.domain.interval_evidence import IntervalObservation, interval_observations
from rebalance_advisor.domain.spec_documents import (
    PublishedAssignments,
    PublishedRanges,
    SnapshotTables,
    StaticMember,
)
from rebalance_advisor.domain.timestamps import assume_utc
from rebalance_advisor.store import plans, static_members_table
from rebalance_advisor.store.models import SnapshotRow
from rebalance_advisor.store.snapshot_reader import snapshot_tables_in
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
            tables, interval=interval_evidence_in(conn, snapshot_id, tables, published)
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
