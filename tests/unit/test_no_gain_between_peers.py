"""Moving a partition no member can hold to a peer measured higher is no relief
(group_planning.no_gain_between_peers; docs/benchmarks/drain.md, "Full repacks under 5-s commits").

Numbers worked out by hand. Group g, topic t, every capacity measured, margin 0.02 (usable = 0.98
x capacity): ``a`` 100/s, ``b`` 106/s (a's class: under 1.3 x 100), ``f`` 140/s (a faster class:
at least 130); p0 at 150/s with 2,000 lag on ``a``: 150 >= 0.98 x 140 = 137.2, so no member can
hold it alone; p1 10/s on ``b``, p2 10/s on ``f``, caught up.
"""

from __future__ import annotations

from datetime import UTC, datetime

import numpy as np
import pytest
from rebalance_advisor.domain.decisions import Thresholds
from rebalance_advisor.domain.group_planning import no_gain_between_peers, plan_group
from rebalance_advisor.domain.group_spec import parse_group_spec
from rebalance_advisor.domain.load_model import load_inputs

T0 = datetime(2026, 11, 29, 12, 0, tzinfo=UTC)


def _doc(hot_rate: float = 150.0, fast: float = 140.0) -> dict:
    return {
        "group_id": "g",
        "members": [
            {"member_id": "a", "topics": ["t"], "owned": [["t", 0]], "capacity": 100.0},
            {"member_id": "b", "topics": ["t"], "owned": [["t", 1]], "capacity": 106.0},
            {"member_id": "f", "topics": ["t"], "owned": [["t", 2]], "capacity": fast},
        ],
        "partitions": [
            {"topic": "t", "partition": 0, "lag": 2_000, "produce_rate": hot_rate},
            {"topic": "t", "partition": 1, "lag": 0, "produce_rate": 10.0},
            {"topic": "t", "partition": 2, "lag": 0, "produce_rate": 10.0},
        ],
        "capacity_sources": {"a": "measured", "b": "measured", "f": "measured"},
    }


def _capacities(doc: dict, owners: list[int]) -> list[float]:
    spec = parse_group_spec({k: doc[k] for k in ("group_id", "members", "partitions")})
    judged = no_gain_between_peers(spec, np.array(owners), load_inputs(spec), 0.02)
    return judged.capacity.tolist()


def test_a_peer_handed_a_partition_no_member_holds_is_credited_with_its_givers_capacity():
    # p0 -> b, p1 -> a: b is judged at a's 100/s, not its 106/s
    assert _capacities(_doc(), [1, 0, 2]) == [100.0, 100.0, 140.0]
    # p0 -> f: f is of a faster class (140 >= 1.3 x 100 = 130), credited in full
    assert _capacities(_doc(), [2, 1, 0]) == [100.0, 106.0, 140.0]
    # nothing handed over: the capacities stand
    assert _capacities(_doc(), [0, 1, 2]) == [100.0, 106.0, 140.0]
    # at 130/s (< 137.2) f can hold p0: a gain elsewhere may be real, nothing is capped
    assert _capacities(_doc(130.0), [1, 0, 2]) == [100.0, 106.0, 140.0]


def test_no_plan_relieves_a_partition_too_hot_for_every_member_by_moving_it_to_a_peer():
    # f at 125/s (a's class too: under 130). On the capacities as measured, p0 alone on f is at
    # 150 / (0.98 x 125) = 122.4 % (severity 0.224^2 = 0.050), alone on b at 150 / (0.98 x 106) =
    # 144.4 %, against a's 150 / 98 = 153.1 % (0.531^2 = 0.282): the sticky plan "relieves" a by
    # 2 handovers (without this rule: recommended, 153.1 % -> 122.4 %). Each receiver credited with
    # a's 100/s, p0 is at 153.1 % wherever it goes: no relief, nothing recommended
    advice = plan_group(_doc(fast=125.0), Thresholds(), T0)
    assert advice.outcome == "no_better_plan", advice.reason
    assert advice.plan is None or advice.plan.status != "recommended"
    best = min(c.load.overload_severity for c in advice.candidates)
    assert best == pytest.approx((150 / 98 - 1) ** 2)
