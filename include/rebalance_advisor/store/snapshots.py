"""Write, load and prune snapshots. A snapshot is written in one transaction: all rows or none."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

import sqlalchemy as sa
from sqlalchemy.engine import Connection, RowMapping

from rebalance_advisor.domain.estimates import (
    CapacityPolicy,
    Carried,
    CarriedCapacity,
    CarriedPerMember,
    RateParameters,
    cluster_key,
    member_key,
    observe_snapshot,
    step,
)
from rebalance_advisor.domain.lag import time_lags
from rebalance_advisor.domain.snapshot_model import (
    MEASURED_CAPACITY_SOURCES,
    CommittedOffset,
    Group,
    GroupMemberSnapshot,
    MemberCapacity,
    PartitionOffsets,
    ProvenRate,
    RateEstimate,
    Snapshot,
    SnapshotError,
    SnapshotRates,
    TimeLag,
)
from rebalance_advisor.domain.telemetry import TelemetryReadings, TelemetryReference
from rebalance_advisor.domain.timestamps import assume_utc as _aware
from rebalance_advisor.errors import AdvisorError
from rebalance_advisor.gcpause import gc_paused
from rebalance_advisor.store import db
from rebalance_advisor.store.id_limits import drop_unstorable_groups, member_storage_key
from rebalance_advisor.store.models import (
    SNAPSHOT_CHILDREN,
    AssignedCapacityRow,
    CommittedOffsetRow,
    ConsumerGroupRow,
    GroupMemberRow,
    MemberAssignmentRow,
    PartitionOffsetRow,
    ShareUnstartedRow,
    SnapshotErrorRow,
    SnapshotRow,
    StaticMemberRow,
)
from rebalance_advisor.store.plan_models import PlanAssignment
from rebalance_advisor.store.plans import published_plans
from rebalance_advisor.store.snapshot_reader import raw_rows, same_cluster

#: Rows per INSERT statement on the generic Core path (dialects other than SQLite and PostgreSQL).
CHUNK = 2000


def _insert(conn: Connection, model: type, rows: list[dict]) -> None:
    table = model.__table__
    for start in range(0, len(rows), CHUNK):
        conn.execute(sa.insert(table), rows[start : start + CHUNK])


def _insert_tuples(conn: Connection, model: type, columns: tuple[str, ...], rows: list[tuple]) -> None:
    """Bulk insert of plain (int/str/None) values, each row a tuple in ``columns`` order.

    Core's executemany builds and type-processes a parameter dict per row, which cost more than
    SQLite's own insert work at 100,000 rows. Here SQLite gets the tuples straight through the
    driver's ``executemany`` and PostgreSQL gets them by ``COPY`` (psycopg 3), on the same
    connection and so in the same transaction; other dialects take the Core path. Only for
    columns whose types need no bind processing (integers, strings, NULL) - the stored values are
    the ones Core would store.
    """
    if not rows:
        return
    table = model.__table__
    dialect = conn.dialect
    quote = dialect.identifier_preparer.quote
    names = ", ".join(quote(table.c[c].name) for c in columns)
    target = f"{dialect.identifier_preparer.format_table(table)} ({names})"
    if dialect.name == "postgresql" and dialect.driver == "psycopg":
        statement = f"COPY {target} FROM STDIN"
        try:
            with conn.connection.driver_connection.cursor() as cursor, cursor.copy(statement) as copy:
                write = copy.write_row
                for row in rows:
                    write(row)
        except dialect.loaded_dbapi.Error as error:  # as Core raises it: IntegrityError etc.
            raise sa.exc.DBAPIError.instance(statement, None, error, dialect.loaded_dbapi.Error) from error
        return
    if dialect.name == "sqlite":
        marks = ", ".join("?" * len(columns))
        conn.exec_driver_sql(f"INSERT INTO {target} VALUES ({marks})", rows)
        return
    _insert(conn, model, [dict(zip(columns, row, strict=True)) for row in rows])


def _delete_snapshots(conn: Connection, ids: list[int]) -> None:
    if not ids:
        return
    for model in SNAPSHOT_CHILDREN:
        conn.execute(sa.delete(model.__table__).where(model.__table__.c.snapshot_id.in_(ids)))
    conn.execute(sa.delete(SnapshotRow.__table__).where(SnapshotRow.__table__.c.id.in_(ids)))


#: group -> (published plan id, registered member -> the partitions that plan gave it)
ManualAssignPlans = dict[str, tuple[int, dict[str, list[tuple[str, int]]]]]


def _manual_assign_plans(conn: Connection, snapshot: Snapshot) -> ManualAssignPlans:
    """Registered manual-assign groups the snapshot lists without members, with a published plan.

    Why: ``assign()`` consumers do not show in DescribeGroups; what they own is their latest published
    plan (``plans.published_assignments``, as the planner reads it), so their capacities are measured
    against it. Members no longer registered drop out; registered members the plan left out own nothing.
    """
    listed = {g.group_id for g in snapshot.groups if g.members}
    registered: dict[str, set[str]] = {}
    for group_id, member_id in conn.execute(sa.select(StaticMemberRow.group_id, StaticMemberRow.member_id)):
        registered.setdefault(group_id, set()).add(member_id)
    out: ManualAssignPlans = {}
    for group_id, (plan_id, owners) in published_plans(conn).items():
        if group_id in listed or group_id not in registered:
            continue
        out[group_id] = (plan_id, {m: list(owners.get(m, ())) for m in sorted(registered[group_id])})
    return out


def load_carried(
    conn: Connection,
    cluster_id: str | None,
    bootstrap_servers: str,
    manual: ManualAssignPlans | None = None,
    before_id: int | None = None,
) -> Carried | None:
    """What the advisor carries from the newest stored snapshot of a cluster (before ``before_id``,
    when given), or None when there is none: ``estimates.step`` pairs the next snapshot with it.

    Only that one snapshot is read (its offsets, stored rates, owners, capacities and the groups'
    arrivals evidence): rates are
    carried forward snapshot by snapshot, never recomputed from older ones. A manual-assign group
    (``manual``: the plans published now) gets as owners those of the plan the stored snapshot
    measured against: a plan published since moved some partitions, and only members whose
    partitions it left unchanged are measured over the interval.
    """
    head = _previous_head(conn, cluster_id, bootstrap_servers, before_id)
    if head is None:
        return None
    snapshot_id, taken_at, isolation = head
    log_ends, lag_ends, produce = _carried_offsets(conn, snapshot_id, isolation)
    committed, consume = _carried_committed(conn, snapshot_id)
    owners, capacities, kept = _carried_members(conn, snapshot_id)
    plans, assigned_capacities, assigned_proven = _carried_assigned(conn, snapshot_id)
    capacities.update(assigned_capacities)
    owners.update(_plan_owners(conn, plans, manual or {}))
    g = ConsumerGroupRow.__table__
    arrivals = conn.execute(
        sa.select(g.c.group_id, g.c.arrivals_evidence).where(
            g.c.snapshot_id == snapshot_id, g.c.arrivals_evidence.is_not(None)
        )
    )
    return Carried(
        cluster=cluster_key(cluster_id, bootstrap_servers),
        taken_at=_aware(taken_at),
        log_ends=log_ends,
        lag_ends=lag_ends,
        produce=produce,
        committed=committed,
        consume=consume,
        owners=owners,
        capacities=capacities,
        arrivals_evidence={group_id: value for group_id, value in arrivals},
        telemetry_references=kept.references,
        proven_rates={**kept.proven, **assigned_proven},
        snapshot_id=snapshot_id,
    )


def _previous_head(
    conn: Connection, cluster_id: str | None, bootstrap_servers: str, before_id: int | None
) -> tuple[int, datetime, str] | None:
    """(id, taken_at, isolation level) of the newest stored snapshot of the cluster (:func:`same_cluster`)."""
    s = SnapshotRow.__table__
    query = same_cluster(sa.select(s.c.id, s.c.taken_at, s.c.isolation_level), cluster_id, bootstrap_servers)
    if before_id is not None:
        query = query.where(s.c.id < before_id)
    row = conn.execute(query.order_by(s.c.id.desc()).limit(1)).first()
    return None if row is None else (row[0], row[1], row[2])


def _carried_offsets(conn: Connection, snapshot_id: int, isolation: str) -> tuple[dict, dict, dict]:
    """(topic, partition) -> log end, the end lags were against, the stored produce rate."""
    p = PartitionOffsetRow.__table__
    log_ends, lag_ends, produce = {}, {}, {}
    for topic, partition, end, stable, rate in raw_rows(
        conn,
        sa.select(
            p.c.topic, p.c.partition, p.c.log_end_offset, p.c.last_stable_offset, p.c.produce_rate
        ).where(p.c.snapshot_id == snapshot_id),
    ):
        log_ends[(topic, partition)] = end
        lag_ends[(topic, partition)] = stable if isolation == "read_committed" and stable is not None else end
        produce[(topic, partition)] = rate
    return log_ends, lag_ends, produce


def _carried_committed(conn: Connection, snapshot_id: int) -> tuple[dict, dict]:
    """(group, topic, partition) -> committed offset, stored consume rate."""
    c = CommittedOffsetRow.__table__
    committed, consume = {}, {}
    for group_id, topic, partition, offset, rate in raw_rows(
        conn,
        sa.select(c.c.group_id, c.c.topic, c.c.partition, c.c.committed_offset, c.c.consume_rate).where(
            c.c.snapshot_id == snapshot_id
        ),
    ):
        committed[(group_id, topic, partition)] = offset
        consume[(group_id, topic, partition)] = rate
    return committed, consume


def _carried_members(
    conn: Connection, snapshot_id: int
) -> tuple[dict[tuple[str, str, int], str], dict[tuple[str, str], CarriedCapacity], CarriedPerMember]:
    """Owners by member key, the measured capacities, and the telemetry references and proven rates
    of the members the broker listed."""
    m, a = GroupMemberRow.__table__, MemberAssignmentRow.__table__
    keys: dict[tuple[str, str], str] = {}
    capacities: dict[tuple[str, str], CarriedCapacity] = {}
    references: dict[tuple[str, str], TelemetryReference] = {}
    proven_rates: dict[tuple[str, str], ProvenRate] = {}
    for (group_id, member_id, full_id, instance_id, capacity, source, measured_at, consumed, random,
         steady, proven, proven_at, count) in conn.execute(
        sa.select(m.c.group_id, m.c.member_id, m.c.member_id_full, m.c.group_instance_id, m.c.capacity,
                  m.c.capacity_source, m.c.capacity_measured_at, m.c.telemetry_reference_consumed,
                  m.c.telemetry_reference_random, m.c.telemetry_reference_steady, m.c.proven_rate,
                  m.c.proven_rate_at, m.c.capacity_sample_count)
        .where(m.c.snapshot_id == snapshot_id)
    ):  # fmt: skip
        # the whole id, as the next snapshot's members carry it (store/id_limits.py)
        key = keys[(group_id, member_id)] = member_key(full_id or member_id, instance_id)
        if (carried := _stored_capacity(capacity, source, measured_at, count)) is not None:
            capacities[(group_id, key)] = carried
        if (reference := _stored_reference(consumed, random, steady)) is not None:
            references[(group_id, key)] = reference
        if (rate := _stored_proven(proven, proven_at)) is not None:
            proven_rates[(group_id, key)] = rate
    owners = {
        (group_id, topic, partition): keys.get((group_id, member_id), member_id)
        for group_id, member_id, topic, partition in raw_rows(
            conn,
            sa.select(a.c.group_id, a.c.member_id, a.c.topic, a.c.partition).where(
                a.c.snapshot_id == snapshot_id
            ),
        )
    }
    return owners, capacities, CarriedPerMember(references, proven_rates)


def _carried_assigned(
    conn: Connection, snapshot_id: int
) -> tuple[dict[str, int], dict[tuple[str, str], CarriedCapacity], dict[tuple[str, str], ProvenRate]]:
    """Of the registered manual-assign members: group -> the plan they were measured against, their
    measured capacities and their proven rates."""
    ac = AssignedCapacityRow.__table__
    plans: dict[str, int] = {}
    capacities: dict[tuple[str, str], CarriedCapacity] = {}
    proven: dict[tuple[str, str], ProvenRate] = {}
    for group_id, member_id, plan_id, capacity, source, measured_at, rate, rate_at, count in conn.execute(
        sa.select(ac.c.group_id, ac.c.member_id, ac.c.plan_id, ac.c.capacity, ac.c.capacity_source,
                  ac.c.capacity_measured_at, ac.c.proven_rate, ac.c.proven_rate_at,
                  ac.c.capacity_sample_count)
        .where(ac.c.snapshot_id == snapshot_id)
    ):  # fmt: skip
        plans[group_id] = plan_id
        if (carried := _stored_capacity(capacity, source, measured_at, count)) is not None:
            capacities[(group_id, member_id)] = carried
        if (stored := _stored_proven(rate, rate_at)) is not None:
            proven[(group_id, member_id)] = stored
    return plans, capacities, proven


def _plan_owners(
    conn: Connection, plans: dict[str, int], manual: ManualAssignPlans
) -> dict[tuple[str, str, int], str]:
    """The owners of manual-assign groups: those of the plan the stored snapshot measured against. A
    member whose partitions a newer plan left unchanged held them over the whole interval, so it is
    measured too (one that gained or lost a partition is not: ``estimates.step`` checks owners and
    counts)."""
    owners: dict[tuple[str, str, int], str] = {}
    older = {g: plans[g] for g, (plan_id, _) in manual.items() if plans.get(g, plan_id) != plan_id}
    if older:
        pa = PlanAssignment.__table__
        for plan_id, member_id, topic, partition in conn.execute(
            sa.select(pa.c.plan_id, pa.c.member_id, pa.c.topic, pa.c.partition).where(
                pa.c.plan_id.in_(sorted(set(older.values()))), pa.c.key_hash_start.is_(None)
            ),
        ):
            for group_id in (g for g, i in older.items() if i == plan_id):
                owners[(group_id, topic, partition)] = member_id
    for group_id, (plan_id, held) in manual.items():
        if plans.get(group_id) == plan_id:
            owners.update(((group_id, t, p), member) for member, parts in held.items() for t, p in parts)
    return owners


def write_snapshot(
    snapshot: Snapshot,
    url: str | None = None,
    airflow_run_id: str | None = None,
    *,
    rate_parameters: RateParameters | None = None,
    capacities: CapacityPolicy | None = None,
) -> int:
    """Store ``snapshot`` with its rates, time lags and capacities in one transaction; return its id.

    The rates come from the previous stored snapshot of the same cluster
    (:func:`load_carried`, :func:`rebalance_advisor.domain.estimates.step`), read in the same transaction, so a
    failure anywhere leaves nothing behind. With an ``airflow_run_id`` (or one set on the snapshot),
    a snapshot stored earlier by the same run is replaced in the same transaction, so a re-run never
    duplicates (and the replaced attempt is not its own predecessor).
    """
    run_id = airflow_run_id or snapshot.airflow_run_id
    drop_unstorable_groups(snapshot)
    db.require_schema(url, to_write=True)
    with gc_paused(), db.connect(url) as conn:
        if run_id is not None:
            previous = conn.execute(sa.select(SnapshotRow.id).where(SnapshotRow.airflow_run_id == run_id))
            _delete_snapshots(conn, list(previous.scalars()))
        manual = _manual_assign_plans(conn, snapshot)
        rates = _rates_of(conn, snapshot, manual, rate_parameters, capacities)
        snapshot_id = _insert_head(conn, snapshot, run_id, rates)
        _insert_partitions(conn, snapshot_id, snapshot, rates)
        _insert_groups(conn, snapshot_id, snapshot, rates)
        _insert_assigned_capacities(conn, snapshot_id, manual, rates)
        _insert_committed(conn, snapshot_id, snapshot, rates)
        _insert_errors(conn, snapshot_id, snapshot)
    snapshot.snapshot_id = snapshot_id
    snapshot.airflow_run_id = run_id
    snapshot.rates = rates
    return snapshot_id


def detach_run_id(snapshot_id: int, url: str | None = None) -> None:
    """Clear a stored snapshot's Airflow run id: the run's own snapshot is a later pass
    (``services.snapshot_service``), and a retry of the run must not replace this one."""
    with db.connect(url) as conn:
        conn.execute(sa.update(SnapshotRow).where(SnapshotRow.id == snapshot_id).values(airflow_run_id=None))


def _rates_of(
    conn: Connection,
    snapshot: Snapshot,
    manual: ManualAssignPlans,
    rate_parameters: RateParameters | None,
    capacities: CapacityPolicy | None,
) -> SnapshotRates:
    """The snapshot's rates, capacities and time lags: one ``estimates.step`` from what the newest
    stored snapshot of the same cluster carried, read on the writing transaction (docs/architecture.md,
    "What the advisor knows between snapshots")."""
    carried = load_carried(conn, snapshot.cluster_id, snapshot.bootstrap_servers, manual)
    assigned = {group_id: held for group_id, (_, held) in manual.items()}
    observed = observe_snapshot(snapshot, carried, rate_parameters, capacities, assigned)
    rates, _ = step(carried, observed, rate_parameters)
    rates.time_lag = time_lags(snapshot, rates.produce)
    return rates


def _insert_head(conn: Connection, snapshot: Snapshot, run_id: str | None, rates: SnapshotRates) -> int:
    """The ``snapshots`` row (counts, the rate interval); its id keys every other row."""
    return conn.execute(
        sa.insert(SnapshotRow.__table__).returning(SnapshotRow.__table__.c.id),
        {
            "taken_at": snapshot.taken_at,
            "cluster_id": snapshot.cluster_id,
            "bootstrap_servers": snapshot.bootstrap_servers,
            "duration_s": snapshot.duration_s,
            "status": snapshot.status,
            "isolation_level": snapshot.isolation_level,
            "group_count": len(snapshot.groups),
            "member_count": snapshot.member_count,
            "partition_count": len(snapshot.partitions),
            "committed_count": len(snapshot.committed),
            "error_count": len(snapshot.errors),
            "airflow_run_id": run_id,
            "rates_note": rates.note,
            "rate_interval_s": rates.interval_s,
        },
    ).scalar_one()


#: what a row stores where the snapshot knows no rate, time lag or capacity
_UNKNOWN_RATE = RateEstimate(None, None)
_NO_TIME_LAG = TimeLag(None, None)
_EQUAL = MemberCapacity(None, "equal")


def _insert_partitions(conn: Connection, snapshot_id: int, snapshot: Snapshot, rates: SnapshotRates) -> None:
    """``partition_offsets``: each partition's offsets with its produce rate."""
    produce = rates.produce
    _insert_tuples(
        conn,
        PartitionOffsetRow,
        ("snapshot_id", "topic", "partition", "log_start_offset", "log_end_offset",
         "last_stable_offset", "leader", "produce_rate", "produce_rate_unknown"),
        [(snapshot_id, p.topic, p.partition, p.log_start_offset, p.log_end_offset,
          p.last_stable_offset, p.leader,
          *produce.get((p.topic, p.partition), _UNKNOWN_RATE))
         for p in snapshot.partitions],
    )  # fmt: skip


def _insert_groups(conn: Connection, snapshot_id: int, snapshot: Snapshot, rates: SnapshotRates) -> None:
    """``consumer_groups``, ``group_members`` (with their capacities) and ``member_assignments``."""
    _insert_tuples(
        conn,
        ConsumerGroupRow,
        ("snapshot_id", "group_id", "state", "group_type", "assignor", "coordinator_id",
         "coordinator_host", "member_count", "arrivals_evidence"),
        [(snapshot_id, g.group_id, g.state, g.group_type, g.assignor, g.coordinator_id,
          g.coordinator_host, g.member_count, rates.arrivals_evidence.get(g.group_id))
         for g in snapshot.groups],
    )  # fmt: skip
    _insert(  # subscribed_topics is JSON and capacity_measured_at a datetime: Core converts them
        conn,
        GroupMemberRow,
        [
            {"snapshot_id": snapshot_id, "group_id": g.group_id, "member_id": stored_key,
             "member_id_full": None if stored_key == m.member_id else m.member_id, "position": m.position, "group_instance_id": m.group_instance_id, "client_id": m.client_id,
             "host": m.host, "rack": m.rack, "subscribed_topics": list(m.subscribed_topics),
             **_capacity_columns(rates.capacity.get((g.group_id, m.member_id), _EQUAL))}
            for g in snapshot.groups
            for m in g.members
            for stored_key in (member_storage_key(m.member_id),)  # store/id_limits.py
        ],
    )  # fmt: skip
    _insert_tuples(
        conn,
        MemberAssignmentRow,
        ("snapshot_id", "group_id", "member_id", "topic", "partition"),
        [(snapshot_id, g.group_id, member_storage_key(m.member_id), t, p) for g in snapshot.groups
         for m in g.members for t, p in m.assignment],
    )  # fmt: skip


#: the columns of ``assigned_capacities`` that :func:`_capacity_columns` fills
_ASSIGNED_CAPACITY_COLUMNS = (
    "capacity",
    "capacity_source",
    "capacity_measured_at",
    "proven_rate",
    "proven_rate_at",
    "capacity_sample_count",
)


def _capacity_columns(capacity: MemberCapacity) -> dict[str, object]:
    """A member's capacity as its ``group_members`` columns, its telemetry reference in three, its
    proven rate in two and its capacity sample count."""
    reference = capacity.telemetry_reference
    readings = reference.readings if reference is not None else None
    return {
        "capacity": capacity.capacity,
        "capacity_source": capacity.source,
        "capacity_measured_at": capacity.measured_at,
        "capacity_note": capacity.note,
        "telemetry_reference_consumed": reference.consumed if reference is not None else None,
        "telemetry_reference_random": readings.random if readings is not None else None,
        "telemetry_reference_steady": readings.steady if readings is not None else None,
        "proven_rate": capacity.proven_rate.value if capacity.proven_rate is not None else None,
        "proven_rate_at": capacity.proven_rate.at if capacity.proven_rate is not None else None,
        "capacity_sample_count": capacity.sample_count,
    }


def _stored_proven(value: float | None, at: datetime | None) -> ProvenRate | None:
    """The proven rate of a member's two stored columns; None when either is NULL."""
    return None if value is None or at is None else ProvenRate(value, _aware(at))


def _stored_capacity(
    capacity: float | None, source: str | None, measured_at: datetime | None, count: int | None
) -> CarriedCapacity | None:
    """The carried capacity of a member's stored capacity columns (group member or registered
    manual-assign member alike); None unless it was measured (a source of
    ``MEASURED_CAPACITY_SOURCES``, with its value and time)."""
    if source not in MEASURED_CAPACITY_SOURCES or capacity is None or measured_at is None:
        return None
    return CarriedCapacity(capacity, _aware(measured_at), source, _stored_count(count))


def _stored_count(count: int | None) -> int | None:
    """A capacity's stored sample count; None (settled) unless it is a count of at least one."""
    return count if isinstance(count, int) and count >= 1 else None


def _stored_reference(
    consumed: float | None, random: float | None, steady: float | None
) -> TelemetryReference | None:
    """The telemetry reference of a member's three stored columns; None when any is NULL."""
    if consumed is None or random is None or steady is None:
        return None
    return TelemetryReference(consumed, TelemetryReadings(random, steady))


def _insert_assigned_capacities(
    conn: Connection, snapshot_id: int, manual: ManualAssignPlans, rates: SnapshotRates
) -> None:
    """``assigned_capacities``: the registered manual-assign members' capacities, with the plan they
    were measured against. Not ``group_members`` rows: the broker lists no members for these groups
    (store/models.py)."""
    _insert(
        conn,
        AssignedCapacityRow,
        [
            {"snapshot_id": snapshot_id, "group_id": group_id, "member_id": member_id, "plan_id": plan_id,
             **{k: v for k, v in _capacity_columns(rates.capacity.get((group_id, member_id), _EQUAL)).items()
                if k in _ASSIGNED_CAPACITY_COLUMNS}}
            for group_id, (plan_id, held) in manual.items()
            for member_id in held
        ],
    )  # fmt: skip


def _insert_committed(conn: Connection, snapshot_id: int, snapshot: Snapshot, rates: SnapshotRates) -> None:
    """``committed_offsets``: each committed offset with its consume rate, record timestamp, time lag
    and share lag (the biggest table: 300,000 rows for a large fleet)."""
    consume, time_lag, stamps = rates.consume, rates.time_lag, snapshot.record_timestamps
    share = snapshot.share_lags
    _insert_tuples(
        conn,
        CommittedOffsetRow,
        ("snapshot_id", "group_id", "topic", "partition", "committed_offset", "leader_epoch",
         "metadata", "consume_rate", "consume_rate_unknown", "record_timestamp_ms", "time_lag_s",
         "time_lag_method", "share_lag"),
        # *c is (group_id, topic, partition, offset, leader_epoch, metadata) and c[:3] its key:
        # at 300,000 offsets, attribute reads and a key built field by field cost seconds
        [(snapshot_id, *c, *consume.get(key, _UNKNOWN_RATE), stamps.get(key),
          *time_lag.get(key, _NO_TIME_LAG), share.get(key) if share else None)
         for c in snapshot.committed
         for key in (c[:3],)],
    )  # fmt: skip


def _insert_errors(conn: Connection, snapshot_id: int, snapshot: Snapshot) -> None:
    """``snapshot_errors``: what the pass could not read, and why; and ``share_unstarted_partitions``,
    the share groups' partitions without a start offset yet."""
    _insert_tuples(
        conn,
        ShareUnstartedRow,
        ("snapshot_id", "group_id", "topic", "partition"),
        [(snapshot_id, *key) for key in snapshot.share_unstarted],
    )
    _insert_tuples(
        conn,
        SnapshotErrorRow,
        ("snapshot_id", "stage", "group_id", "topic", "partition", "error_code", "reason"),
        [(snapshot_id, e.stage, e.group_id, e.topic, e.partition, e.error_code, e.reason)
         for e in snapshot.errors],
    )  # fmt: skip


def stored_snapshot_after(after_id: int, bootstrap_servers: str, url: str | None = None) -> int | None:
    """The newest snapshot of ``bootstrap_servers`` stored with an id above ``after_id``, or None.

    For an interrupted snapshot command: a Ctrl-C that lands just after the commit leaves the caller
    without the id although every row is stored.
    """
    s = SnapshotRow.__table__
    with db.connect(url) as conn:
        return conn.execute(
            sa.select(sa.func.max(s.c.id)).where(
                s.c.id > after_id, s.c.bootstrap_servers == bootstrap_servers
            )
        ).scalar_one_or_none()


def latest_snapshot_id(url: str | None = None) -> int | None:
    """The newest stored snapshot (highest id), or None when there is none."""
    with db.connect(url) as conn:
        return conn.execute(sa.select(sa.func.max(SnapshotRow.id))).scalar_one_or_none()


@dataclass(frozen=True)
class SnapshotHead:
    """What a page says about a stored snapshot: its id, when it was taken, complete or partial."""

    id: int
    taken_at: datetime
    status: str


@dataclass(frozen=True)
class GroupHead:
    """A group as one snapshot saw it, without members or offsets."""

    group_id: str
    state: str
    group_type: str
    assignor: str | None
    member_count: int


def latest_snapshot_row(conn: Connection) -> SnapshotHead | None:
    """The newest snapshot's id, time and status, or None when there is none."""
    s = SnapshotRow
    row = conn.execute(sa.select(s.id, s.taken_at, s.status).order_by(s.id.desc()).limit(1)).first()
    return SnapshotHead(*row) if row is not None else None


def snapshot_group_rows(conn: Connection, snapshot_id: int) -> list[GroupHead]:
    """The groups (``consumer_groups`` rows) of one snapshot."""
    g = ConsumerGroupRow
    rows = conn.execute(
        sa.select(g.group_id, g.state, g.group_type, g.assignor, g.member_count).where(
            g.snapshot_id == snapshot_id
        )
    )
    return [GroupHead(*r) for r in rows]


def newest_snapshot_id_of_group(conn: Connection, group_id: str) -> int | None:
    """The newest stored snapshot that holds the group, or None."""
    return conn.execute(
        sa.select(sa.func.max(ConsumerGroupRow.snapshot_id)).where(ConsumerGroupRow.group_id == group_id)
    ).scalar()


#: The largest id a snapshot can have: ``snapshots.id`` is ``sa.Integer``, a 32-bit column on
#: PostgreSQL (a larger number in a query fails there with NumericValueOutOfRange).
SQL_ID_MAX = 2**31 - 1


def resolve_snapshot_id(ref: str | int | None, url: str | None = None) -> int:
    """``latest``/None or a number to an existing snapshot id; a clear error otherwise."""
    with db.connect(url) as conn:
        return snapshot_id_in(conn, ref)


def snapshot_id_in(conn: Connection, ref: str | int | None) -> int:
    """:func:`resolve_snapshot_id` inside the caller's transaction."""
    if ref is None or str(ref).strip().lower() == "latest":
        found = conn.execute(sa.select(sa.func.max(SnapshotRow.id))).scalar_one_or_none()
        if found is None:
            raise AdvisorError("no snapshot stored yet: take one with `rebalance-advisor snapshot`")
        return found
    try:
        wanted = int(ref)
    except ValueError as error:
        raise AdvisorError(f"--snapshot must be a number or 'latest', not {ref!r}") from error
    if not 1 <= wanted <= SQL_ID_MAX:  # also: a larger number does not fit the id column's type
        raise AdvisorError(f"snapshot {wanted} does not exist (snapshot ids run from 1 to {SQL_ID_MAX})")
    if conn.execute(sa.select(SnapshotRow.id).where(SnapshotRow.id == wanted)).first() is None:
        raise AdvisorError(f"snapshot {wanted} does not exist (pruned, or never taken)")
    return wanted


def load_snapshot(snapshot_id: int, url: str | None = None, groups: list[str] | None = None) -> Snapshot:
    """One stored snapshot back as the in-memory :class:`Snapshot` (optionally only some groups).

    With ``groups``, only their rows, and only the partitions of the topics they subscribe to or
    committed on."""
    with db.connect(url) as conn:
        row = conn.execute(sa.select(SnapshotRow).where(SnapshotRow.id == snapshot_id)).mappings().first()
        if row is None:
            raise AdvisorError(f"snapshot {snapshot_id} does not exist")
        rows = _table_reader(conn, snapshot_id, groups)
        rates = SnapshotRates(note=row["rates_note"], interval_s=row["rate_interval_s"])
        loaded_groups = _load_groups(rows, rates)
        committed, stamps, share_lags = _load_committed(rows, rates)
        topics = None
        if groups is not None:
            topics = {t for g in loaded_groups for m in g.members for t in m.subscribed_topics}
            topics |= {c.topic for c in committed}
        partitions = _load_partitions(rows, rates, topics)
        errors = [
            SnapshotError(e["stage"], e["reason"], e["group_id"], e["topic"], e["partition"], e["error_code"])
            for e in rows(SnapshotErrorRow, "id")
        ]
        unstarted = [
            (u["group_id"], u["topic"], u["partition"])
            for u in rows(ShareUnstartedRow, "group_id", "topic", "partition")
        ]
    return Snapshot(
        taken_at=_aware(row["taken_at"]),
        bootstrap_servers=row["bootstrap_servers"],
        cluster_id=row["cluster_id"],
        duration_s=row["duration_s"],
        groups=loaded_groups,
        committed=committed,
        partitions=partitions,
        errors=errors,
        isolation_level=row["isolation_level"],
        snapshot_id=row["id"],
        airflow_run_id=row["airflow_run_id"],
        record_timestamps=stamps,
        rates=rates,
        share_lags=share_lags,
        share_unstarted=unstarted,
    )


#: the rows of one snapshot table, ordered by the named columns (:func:`_table_reader`)
_Rows = Callable[..., Sequence[RowMapping]]


def _table_reader(conn: Connection, snapshot_id: int, groups: list[str] | None) -> _Rows:
    """Reads one snapshot's rows of a table, only ``groups``' where the table has a group id."""

    def rows(model: type, *order: str) -> Sequence[RowMapping]:
        table = model.__table__
        query = sa.select(table).where(table.c.snapshot_id == snapshot_id)
        if groups is not None and "group_id" in table.c:
            query = query.where(table.c.group_id.in_(groups))
        return conn.execute(query.order_by(*(table.c[o] for o in order))).mappings().all()

    return rows


def _load_groups(rows: _Rows, rates: SnapshotRates) -> list[Group]:
    """The groups by id, each with its members (:func:`_load_members`)."""
    members = _load_members(rows, rates)
    return [
        Group(g["group_id"], g["state"], g["group_type"], g["assignor"], g["coordinator_id"],
              g["coordinator_host"], tuple(members.get(g["group_id"], ())))
        for g in rows(ConsumerGroupRow, "group_id")
    ]  # fmt: skip


def _load_members(rows: _Rows, rates: SnapshotRates) -> dict[str, list[GroupMemberSnapshot]]:
    """group -> its members by position, each with its assignment; their capacities, and those of the
    registered manual-assign members, go into ``rates``."""
    assignments: dict[tuple[str, str], list[tuple[str, int]]] = {}
    for a in rows(MemberAssignmentRow, "group_id", "member_id", "topic", "partition"):
        assignments.setdefault((a["group_id"], a["member_id"]), []).append((a["topic"], a["partition"]))
    members: dict[str, list[GroupMemberSnapshot]] = {}
    for m in rows(GroupMemberRow, "group_id", "position"):
        member_id = m["member_id_full"] or m["member_id"]  # the whole id of a keyed one (id_limits)
        if m["capacity_source"] is not None:
            measured_at = m["capacity_measured_at"]
            rates.capacity[(m["group_id"], member_id)] = MemberCapacity(
                m["capacity"], m["capacity_source"], _aware(measured_at) if measured_at else None,
                m["capacity_note"], _stored_reference(m["telemetry_reference_consumed"],
                m["telemetry_reference_random"], m["telemetry_reference_steady"]),
                _stored_proven(m["proven_rate"], m["proven_rate_at"]),
                _stored_count(m["capacity_sample_count"]),
            )  # fmt: skip
        members.setdefault(m["group_id"], []).append(
            GroupMemberSnapshot(
                member_id=member_id,
                client_id=m["client_id"],
                host=m["host"],
                group_instance_id=m["group_instance_id"],
                rack=m["rack"],
                subscribed_topics=tuple(m["subscribed_topics"] or ()),
                assignment=tuple(assignments.get((m["group_id"], m["member_id"]), ())),
                position=m["position"],
            )
        )
    for r in rows(AssignedCapacityRow, "group_id", "member_id"):
        measured_at = r["capacity_measured_at"]
        rates.capacity[(r["group_id"], r["member_id"])] = MemberCapacity(
            r["capacity"], r["capacity_source"], _aware(measured_at) if measured_at else None
        )
    return members


def _load_committed(
    rows: _Rows, rates: SnapshotRates
) -> tuple[list[CommittedOffset], dict[tuple[str, str, int], int], dict[tuple[str, str, int], int | None]]:
    """The committed offsets, their record timestamps and share lags; consume rates and time lags go
    into ``rates``."""
    committed = []
    stamps: dict[tuple[str, str, int], int] = {}
    share_lags: dict[tuple[str, str, int], int | None] = {}
    for c in rows(CommittedOffsetRow, "group_id", "topic", "partition"):
        key = (c["group_id"], c["topic"], c["partition"])
        committed.append(CommittedOffset(*key, c["committed_offset"], c["leader_epoch"], c["metadata"]))
        rates.consume[key] = RateEstimate(c["consume_rate"], c["consume_rate_unknown"])
        rates.time_lag[key] = TimeLag(c["time_lag_s"], c["time_lag_method"])
        if c["record_timestamp_ms"] is not None:
            stamps[key] = c["record_timestamp_ms"]
        if c["share_lag"] is not None:
            share_lags[key] = c["share_lag"]
    return committed, stamps, share_lags


def _load_partitions(rows: _Rows, rates: SnapshotRates, topics: set[str] | None) -> list[PartitionOffsets]:
    """The partitions (of ``topics`` only, when given); produce rates go into ``rates``."""
    partitions = []
    for p in rows(PartitionOffsetRow, "topic", "partition"):
        if topics is None or p["topic"] in topics:
            partitions.append(
                PartitionOffsets(p["topic"], p["partition"], p["log_start_offset"], p["log_end_offset"],
                                 p["leader"], p["last_stable_offset"])
            )  # fmt: skip
            rates.produce[(p["topic"], p["partition"])] = RateEstimate(
                p["produce_rate"], p["produce_rate_unknown"]
            )
    return partitions


def prune(
    retention: timedelta, url: str | None = None, keep_latest: int = 1, now: datetime | None = None
) -> int:
    """Delete snapshots taken before ``now - retention``, always keeping the ``keep_latest`` most recently taken.

    Returns how many snapshots were deleted (their child rows go in the same transaction).
    """
    cutoff = (now or datetime.now(UTC)) - retention
    with db.connect(url) as conn:
        newest = conn.execute(
            sa.select(SnapshotRow.id)
            .order_by(SnapshotRow.taken_at.desc(), SnapshotRow.id.desc())
            .limit(max(keep_latest, 0))
        ).scalars()
        keep = set(newest)
        old = [
            i
            for i in conn.execute(sa.select(SnapshotRow.id).where(SnapshotRow.taken_at < cutoff)).scalars()
            if i not in keep
        ]
        _delete_snapshots(conn, old)
    return len(old)
