"""The idle rule (docs/concepts/decision-rules.md): a small lag is idle only while it clears within the
target. A member just under its line grows a small lag for minutes, and the 1,000-record floor alone
hid it (bench/closed_loop.py run C, 2026-11-28 07:46: `idle` at total lags 650-954 while the slow
member fell behind).

Hand-worked group: two members, capacity 116/s and 300/s, margin 2 % (usable 113.68 and 294/s);
m0 holds p0 (60/s) and p1 (52.9/s) = 112.9/s with 650 records of lag, m1 holds p2 (100/s), caught up.
m0's predicted catch-up: 650 / (113.68 - 112.9) = 833 s, over the 300 s target; 99.3 % of its usable
capacity, so not overloaded.
"""

from __future__ import annotations

import numpy as np
import pytest
from rebalance_advisor.domain.advice import CandidatePlan
from rebalance_advisor.domain.decisions import Thresholds, decide, is_idle
from rebalance_advisor.domain.group_planning import group_state
from rebalance_advisor.domain.group_spec import parse_group_spec
from rebalance_advisor.domain.load_model import load_inputs, summarize

T = Thresholds(capacity_margin=0.02)  # lag_floor 1,000, target_catch_up_s 300


def _spec(lag_p0: int, lag_p1: int, owners: tuple[int, int, int] = (0, 0, 1)):
    members = [
        {
            "member_id": f"m{m}",
            "topics": ["t"],
            "owned": [["t", p] for p, o in enumerate(owners) if o == m],
            "capacity": cap,
        }
        for m, cap in enumerate((116.0, 300.0))
    ]
    partitions = [
        {"topic": "t", "partition": p, "lag": lag, "produce_rate": rate}
        for p, (lag, rate) in enumerate(((lag_p0, 60.0), (lag_p1, 52.9), (0, 100.0)))
    ]
    return parse_group_spec({"group_id": "g", "members": members, "partitions": partitions})


def test_a_small_lag_that_does_not_clear_in_time_is_not_idle():
    spec = _spec(400, 250)
    state, _ = group_state(spec, load_inputs(spec), T)
    assert state.total_lag == 650 and state.load.overloaded == 0
    assert state.load.max_catch_up_s == pytest.approx(650 / (116 * 0.98 - 112.9))  # 833 s
    assert not is_idle(state, T)
    moved = np.asarray((1, 0, 1), dtype=np.int32)  # p0 to m1: m0 52.9/s, m1 160/s
    load, _ = summarize(
        spec, moved, load_inputs(spec), T.horizon_s, T.handover_cost_s, T.capacity_margin_in_force
    )
    decision = decide(state, [CandidatePlan("rate_aware", 0, 1, 0.0, load)], T)
    assert decision.outcome == "recommended", decision.reason
    assert decision.reason.startswith("predicted catch-up 833 s > target 300 s"), decision.reason


def test_a_small_lag_that_clears_in_time_stays_idle():
    # 100 records: 100 / 0.78 = 128 s <= 300 s
    spec = _spec(60, 40)
    state, _ = group_state(spec, load_inputs(spec), T)
    assert state.load.max_catch_up_s == pytest.approx(100 / (116 * 0.98 - 112.9))
    assert is_idle(state, T)
    assert decide(state, [], T).outcome == "idle"


def test_without_capacities_the_floor_alone_decides():
    spec = parse_group_spec(
        {
            "group_id": "g",
            "members": [{"member_id": "m0", "topics": ["t"], "owned": [["t", 0]]}],
            "partitions": [{"topic": "t", "partition": 0, "lag": 650, "produce_rate": 112.9}],
        }
    )
    state, _ = group_state(spec, load_inputs(spec), T)
    assert not state.capacities_known
    assert is_idle(state, T)
