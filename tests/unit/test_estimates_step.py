"""The carried state and its one step (domain/estimates.py): what a snapshot adds over the previous
one, and what is carried to the next. Expected values are worked out by hand in each test."""

from __future__ import annotations

import math
from dataclasses import replace
from datetime import UTC, datetime, timedelta

import pytest
from rebalance_advisor.domain.estimates import (
    Carried,
    CarriedCapacity,
    Observed,
    ObservedMember,
    RateParameters,
    step,
    wants_rate_pass,
)
from rebalance_advisor.domain.group_spec import RecentMove

T0 = datetime(2026, 1, 1, 12, 0, tzinfo=UTC)
CLUSTER = "id:c"


def _observed(
    seconds: float,
    ends: dict[int, int],
    committed: dict[int, int],
    owners: dict[str, tuple[int, ...]],
    cluster: str = CLUSTER,
) -> Observed:
    """Group g on topic t, ``seconds`` after T0: log ends and committed offsets by partition."""
    return Observed(
        cluster=cluster,
        taken_at=T0 + timedelta(seconds=seconds),
        log_ends={("t", p): e for p, e in ends.items()},
        lag_ends={("t", p): e for p, e in ends.items()},
        committed={("g", "t", p): c for p, c in committed.items()},
        members=tuple(ObservedMember("g", m, m, tuple(("t", p) for p in ps)) for m, ps in owners.items()),
    )


def test_two_snapshots_give_a_rate_and_a_third_smooths_it():
    first, carried = step(None, _observed(0, {0: 1000}, {0: 900}, {"a": (0,)}))
    assert first.note == "no previous snapshot of this cluster: rates from the next one on"
    assert first.produce[("t", 0)].rate is None and first.interval_s is None
    assert first.produce[("t", 0)].unknown_reason == first.note
    # 60 s later: 600 appended and 600 committed -> 10/s each, the first sample taken as is
    second, carried = step(carried, _observed(60, {0: 1600}, {0: 1500}, {"a": (0,)}))
    assert second.note is None and second.interval_s == 60.0
    assert second.produce[("t", 0)].rate == pytest.approx(10.0)
    assert second.consume[("g", "t", 0)].rate == pytest.approx(10.0)
    # 60 s later: 1,200 appended (20/s), 600 committed (10/s). alpha = 1 - e^(-60/120) = 0.3935:
    # produce 10 + 0.3935 x (20 - 10) = 13.93/s; consume stays 10/s
    third, carried = step(carried, _observed(120, {0: 2800}, {0: 2100}, {"a": (0,)}))
    alpha = 1 - math.exp(-0.5)
    assert third.produce[("t", 0)].rate == pytest.approx(10 + alpha * 10)
    assert third.consume[("g", "t", 0)].rate == pytest.approx(10.0)
    # what is carried: this snapshot's offsets and smoothed rates, its time, owners by member key
    assert carried.taken_at == T0 + timedelta(seconds=120)
    assert carried.log_ends == {("t", 0): 2800} and carried.committed == {("g", "t", 0): 2100}
    assert carried.produce[("t", 0)] == pytest.approx(13.9347, abs=1e-4)
    assert carried.owners == {("g", "t", 0): "a"}
    # lag 100 -> 700 is below 10 s of 13.9/s at the start: not busy, so nothing measured yet
    assert third.capacity[("g", "a")].source == "equal" and carried.capacities == {}


def _carried(capacities: dict[tuple[str, str], CarriedCapacity], cluster: str = CLUSTER) -> Carried:
    """Group g at T0: a holds t-0, b holds t-1, both caught up at 1,000."""
    return Carried(
        cluster=cluster,
        taken_at=T0,
        log_ends={("t", 0): 1000, ("t", 1): 1000},
        lag_ends={("t", 0): 1000, ("t", 1): 1000},
        produce={("t", 0): 10.0, ("t", 1): 5.0},
        committed={("g", "t", 0): 1000, ("g", "t", 1): 1000},
        consume={("g", "t", 0): 10.0, ("g", "t", 1): 5.0},
        owners={("g", "t", 0): "a", ("g", "t", 1): "b"},
        capacities=capacities,
    )


def test_a_capacity_is_carried_with_its_time_and_source_until_it_is_too_old():
    # a reported 80/s half an hour ago; 60 s later both are still caught up (10/s and 5/s): no new
    # sample, so a keeps 80 as reported, measured then; b (5/s x 1.2 = 6 < 80) gets the median 80
    reported = CarriedCapacity(80.0, T0 - timedelta(minutes=30), "reported")
    later = _observed(60, {0: 1600, 1: 1300}, {0: 1600, 1: 1300}, {"a": (0,), "b": (1,)})
    rates, carried = step(_carried({("g", "a"): reported}), later)
    a, b = rates.capacity[("g", "a")], rates.capacity[("g", "b")]
    assert (a.capacity, a.source, a.measured_at) == (80.0, "reported", T0 - timedelta(minutes=30))
    assert (b.capacity, b.source, b.measured_at) == (80.0, "group_median", None)
    assert carried.capacities == {("g", "a"): reported}
    # with capacities kept 30 min only, a's is 31 min old: forgotten, and nobody is measured
    short = RateParameters(capacity_max_age_s=1800.0)
    rates, carried = step(_carried({("g", "a"): reported}), later, short)
    assert rates.capacity[("g", "a")].source == "equal" and rates.capacity[("g", "a")].capacity is None
    assert carried.capacities == {}


def test_a_snapshot_of_another_cluster_is_not_paired():
    measured = CarriedCapacity(80.0, T0, "measured")
    later = _observed(60, {0: 1600, 1: 1300}, {0: 1600, 1: 1300}, {"a": (0,), "b": (1,)})
    rates, carried = step(_carried({("g", "a"): measured}, cluster="id:other"), later)
    # as at a first snapshot: no rates, nothing carried over from the other cluster's state
    assert rates.note == "no previous snapshot of this cluster: rates from the next one on"
    assert rates.interval_s is None and rates.produce[("t", 0)].rate is None
    assert rates.capacity[("g", "a")].source == "equal"
    assert carried.cluster == CLUSTER and carried.capacities == {}


def _backlogged(carried: Carried) -> tuple:
    """60 s after T0: t-0 and t-1 appended 600 (10/s), t-0 committed 300 (5/s), t-1 600 (10/s);
    both 5,000 behind or more at both ends (floor 10 s x 10/s = 100): busy. a now holds t-0 only, b
    holds t-1 (it had) and t-2 (new, caught up)."""
    before = Carried(
        **{
            **carried.__dict__,
            "log_ends": {("t", 0): 10_000, ("t", 1): 10_000, ("t", 2): 50},
            "lag_ends": {("t", 0): 10_000, ("t", 1): 10_000, ("t", 2): 50},
            "committed": {("g", "t", 0): 5_000, ("g", "t", 1): 4_000, ("g", "t", 2): 50},
        }
    )
    later = _observed(
        60, {0: 10_600, 1: 10_600, 2: 50}, {0: 5_300, 1: 4_600, 2: 50}, {"a": (0,), "b": (1, 2)}
    )
    return before, later


def test_a_member_that_gained_or_lost_a_partition_is_not_measured_even_after_a_plan():
    # before: a held t-0 and t-2, b held t-1. Now a holds t-0, b holds t-1 and t-2.
    carried = Carried(
        **{**_carried({}).__dict__, "owners": {("g", "t", 0): "a", ("g", "t", 2): "a", ("g", "t", 1): "b"}}
    )
    before, later = _backlogged(carried)
    # A snapshot alone cannot tell when t-2 left a: a is not measured, nor b, which gained it
    rates, _ = step(before, later)
    assert {rates.capacity[("g", m)].source for m in ("a", "b")} == {"equal"}
    # A plan applied at the previous snapshot's instant (the simulator's case) changes nothing: the
    # store carries the snapshot's owners, so a (backlogged at both ends, 5/s) is not measured either
    move = RecentMove("t", 2, "a", "b", T0)
    planned = before.after_plan("g", [move])
    assert planned.owners == before.owners
    rates, after = step(planned, later)
    assert {rates.capacity[("g", m)].source for m in ("a", "b")} == {"equal"}
    # with a holding t-0 alone before and after, the same interval measures it at 5/s; b gained
    # t-2 (no owner before): still not measured
    kept = replace(before, owners={("g", "t", 0): "a", ("g", "t", 1): "b"})
    measured = step(kept, later)[0]
    a = measured.capacity[("g", "a")]
    assert (a.capacity, a.source, a.measured_at) == (
        pytest.approx(5.0),
        "measured",
        T0 + timedelta(seconds=60),
    )
    # b's own rate: t-1 smoothed from 5 to 5 + 0.3935 x (10 - 5) = 6.97/s, t-2 first seen at 0/s;
    # 1.2 x 6.97 = 8.36 is above the median 5, so b gets that (own_rate)
    alpha = 1 - math.exp(-0.5)
    assert measured.capacity[("g", "b")].source == "own_rate"
    assert measured.capacity[("g", "b")].capacity == pytest.approx(1.2 * (5 + alpha * 5))
    # the move is carried on, and forgotten once older than recent_moves_s (1,800 s)
    assert after.recent_moves == {"g": (move,)}
    _, much_later = step(after, _observed(1801, {0: 28_000}, {0: 20_000}, {"a": (0,)}))
    assert much_later.recent_moves == {}


def test_a_snapshot_without_rates_wants_a_second_pass():
    # The snapshot service takes a second pass after a snapshot that gave no rates: the cluster's
    # first; one 3 s after the previous (under min_interval_s 5 s); one 2 h after it (over
    # max_interval_s 1 h); one of another cluster. 30 s after a snapshot: 600 / 30 = 20/s, no pass.
    first, carried = step(None, _observed(0, {0: 1000}, {0: 900}, {"a": (0,)}))
    assert wants_rate_pass(first)
    second, later = step(carried, _observed(30, {0: 1600}, {0: 1500}, {"a": (0,)}))
    assert not wants_rate_pass(second) and second.produce[("t", 0)].rate == pytest.approx(20.0)
    for seconds, cluster in ((3, CLUSTER), (7230, CLUSTER), (60, "id:other")):
        rates, _ = step(later, _observed(30 + seconds, {0: 1700}, {0: 1600}, {"a": (0,)}, cluster))
        assert wants_rate_pass(rates), (seconds, cluster)
    assert RateParameters().rate_pass_s == 30.0
