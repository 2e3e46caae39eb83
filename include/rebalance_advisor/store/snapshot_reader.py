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


def raw_rows(conn: Connection, query: sa.Select) -> list[Any]:
    """Plain row tuples from the DBAPI cursor (no Row objects: millions of rows).

    Driver errors become the same clear :class:`~rebalance_advisor.store.db.DatabaseUnavailable`
    as :func:`rebalance_advisor.store.db.connect` raises (password hidden).
    """
    compiled = query.compile(dialect=conn.dialect)
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


def snapshot_tables_in(conn: Connection, snapshot_id: int) -> SnapshotTables:
    """:func:`read_snapshot_tables` inside the caller's transaction (the planner's one read)."""
    s = SnapshotRow.__table__
    found = conn.execute(
        sa.select(s.c.isolation_level, s.c.rates_note, s.c.rate_interval_s).where(s.c.id == snapshot_id)
    ).first()
    if found is None:
        raise AdvisorError(f"snapshot {snapshot_id} does not exist")
    isolation, rates_note, rate_interval_s = found
    stable = isolation == "read_committed"  # lags against the LSO (lag.lag_end_offset)
    p, g, m = PartitionOffsetRow.__table__, ConsumerGroupRow.__table__, GroupMemberRow.__table__
    a, c = MemberAssignmentRow.__table__, CommittedOffsetRow.__table__
    offsets = {}
    produce_rates = {}
    for topic, partition, start, end, lso, rate in raw_rows(
        conn,
        sa.select(p.c.topic, p.c.partition, p.c.log_start_offset, p.c.log_end_offset,
                  p.c.last_stable_offset, p.c.produce_rate)
        .where(p.c.snapshot_id == snapshot_id)
        .order_by(p.c.topic, p.c.partition),
    ):  # fmt: skip
        offsets[(topic, partition)] = (start, lso if stable and lso is not None else end)
        if rate is not None:
            produce_rates[(topic, partition)] = rate
    committed: dict[str, dict[tuple[str, int], int]] = {}
    time_lags: dict[tuple[str, str, int], TimeLag] = {}
    share_lags: dict[tuple[str, str, int], int | None] = {}
    for group_id, topic, partition, offset, seconds, method, share_lag in raw_rows(
        conn,
        sa.select(c.c.group_id, c.c.topic, c.c.partition, c.c.committed_offset, c.c.time_lag_s,
                  c.c.time_lag_method, c.c.share_lag)
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
    assignments: dict[tuple[str, str], list[tuple[str, int]]] = {}
    for group_id, member_id, topic, partition in raw_rows(
        conn,
        sa.select(a.c.group_id, a.c.member_id, a.c.topic, a.c.partition)
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
        sa.select(m.c.group_id, m.c.member_id, m.c.group_instance_id, m.c.subscribed_topics,
                  m.c.capacity, m.c.capacity_source, m.c.capacity_measured_at)
        .where(m.c.snapshot_id == snapshot_id)
        .order_by(m.c.group_id, m.c.position)
    )  # fmt: skip
    for group_id, member_id, instance_id, topics, capacity, source, measured_at in member_rows:
        if source is not None:
            capacities[(group_id, member_id)] = MemberCapacity(capacity, source, measured_at)
        members.setdefault(group_id, []).append(
            (
                member_id,
                instance_id,
                tuple(topics or ()),
                tuple(assignments.get((group_id, member_id), ())),
            )
        )
    ac = AssignedCapacityRow.__table__  # registered manual-assign members (store.snapshots)
    for group_id, member_id, capacity, source, measured_at in conn.execute(
        sa.select(ac.c.group_id, ac.c.member_id, ac.c.capacity, ac.c.capacity_source,
                  ac.c.capacity_measured_at).where(ac.c.snapshot_id == snapshot_id)
    ):  # fmt: skip
        capacities[(group_id, member_id)] = MemberCapacity(capacity, source, measured_at)
    group_types = conn.execute(
        sa.select(g.c.group_id, g.c.group_type).where(g.c.snapshot_id == snapshot_id)
    ).all()
    groups = {group_id: members.get(group_id, []) for group_id, _ in group_types}
    share_groups = frozenset(group_id for group_id, kind in group_types if kind == SHARE_GROUP_TYPE)
    return SnapshotTables(
        offsets=offsets,
        committed=committed,
        members=groups,
        produce_rates=produce_rates,
        capacities=capacities,
        time_lags=time_lags,
        rates_note=rates_note,
        rate_interval_s=rate_interval_s,
        share_groups=share_groups,
        share_lags=share_lags,
    )
