"""The overload rule ranks by how deep the overload is, not by how many members are over the line.

Hand-worked group: three members of capacity 1,000/s, margin 2 % (usable 980/s), seven partitions
with a total inflow of 2,970/s (full load: 101 % of the usable capacity).

- as it stands: m0 holds p0 740 + p1 250 + p2 480 = 1,470/s (1,470 / 980 = 150 %), m1 p3 510 + p4
  240 = 750/s, m2 p5 500 + p6 250 = 750/s: one member overloaded, severity (1.5 - 1)^2 = 0.25;
- spread: m0 p0 + p1 = 990, m1 p2 + p3 = 990, m2 p4 + p5 + p6 = 990/s: each at 990 / 980 =
  101.02 %, all three over the line, severity 3 x 0.0102^2 = 0.000312.

Counting overloaded members first ranked 1 < 3 and answered no_better_plan while m0's lag grew by
490/s; the spread plan must win and its reason must name 150.0 % and 101.0 %.
"""

from __future__ import annotations

import numpy as np
import pytest
from rebalance_advisor.domain.advice import CandidatePlan
from rebalance_advisor.domain.decisions import Thresholds, decide, rank_key, relieves_overload
from rebalance_advisor.domain.group_planning import group_state
from rebalance_advisor.domain.group_spec import parse_group_spec
from rebalance_advisor.domain.load_model import load_inputs, summarize

T = Thresholds(capacity_margin=0.02)
RATES = (740, 250, 480, 510, 240, 500, 250)
CURRENT = (0, 0, 0, 1, 1, 2, 2)
SPREAD = (0, 0, 1, 1, 2, 2, 2)


def _spec(owners: tuple[int, ...], rates: tuple[float, ...] = RATES, lag: int = 5_000):
    members = [
        {
            "member_id": f"m{m}",
            "topics": ["t"],
            "owned": [["t", p] for p, o in enumerate(owners) if o == m],
            "capacity": 1000.0,
        }
        for m in range(3)
    ]
    partitions = [{"topic": "t", "partition": p, "lag": lag, "produce_rate": r} for p, r in enumerate(rates)]
    return parse_group_spec({"group_id": "g", "members": members, "partitions": partitions})


def _candidate(spec, name: str, owners: tuple[int, ...]) -> CandidatePlan:
    o = np.asarray(owners, dtype=np.int32)
    load, _ = summarize(spec, o, load_inputs(spec), T.horizon_s, 0.0, T.capacity_margin_in_force)
    moves = int(np.count_nonzero(o != spec.owner))
    return CandidatePlan(name, 0, moves, 0.0, load)


def test_hand_worked_severities():
    spec = _spec(CURRENT)
    state, _ = group_state(spec, load_inputs(spec), T)
    spread = _candidate(spec, "rate_aware", SPREAD)
    assert state.load.overloaded == 1
    assert state.load.worst_utilisation == pytest.approx(1.5)
    assert state.load.overload_severity == pytest.approx(0.25)
    assert state.load.excess_inflow == pytest.approx(490.0)
    assert spread.load.overloaded == 3
    assert spread.load.worst_utilisation == pytest.approx(990 / 980)
    assert spread.load.overload_severity == pytest.approx(3 * (10 / 980) ** 2)
    assert spread.load.excess_inflow == pytest.approx(30.0)


def test_one_at_150_percent_loses_to_three_at_101_percent():
    spec = _spec(CURRENT)
    state, _ = group_state(spec, load_inputs(spec), T)
    keep = _candidate(spec, "sticky", CURRENT)
    spread = _candidate(spec, "rate_aware", SPREAD)
    assert rank_key(spread) < rank_key(keep)
    decision = decide(state, [keep, spread], T)
    assert decision.outcome == "recommended", decision.reason
    assert decision.chosen is not None and decision.chosen.strategy == "rate_aware"
    assert "overloaded members 1 -> 3 (worst member 150.0% -> 101.0% of usable capacity" in decision.reason
    assert "excess inflow 490.0 -> 30.0/s" in decision.reason


def test_never_trades_two_marginal_members_for_one_deep_one():
    """Two members at 101.0 % (990/s each) against a plan with one at 151.5 % (1,485/s): fewer
    members over the line, but severity 0.515^2 = 0.265 > 2 x 0.0102^2 = 0.0002; it neither relieves
    nor ranks first."""
    rates = (495, 495, 495, 495, 300, 100, 100)
    now = (0, 0, 1, 1, 2, 2, 2)  # m0 990, m1 990, m2 500
    deep = (0, 0, 0, 1, 1, 2, 2)  # m0 1,485, m1 795, m2 200
    spec = _spec(now, rates)
    state, _ = group_state(spec, load_inputs(spec), T)
    assert state.load.overloaded == 2
    worse = _candidate(spec, "rate_aware", deep)
    assert worse.load.overloaded == 1
    assert worse.load.overload_severity == pytest.approx((1485 / 980 - 1) ** 2)
    assert not relieves_overload(worse.load, state.load, T)
    keep = _candidate(spec, "sticky", now)
    assert rank_key(keep) < rank_key(worse)
    decision = decide(state, [keep, worse], T)
    assert decision.outcome != "recommended", decision.reason
