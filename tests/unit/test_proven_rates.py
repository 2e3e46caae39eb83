"""A member's proven rate (domain/estimates.py, ``ProvenRate``): the most it consumed over an interval
it kept up through is a floor under its capacity estimate, carried between snapshots and forgotten
after ``capacity_max_age_s``. Hand-worked numbers throughout."""

from __future__ import annotations

from datetime import timedelta

import pytest
from rebalance_advisor.domain.estimates import (
    RateParameters,
    _kept_up,
    _Work,
    fill_capacities,
    next_proven_rate,
    observe_snapshot,
    step,
)
from rebalance_advisor.domain.snapshot_model import ProvenRate

from tests.support.hand_made import T0
from tests.support.hand_made import group_b_snapshot as _snap

PARAMS = RateParameters()


def test_a_proven_rate_rises_with_a_faster_interval_and_keeps_its_time_otherwise() -> None:
    first = next_proven_rate(None, 800.0, T0, PARAMS)
    assert first == ProvenRate(800.0, T0)
    later = T0 + timedelta(seconds=300)
    assert next_proven_rate(first, 500.0, later, PARAMS) == first  # slower: it proves nothing new
    assert next_proven_rate(first, None, later, PARAMS) == first  # busy, or moved: nothing
    assert next_proven_rate(first, 900.0, later, PARAMS) == ProvenRate(900.0, later)


def test_a_proven_rate_older_than_the_capacity_age_is_forgotten() -> None:
    old = ProvenRate(800.0, T0)
    past = T0 + timedelta(seconds=PARAMS.capacity_max_age_s + 1)
    assert next_proven_rate(old, None, past, PARAMS) is None
    assert next_proven_rate(old, 300.0, past, PARAMS) == ProvenRate(300.0, past)


def test_lag_drained_within_what_is_in_flight_does_not_count_as_work() -> None:
    # 100/s consumed over 60 s; its partitions' floors (10 s of produce) sum to 600 records
    assert _kept_up(_Work(None, 100.0, -300.0, 600.0), 60.0) == pytest.approx(95.0)  # 100 - 300/60
    assert _kept_up(_Work(None, 100.0, -1200.0, 600.0), 60.0) == pytest.approx(90.0)  # 100 - 600/60
    assert _kept_up(_Work(None, 100.0, 500.0, 600.0), 60.0) == pytest.approx(100.0)  # lag grew
    assert _kept_up(_Work(96.0, 96.0, 500.0, 600.0), 60.0) is None  # busy: measured instead


def test_no_estimate_goes_under_a_proven_rate() -> None:
    """Median 960 (one measured member). b consumes 500/s but once kept up at 1,500/s: the median
    would hold it at 960. c consumes 1,100/s, above the median: 1.2 x 1,100 = 1,320, over its proven
    1,000. A measured member keeps its measurement whatever it proved."""
    filled = fill_capacities(
        [960.0, None, None], [900.0, 500.0, 1100.0], factor=1.2, proven=[2000.0, 1500.0, 1000.0]
    )
    assert filled[0] == (960.0, "measured")
    assert filled[1] == (1500.0, "group_median")
    assert filled[2][0] == pytest.approx(1320.0) and filled[2][1] == "own_rate"


def test_a_member_whose_load_fell_keeps_the_capacity_it_proved() -> None:
    """Group b (tests/support/hand_made.py). m1 has backlog on t-0 throughout: measured 3/s + 0.5/s = 3.5/s, the group's median. m2 keeps up
    with 8/s from 0 to 100 s, then with 1/s. At 200 s its smoothed rate is 8 + (1 - 8)(1 - e^(-100/120))
    = 4.04/s, above the median, so its estimate would be 1.2 x 4.04 = 4.85/s; it proved 8/s."""
    carried = None
    for snap in (
        _snap(0, {0: 1000, 1: 100, 2: 100}, {0: 100, 1: 100, 2: 100}),
        _snap(100, {0: 1200, 1: 150, 2: 900}, {0: 400, 1: 150, 2: 900}),
        _snap(200, {0: 1400, 1: 200, 2: 1000}, {0: 700, 1: 200, 2: 1000}),
    ):
        rates, carried = step(carried, observe_snapshot(snap, carried), PARAMS)
    m1, m2 = rates.capacity[("b", "m1")], rates.capacity[("b", "m2")]
    assert (m1.capacity, m1.source) == (pytest.approx(3.5), "measured")
    assert rates.consume[("b", "t", 2)].rate == pytest.approx(4.04, abs=0.01)
    assert (m2.capacity, m2.source) == (pytest.approx(8.0), "own_rate")
    assert m2.proven_rate == ProvenRate(pytest.approx(8.0), T0 + timedelta(seconds=100))
    assert carried.proven_rates == {("b", "m2"): m2.proven_rate}
