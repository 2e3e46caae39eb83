"""The store loads and saves what the advisor carries between snapshots (domain/estimates.py), on
SQLite and PostgreSQL: what it loads back after a write is what the step carried on (proven rates
included), the previous
snapshot is always of the same cluster, and the rate interval is stored with each snapshot (filled
in for snapshots stored before migration 0009)."""

from __future__ import annotations

from datetime import datetime, timedelta

import pytest
import sqlalchemy as sa
from rebalance_advisor import store
from rebalance_advisor.domain.estimates import CarriedCapacity, observe_snapshot, step
from rebalance_advisor.domain.snapshot_model import ProvenRate
from rebalance_advisor.domain.telemetry import TelemetrySample
from rebalance_advisor.store import db
from rebalance_advisor.store.models import SnapshotRow
from rebalance_advisor.store.snapshot_reader import read_snapshot_tables
from rebalance_advisor.store.snapshots import load_carried

from tests.support.hand_made import BOOTSTRAP, T0
from tests.support.hand_made import group_b_snapshot as _snap


def _carried(url: str, cluster: str = "c1", before_id: int | None = None):
    with db.connect(url) as conn:
        return load_carried(conn, cluster, BOOTSTRAP, before_id=before_id)


def test_what_is_loaded_after_a_write_is_what_the_step_carried_on(db_url) -> None:
    store.upgrade(db_url)
    assert _carried(db_url) is None
    store.write_snapshot(_snap(0, {0: 1000, 1: 100, 2: 100}, {0: 100, 1: 100, 2: 100}), db_url)
    before = _carried(db_url)
    # another cluster's snapshot in between is not what c1 carries
    store.write_snapshot(_snap(30, {0: 5, 1: 5, 2: 5}, {0: 1, 1: 1, 2: 1}, cluster="c2"), db_url)
    assert _carried(db_url) == before
    # 100 s later m1 consumed 300 + 50 with backlog on t-0 at both ends: measured at 3.5/s
    later = _snap(100, {0: 1200, 1: 150, 2: 120}, {0: 400, 1: 150, 2: 120})
    store.write_snapshot(later, db_url)
    expected = step(before, observe_snapshot(later, before))[1]
    loaded = _carried(db_url)
    assert loaded == expected
    assert loaded.snapshot_id == later.snapshot_id and loaded.taken_at == later.taken_at
    assert loaded.owners == {("b", "t", 0): "i1", ("b", "t", 1): "i1", ("b", "t", 2): "m2"}
    assert loaded.capacities == {("b", "i1"): CarriedCapacity(3.5, later.taken_at, "measured")}
    # m2 kept up with t-2 over the 100 s: 20 records, 0.2/s proven (m1 was busy: measured instead)
    assert loaded.proven_rates == {("b", "m2"): ProvenRate(pytest.approx(0.2), later.taken_at)}
    assert loaded.produce[("t", 0)] == pytest.approx(2.0) and loaded.consume[("b", "t", 0)] == pytest.approx(
        3.0
    )
    store.db.dispose(db_url)


def _pushed(member: str, idle: float, at: datetime) -> TelemetrySample:
    """A confluent-kafka member's telemetry, pushed a second before the snapshot at ``at``."""
    return TelemetrySample(
        "b", member, "", "client", "confluent-kafka-python", "2.16.1", idle, at.timestamp() - 1, None, 0, 0,
        False, 5.0, at.timestamp() - 1,
    )  # fmt: skip


def test_the_groups_arrivals_evidence_is_carried_through_the_store(db_url) -> None:
    """m1 is measured at 3.5/s at 100 s (as above). At 200 s it has caught up, 9.5/s, and pushes
    idle 0.5: read as steady arrivals 19/s (off log 2 from 9.5), as random arrivals more (the
    librdkafka model reads 0.5 as less busy). The group's evidence is positive: stored with the
    snapshot, loaded back as the step carried it, and m2's telemetry (0.2/s at idle 0.5) is read
    as steady, 0.4/s."""
    store.upgrade(db_url)
    store.write_snapshot(_snap(0, {0: 1000, 1: 100, 2: 100}, {0: 100, 1: 100, 2: 100}), db_url)
    store.write_snapshot(_snap(100, {0: 1200, 1: 150, 2: 120}, {0: 400, 1: 150, 2: 120}), db_url)
    before = _carried(db_url)
    assert before.capacities[("b", "i1")].value == pytest.approx(3.5) and before.arrivals_evidence == {}
    later = _snap(200, {0: 1300, 1: 200, 2: 140}, {0: 1300, 1: 200, 2: 140})
    later.telemetry = [_pushed("m1", 0.5, later.taken_at), _pushed("m2", 0.5, later.taken_at)]
    store.write_snapshot(later, db_url)
    expected = step(before, observe_snapshot(later, before))[1]
    loaded = _carried(db_url)
    assert loaded == expected
    assert set(loaded.arrivals_evidence) == {"b"} and loaded.arrivals_evidence["b"] > 0
    m2 = store.load_snapshot(later.snapshot_id, db_url).rates.capacity[("b", "m2")]
    assert (m2.capacity, m2.source) == (pytest.approx(0.4), "telemetry")
    # m2's telemetry reference (0.2/s; steady 0.4/s) is stored beside its capacity and carried
    assert m2.telemetry_reference is not None and m2.telemetry_reference.consumed == pytest.approx(0.2)
    assert m2.telemetry_reference.readings.steady == pytest.approx(0.4)
    assert loaded.telemetry_references[("b", "m2")] == m2.telemetry_reference
    # its first telemetry reading: the plain mean of one, stored and carried (the next weighs 1/2)
    assert m2.sample_count == 1 and loaded.capacities[("b", "m2")].sample_count == 1
    store.db.dispose(db_url)


def test_the_previous_snapshot_is_of_the_same_cluster(db_url) -> None:
    store.upgrade(db_url)
    first = store.write_snapshot(_snap(0, {0: 10}, {0: 1}), db_url)
    other = store.write_snapshot(_snap(30, {0: 10}, {0: 1}, cluster="c2"), db_url)
    third = store.write_snapshot(_snap(100, {0: 20}, {0: 2}), db_url)
    with db.connect(db_url) as conn:  # what the planner pairs a snapshot with (planner_inputs)
        assert load_carried(conn, "c1", BOOTSTRAP, before_id=third).snapshot_id == first
        assert load_carried(conn, "c2", BOOTSTRAP, before_id=other) is None
    assert _carried(db_url, before_id=third).snapshot_id == first
    # the interval is stored with the snapshot, to its own cluster's predecessor
    assert read_snapshot_tables(third, db_url).rate_interval_s == pytest.approx(100.0)
    assert store.load_snapshot(other, db_url).rates.interval_s is None
    store.db.dispose(db_url)


def test_the_migration_fills_the_interval_of_snapshots_stored_before_it(db_url) -> None:
    """Snapshots stored at revision 0008 (c1 at 0 s, c2 at 30 s, c1 at 100 s, c1 at 160 s with no
    rates, c1 at 200 s): after the upgrade each has the interval its rates were derived over."""
    db.upgrade(db_url, "0008_flagged_view")
    s = SnapshotRow.__table__
    rows = [
        (0, "c1", None),
        (30, "c2", None),
        (100, "c1", None),
        (160, "c1", "interval too long"),
        (200, "c1", None),
    ]
    with db.connect(db_url) as conn:
        for seconds, cluster, note in rows:
            conn.execute(
                sa.insert(s).values(
                    taken_at=T0 + timedelta(seconds=seconds), cluster_id=cluster, bootstrap_servers=BOOTSTRAP,
                    duration_s=0.1, status="complete", isolation_level="read_uncommitted", group_count=0,
                    member_count=0, partition_count=0, committed_count=0, error_count=0, rates_note=note,
                )
            )  # fmt: skip
    db.upgrade(db_url)
    with db.connect(db_url) as conn:
        got = conn.execute(sa.select(s.c.rate_interval_s).order_by(s.c.id)).scalars().all()
    assert got == [None, None, pytest.approx(100.0), None, pytest.approx(40.0)]
    store.db.dispose(db_url)
