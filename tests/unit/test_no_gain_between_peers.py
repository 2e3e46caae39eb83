"""Putting a partition no member can hold, or one alone, on a peer measured higher is no relief
(group_planning.no_gain_between_peers; docs/benchmarks/drain.md, "A partition that fills a member
is no relief moved to a peer measured higher").

Numbers worked out by hand. Group g, topic t, every capacity measured, margin 0.02 (usable = 0.98
x capacity): ``a`` 100/s, ``b`` 106/s (alike to a: under the 1.15 x 100 = 115 its measurements
may spread), ``f`` 140/s (faster than that); p0 at 150/s with 2,000 lag on ``a``: 150 >= 0.98 x
140 = 137.2, so no member can hold it alone; p1 10/s on ``b``, p2 10/s on ``f``, caught up.
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
    # the same while b keeps p1: p0 is still one no member can hold
    assert _capacities(_doc(), [1, 1, 2]) == [100.0, 100.0, 140.0]
    # p0 -> f: f is faster than a's 115 (140), credited in full
    assert _capacities(_doc(), [2, 1, 0]) == [100.0, 106.0, 140.0]
    # nothing handed over: the capacities stand
    assert _capacities(_doc(), [0, 1, 2]) == [100.0, 106.0, 140.0]


def test_a_peer_left_holding_only_a_partition_it_received_is_credited_with_its_givers_capacity():
    # at 130/s (< 137.2) f can hold p0; alone on b (p1 -> a) b is judged at a's 100/s
    assert _capacities(_doc(130.0), [1, 0, 2]) == [100.0, 100.0, 140.0]
    # b keeps p1 beside it: a balancing move, b's 106/s stands
    assert _capacities(_doc(130.0), [1, 1, 2]) == [100.0, 106.0, 140.0]
    # p0 -> f, p1 -> a, p2 -> b, each alone: f is faster than its giver a (140 >= 115), credited in
    # full; a and b at most their givers' 106 and 140, above their own: unchanged
    assert _capacities(_doc(130.0), [2, 0, 1]) == [100.0, 106.0, 140.0]


def test_no_plan_relieves_a_partition_too_hot_for_every_member_by_moving_it_to_a_peer():
    # f at 110/s (alike to a too: under 115). On the capacities as measured, p0 alone on f is at
    # 150 / (0.98 x 110) = 139.1 % (severity 0.391^2 = 0.153), alone on b at 150 / (0.98 x 106) =
    # 144.4 %, against a's 150 / 98 = 153.1 % (0.531^2 = 0.282): a plan "relieves" a by moving p0
    # (without this rule: recommended, 153.1 % -> 139.1 %). Each receiver credited with a's 100/s,
    # p0 is at 153.1 % wherever it goes: no relief, nothing recommended
    advice = plan_group(_doc(fast=110.0), Thresholds(), T0)
    assert advice.outcome == "no_better_plan", advice.reason
    assert advice.plan is None or advice.plan.status != "recommended"
    best = min(c.load.overload_severity for c in advice.candidates)
    assert best == pytest.approx((150 / 98 - 1) ** 2)


def test_a_member_measured_a_fifth_faster_still_relieves_its_peer():
    # f at 125/s is 1.25 x a's 100, more than measurements spread: p0 at 115/s (a at 117.3 % of its
    # 98/s usable) fits f alone, 115 / (0.98 x 125) = 93.9 %, and the plan moving it there is
    # recommended (judged at a's 100/s, f would be at 117.3 % too, and nothing would be)
    advice = plan_group(_doc(hot_rate=115.0, fast=125.0), Thresholds(), T0)
    assert advice.outcome == "recommended", advice.reason
    assert advice.plan is not None
    owners = {p: m for m, _t, p, _lag in advice.plan.assignments}
    assert owners[0] == "f", owners
