"""A member's own capacity report (docs/protocol/index.md, "Capacity reports"): the client helper's meter, the mark that carries it, the
snapshot rule that reads it, and the simulator's model of it. Expected values are worked out by hand."""

from __future__ import annotations

import json
import math
from datetime import UTC, datetime, timedelta

import numpy as np
import pytest
from rebalance_advisor.domain.estimates import (
    Carried,
    CarriedCapacity,
    RateParameters,
    observe_snapshot,
    step,
)
from rebalance_advisor.domain.simulation import Observation, parse_scenario, simulate
from rebalance_advisor.domain.snapshot_model import CommittedOffset, PartitionOffsets, Snapshot
from rebalance_advisor_client.capacity_report import (
    CapacityReport,
    UtilisationMeter,
    decode_capacity_report,
)
from rebalance_advisor_client.handover_rules import OWNED, OwnerMark, decode_mark


class _Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def _meter(clock: _Clock, **kwargs) -> UtilisationMeter:
    return UtilisationMeter(clock=clock, wall_clock=lambda: 1_700_000_000.0 + clock.now, **kwargs)


def _polls(meter: UtilisationMeter, clock: _Clock, count: int, in_poll: float, handling: float, records=1):
    for _ in range(count):
        meter.poll_started()
        clock.now += in_poll
        meter.poll_ended(records)
        clock.now += handling


def test_capacity_is_records_per_second_spent_outside_poll_whatever_the_load():
    clock = _Clock()
    meter = _meter(clock)
    # 200 records, each handled in 4 ms, each poll waiting 16 ms for it (a member at 20 % load):
    # busy 200 x 4 ms = 0.8 s, idle 3.2 s -> 250 records per busy second, busy share 0.2. The last
    # record's handling is still under way when the report is read, so 199 x 4 ms are counted.
    _polls(meter, clock, 200, in_poll=0.016, handling=0.004)
    report = meter.report()
    assert report is not None
    assert report.capacity == pytest.approx(200 / (199 * 0.004))
    assert report.busy == pytest.approx(199 * 0.004 / (199 * 0.004 + 200 * 0.016))
    assert report.at == pytest.approx(1_700_000_000.0 + clock.now)
    # the same member saturated (polls return at once): the same capacity, busy share near 1
    clock2 = _Clock()
    saturated = _meter(clock2)
    _polls(saturated, clock2, 200, in_poll=0.0, handling=0.004)
    assert saturated.report().capacity == pytest.approx(200 / (199 * 0.004))
    assert saturated.report().busy == pytest.approx(1.0)


def test_no_report_from_too_little_work_and_old_work_leaves_the_window():
    clock = _Clock()
    meter = _meter(clock, window_s=60.0, bucket_s=5.0, min_busy_s=0.5, min_records=20)
    _polls(meter, clock, 19, in_poll=0.0, handling=0.1)  # 1.8 s busy but 19 records
    assert meter.report() is None
    _polls(meter, clock, 100, in_poll=0.001, handling=0.001)  # 119 records, busy 1.9 s
    assert meter.report() is not None
    # two minutes of empty polls (1 s each, nothing returned): the busy seconds age out
    _polls(meter, clock, 120, in_poll=1.0, handling=0.0, records=0)
    assert meter.report() is None


def test_the_report_rides_in_the_owner_mark_and_old_readers_still_read_the_mark():
    mark = OwnerMark("m1", 3, OWNED, "inst", None, 4)
    text = mark.encode(CapacityReport(250.123456, 0.41234567, 1_700_000_000.5))
    assert len(text) < 200  # commit metadata is capped at 4,096 bytes by default
    assert decode_mark(text) == mark
    assert decode_capacity_report(text) == CapacityReport(250.123, 0.4123, 1_700_000_000.5)
    assert decode_capacity_report(mark.encode()) is None  # a mark without a report


@pytest.mark.parametrize(
    "changes",
    [
        {"capacity": -5},
        {"capacity": 0},
        {"capacity": "fast"},
        {"capacity": True},
        {"busy": 1.5},
        {"at": None},
        {"rebalance_advisor": None},
    ],
)
def test_malformed_reports_are_ignored(changes):
    data = {"rebalance_advisor": 2, "member": "m", "epoch": 1, "state": OWNED}
    data |= {"capacity": 100.0, "busy": 0.5, "at": 1_700_000_000.0} | changes
    if data["rebalance_advisor"] is None:
        del data["rebalance_advisor"]
    assert decode_capacity_report(json.dumps(data)) is None
    for text in ('{"capacity": NaN}', '{"capacity": Infinity, "rebalance_advisor": 2}', "[1]", "capacity"):
        assert decode_capacity_report(text) is None


# ---- the snapshot rule: group g, topic t, manual-assign members a (p0, p1) and b (p2, p3) --------

T0 = datetime(2026, 1, 1, 12, 0, tzinfo=UTC)
ASSIGNED = {"g": {"a": [("t", 0), ("t", 1)], "b": [("t", 2), ("t", 3)]}}
OWNERS = {("g", "t", p): ("a" if p < 2 else "b") for p in range(4)}


def _mark(member: str, capacity: float, at: datetime) -> str:
    return OwnerMark(member, 1, OWNED, "i").encode(CapacityReport(capacity, 0.3, at.timestamp()))


def _snapshot(k: int, metadata: dict[int, str] | None = None, lag0: int = 0) -> Snapshot:
    """k minutes after T0; every partition gets 10 records/s and is committed at its end, except p0,
    which is ``lag0`` behind."""
    end = 100_000 + 600 * k
    return Snapshot(
        taken_at=T0 + timedelta(minutes=k),
        bootstrap_servers="b",
        cluster_id="c",
        duration_s=0.1,
        committed=[
            CommittedOffset("g", "t", p, end - (lag0 if p == 0 else 0), None, (metadata or {}).get(p))
            for p in range(4)
        ],
        partitions=[PartitionOffsets("t", p, 0, end) for p in range(4)],
    )


def derive_rates(snap: Snapshot, carried: Carried | None, params: RateParameters, assigned=None):
    """The snapshot's rates and capacities (what the store computes when it writes it)."""
    return step(carried, observe_snapshot(snap, carried, params, assigned=assigned), params)[0]


def _previous(snap: Snapshot, carried=None, sources=None) -> Carried:
    ends = {(p.topic, p.partition): p.log_end_offset for p in snap.partitions}
    sources = sources or {}
    return Carried(
        cluster="id:c",
        snapshot_id=1,
        taken_at=snap.taken_at,
        log_ends=ends,
        lag_ends=ends,
        produce={k: 10.0 for k in ends},
        committed={(c.group_id, c.topic, c.partition): c.offset for c in snap.committed},
        consume={("g", t, p): 10.0 for t, p in ends},
        owners=OWNERS,
        capacities={
            k: CarriedCapacity(value, at, sources.get(k, "measured"))
            for k, (value, at) in (carried or {}).items()
        },
    )


def _capacities(rates) -> dict[str, tuple[float | None, str, datetime | None]]:
    return {m: (c.capacity, c.source, c.measured_at) for (_, m), c in rates.capacity.items()}


def test_a_fresh_report_is_the_members_capacity_and_the_median_for_the_others():
    # a is caught up (no busy sample) and reported 300/s at +50 s on p0 and 320/s at +55 s on p1: the
    # newest, 320. b's report was written before the previous snapshot: not a new sample, and b,
    # consuming 20/s (below 320), gets the group median of the one known capacity, 320.
    snap = _snapshot(
        1,
        {
            0: _mark("a", 300.0, T0 + timedelta(seconds=50)),
            1: _mark("a", 320.0, T0 + timedelta(seconds=55)),
            2: _mark("b", 90.0, T0 - timedelta(seconds=10)),
        },
    )
    rates = derive_rates(snap, _previous(_snapshot(0)), RateParameters(), assigned=ASSIGNED)
    got = _capacities(rates)
    assert got["a"] == (pytest.approx(320.0), "reported", T0 + timedelta(minutes=1))
    assert got["b"] == (pytest.approx(320.0), "group_median", None)

    # the next snapshot has no new report: a's value is carried as reported, time unchanged
    carried = {("g", "a"): (320.0, T0 + timedelta(minutes=1))}
    later = derive_rates(
        _snapshot(2, {0: _mark("a", 999.0, T0 + timedelta(seconds=30))}),  # an old mark, still there
        _previous(snap, carried, {("g", "a"): "reported"}),
        RateParameters(),
        assigned=ASSIGNED,
    )
    assert _capacities(later)["a"] == (pytest.approx(320.0), "reported", T0 + timedelta(minutes=1))


def test_a_new_report_is_smoothed_into_the_carried_value_like_a_rate():
    # carried 200 (reported a minute ago), new report 400 after 60 s; reports are smoothed over
    # 600 s (capacity_report_time_constant_s): alpha = 1 - e^(-60/600) = 0.0952; 200 + 0.0952 x 200
    # = 219.0
    carried = {("g", "a"): (200.0, T0 + timedelta(minutes=1))}
    rates = derive_rates(
        _snapshot(2, {1: _mark("a", 400.0, T0 + timedelta(seconds=100))}),
        _previous(_snapshot(1), carried, {("g", "a"): "reported"}),
        RateParameters(),
        assigned=ASSIGNED,
    )
    expected = 200.0 + (1 - math.exp(-0.1)) * 200.0
    assert _capacities(rates)["a"] == (pytest.approx(expected), "reported", T0 + timedelta(minutes=2))


def test_a_member_seen_saturated_is_measured_whatever_it_reports():
    # p0 stays 5,000 behind (floor 10 s x 10/s = 100) at both ends, so a was busy: its sample is what
    # it consumed, 10 + 10 = 20/s, not the 320 it reported
    snap = _snapshot(1, {0: _mark("a", 320.0, T0 + timedelta(seconds=50))}, lag0=5000)
    rates = derive_rates(snap, _previous(_snapshot(0, lag0=5000)), RateParameters(), assigned=ASSIGNED)
    assert _capacities(rates)["a"][:2] == (pytest.approx(20.0), "measured")


def test_at_a_first_snapshot_a_report_of_the_last_five_minutes_counts():
    recent = _snapshot(0, {0: _mark("a", 150.0, T0 - timedelta(seconds=299))})
    assert _capacities(derive_rates(recent, None, RateParameters(), assigned=ASSIGNED))["a"][:2] == (
        150.0,
        "reported",
    )
    stale = _snapshot(0, {0: _mark("a", 150.0, T0 - timedelta(seconds=301))})
    assert _capacities(derive_rates(stale, None, RateParameters(), assigned=ASSIGNED))["a"][1] == "equal"


# ---- the simulator's model of it ------------------------------------------------------------------


class _Recorder:
    name = "recorder"

    def __init__(self) -> None:
        self.seen: list[Observation] = []

    def plan(self, obs: Observation, truth) -> None:
        self.seen.append(obs)
        return None


def _scenario(**extra):
    return parse_scenario(
        {
            "topics": [{"name": "t", "partitions": 4, "total_rate": 100.0}],
            "members": [{"id": "slow", "capacity": 60.0}, {"id": "fast", "capacity": 120.0}],
            "replan_interval_s": 60,
            "hours": 0.1,
            **extra,
        },
        strategy="range",
        seed=3,
    )


def test_simulated_members_report_their_true_capacity_from_the_second_snapshot_on():
    # 100 msg/s over 4 equal partitions, 50/s per member under range: neither is saturated, so
    # nothing is measured and, without reports, nobody's capacity is known
    quiet = _Recorder()
    simulate(_scenario(), quiet)
    assert all(o.capacity_source == ("equal", "equal") for o in quiet.seen)

    told = _Recorder()
    simulate(_scenario(capacity_reports=True), told)
    # the planner first runs on the second pass, 30 s after the first snapshot (which gave no
    # rates): the members processed records in between, so they reported already
    assert told.seen[0].time_s == 30.0
    for obs in told.seen:
        assert obs.capacity_source == ("reported", "reported")
        np.testing.assert_allclose(obs.capacity, [60.0, 120.0])

    # off by up to 10 %: each report within it, and not all exact
    noisy = _Recorder()
    simulate(_scenario(capacity_reports=True, capacity_report_error=0.1), noisy)
    caps = np.asarray([o.capacity for o in noisy.seen[1:]])
    assert ((caps >= [54.0, 108.0]) & (caps <= [66.0, 132.0])).all()
    assert not np.allclose(caps, [60.0, 120.0])


def test_reports_leave_the_rest_of_a_simulation_unchanged():
    # the reports draw from their own random stream: the rates a seed produces stay the same
    plain = simulate(_scenario(drift_sigma=0.5)).summary
    reported = simulate(_scenario(drift_sigma=0.5, capacity_reports=True, capacity_report_error=0.1)).summary
    assert plain.produced == reported.produced


def test_simulated_telemetry_gives_capacities_within_its_gates():
    # range: 50/s per member. slow (60/s) is busy 5/6 and fast (120/s) 5/12: each pushes that busy
    # share as Java's idle ratio, which the telemetry source reads back: 50 / (5/6) = 60 and
    # 50 / (5/12) = 120. A member of 300/s is busy 1/6 < 20 %: no capacity from its telemetry.
    heard = _Recorder()
    simulate(_scenario(telemetry=True), heard)
    # from the first observation on: the second pass, 30 s after the first snapshot
    assert len(heard.seen) >= 5 and heard.seen[0].time_s == 30.0
    for obs in heard.seen:
        assert obs.capacity_source == ("telemetry", "telemetry")
        np.testing.assert_allclose(obs.capacity, [60.0, 120.0])
    idle = _Recorder()
    members = [{"id": "slow", "capacity": 60.0}, {"id": "idle", "capacity": 300.0}]
    simulate(_scenario(telemetry=True, members=members), idle)
    assert all(o.capacity_source[1] != "telemetry" for o in idle.seen)
    assert idle.seen[-1].capacity_source == ("telemetry", "group_median")
