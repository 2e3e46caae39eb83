"""Measured capacity of manual-assign (``assign()``) members from their published plan (docs/concepts/snapshots.md, "Member capacity").

The broker lists no members for such a group (offsets are committed without joining it, as
``assign()`` consumers do), so a member's capacity can only be measured against the partitions
its latest published plan gave it. Truths come from the offsets this test commits over a known
interval (the snapshots' times are set to it): a member whose partition keeps backlog at both ends
consumes at its capacity, Σ Δcommitted / Δt over the partitions it owns.
"""

from __future__ import annotations

import uuid
from datetime import UTC, datetime, timedelta

import pytest
import sqlalchemy as sa
from confluent_kafka import Producer
from rebalance_advisor import store
from rebalance_advisor.domain.spec_documents import build_docs_from_tables
from rebalance_advisor.services import static_members
from rebalance_advisor.store import db
from rebalance_advisor.store.models import GroupMemberRow, MemberAssignmentRow
from rebalance_advisor.store.planner_inputs import read_planner_inputs
from rebalance_advisor.store.plans import published_assignments

from tests._plans import mark_published, record_plan
from tests.support.kafka_offsets import commit as _commit
from tests.support.kafka_offsets import new_topic as _topic
from tests.support.kafka_offsets import stored_snapshot

pytestmark = pytest.mark.kafka

INTERVAL_S = 60.0


def _produce(bootstrap: str, topic: str, counts: dict[int, int]) -> None:
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 20})
    for partition, count in counts.items():
        for _ in range(count):
            producer.produce(topic, b"r", partition=partition)
    assert producer.flush(30) == 0


def _doc(url: str, snapshot_id: int, group: str) -> dict:
    with db.connect(url) as conn:
        inputs = read_planner_inputs(conn, snapshot_id)
    docs = build_docs_from_tables(inputs.tables, inputs.registry, published=inputs.published)
    return next(d for d in docs if d["group_id"] == group)


def test_assign_only_member_gets_a_measured_capacity_from_its_published_plan(kafka_bootstrap, db_url) -> None:
    url = db_url
    store.upgrade(url)
    group = f"asg-cap-{uuid.uuid4().hex[:8]}"
    topic = _topic(kafka_bootstrap, 4)
    for member in ("m1", "m2"):
        static_members.add(group, member, [topic], url)
    first = record_plan(url, group, ["m1", "m2"], [9000, 500, 400, 300], topic=topic)
    mark_published(url, first, 1)
    with db.connect(url) as conn:
        owners = published_assignments(conn)[group]
    busy = next(m for m, parts in owners.items() if (topic, 0) in parts)  # holds the backlogged p0
    idle = next(m for m in owners if m != busy)
    busy_others = [p for t, p in owners[busy] if p != 0]
    idle_parts = [p for _, p in owners[idle]]
    assert idle_parts, owners  # the planner gave each member something

    # Snapshot 1: p0 has 2,000 records of backlog, every other partition is caught up.
    _produce(kafka_bootstrap, topic, {0: 3000, 1: 200, 2: 200, 3: 200})
    _commit(kafka_bootstrap, group, topic, {0: 1000, 1: 200, 2: 200, 3: 200})
    t0 = datetime.now(UTC).replace(microsecond=0) - timedelta(minutes=10)
    first_id = stored_snapshot(kafka_bootstrap, group, url, t0)

    # Over the next 60 s: busy consumes 900 of p0's backlog (still 1,100 behind) and the 120 new
    # records on each of its other partitions; idle keeps up with 30 new records per partition.
    _produce(kafka_bootstrap, topic, {**{p: 120 for p in busy_others}, **{p: 30 for p in idle_parts}})
    _commit(
        kafka_bootstrap,
        group,
        topic,
        {0: 1900, **{p: 320 for p in busy_others}, **{p: 230 for p in idle_parts}},
    )
    second_id = stored_snapshot(kafka_bootstrap, group, url, t0 + timedelta(seconds=INTERVAL_S))

    # By hand: busy had backlog on p0 at both ends, so its capacity is what it consumed.
    expected = (900 + 120 * len(busy_others)) / INTERVAL_S
    loaded = store.load_snapshot(second_id, url)
    got = loaded.rates.capacity[(group, busy)]
    assert got.source == "measured" and got.capacity == pytest.approx(expected, rel=0.01), got
    assert got.measured_at == t0 + timedelta(seconds=INTERVAL_S)
    # idle never had backlog: unmeasured; it consumes 0.5/s per partition, below the median.
    assert loaded.rates.capacity[(group, idle)].source == "group_median"
    assert loaded.rates.capacity[(group, idle)].capacity == pytest.approx(expected, rel=0.01)
    # The first snapshot had nothing to measure from.
    assert store.load_snapshot(first_id, url).rates.capacity[(group, busy)].source == "equal"

    doc = _doc(url, second_id, group)
    by_member = {m["member_id"]: m for m in doc["members"]}
    assert by_member[busy]["capacity"] == pytest.approx(expected, rel=0.01)
    assert doc["capacity_sources"] == {busy: "measured", idle: "group_median"}
    assert sorted(tuple(x) for x in by_member[busy]["owned"]) == sorted(owners[busy])

    # The broker listed no members: none are stored as if it had (what `lag` shows stays the broker's).
    with db.connect(url) as conn:
        for model in (GroupMemberRow, MemberAssignmentRow):
            rows = conn.execute(sa.select(sa.func.count()).where(model.__table__.c.group_id == group))
            assert rows.scalar_one() == 0, model.__tablename__

    # A plan published between snapshots moves partitions: no sample over that interval, the measured
    # value is carried (same value, same time), although busy consumed 800 records of p0 meanwhile.
    second = record_plan(url, group, ["m1", "m2"], [300, 400, 500, 9000], topic=topic)
    mark_published(url, second, 2)
    _commit(kafka_bootstrap, group, topic, {0: 2700})  # p0 still behind (log end 3,000)
    third_id = stored_snapshot(kafka_bootstrap, group, url, t0 + timedelta(seconds=2 * INTERVAL_S))
    carried = store.load_snapshot(third_id, url).rates.capacity[(group, busy)]
    assert carried == got
    store.db.dispose(url)


def test_member_whose_partitions_a_new_plan_left_unchanged_is_measured_across_it(
    kafka_bootstrap, db_url
) -> None:
    """A plan published between two snapshots pauses the measurement only of the members it changed:
    one that kept exactly its partitions held them over the whole interval (store path: the previous
    owners are those of the plan the previous snapshot measured against)."""
    url = db_url
    store.upgrade(url)
    group = f"asg-keep-{uuid.uuid4().hex[:8]}"
    topic = _topic(kafka_bootstrap, 6)
    for member in ("m1", "m2", "m3"):
        static_members.add(group, member, [topic], url)
    mark_published(
        url, record_plan(url, group, ["m1", "m2", "m3"], [9000, 500, 400, 300, 200, 100], topic=topic), 1
    )
    with db.connect(url) as conn:
        before = published_assignments(conn)[group]
    keeper = next(m for m, parts in before.items() if (topic, 0) in parts)  # holds the backlogged p0
    mover = next(m for m, parts in before.items() if (topic, 1) in parts)  # holds the backlogged p1
    assert keeper != mover, before

    # p0 and p1 are behind at every snapshot; nothing new is produced after the first one.
    _produce(kafka_bootstrap, topic, {0: 3000, **{p: 200 for p in range(1, 6)}})
    _commit(kafka_bootstrap, group, topic, {0: 1000, 1: 50, **{p: 200 for p in range(2, 6)}})
    t0 = datetime.now(UTC).replace(microsecond=0) - timedelta(minutes=10)
    stored_snapshot(kafka_bootstrap, group, url, t0)
    _commit(kafka_bootstrap, group, topic, {0: 1600, 1: 100})
    second_id = stored_snapshot(kafka_bootstrap, group, url, t0 + timedelta(seconds=INTERVAL_S))
    second = store.load_snapshot(second_id, url).rates.capacity
    # By hand: each consumed its backlogged partition only; 600 and 50 records in 60 s.
    assert second[(group, keeper)].capacity == pytest.approx(600 / INTERVAL_S)
    assert second[(group, mover)].capacity == pytest.approx(50 / INTERVAL_S)
    assert {second[(group, m)].source for m in (keeper, mover)} == {"measured"}

    # A new plan keeps the keeper's partitions and changes the mover's.
    mark_published(
        url, record_plan(url, group, ["m1", "m2", "m3"], [9000, 100, 200, 300, 400, 500], topic=topic), 2
    )
    with db.connect(url) as conn:
        after = published_assignments(conn)[group]
    assert sorted(after[keeper]) == sorted(before[keeper]), (before, after)
    assert sorted(after[mover]) != sorted(before[mover]) and (topic, 1) in after[mover], (before, after)

    _commit(kafka_bootstrap, group, topic, {0: 2500, 1: 150})
    third = store.load_snapshot(
        stored_snapshot(kafka_bootstrap, group, url, t0 + timedelta(seconds=2 * INTERVAL_S)), url
    ).rates.capacity
    # The keeper is measured again over the interval the plan changed in: it consumed 900 records in
    # 60 s, 15/s (above its smoothed sample, so the consumed bound gives exactly that), at that time.
    assert third[(group, keeper)].source == "measured"
    assert third[(group, keeper)].capacity == pytest.approx(900 / INTERVAL_S)
    assert third[(group, keeper)].measured_at == t0 + timedelta(seconds=2 * INTERVAL_S)
    # The mover gained or lost partitions: not measured over it, its value is carried as it was.
    assert third[(group, mover)] == second[(group, mover)]
    store.db.dispose(url)
