"""An own-rate capacity estimate is bounded by the fastest measured member's capacity
(group_planning.no_faster_than_measured; docs/concepts/decision-rules.md, "Estimated capacities").

Hand-worked numbers. Group g, topic t, no lag, auto capacity margin 2 %. a and c are measured at
1,000/s (usable 980/s); b is unmeasured: its estimate is 1.2 x what it consumes (source own_rate).
- b consumed 950/s: estimate 1,140/s. Its partitions now bring 400 + 300 + 290 = 990/s. On the
  estimate it is at 990 / (0.98 x 1,140) = 88.6 %: idle today (no lag), while a member as fast as the
  fastest measured one is over its usable capacity. Bounded at 1,000/s: 990 / 980 = 101.0 %,
  overloaded. The best single move off b is p2 (290/s) to a (a 790, b 700: max 790 / 980 = 0.806;
  p1 to a leaves a at 800, 0.816; p0 to a at 900); a and c tie, a comes first. Then a at 0.806 is the
  top and no move lowers it by 1 %: one handover. rate_aware's full repack moves four partitions
  for max 0.806 as well, so the sticky plan is the one recommended.
- b consumed 1,100/s (more than a or c can): estimate 1,320/s, kept. 400 + 330 + 320 = 1,050/s is
  81.2 % of its usable 1,293.6/s: no member overloaded, and without lag the group is idle.
"""

from __future__ import annotations

from datetime import UTC, datetime

from rebalance_advisor.domain.decisions import Thresholds
from rebalance_advisor.domain.group_planning import plan_group

NOW = datetime(2026, 11, 28, 12, 0, tzinfo=UTC)
RULE = Thresholds(strategies=("rate_aware", "rate_aware_sticky"))


def _doc(b_capacity: float, b_rates: list[float]) -> dict:
    rates = {0: b_rates[0], 1: b_rates[1], 2: b_rates[2], 3: 500.0, 4: 500.0}
    owned = {"a": [3], "b": [0, 1, 2], "c": [4]}
    caps = {"a": 1000.0, "b": b_capacity, "c": 1000.0}
    return {
        "group_id": "g",
        "members": [
            {"member_id": m, "topics": ["t"], "owned": [["t", p] for p in parts], "capacity": caps[m]}
            for m, parts in owned.items()
        ],
        "partitions": [{"topic": "t", "partition": p, "lag": 0, "produce_rate": r} for p, r in rates.items()],
        "capacity_sources": {"a": "measured", "b": "own_rate", "c": "measured"},
    }


def test_an_own_rate_member_is_no_faster_than_the_fastest_measured_one():
    advice = plan_group(_doc(1140.0, [400.0, 300.0, 290.0]), RULE, NOW)
    assert advice.outcome == "recommended", advice.reason
    assert "worst at 101.0% of usable capacity" in advice.reason
    owners = {partition: member for member, _, partition, _ in advice.plan.assignments}
    assert owners == {0: "b", 1: "b", 2: "a", 3: "a", 4: "c"}
    assert advice.plan.strategy == "rate_aware_sticky"


def test_a_member_that_consumes_more_than_any_measured_one_keeps_its_estimate():
    advice = plan_group(_doc(1320.0, [400.0, 330.0, 320.0]), RULE, NOW)
    assert advice.outcome == "idle", advice.reason  # no lag and no member overloaded
