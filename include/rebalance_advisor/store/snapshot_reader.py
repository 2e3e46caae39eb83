"""The planner's snapshot reader: stored rows straight into :class:`SnapshotTables`.

Why not :func:`rebalance_advisor.store.snapshots.load_snapshot`: for 10,000 groups it builds about
two million dataclasses (a committed offset and an assignment pair per partition and group) and
goes through SQLAlchemy's mapping rows, which made reading most of the planner's run time. This
reader selects only the columns the documents need and fills plain dicts from the driver's row
tuples (with the rates, time lags and capacities stored with the snapshot);
:func:`~rebalance_advisor.domain.spec_documents.build_docs_from_tables` then builds the same
documents as :func:`~rebalance_advisor.domain.spec_documents.build_group_docs` on a loaded snapshot (the
lag rule stays :func:`rebalance_advisor.domain.lag.partition_lag`). Orders match ``load_snapshot``:
members by position, a member's assignment by (topic, partition).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from rebalance_advisor.domain.snapshot_model import SHARE_GROUP_TYPE, MemberCapacity, TimeLag
from rebalance_advisor.domain.spec_documents import SnapshotTables
from rebalance_advisor.errors import AdvisorError
from rebalance_advisor.store import db
from rebalance_advisor.store.models import (
    AssignedCapacityRow,
    CommittedOffsetRow,
    ConsumerGroupRow,
    GroupMemberRow,
    MemberAssignmentRow,
    PartitionOffsetRow,
    SnapshotRow,
)
from rebalance_advisor.store.planner_scope import GroupScope, scoped


def raw_rows(conn: Connection, query: sa.Select) -> list[Any]:
    """Plain row tuples from the DBAPI cursor (no Row objects: millions of rows).

    Driver errors become the same clear :class:`~rebalance_advisor.store.db.DatabaseUnavailable`
    as :func:`rebalance_advisor.store.db.connect` raises (password hidden).
    """
    compiled = query.compile(dialect=conn.dialect, compile_kwargs={"render_postcompile": True})
    params = compiled.construct_params()
    positional = compiled.positiontup
    try:
        cursor = conn.connection.cursor()
        try:
            if positional is not None:
                cursor.execute(str(compiled), tuple(params[name] for name in positional))
            else:
                cursor.execute(str(compiled), params)
            return cursor.fetchall()
        finally:
            cursor.close()
    except db.dbapi_errors(conn) as error:  # the raw cursor raises the driver's errors, not SQLAlchemy's
        raise db.unavailable(conn.engine.url, error) from error


def same_cluster(query: sa.Select, cluster_id: str | None, bootstrap_servers: str) -> sa.Select:
    """``query`` restricted to the snapshots of one cluster: by its cluster id when the snapshot
    has one, else by its bootstrap servers (``estimates.cluster_key``). Rates pair a snapshot with
    the newest earlier one of its cluster, so everything about that pair selects it this way."""
    s = SnapshotRow.__table__
    if cluster_id is not None:
        return query.where(s.c.cluster_id == cluster_id)
    return query.where(s.c.bootstrap_servers == bootstrap_servers)


def read_snapshot_tables(snapshot_id: int, url: str | None = None) -> SnapshotTables:
    """One stored snapshot's offsets, committed offsets and members; unknown ids raise AdvisorError."""
    with db.connect(url) as conn:
        return snapshot_tables_in(conn, snapshot_id)


def snapshot_tables_in(
    conn: Connection, snapshot_id: int, scope: GroupScope | None = None, extra_topics: Iterable[str] = ()
) -> SnapshotTables:
    """:func:`read_snapshot_tables` inside the caller's transaction (the planner's one read).

    With a ``scope`` (store/planner_scope.py), only its groups' rows, and the partitions of the
    topics they commit, hold, subscribe to, or ``extra_topics`` (registered members' and published
    plans' topics): what the scope's documents read, and the same values as an unscoped read.
    """
    s = SnapshotRow.__table__
    found = conn.execute(
        sa.select(s.c.isolation_level, s.c.rates_note, s.c.rate_interval_s).where(s.c.id == snapshot_id)
    ).first()
    if found is None:
        raise AdvisorError(f"snapshot {snapshot_id} does not exist")
    isolation, rates_note, rate_interval_s = found
    committed, time_lags, share_lags = _committed_in(conn, snapshot_id, scope)
    members, capacities = _members_in(conn, snapshot_id, scope)
    g = ConsumerGroupRow.__table__
    group_types = raw_rows(
        conn,
        scoped(
            sa.select(g.c.group_id, g.c.group_type).where(g.c.snapshot_id == snapshot_id), g.c.group_id, scope
        ),
    )
    topics = None
    if scope is not None:
        topics = {t for held in committed.values() for t, _ in held} | set(extra_topics)
        topics |= {t for listed in members.values() for m in listed for t in (*m[2], *(t for t, _ in m[3]))}
    # lags against the LSO under read_committed (lag.lag_end_offset)
    offsets, produce_rates = _offsets_in(conn, snapshot_id, isolation == "read_committed", topics)
    return SnapshotTables(
        offsets=offsets,
        committed=committed,
        members={group_id: members.get(group_id, []) for group_id, _ in group_types},
        produce_rates=produce_rates,
        capacities=capacities,
        time_lags=time_lags,
        rates_note=rates_note,
        rate_interval_s=rate_interval_s,
        share_groups=frozenset(group_id for group_id, kind in group_types if kind == SHARE_GROUP_TYPE),
        share_lags=share_lags,
    )


def _offsets_in(
    conn: Connection, snapshot_id: int, stable: bool, topics: set[str] | None
) -> tuple[dict[tuple[str, int], tuple[int | None, int | None]], dict[tuple[str, int], float]]:
    """(topic, partition) -> (log start, the end lags are against), and the known produce rates;
    of ``topics`` only when given (in chunks: an IN list has limits)."""
    p = PartitionOffsetRow.__table__
    query = sa.select(p.c.topic, p.c.partition, p.c.log_start_offset, p.c.log_end_offset,
                      p.c.last_stable_offset, p.c.produce_rate).where(p.c.snapshot_id == snapshot_id)  # fmt: skip
    if topics is None:
        queries = [query.order_by(p.c.topic, p.c.partition)]
    else:
        names = sorted(topics)
        queries = [query.where(p.c.topic.in_(names[i : i + 500])).order_by(p.c.topic, p.c.partition)
                   for i in range(0, len(names), 500)]  # fmt: skip
    offsets, produce_rates = {}, {}
    for chunk in queries:
        for topic, partition, start, end, lso, rate in raw_rows(conn, chunk):
            offsets[(topic, partition)] = (start, lso if stable and lso is not None else end)
            if rate is not None:
                produce_rates[(topic, partition)] = rate
    return offsets, produce_rates


def _committed_in(conn: Connection, snapshot_id: int, scope: GroupScope | None) -> tuple[dict, dict, dict]:
    """group -> {(topic, partition): committed offset}, the stored time lags and share lags."""
    c = CommittedOffsetRow.__table__
    committed: dict[str, dict[tuple[str, int], int]] = {}
    time_lags: dict[tuple[str, str, int], TimeLag] = {}
    share_lags: dict[tuple[str, str, int], int | None] = {}
    for group_id, topic, partition, offset, seconds, method, share_lag in raw_rows(
        conn,
        scoped(sa.select(c.c.group_id, c.c.topic, c.c.partition, c.c.committed_offset, c.c.time_lag_s,
                         c.c.time_lag_method, c.c.share_lag), c.c.group_id, scope)
        .where(c.c.snapshot_id == snapshot_id)
        .order_by(c.c.group_id, c.c.topic, c.c.partition),
    ):  # fmt: skip
        group = committed.get(group_id)
        if group is None:
            group = committed[group_id] = {}
        group[(topic, partition)] = offset
        if method is not None:
            time_lags[(group_id, topic, partition)] = TimeLag(seconds, method)
        if share_lag is not None:
            share_lags[(group_id, topic, partition)] = share_lag
    return committed, time_lags, share_lags


def _members_in(conn: Connection, snapshot_id: int, scope: GroupScope | None) -> tuple[dict, dict]:
    """group -> its members in the coordinator's order (id, instance id, topics, assignment), and the
    stored capacities of members and of registered manual-assign members."""
    m, a = GroupMemberRow.__table__, MemberAssignmentRow.__table__
    assignments: dict[tuple[str, str], list[tuple[str, int]]] = {}
    for group_id, member_id, topic, partition in raw_rows(
        conn,
        scoped(sa.select(a.c.group_id, a.c.member_id, a.c.topic, a.c.partition), a.c.group_id, scope)
        .where(a.c.snapshot_id == snapshot_id)
        .order_by(a.c.group_id, a.c.member_id, a.c.topic, a.c.partition),
    ):
        key = (group_id, member_id)
        held = assignments.get(key)
        if held is None:
            held = assignments[key] = []
        held.append((topic, partition))
    members: dict[str, list[tuple[str, str | None, tuple[str, ...], tuple[tuple[str, int], ...]]]] = {}
    capacities: dict[tuple[str, str], MemberCapacity] = {}
    # SQLAlchemy rows here: few (one per member) and the JSON column needs its type's decoding.
    member_rows = conn.execute(
        scoped(sa.select(m.c.group_id, m.c.member_id, m.c.group_instance_id, m.c.subscribed_topics,
                         m.c.capacity, m.c.capacity_source, m.c.capacity_measured_at), m.c.group_id, scope)
        .where(m.c.snapshot_id == snapshot_id)
        .order_by(m.c.group_id, m.c.position)
    )  # fmt: skip
    for group_id, member_id, instance_id, topics, capacity, source, measured_at in member_rows:
        if source is not None:
            capacities[(group_id, member_id)] = MemberCapacity(capacity, source, measured_at)
        held = tuple(assignments.get((group_id, member_id), ()))
        members.setdefault(group_id, []).append((member_id, instance_id, tuple(topics or ()), held))
    ac = AssignedCapacityRow.__table__  # registered manual-assign members (store.snapshots)
    for group_id, member_id, capacity, source, measured_at in conn.execute(
        scoped(sa.select(ac.c.group_id, ac.c.member_id, ac.c.capacity, ac.c.capacity_source,
                         ac.c.capacity_measured_at), ac.c.group_id, scope).where(ac.c.snapshot_id == snapshot_id)
    ):  # fmt: skip
        capacities[(group_id, member_id)] = MemberCapacity(capacity, source, measured_at)
    return members, capacities
