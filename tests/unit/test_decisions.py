"""Decision rules and the per-group planner, on hand-checked groups (no Spark, no database)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from rebalance_advisor.domain.advice import GroupAdvice
from rebalance_advisor.domain.assignors import get_assignor
from rebalance_advisor.domain.decisions import (
    StandingPlan,
    Thresholds,
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
        0.0,
    )
    assert (T.target_catch_up_s, T.horizon_s, T.handover_cost_s, T.hysteresis_window_s) == (300, 900, 5, 1800)
    assert set(T.strategies) == {
        "range",
        "roundrobin",
        "sticky",
        "lag_aware",
        "lag_aware_sticky",
        "rate_aware",
        "rate_aware_sticky",
    }


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
        {"horizon_s": 0},
        {"handover_cost_s": float("nan")},
        {"target_catch_up_s": float("inf")},
    ],
)
def test_bad_thresholds_are_refused(kwargs):
    with pytest.raises(AdvisorError):
        Thresholds(**kwargs)


def test_cooldown_when_asked_holds_the_candidate_back_then_expires():
    standing = StandingPlan(7, "recommended", (NOW - timedelta(minutes=10)).replace(tzinfo=None))
    doc = dict(
        KIP, standing={"plan_id": 7, "status": "recommended", "created_at": standing.created_at.isoformat()}
    )
    thirty = Thresholds(cooldown_minutes=30)
    r = plan_group(doc, thirty, NOW)
    assert (r.outcome, r.plan.status) == ("held_by_cooldown", "skipped")
    assert r.reason.startswith("cool-down: plan 7 (recommended) still stands until 2025-01-01 12:20:00 UTC;")
    # the candidate is named, and the reason does not claim it is kept (write_run stores no skipped plan)
    assert f"; candidate {r.plan.strategy}: " in r.reason, r.reason
    assert r.reason.endswith("held back, no plan stored") and "kept" not in r.reason, r.reason
    assert plan_group(doc, thirty, NOW + timedelta(minutes=21)).outcome == "recommended"
    assert plan_group(doc, T, NOW).outcome == "recommended"  # no fixed silence by default


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
    assert plan.strategy == "lag_aware" and plan.status == "recommended"  # full tie: the KIP's name
    assert {"lag_aware_sticky", "rate_aware", "rate_aware_sticky"} <= set(plan.equivalent_strategies)
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
