"""Everything one planner run reads, in one transaction: the snapshot, the registry, the plan history.

Why one read unit and one write unit (:func:`rebalance_advisor.store.plans.write_run`) rather than one
transaction around the whole run: Spark plans between them for seconds to minutes, and holding a
transaction across it would hold SQLite's lock (snapshots could not be stored meanwhile) and pin a
PostgreSQL snapshot. The write re-checks what may have changed meanwhile (the cool-down against plans
stored by a concurrent run) under the plan-write lock, so the two units behave as one run.
See docs/architecture.md, "One planner run".
"""

from __future__ import annotations

from dataclasses import dataclass

from sqlalchemy.engine import Connection

from rebalance_advisor.domain.decisions import StandingPlan
from rebalance_advisor.domain.spec_documents import (
    PublishedAssignments,
    PublishedRanges,
    SnapshotTables,
    StaticMember,
)
from rebalance_advisor.store import plans, static_members_table
from rebalance_advisor.store.snapshot_reader import snapshot_tables_in
from rebalance_advisor.store.snapshots import snapshot_id_in


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
    return PlannerInputs(
        snapshot_id=snapshot_id,
        tables=snapshot_tables_in(conn, snapshot_id),
        registry=static_members_table.static_member_specs(conn),
        published=plans.published_assignments(conn),
        published_ranges=plans.published_key_ranges(conn),
        standing=plans.standing_plans(conn, replacing_airflow_run_id),
    )
