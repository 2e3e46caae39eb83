"""A plan does not count on an estimated capacity for a partition no measured member can hold
(group_planning.untested_capacities; docs/benchmarks/drain.md, large-50x500-steps).

Numbers worked out by hand. Group g, topic t, no margin unless said (capacity_margin 0.02 by
default: usable = 0.98 x capacity):
- ``a`` and ``b`` measured at 100/s; ``u`` never saturated, its capacity an estimate of 150/s
  (1.2 x the 125/s it once consumed, source ``own_rate``);
- p0 stepped up to 105/s with 2,000 lag on ``a``: 105 >= 98 (a's usable capacity), overloaded, and
  no measured member can hold it alone; p1 30/s on ``b``, p2 40/s on ``u``, both caught up.
"""

from __future__ import annotations

from datetime import UTC, datetime

import numpy as np
import pytest
from rebalance_advisor.domain.decisions import Thresholds
from rebalance_advisor.domain.group_planning import plan_group, untested_capacities
from rebalance_advisor.domain.group_spec import parse_group_spec
from rebalance_advisor.domain.load_model import load_inputs

T0 = datetime(2026, 11, 27, 12, 0, tzinfo=UTC)
SOURCES = {"a": "measured", "b": "measured", "u": "own_rate"}


def _doc(hot_rate: float = 105.0) -> dict:
    return {
        "group_id": "g",
        "members": [
            {"member_id": "a", "topics": ["t"], "owned": [["t", 0]], "capacity": 100.0},
            {"member_id": "b", "topics": ["t"], "owned": [["t", 1]], "capacity": 100.0},
            {"member_id": "u", "topics": ["t"], "owned": [["t", 2]], "capacity": 150.0},
        ],
        "partitions": [
            {"topic": "t", "partition": 0, "lag": 2_000, "produce_rate": hot_rate},
            {"topic": "t", "partition": 1, "lag": 0, "produce_rate": 30.0},
            {"topic": "t", "partition": 2, "lag": 0, "produce_rate": 40.0},
        ],
        "capacity_sources": SOURCES,
    }


def _capacities(doc: dict, owners: list[int], estimated=frozenset({"u"})) -> list[float]:
    spec = parse_group_spec({k: doc[k] for k in ("group_id", "members", "partitions")})
    judged = untested_capacities(spec, np.array(owners), load_inputs(spec), estimated, 0.02)
    return judged.capacity.tolist()


def test_an_estimated_member_handed_a_partition_no_measured_member_holds_gets_the_fastest_measured():
    # p0 -> u, p2 -> a (what rate_aware and rate_aware_sticky both plan): p0's 105/s >= 0.98 x 100,
    # the fastest measured subscriber's usable capacity, so u is judged at 100/s, not its 150/s
    # estimate: 105 >= 98, still overloaded
    assert _capacities(_doc(), [2, 1, 0]) == [100.0, 100.0, 100.0]
    # p0 stays on a and u keeps p2: nothing handed over, u's estimate stands
    assert _capacities(_doc(), [0, 1, 2]) == [100.0, 100.0, 150.0]
    # at 95/s (< 98) a measured member can hold p0: u's estimate is not what the plan relies on
    assert _capacities(_doc(95.0), [2, 1, 0]) == [100.0, 100.0, 150.0]
    # nobody measured (every member estimated): no evidence to judge by, the estimates stand
    assert _capacities(_doc(), [2, 1, 0], frozenset({"a", "b", "u"})) == [100.0, 100.0, 150.0]


def test_the_stepped_partition_is_tested_by_the_probe_not_relieved_on_an_estimate():
    # judged on u's estimate, both strategies "relieve" a (u: 105 + 0 < 147, severity
    # (105 / 98 - 1)^2 = 0.0051 -> 0); judged at 100/s, u would be at 107.1 % of 98, the same
    # severity: no plan relieves, and the capacity probe makes the one test of u's estimate
    advice = plan_group(_doc(), Thresholds(), T0)
    assert advice.outcome == "recommended", advice.reason
    assert advice.plan is not None and advice.plan.strategy == "capacity_probe", advice.reason
    assert "whose capacity 150.0/s is an estimate" in advice.reason
    owners = {p: m for m, _t, p, _lag in advice.plan.assignments}
    assert owners == {0: "u", 1: "b", 2: "a"}  # p0 to u, and a takes u's lightest partition back
    sticky = next(c for c in advice.candidates if c.strategy == "rate_aware_sticky")
    assert sticky.load.overloaded == 1
    assert sticky.load.overload_severity == pytest.approx((105 / 98 - 1) ** 2)
