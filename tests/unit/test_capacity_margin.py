"""The auto capacity margin (docs/concepts/decision-rules.md): it follows the interval between the snapshots the rates
come from, because a member's inflow drifts until the next plan. Values worked out by hand from
0.016 per minute, at least 0.02, at most 0.20."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
from rebalance_advisor.domain.group_planning import plan_group
from rebalance_advisor.domain.parameters import Thresholds, auto_capacity_margin

NOW = datetime(2026, 1, 1, tzinfo=UTC)


@pytest.mark.parametrize(
    ("interval_s", "margin"),
    [(None, 0.02), (30.0, 0.02), (60.0, 0.02), (90.0, 0.024), (300.0, 0.08), (600.0, 0.16), (3600.0, 0.2)],
)
def test_the_auto_margin_per_snapshot_interval(interval_s, margin):
    assert auto_capacity_margin(interval_s) == pytest.approx(margin)
    assert Thresholds().for_rate_interval(interval_s).capacity_margin == pytest.approx(margin)


def test_an_explicit_margin_is_kept_whatever_the_interval():
    assert Thresholds(capacity_margin=0.05).for_rate_interval(300.0).capacity_margin == 0.05
    assert Thresholds(capacity_margin=0).for_rate_interval(300.0).capacity_margin == 0


def _doc(interval):
    # m holds 94/s against a measured 100/s: 94 % of its capacity; n is idle
    doc = {
        "group_id": "g",
        "members": [
            {"member_id": "m", "topics": ["t"], "owned": [["t", 0], ["t", 1]], "capacity": 100.0},
            {"member_id": "n", "topics": ["t"], "owned": [["t", 2]], "capacity": 100.0},
        ],
        "partitions": [
            {"topic": "t", "partition": 0, "lag": 0, "produce_rate": 60.0},
            {"topic": "t", "partition": 1, "lag": 0, "produce_rate": 34.0},
            {"topic": "t", "partition": 2, "lag": 0, "produce_rate": 1.0},
        ],
        "capacity_sources": {"m": "measured", "n": "measured"},
    }
    if interval is not None:
        doc["rate_interval_s"] = interval
    return doc


def test_the_plan_document_s_interval_sets_the_margin():
    # 1-minute snapshots: margin 0.02, 94 < 98: nothing overloaded, no lag: idle
    assert plan_group(_doc(60), Thresholds(), NOW).outcome == "idle"
    # 5-minute snapshots: margin 0.08, 94 >= 92: overloaded, p1 (34/s) goes to n
    five = plan_group(_doc(300), Thresholds(), NOW)
    assert five.outcome == "recommended", five.reason
    assert "1 member(s) overloaded (inflow >= 92% of capacity)" in five.reason
    assert {p: m for m, _t, p, _lag in five.plan.assignments} == {0: "m", 1: "n", 2: "n"}
    # unknown (a hand-written document): the minimum margin
    assert plan_group(_doc(None), Thresholds(), NOW).outcome == "idle"


@pytest.mark.parametrize("bad", [-60, 0, float("nan"), float("inf"), "300", True])
def test_a_bad_rate_interval_is_refused_naming_the_field(bad):
    advice = plan_group(_doc(bad), Thresholds(), NOW)
    assert advice.outcome == "error"
    assert "rate_interval_s must be a finite number of seconds > 0 or null" in advice.reason
