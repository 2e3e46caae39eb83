"""Rates, time lag and member capacity stored with each snapshot (docs/concepts/snapshots.md), on a real broker and DB.

Truths come from the test's own producers and commits: records stamped with known CreateTimes,
a producer and a committer paced at known rates. Capacities are checked by hand-computed numbers on
hand-made snapshots (the rule is pure; its inputs are what the store hands it).
"""

from __future__ import annotations

import threading
import time
import uuid
from dataclasses import replace
from datetime import UTC, datetime, timedelta

import pytest
import sqlalchemy as sa
from rebalance_advisor import store
from rebalance_advisor.adapters import kafka_snapshot
from rebalance_advisor.cli import main
from rebalance_advisor.domain import estimates
from rebalance_advisor.domain.spec_documents import build_docs_from_tables
from rebalance_advisor.store.snapshot_reader import read_snapshot_tables

from tests.support.hand_made import hand_made_snapshot as _snap
from tests.support.kafka_offsets import admin as _admin
from tests.support.kafka_offsets import commit as _commit
from tests.support.kafka_offsets import new_topic as _topic

#: the tests below stamp each record with the offset it is produced for: a produce request retried
#: under load must not land after a later one (a CI run read stamps one or two records late on 4 of
#: 32 partitions), which the idempotent producer guarantees
IN_ORDER = {"enable.idempotence": True}

pytestmark = pytest.mark.kafka


def _options(regex: str, **kwargs) -> kafka_snapshot.SnapshotOptions:
    return kafka_snapshot.SnapshotOptions(
        groups=kafka_snapshot.GroupFilter.parse(regex), timeout_s=10, **kwargs
    )


def test_time_lag_from_record_timestamps_is_within_a_second_of_the_truth(kafka_bootstrap, sqlite_url) -> None:
    """Records stamped 1 s apart, 10 minutes ago; three groups at different offsets of one partition
    (one fetch answers them in offset order), one caught up, one committed below the log start."""
    from confluent_kafka import Producer, TopicPartition

    topic = _topic(kafka_bootstrap, 3)
    base_ms = int(time.time() * 1000) - 600_000
    producer = Producer({"bootstrap.servers": kafka_bootstrap, "linger.ms": 20, **IN_ORDER})
    for i in range(100):
        for partition in range(3):
            producer.produce(topic, b"r", partition=partition, timestamp=base_ms + i * 1000)
    assert producer.flush(30) == 0
    admin = _admin(kafka_bootstrap)
    for future in admin.delete_records([TopicPartition(topic, 2, 50)]).values():
        assert future.result(30).low_watermark == 50
    prefix = f"tl-{uuid.uuid4().hex[:8]}"
    committed = {"a": {0: 10, 1: 100}, "b": {0: 55}, "c": {0: 99, 2: 20}}
    for group, offsets in committed.items():
        _commit(kafka_bootstrap, f"{prefix}-{group}", topic, offsets)

    taken = kafka_snapshot.collect(kafka_bootstrap, options=_options(f"{prefix}-.*"))
    store.upgrade(sqlite_url)
    store.write_snapshot(taken, sqlite_url)
    loaded = store.load_snapshot(taken.snapshot_id, sqlite_url)
    taken_ms = taken.taken_at.timestamp() * 1000
    for group, offset in (("a", 10), ("b", 55), ("c", 99)):
        truth = (taken_ms - (base_ms + offset * 1000)) / 1000
        got = loaded.rates.time_lag[(f"{prefix}-{group}", topic, 0)]
        assert got.method == "record_timestamp", group
        assert abs(got.seconds - truth) <= max(1.0, 0.05 * truth), (group, got, truth)
        assert loaded.record_timestamps[(f"{prefix}-{group}", topic, 0)] == base_ms + offset * 1000
    assert loaded.rates.time_lag[(f"{prefix}-a", topic, 1)] == (0.0, "caught_up")
    # Below the log start there is no record to read; first snapshot, no rate to estimate from.
    assert loaded.rates.time_lag[(f"{prefix}-c", topic, 2)] == (None, None)
    assert (f"{prefix}-c", topic, 2) not in loaded.record_timestamps
    store.db.dispose(sqlite_url)


def test_time_lag_of_offsets_in_different_batches_of_one_partition(kafka_bootstrap) -> None:
    """30 batches of 10 records, 2 KB each (flushed apart, each over the 1 KiB fetch size); one group
    in the first, one in the 26th. The first fetch answers only the first group; the partition,
    paused once answered, is fetched again in a second round at the other group's offset."""
    from confluent_kafka import Producer

    topic = _topic(kafka_bootstrap, 1)
    base_ms = int(time.time() * 1000) - 600_000
    producer = Producer({"bootstrap.servers": kafka_bootstrap, "linger.ms": 0, **IN_ORDER})
    for batch in range(30):
        for i in range(10):
            producer.produce(topic, b"b" * 200, partition=0, timestamp=base_ms + (batch * 10 + i) * 1000)
        assert producer.flush(30) == 0
    prefix = f"tb-{uuid.uuid4().hex[:8]}"
    _commit(kafka_bootstrap, f"{prefix}-x", topic, {0: 2})
    _commit(kafka_bootstrap, f"{prefix}-y", topic, {0: 255})
    started = time.monotonic()
    taken = kafka_snapshot.collect(kafka_bootstrap, options=_options(f"{prefix}-.*"))
    assert time.monotonic() - started < 8  # not the 10 s budget spent waiting for a paused partition
    assert taken.record_timestamps == {
        (f"{prefix}-x", topic, 0): base_ms + 2_000,
        (f"{prefix}-y", topic, 0): base_ms + 255_000,
    }


def test_time_lag_of_many_partitions_and_offsets_outside_the_log(kafka_bootstrap) -> None:
    """32 partitions, each record stamped by (partition, offset), in batches over the reader's 1 KiB
    fetch size (the broker returns such a batch whole for one partition of a fetch response only). Every partition has a lagging
    group; on partition 0 another group committed past the log end, on partition 1 one committed
    below the log start (records deleted): those have no record to read and must not keep the other
    groups of their partition from their answer. The reader used to wait out a 1 s fetch back-off
    per partition and left most of them unanswered within the budget."""
    from confluent_kafka import Producer, TopicPartition

    partitions, records = 32, 20
    topic = _topic(kafka_bootstrap, partitions)
    base_ms = int(time.time() * 1000) - 3_600_000
    producer = Producer({"bootstrap.servers": kafka_bootstrap, "linger.ms": 20, **IN_ORDER})
    for offset in range(records):
        for partition in range(partitions):
            stamp = base_ms + partition * 100_000 + offset * 1000
            producer.produce(topic, b"r" * 200, partition=partition, timestamp=stamp)
    assert producer.flush(30) == 0
    admin = _admin(kafka_bootstrap)
    for future in admin.delete_records([TopicPartition(topic, 1, 10)]).values():
        assert future.result(30).low_watermark == 10
    prefix = f"tm-{uuid.uuid4().hex[:8]}"
    lagging = {p: (3 + p) % records for p in range(partitions)}
    lagging[1] = 12
    _commit(kafka_bootstrap, f"{prefix}-lag", topic, lagging)
    _commit(kafka_bootstrap, f"{prefix}-past", topic, {0: 50})
    _commit(kafka_bootstrap, f"{prefix}-deleted", topic, {1: 4})
    _commit(kafka_bootstrap, f"{prefix}-done", topic, {p: records for p in range(partitions)})

    started = time.monotonic()
    taken = kafka_snapshot.collect(kafka_bootstrap, options=_options(f"{prefix}-.*"))
    elapsed = time.monotonic() - started
    assert taken.record_timestamps == {
        (f"{prefix}-lag", topic, p): base_ms + p * 100_000 + offset * 1000 for p, offset in lagging.items()
    }
    assert elapsed < 8, elapsed  # not the 10 s budget


class _Paced:
    """Produces to (and optionally commits for a group on) one topic at fixed rates, in a thread."""

    def __init__(self, bootstrap: str, topic: str, rates: dict[int, float], group: str, commit_rate: float):
        from confluent_kafka import Consumer, Producer

        self.topic, self.rates, self.commit_rate, self.group = topic, rates, commit_rate, group
        self.producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5})
        self.consumer = Consumer(
            {"bootstrap.servers": bootstrap, "group.id": group, "enable.auto.commit": False}
        )
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        from confluent_kafka import TopicPartition

        started = time.monotonic()
        sent = dict.fromkeys(self.rates, 0)
        committed_start = 0
        while not self.stop.is_set():
            elapsed = time.monotonic() - started
            for partition, rate in self.rates.items():
                due = int(elapsed * rate)
                for _ in range(due - sent[partition]):
                    self.producer.produce(self.topic, b"p", partition=partition)
                sent[partition] = due
            self.producer.poll(0)
            offset = committed_start + int(elapsed * self.commit_rate)
            if offset:
                self.consumer.commit(offsets=[TopicPartition(self.topic, 0, offset)], asynchronous=True)
            time.sleep(0.02)
        self.producer.flush(30)

    def __enter__(self) -> _Paced:
        self.thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self.stop.set()
        self.thread.join(30)
        self.consumer.close()


@pytest.mark.postgres
def test_rates_within_ten_percent_of_known_rates_across_two_snapshots(
    kafka_bootstrap, db_url, capsys
) -> None:
    """Partition 0 at 200/s, partition 1 at 50/s; the group commits 120/s on partition 0 (backlog
    grows). Two snapshots 8 s apart: produce and consume rates within 10 %; the time lag falls back
    to lag / produce rate where record timestamps are not read."""
    topic = _topic(kafka_bootstrap, 2)
    group = f"rt-{uuid.uuid4().hex[:8]}"
    _commit(kafka_bootstrap, group, topic, {0: 0, 1: 0})
    store.upgrade(db_url)
    with _Paced(kafka_bootstrap, topic, {0: 200.0, 1: 50.0}, group, commit_rate=120.0):
        time.sleep(2.0)
        first = kafka_snapshot.collect(kafka_bootstrap, options=_options(group, time_lag=False))
        store.write_snapshot(first, db_url)
        time.sleep(8.0)
        second = kafka_snapshot.collect(kafka_bootstrap, options=_options(group, time_lag=False))
        store.write_snapshot(second, db_url)
    assert first.rates.note.startswith("no previous snapshot")
    assert all(r.rate is None and r.unknown_reason for r in first.rates.produce.values())
    loaded = store.load_snapshot(second.snapshot_id, db_url)
    assert loaded.rates.note is None
    produce = loaded.rates.produce
    assert produce[(topic, 0)].rate == pytest.approx(200.0, rel=0.10)
    assert produce[(topic, 1)].rate == pytest.approx(50.0, rel=0.10)
    consume = loaded.rates.consume[(group, topic, 0)]
    assert consume.rate == pytest.approx(120.0, rel=0.10)
    # partition 1: committed 0 at both ends -> rate 0, known
    assert loaded.rates.consume[(group, topic, 1)].rate == 0.0
    lag_0 = next(p for p in loaded.partitions if p.partition == 0).log_end_offset - next(
        c.offset for c in loaded.committed if c.partition == 0
    )
    estimate = loaded.rates.time_lag[(group, topic, 0)]
    assert estimate.method == "rate_estimate"
    assert estimate.seconds == pytest.approx(lag_0 / produce[(topic, 0)].rate)

    # The planner's inputs carry them, through the SQL reader.
    (doc,) = build_docs_from_tables(read_snapshot_tables(second.snapshot_id, db_url))
    rates = {p["partition"]: p["produce_rate"] for p in doc["partitions"]}
    assert rates == {0: produce[(topic, 0)].rate, 1: produce[(topic, 1)].rate}
    assert doc["rates_note"] is None
    (first_doc,) = build_docs_from_tables(read_snapshot_tables(first.snapshot_id, db_url))
    assert [p["produce_rate"] for p in first_doc["partitions"]] == [None, None]
    assert first_doc["rates_note"].startswith("no previous snapshot")

    # `lag` shows them.
    assert main(["lag", "--db", db_url, "--group", group]) == 0
    out = capsys.readouterr().out
    header, *lines = [line for line in out.splitlines() if line.strip()]
    assert header.split()[-5:] == ["TIME-LAG-S", "TIME-LAG-BY", "PRODUCE-RATE", "CONSUME-RATE", "FLAGS"]
    cells = lines[0].split()
    assert cells[-4] == "rate_estimate" and float(cells[-3]) == pytest.approx(200.0, rel=0.10)
    store.db.dispose(db_url)


def test_unknown_rates_say_why_and_a_recreated_topic_restarts_the_average(sqlite_url) -> None:
    """Log end backwards, committed backwards, clock backwards, interval too short or too long, other
    cluster: unknown with the reason. EWMA by hand: τ = 120 s (the default), Δt = 60 s."""
    store.upgrade(sqlite_url)
    t0 = datetime(2030, 1, 1, tzinfo=UTC)
    ends0 = {("t", 0): 1000, ("t", 1): 1000}
    store.write_snapshot(_snap(t0, ends0, {("g", "t", 0): 500, ("g", "t", 1): 900}), sqlite_url)
    # +60 s: t-0 grew 600 (10/s), t-1 went back to 10 (recreated); g committed +300 (5/s) and went back
    one = _snap(t0 + timedelta(seconds=60), {("t", 0): 1600, ("t", 1): 10},
                {("g", "t", 0): 800, ("g", "t", 1): 5})  # fmt: skip
    store.write_snapshot(one, sqlite_url)
    r = one.rates
    assert r.produce[("t", 0)] == (10.0, None)
    assert (
        r.produce[("t", 1)].rate is None
        and "went backwards (1000 -> 10)" in r.produce[("t", 1)].unknown_reason
    )
    assert r.consume[("g", "t", 0)] == (5.0, None)
    assert (
        r.consume[("g", "t", 1)].rate is None and "offsets reset" in r.consume[("g", "t", 1)].unknown_reason
    )
    # +120 s: t-0 grew 1200 in 60 s (20/s): EWMA 10 + (1 - e^-0.5) * (20 - 10); t-1 restarts at its sample
    two = _snap(
        t0 + timedelta(seconds=120), {("t", 0): 2800, ("t", 1): 70}, {("g", "t", 0): 800, ("g", "t", 1): 5}
    )
    store.write_snapshot(two, sqlite_url)
    alpha = 1 - 0.6065306597126334  # e^-0.5
    assert two.rates.produce[("t", 0)].rate == pytest.approx(10 + alpha * 10)
    assert two.rates.produce[("t", 1)].rate == pytest.approx(1.0)
    assert two.rates.consume[("g", "t", 0)].rate == pytest.approx(5 + alpha * (0 - 5))
    # Stored, and read back so (no recomputation).
    assert store.load_snapshot(two.snapshot_id, sqlite_url).rates.produce == two.rates.produce

    for later, reason in (
        (t0 + timedelta(seconds=119), "clock went backwards"),
        (t0 + timedelta(seconds=122), "shorter than 5 s"),
        (t0 + timedelta(hours=3), "longer than 3600 s"),
    ):
        odd = _snap(later, {("t", 0): 3000, ("t", 1): 80}, {("g", "t", 0): 900, ("g", "t", 1): 6})
        with store.engine_for(sqlite_url).begin() as conn:  # compare with `two` each time
            conn.execute(sa.text("delete from snapshots where id > :i"), {"i": two.snapshot_id})
        store.write_snapshot(odd, sqlite_url)
        assert reason in odd.rates.note
        assert all(
            reason in x.unknown_reason for x in [*odd.rates.produce.values(), *odd.rates.consume.values()]
        )
    other = _snap(t0 + timedelta(seconds=180), {("t", 0): 3000}, {("g", "t", 0): 900}, cluster="c2")
    store.write_snapshot(other, sqlite_url)
    assert other.rates.note.startswith("no previous snapshot of this cluster")
    store.db.dispose(sqlite_url)


def test_member_capacity_measured_median_configured_equal(sqlite_url) -> None:
    """Group g: m1 (static "i1") holds t-0 and t-1 with backlog at both ends -> capacity = its consume
    rate 3 + 2 = 5/s; m2 holds t-2, caught up at the end -> not measured -> group median 5. Group h: no
    backlog -> configured 40/s by pattern; group k: nothing -> equal (unknown)."""
    store.upgrade(sqlite_url)
    t0 = datetime(2030, 1, 1, tzinfo=UTC)
    members = [("g", "m1", "i1", [("t", 0), ("t", 1)]), ("g", "m2", None, [("t", 2)]),
               ("h", "n1", None, [("u", 0)]), ("k", "x1", None, [("v", 0)])]  # fmt: skip
    ends = {("t", 0): 1000, ("t", 1): 1000, ("t", 2): 100, ("u", 0): 10, ("v", 0): 10}
    c0 = {("g", "t", 0): 100, ("g", "t", 1): 100, ("g", "t", 2): 50, ("h", "u", 0): 10}
    store.write_snapshot(_snap(t0, ends, c0, members), sqlite_url)
    ends1 = {**ends, ("t", 2): 130, ("u", 0): 20, ("v", 0): 20}
    c1 = {("g", "t", 0): 400, ("g", "t", 1): 300, ("g", "t", 2): 130, ("h", "u", 0): 20}
    # member ids change for the static member (restart), the instance id stays
    members1 = [("g", "m1-new", "i1", [("t", 0), ("t", 1)]), *members[1:]]
    later = _snap(t0 + timedelta(seconds=100), ends1, c1, members1)
    policy = estimates.CapacityPolicy.parse("h=40,k-.*=7")
    store.write_snapshot(later, sqlite_url, capacities=policy)
    cap = store.load_snapshot(later.snapshot_id, sqlite_url).rates.capacity
    assert cap[("g", "m1-new")][:2] == (5.0, "measured")
    assert cap[("g", "m1-new")].measured_at == later.taken_at
    assert cap[("g", "m2")][:2] == (5.0, "group_median")
    assert cap[("h", "n1")][:2] == (40.0, "configured")
    assert cap[("k", "x1")][:2] == (None, "equal")
    # m1 then catches up: 600 + 700 records in 100 s = 13/s consumed, with no backlog left. A member
    # cannot consume faster than its capacity, so the measured 5 is raised to 13 (a fresh measurement);
    # m2 gets the new median.
    c2 = {**c1, ("g", "t", 0): 1000, ("g", "t", 1): 1000}
    third = _snap(t0 + timedelta(seconds=200), ends1, c2, members1)
    store.write_snapshot(third, sqlite_url)
    cap = store.load_snapshot(third.snapshot_id, sqlite_url).rates.capacity
    assert cap[("g", "m1-new")][:2] == (13.0, "measured")
    assert cap[("g", "m1-new")].measured_at == third.taken_at
    # Carried to the next snapshot while it stays (nothing consumed, no backlog), shown in the
    # planner's documents with the time it was measured.
    fourth = _snap(t0 + timedelta(seconds=300), ends1, c2, members1)
    store.write_snapshot(fourth, sqlite_url)
    cap = store.load_snapshot(fourth.snapshot_id, sqlite_url).rates.capacity
    assert cap[("g", "m1-new")][:2] == (13.0, "measured")
    assert cap[("g", "m1-new")].measured_at == third.taken_at
    docs = {
        d["group_id"]: d for d in build_docs_from_tables(read_snapshot_tables(fourth.snapshot_id, sqlite_url))
    }
    by_member = {m["member_id"]: (m["capacity"], docs["g"]["capacity_sources"][m["member_id"]])
                 for m in docs["g"]["members"]}  # fmt: skip
    assert by_member == {"i1": (13.0, "measured"), "m2": (13.0, "group_median")}
    assert [m["capacity"] for m in docs["k"]["members"]] == [None]
    assert docs["k"]["capacity_sources"] == {"x1": "equal"}
    # The planner's parser takes the members and partitions as they are.
    from rebalance_advisor.domain.group_spec import parse_group_spec

    spec = parse_group_spec({k: docs["g"][k] for k in ("group_id", "members", "partitions")})
    assert [m.capacity for m in spec.members] == [13.0, 13.0]
    with pytest.raises(Exception, match="records/s must be a number > 0"):
        estimates.CapacityPolicy.parse("g=-1")
    store.db.dispose(sqlite_url)


def test_the_rate_interval_is_to_the_previous_snapshot_of_the_same_cluster(sqlite_url) -> None:
    """c1 at 0 s, c2 at 30 s, c1 at 100 s: c1's second snapshot derives its rates over 100 s (from
    its own cluster's), and that is the interval the planner reads back, not the 70 s since c2's."""
    store.upgrade(sqlite_url)
    t0 = datetime(2030, 1, 1, tzinfo=UTC)
    ends, committed = {("t", 0): 1000}, {("g", "t", 0): 500}
    store.write_snapshot(_snap(t0, ends, committed), sqlite_url)
    store.write_snapshot(_snap(t0 + timedelta(seconds=30), ends, committed, cluster="c2"), sqlite_url)
    later = _snap(t0 + timedelta(seconds=100), {("t", 0): 2000}, {("g", "t", 0): 900})
    store.write_snapshot(later, sqlite_url)
    assert later.rates.interval_s == pytest.approx(100.0)
    assert read_snapshot_tables(later.snapshot_id, sqlite_url).rate_interval_s == pytest.approx(100.0)
    assert store.load_snapshot(later.snapshot_id, sqlite_url).rates.interval_s == pytest.approx(100.0)
    store.db.dispose(sqlite_url)


def test_a_member_capacity_configured_by_member_name(sqlite_url) -> None:
    """As above, group g: m1 (static "i1") measured at 5/s, m2 not measured. Configured
    "m2@g=9": m2 gets 9/s (configured) instead of the median 5; "i1@g=99" is not used, i1 being
    measured. In the planner's documents m2's capacity is not an estimate (no probe, no optimism)."""
    from rebalance_advisor.domain.snapshot_model import estimated_capacity_members

    store.upgrade(sqlite_url)
    t0 = datetime(2030, 1, 1, tzinfo=UTC)
    members = [("g", "m1", "i1", [("t", 0), ("t", 1)]), ("g", "m2", None, [("t", 2)])]
    ends = {("t", 0): 1000, ("t", 1): 1000, ("t", 2): 100}
    c0 = {("g", "t", 0): 100, ("g", "t", 1): 100, ("g", "t", 2): 50}
    store.write_snapshot(_snap(t0, ends, c0, members), sqlite_url)
    ends1 = {**ends, ("t", 2): 130}
    c1 = {("g", "t", 0): 400, ("g", "t", 1): 300, ("g", "t", 2): 130}
    later = _snap(t0 + timedelta(seconds=100), ends1, c1, members)
    store.write_snapshot(later, sqlite_url, capacities=estimates.CapacityPolicy.parse("i1@g=99,m2@g=9"))
    cap = store.load_snapshot(later.snapshot_id, sqlite_url).rates.capacity
    assert cap[("g", "m1")][:2] == (5.0, "measured")
    assert cap[("g", "m2")][:2] == (9.0, "configured")
    docs = {
        d["group_id"]: d for d in build_docs_from_tables(read_snapshot_tables(later.snapshot_id, sqlite_url))
    }
    assert {m["member_id"]: m["capacity"] for m in docs["g"]["members"]} == {"i1": 5.0, "m2": 9.0}
    assert docs["g"]["capacity_sources"] == {"i1": "measured", "m2": "configured"}
    assert estimated_capacity_members(docs["g"]["capacity_sources"].items()) == frozenset()
    store.db.dispose(sqlite_url)


@pytest.mark.postgres
def test_a_failed_write_with_rates_leaves_the_previous_snapshot_and_nothing_else(db_url) -> None:
    store.upgrade(db_url)
    t0 = datetime(2030, 1, 1, tzinfo=UTC)
    first = _snap(t0, {("t", 0): 100}, {("g", "t", 0): 10})
    store.write_snapshot(first, db_url)
    broken = _snap(t0 + timedelta(seconds=60), {("t", 0): 200}, {("g", "t", 0): 20})
    broken = replace(broken, committed=broken.committed * 2)  # duplicate key: fails after the rates
    with pytest.raises(sa.exc.IntegrityError):
        store.write_snapshot(broken, db_url)
    with store.engine_for(db_url).connect() as conn:
        assert conn.execute(sa.text("select id from snapshots")).scalars().all() == [first.snapshot_id]
        for table in ("partition_offsets", "committed_offsets"):
            count = conn.execute(sa.text(f"select count(*) from {table}")).scalar_one()
            assert count == 1, table
    good = _snap(t0 + timedelta(seconds=60), {("t", 0): 200}, {("g", "t", 0): 20})
    store.write_snapshot(good, db_url)
    assert good.rates.produce[("t", 0)].rate == pytest.approx(100 / 60)
    store.db.dispose(db_url)


def test_a_member_that_consumed_nothing_has_no_measured_capacity(sqlite_url) -> None:
    """m1 holds t-0 with backlog at both snapshots but commits nothing in between (stalled, or a
    member that does not commit): a consume rate of 0 is no capacity. It stays unknown ("equal"),
    and the planner's parser takes the group (a capacity of 0 would be refused: no plan, an error)."""
    store.upgrade(sqlite_url)
    t0 = datetime(2030, 1, 1, tzinfo=UTC)
    members = [("s", "m1", None, [("t", 0)]), ("s", "m2", None, [("t", 1)])]
    ends = {("t", 0): 1000, ("t", 1): 1000}
    committed = {("s", "t", 0): 100, ("s", "t", 1): 100}
    store.write_snapshot(_snap(t0, ends, committed, members), sqlite_url)
    later = _snap(t0 + timedelta(seconds=100), {("t", 0): 1500, ("t", 1): 1500}, committed, members)
    store.write_snapshot(later, sqlite_url)
    cap = store.load_snapshot(later.snapshot_id, sqlite_url).rates.capacity
    assert cap[("s", "m1")][:2] == (None, "equal")
    assert cap[("s", "m2")][:2] == (None, "equal")
    docs = {
        d["group_id"]: d for d in build_docs_from_tables(read_snapshot_tables(later.snapshot_id, sqlite_url))
    }
    from rebalance_advisor.domain.group_spec import parse_group_spec

    spec = parse_group_spec({k: docs["s"][k] for k in ("group_id", "members", "partitions")})
    assert [m.capacity for m in spec.members] == [None, None]
    store.db.dispose(sqlite_url)


def test_a_busy_member_is_measured_while_one_partition_keeps_backlog(sqlite_url) -> None:
    """m1 holds t-0 (backlog at both snapshots) and t-1 (caught up at both: served in full by fair
    fetching). Over 100 s it consumed 300 (t-0) + 50 (t-1): capacity 3.5/s, measured. m2's only
    partition is caught up at both ends: not measured, so it gets the group median 3.5."""
    store.upgrade(sqlite_url)
    t0 = datetime(2030, 1, 1, tzinfo=UTC)
    members = [("b", "m1", None, [("t", 0), ("t", 1)]), ("b", "m2", None, [("t", 2)])]
    ends = {("t", 0): 1000, ("t", 1): 100, ("t", 2): 100}
    c0 = {("b", "t", 0): 100, ("b", "t", 1): 100, ("b", "t", 2): 100}
    store.write_snapshot(_snap(t0, ends, c0, members), sqlite_url)
    ends1 = {("t", 0): 1200, ("t", 1): 150, ("t", 2): 120}
    c1 = {("b", "t", 0): 400, ("b", "t", 1): 150, ("b", "t", 2): 120}
    later = _snap(t0 + timedelta(seconds=100), ends1, c1, members)
    store.write_snapshot(later, sqlite_url)
    cap = store.load_snapshot(later.snapshot_id, sqlite_url).rates.capacity
    assert cap[("b", "m1")][:2] == (3.5, "measured")
    assert cap[("b", "m2")][:2] == (3.5, "group_median")
    store.db.dispose(sqlite_url)
