"""The planner pipeline's unit of reading: a scope of groups, and the scopes one run is cut into.

Why ranges of group ids, read straight from the snapshot tables (docs/architecture.md, "One planner
run"): every snapshot table that holds group rows has ``(snapshot_id, group_id, ...)`` as its primary
key, so ``group_id >= low AND group_id < high`` is an index range scan on SQLite and PostgreSQL alike,
with no bucket column to store and no export to write and ship. The boundaries are group ids taken
in the database's own order (its collation decides, never Python's), so the scopes of a run cover
every group exactly once.

Key-range groups (``<parent>.keyrange.<lo>-<hi>``, domain/key_range_groups.py) plan as their
parent, so each goes to the scope that holds its parent's id: the scope excludes it from its own
range and the parent's scope includes it by name (the database says which scope a parent id falls in).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass

import sqlalchemy as sa
from rebalance_advisor_client.key_ranges import parse_range_group
from sqlalchemy.engine import Connection

from rebalance_advisor.store.models import CommittedOffsetRow, ConsumerGroupRow, SnapshotRow

#: committed offsets (about the partitions' count) a scope is cut at: big enough that the fixed
#: cost of a scope (a handful of indexed queries, one Python call) is small, small enough that an
#: executor holds one scope's rows easily and uneven groups spread over the cores
#: (bench/pipeline.py measures it)
ROWS_PER_SCOPE = 20_000

#: scopes per core at least, so a slow scope does not leave a core idle at the end
SCOPES_PER_CORE = 4


@dataclass(frozen=True)
class GroupScope:
    """Group ids in ``[low, high)`` (None: unbounded), except ``exclude``, plus ``include``."""

    low: str | None = None
    high: str | None = None
    include: tuple[str, ...] = ()
    exclude: tuple[str, ...] = ()

    def where(self, column: sa.ColumnElement) -> sa.ColumnElement[bool]:
        """The SQL condition "this row's group is in the scope" on ``column``."""
        bounds = []
        if self.low is not None:
            bounds.append(column >= self.low)
        if self.high is not None:
            bounds.append(column < self.high)
        if self.exclude:
            bounds.append(column.not_in(self.exclude))
        ranged = sa.and_(sa.true(), *bounds)
        return sa.or_(ranged, column.in_(self.include)) if self.include else ranged

    def to_row(self) -> dict[str, object]:
        """The scope as a Spark row's columns (lists of names as tuples of strings)."""
        return {
            "low": self.low,
            "high": self.high,
            "include": list(self.include),
            "exclude": list(self.exclude),
        }

    @classmethod
    def from_row(cls, row: dict[str, object]) -> GroupScope:
        return cls(row["low"], row["high"], tuple(row["include"] or ()), tuple(row["exclude"] or ()))  # type: ignore[arg-type]


def scoped(query: sa.Select, column: sa.ColumnElement, scope: GroupScope | None) -> sa.Select:
    """``query`` restricted to the groups of ``scope`` (None: every group)."""
    return query if scope is None else query.where(scope.where(column))


def planner_scopes(conn: Connection, snapshot_id: int, parallelism: int) -> list[GroupScope]:
    """The scopes one run of ``snapshot_id`` is cut into: ranges of about :data:`ROWS_PER_SCOPE`
    committed offsets, at least :data:`SCOPES_PER_CORE` per core, key-range groups with their parent.

    The driver streams the snapshot's group ids once (constant memory) and keeps only the boundaries.
    """
    s = SnapshotRow.__table__
    counts = conn.execute(
        sa.select(s.c.group_count, s.c.committed_count).where(s.c.id == snapshot_id)
    ).first()
    groups, committed = (counts or (0, 0))[0] or 0, (counts or (0, 0))[1] or 0
    if groups + committed == 0:
        return []
    wanted = max(SCOPES_PER_CORE * max(parallelism, 1), -(-committed // ROWS_PER_SCOPE))
    per_scope = max(1, -(-(groups + committed) // wanted))
    boundaries: list[str] = []
    derived: list[tuple[str, str]] = []
    weight = 0
    for group_id, rows in _group_weights(conn, snapshot_id):
        if weight >= per_scope:
            boundaries.append(group_id)
            weight = 0
        weight += 1 + rows
        if (parent := parse_range_group(group_id)) is not None:
            derived.append((group_id, parent[0]))
    edges: list[str | None] = [None, *boundaries, None]
    scopes = [GroupScope(lo, hi) for lo, hi in zip(edges, edges[1:], strict=False)]
    return _with_range_groups(conn, scopes, derived) if derived else scopes


def _group_weights(conn: Connection, snapshot_id: int) -> Iterator[tuple[str, int]]:
    """(group id, committed offsets) of every group of the snapshot, in the database's order."""
    g, c = ConsumerGroupRow.__table__, CommittedOffsetRow.__table__
    listed = sa.select(g.c.group_id, sa.literal(0).label("n")).where(g.c.snapshot_id == snapshot_id)
    committing = (
        sa.select(c.c.group_id, sa.func.count().label("n"))
        .where(c.c.snapshot_id == snapshot_id)
        .group_by(c.c.group_id)
    )
    both = sa.union_all(listed, committing).subquery()
    query = (
        sa.select(both.c.group_id, sa.func.sum(both.c.n)).group_by(both.c.group_id).order_by(both.c.group_id)
    )
    # streamed on the statement (a Connection's execution_options would change the connection itself)
    for group_id, rows in conn.execute(query.execution_options(stream_results=True, yield_per=5_000)):
        yield group_id, int(rows or 0)


def _with_range_groups(
    conn: Connection, scopes: list[GroupScope], derived: Sequence[tuple[str, str]]
) -> list[GroupScope]:
    """Each derived range group moved to the scope of its parent (module docstring)."""
    own = {d: _scope_of(conn, scopes, d) for d, _ in derived}
    home = {d: _scope_of(conn, scopes, parent) for d, parent in derived}
    out = []
    for i, scope in enumerate(scopes):
        include = tuple(sorted(d for d, at in home.items() if at == i and own[d] != i))
        exclude = tuple(sorted(d for d, at in own.items() if at == i and home[d] != i))
        out.append(GroupScope(scope.low, scope.high, include, exclude))
    return out


def _scope_of(conn: Connection, scopes: Sequence[GroupScope], group_id: str) -> int:
    """Index of the range holding ``group_id``, compared by the database (its collation)."""
    low, high = 0, len(scopes) - 1
    while low < high:  # binary search over the boundaries: few derived groups, few queries each
        mid = (low + high + 1) // 2
        boundary = scopes[mid].low
        if conn.execute(sa.select(sa.literal(group_id, sa.Text) >= sa.literal(boundary, sa.Text))).scalar():
            low = mid
        else:
            high = mid - 1
    return low
