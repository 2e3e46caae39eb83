"""Decision rules and the per-group planner, on hand-checked groups (no Spark, no database)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from rebalance_advisor.domain.advice import GroupAdvice
from rebalance_advisor.domain.assignors import get_assignor
from rebalance_advisor.domain.decisions import (
    CandidatePlan,
    StandingPlan,
    Thresholds,
    best_candidate,
    decide,
    is_flagged,
)
from rebalance_advisor.domain.group_planning import plan_group
from rebalance_advisor.domain.group_spec import parse_group_spec
from rebalance_advisor.errors import AdvisorError

from tests._groups import group

NOW = datetime(2025, 1, 1, 12, 0, tzinfo=UTC)
T = Thresholds()


def test_defaults_are_the_documented_ones():
    assert (T.imbalance_threshold, T.lag_floor, T.min_improvement, T.move_budget, T.cooldown_minutes) == (
        1.25,
        1000,
        0.10,
        None,
        30.0,
    )
    assert set(T.strategies) == {"range", "roundrobin", "sticky", "lag_aware", "lag_aware_sticky"}


@pytest.mark.parametrize(
    "kwargs",
    [
        {"imbalance_threshold": 0.9},
        {"lag_floor": -1},
        {"min_improvement": 1.0},
        {"move_budget": -2},
        {"cooldown_minutes": -1},
        {"strategies": ()},
        {"strategies": ("nope",)},
    ],
)
def test_bad_thresholds_are_refused(kwargs):
    with pytest.raises(AdvisorError):
        Thresholds(**kwargs)


def test_flag_needs_both_imbalance_and_floor():
    assert is_flagged(1.25, 1000, 0, T)
    assert not is_flagged(1.2499, 10**9, 0, T)
    assert not is_flagged(5.0, 999, 0, T)
    assert is_flagged(1.0, 1000, 1, T)  # lag no member owns flags an even group
    assert not is_flagged(1.0, 999, 999, T)


def test_best_candidate_order_and_budget():
    cands = [
        CandidatePlan("range", 100, 0),
        CandidatePlan("lag_aware_sticky", 80, 3),
        CandidatePlan("lag_aware", 80, 3),
        CandidatePlan("sticky", 80, 2),
    ]
    assert best_candidate(cands, None) == CandidatePlan("sticky", 80, 2)  # fewer moves beats preference
    assert best_candidate(cands[1:3], None).strategy == "lag_aware"  # full tie: preference order
    assert best_candidate(cands, 1) == CandidatePlan("range", 100, 0)
    assert best_candidate(cands[1:], 1) is None


def _decide(**kw):
    base = dict(total_lag=210_000, max_lag_before=160_000, imbalance_before=160_000 / 105_000)
    base["candidates"] = [CandidatePlan("lag_aware", 110_000, 1)]
    base.update(kw)
    return decide(thresholds=T, **base)


def test_outcomes_in_order():
    assert _decide(total_lag=0).outcome == "idle"
    assert _decide(total_lag=999).reason == "total lag 999 < floor 1,000"
    assert _decide(imbalance_before=1.2).outcome == "balanced"
    d = _decide()
    assert (d.outcome, d.plan_status, d.chosen.strategy) == ("recommended", "recommended", "lag_aware")
    assert "160,000 -> 110,000" in d.reason
    # 160,000 -> 150,000 is 6.25 %: below the 10 % minimum
    d = _decide(candidates=[CandidatePlan("lag_aware", 150_000, 1)])
    assert (d.outcome, d.chosen, d.best.strategy) == ("no_better_plan", None, "lag_aware")
    assert "6.2%" in d.reason
    d = decide(
        total_lag=210_000,
        max_lag_before=160_000,
        imbalance_before=1.6,
        candidates=[CandidatePlan("lag_aware", 110_000, 1)],
        thresholds=Thresholds(move_budget=0),
    )
    assert d.outcome == "no_better_plan" and "move budget 0" in d.reason


def test_cooldown_keeps_candidate_as_skipped_then_expires():
    standing = StandingPlan(7, "recommended", (NOW - timedelta(minutes=10)).replace(tzinfo=None))
    d = _decide(standing=standing, now=NOW)
    assert (d.outcome, d.plan_status) == ("no_better_plan", "skipped")
    assert d.reason.startswith("cool-down: plan 7 (recommended) still stands until 2025-01-01T12:20:00")
    d = _decide(standing=standing, now=NOW + timedelta(minutes=21))
    assert d.outcome == "recommended"


def test_unowned_lag_flags_even_when_even():
    d = _decide(max_lag_before=0, imbalance_before=1.0, unowned_lag=210_000)
    assert d.outcome == "recommended" and "no member owns" in d.reason


KIP = group(
    [("C0", ["t0"], [("t0", 0), ("t0", 1)]), ("C1", ["t0"], [("t0", 2)])],
    {"t0": [100_000, 60_000, 50_000]},
    group_id="kip-example",
)


def test_plan_group_worked_example():
    result = plan_group(KIP, T, NOW)
    assert result.outcome == "recommended"
    assert (result.max_lag_before, result.max_lag_after, result.moves) == (160_000, 110_000, 1)
    plan = result.plan
    assert plan.strategy == "lag_aware" and plan.status == "recommended"
    assert "lag_aware_sticky" in plan.equivalent_strategies
    assert sorted(plan.assignments) == [
        ("C0", "t0", 0, 100_000),
        ("C1", "t0", 1, 60_000),
        ("C1", "t0", 2, 50_000),
    ]
    assert plan.metrics.member_lag == {"C0": 100_000, "C1": 110_000}
    assert result.current.member_lag == {"C0": 160_000, "C1": 50_000}
    assert GroupAdvice.from_json(result.to_json()) == result  # what crosses the Spark boundary


def test_plan_group_matches_direct_assignor_calls():
    doc = group(
        [("a", ["x", "y"], [("x", 0)]), ("b", ["x"], [("x", 1)]), ("c", ["y"])],
        {"x": [9_000, 7_000, 5_000, 1], "y": [30_000, 2, 3]},
    )
    spec = parse_group_spec(doc)
    for name in T.strategies:
        result = plan_group(
            doc, Thresholds(strategies=(name,), imbalance_threshold=1.0, min_improvement=0.0), NOW
        )
        if result.plan is None:
            continue
        direct = get_assignor(name).assign(spec)
        got: dict[str, list] = {m: [] for m in spec.member_ids}
        for member, topic, partition, _lag in result.plan.assignments:
            got[member].append((topic, partition))
        assert got == direct, name


def test_plan_group_no_members_and_errors():
    doc = {"group_id": "m", "members": [], "partitions": [{"topic": "t", "partition": 0, "lag": 5}]}
    r = plan_group(doc, T, NOW)
    assert (r.outcome, r.total_lag, r.plan) == ("no_members", 5, None)
    bad = group([("a", ["missing"])], {"t": [1, 2]})
    r = plan_group(bad, T, NOW)
    assert r.outcome == "error" and "missing" in r.reason
