"""Overload seen at the snapshot that shows it: the last interval's own evidence (domain/interval_evidence.py).

Hand-worked step change. m0 (capacity 1,368/s) holds p0..p3 at 274/s each = 1,096/s (80.1 %). At
the last snapshot p0 steps to 554/s: m0 takes 1,376/s = 100.6 % of its capacity. One 60-s
interval later the EWMA (τ 120 s, α = 1 - e^-0.5 = 0.3935) shows p0 at 274 + 0.3935 x 280 = 384.2/s,
m0 at 1,206.2/s = 88.2 %: below the 98 % line, so the rule answered ``balanced``. p0's interval rate,
554/s, departs from 384.2 by 44 % > the 10 % guard: with it m0 is at 1,376 >= 1,340.6 (98 %) and
one partition goes to m1 (600/s + 274 = 874/s).
"""

from __future__ import annotations

import math
from datetime import UTC, datetime

from rebalance_advisor.domain.decisions import Thresholds
from rebalance_advisor.domain.group_planning import plan_group
from rebalance_advisor.domain.interval_evidence import IntervalObservation

NOW = datetime(2026, 1, 1, 12, 0, tzinfo=UTC)
T = Thresholds(capacity_margin=0.02, strategies=("rate_aware", "rate_aware_sticky"))
ALPHA = 1 - math.exp(-0.5)


def _doc(rates, caps=(1368.0, 1368.0), lags=(1_000,) * 6, interval=None):
    owners = {0: "m0", 1: "m0", 2: "m0", 3: "m0", 4: "m1", 5: "m1"}
    doc = {
        "group_id": "g",
        "members": [
            {
                "member_id": m,
                "topics": ["t"],
                "owned": [["t", p] for p, o in owners.items() if o == m],
                "capacity": c,
            }
            for m, c in zip(("m0", "m1"), caps, strict=True)
        ],
        "partitions": [
            {"topic": "t", "partition": p, "lag": lags[p], "produce_rate": r} for p, r in enumerate(rates)
        ],
        "rate_interval_s": 60.0,
    }
    if interval is not None:
        doc["interval"] = interval.to_doc()
    return doc


SMOOTHED = (274 + ALPHA * 280, 274.0, 274.0, 274.0, 300.0, 300.0)
STEPPED = (554.0, 274.0, 274.0, 274.0, 300.0, 300.0)


def _interval(rates, lags_before=None, held=frozenset({"m0", "m1"})):
    return IntervalObservation(
        60.0,
        {("t", p): r for p, r in enumerate(rates)},
        {("t", p): lag for p, lag in enumerate(lags_before or (1_000,) * 6)},
        held,
    )


def test_the_step_change_member_was_balanced_on_smoothed_rates():
    assert sum(SMOOTHED[:4]) / 1368 < 0.98 * 0.9  # 88.2 %
    advice = plan_group(_doc(SMOOTHED), T, NOW)
    assert advice.outcome == "balanced", advice.reason


def test_the_interval_rate_shows_it_overloaded_and_one_move_relieves_it():
    advice = plan_group(_doc(SMOOTHED, interval=_interval(STEPPED)), T, NOW)
    assert advice.outcome == "recommended", advice.reason
    assert "1 member(s) overloaded" in advice.reason and "worst at 102.6% of usable capacity" in advice.reason
    assert advice.moves == 1
    assert advice.plan is not None and advice.plan.members is not None
    assert max(advice.plan.members.inflow) < 0.98 * 1368


def test_a_departure_within_the_guard_is_noise():
    # p0 at 5 % over its smoothed rate in the last interval: within the 10 % guard, the smoothed rates stand
    noisy = (SMOOTHED[0] * 1.05, *SMOOTHED[1:])
    assert plan_group(_doc(SMOOTHED, interval=_interval(noisy)), T, NOW).outcome == "balanced"


def test_backlog_that_grew_while_holding_the_same_partitions_is_overload():
    """m0's capacity estimate says 2,000/s and its rates hold still at 1,096/s, but its backlog grew
    from 4 x 100 to 4 x 3,100 in 60 s: 12,000 > the floor of 5 s x 1,096 = 5,480. It consumed
    1,096 - 12,000 / 60 = 896/s: its capacity is at most that, so it is overloaded now."""
    rates = (274.0, 274.0, 274.0, 274.0, 300.0, 300.0)
    lags, before = (3_100, 3_100, 3_100, 3_100, 100, 100), (100,) * 6
    doc = _doc(rates, caps=(2000.0, 2000.0), lags=lags, interval=_interval(rates, before))
    advice = plan_group(doc, T, NOW)
    assert advice.outcome == "recommended", advice.reason
    assert advice.current_load is not None and advice.current_load.worst_utilisation > 1.0
    # the same growth without holding the same partitions throughout (a handover at the previous
    # snapshot) is no evidence: the smoothed rates and the estimate stand
    moved = _doc(
        rates, caps=(2000.0, 2000.0), lags=lags, interval=_interval(rates, before, frozenset({"m1"}))
    )
    assert plan_group(moved, T, NOW).current_load.overloaded == 0
    # growth below the floor (4 x 1,300 = 5,200 < 5,480) is not evidence either
    assert T.growth_floor_s == 5.0
    small = _doc(
        rates, caps=(2000.0, 2000.0), lags=(1_400,) * 4 + (100, 100), interval=_interval(rates, before)
    )
    assert plan_group(small, T, NOW).current_load.overloaded == 0
