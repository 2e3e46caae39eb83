"""The load model (docs/architecture.md), ``rate_aware``, and the decision rule in time (hand-computed numbers)."""

from __future__ import annotations

import math
from datetime import UTC, datetime, timedelta

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from rebalance_advisor.domain.assignors import get_assignor
from rebalance_advisor.domain.decisions import Thresholds
from rebalance_advisor.domain.group_planning import plan_group
from rebalance_advisor.domain.group_spec import parse_group_spec
from rebalance_advisor.domain.load_model import backlog_area, catch_up_time, lag_curves

NOW = datetime(2025, 1, 1, 12, 0, tzinfo=UTC)
T = Thresholds()


def doc(members, partitions, **extra):
    """members: [(id, owned partition numbers, capacity or None)]; partitions: [(lag, rate or None)] of topic t."""
    return {
        "group_id": "g",
        "members": [
            {"member_id": m, "topics": ["t"], "owned": [["t", p] for p in owned], "capacity": cap}
            for m, owned, cap in members
        ],
        "partitions": [
            {"topic": "t", "partition": p, "lag": lag, "produce_rate": rate}
            for p, (lag, rate) in enumerate(partitions)
        ],
        **extra,
    }


def owned_by(advice):
    got: dict[str, list[int]] = {}
    for member, _topic, partition, _lag in advice.plan.assignments:
        got.setdefault(member, []).append(partition)
    return {m: sorted(ps) for m, ps in got.items()}


# ---- load model -------------------------------------------------------------------------

finite = st.floats(min_value=0, max_value=1e7, allow_nan=False)
positive = st.floats(min_value=1e-3, max_value=1e7, allow_nan=False)


@given(finite, finite, positive)
def test_catch_up_formula_and_infinity_on_overload(backlog, inflow, capacity):
    (t,) = catch_up_time(np.array([backlog]), np.array([inflow]), np.array([capacity]))
    if inflow >= capacity:
        assert math.isinf(t)
    else:
        assert t == pytest.approx(backlog / (capacity - inflow), rel=1e-12)
        assert t * (capacity - inflow) == pytest.approx(backlog, rel=1e-9, abs=1e-9)


@given(finite, finite, finite, positive)
def test_catch_up_is_monotone_in_backlog(b1, b2, inflow, capacity):
    low, high = sorted((b1, b2))
    t = catch_up_time(np.array([low, high]), np.array([inflow] * 2), np.array([capacity] * 2))
    assert t[0] <= t[1]


def test_backlog_area_and_curves_by_hand():
    # B=100, inflow 1, capacity 3: drains at 2/s, zero at 50 s; area = 100*50 - 2*50^2/2 = 2,500
    assert backlog_area(np.array([100.0]), np.array([1.0]), np.array([3.0]), 100)[0] == pytest.approx(2500)
    # overloaded: B=10 growing at 2/s for 10 s: area = 10*10 + 2*10^2/2 = 200
    assert backlog_area(np.array([10.0]), np.array([3.0]), np.array([1.0]), 10)[0] == pytest.approx(200)
    curves = lag_curves(
        np.array([100.0, 10.0]), np.array([1.0, 3.0]), np.array([3.0, 1.0]), np.array([0, 25, 60])
    )
    assert curves.tolist() == [[100.0, 50.0, 0.0], [10.0, 60.0, 130.0]]


# ---- rate_aware on small hand-checked groups --------------------------------------------


def test_rate_aware_packs_rates_without_capacities():
    # weights ~ rates (no lag): 600 -> C0; 300 -> C1; 300 -> C2; 200 -> C1 (C1, C2 tie: member order);
    # 100 -> C2 (300 < 500); 100 -> C2 (400 < 500)
    spec = parse_group_spec(doc([("C0", [], None), ("C1", [], None), ("C2", [], None)],
                                [(0, r) for r in (600, 300, 300, 200, 100, 100)]))  # fmt: skip
    got = get_assignor("rate_aware").assign(spec)
    assert got == {"C0": [("t", 0)], "C1": [("t", 1), ("t", 3)], "C2": [("t", 2), ("t", 4), ("t", 5)]}


def test_rate_aware_uses_capacities():
    # utilisation (load + w)/capacity, capacities 400/800/800: 600 -> C1 (.75); 300 -> C2 (.375);
    # 250 -> C0 (.625 < C2 .6875); 200 -> C2 (.625 < C1 1.0 < C0 1.125). Nobody overloaded.
    spec = parse_group_spec(doc([("C0", [], 400), ("C1", [], 800), ("C2", [], 800)],
                                [(0, r) for r in (600, 300, 250, 200)]))  # fmt: skip
    got = get_assignor("rate_aware").assign(spec)
    assert got == {"C0": [("t", 2)], "C1": [("t", 0)], "C2": [("t", 1), ("t", 3)]}


def test_rate_aware_mixed_subscriptions_only_to_subscribers():
    data = {
        "group_id": "g",
        "members": [{"member_id": "a", "topics": ["x"]}, {"member_id": "b", "topics": ["x", "y"]}],
        "partitions": [
            {"topic": "x", "partition": 0, "lag": 0, "produce_rate": 100},
            {"topic": "x", "partition": 1, "lag": 0, "produce_rate": 100},
            {"topic": "y", "partition": 0, "lag": 0, "produce_rate": 150},
        ],
    }
    for name in ("rate_aware", "rate_aware_sticky"):
        got = get_assignor(name).assign(parse_group_spec(data))
        # y-0 can only go to b; then x-0 and x-1 (100 each): a (0) takes x-0, a (100) vs b (150): x-1 -> a
        assert got == {"a": [("x", 0), ("x", 1)], "b": [("y", 0)]}, name


def test_rates_unknown_plan_on_backlog_alone_and_say_so():
    d = doc([("C0", [0, 1], None), ("C1", [2], None)], [(100_000, None), (60_000, None), (50_000, None)])
    r = plan_group(d, T, NOW)
    assert r.outcome == "recommended" and "no produce rates known yet: planned on backlog alone" in r.reason


# ---- six defects of the first rule in time ----------------------------------------------------------


def test_defect1_dominant_backlog_deadlock_is_overload():
    # C0: partition 0 with 531,520 lag plus three caught-up hot partitions (350/s each): inflow
    # 10 + 3*350 = 1,060 >= capacity 1,000, so C0 is overloaded whatever the max lag says.
    d = doc(
        [("C0", [0, 1, 2, 3], 1000), ("C1", [4], 1000), ("C2", [5], 1000), ("C3", [6, 7], 1000)],
        [(531_520, 10), (0, 350), (0, 350), (0, 350), (1000, 100), (1000, 100), (500, 50), (500, 50)],
    )
    r = plan_group(d, T, NOW)
    assert r.current_load.overloaded == 1 and math.isinf(r.current_load.max_catch_up_s)
    assert r.outcome == "recommended", r.reason
    assert "1 member(s) overloaded" in r.reason and "overloaded members 1 -> 0" in r.reason
    assert r.best.load.overloaded == 0
    assert max(r.plan.members.inflow) < 1000


def test_defect2_unowned_partitions_are_never_blocked():
    standing = {"plan_id": 3, "status": "published", "created_at": (NOW - timedelta(minutes=1)).isoformat()}
    d = doc(
        [("A", [0], 100), ("B", [1], 100)], [(10, 5), (10, 5), (100_000, 5), (100_000, 5)], standing=standing
    )
    for thresholds in (T, Thresholds(cooldown_minutes=30)):
        r = plan_group(d, thresholds, NOW)
        assert r.outcome == "recommended", r.reason
        assert "on partitions no member owns" in r.reason and "assigns every unowned partition" in r.reason
        assert sorted(p for ps in owned_by(r).values() for p in ps) == [0, 1, 2, 3]


def test_defect3_a_member_owning_nothing_gets_partitions():
    # five members x 4 partitions at 2,500 lag, a sixth with nothing: imbalance 1.20 < 1.25 (old: balanced)
    members = [(f"C{i}", list(range(4 * i, 4 * i + 4)), None) for i in range(5)] + [("C5", [], None)]
    r = plan_group(doc(members, [(2_500, None)] * 20), T, NOW)
    assert r.outcome == "recommended", r.reason
    assert "1 member(s) own nothing" in r.reason
    # the fewest handovers that feed C5 without raising the max (4 partitions): 3 (one each from C0..C2)
    assert r.moves == 3 and len(owned_by(r)["C5"]) == 3


def test_defect4_rates_of_caught_up_partitions_count():
    # caught-up partitions at 1,000 and 10 msg/s weigh differently: C0 holds both 1,000/s ones (2,000 >= 1,500)
    d = doc([("C0", [0, 1], 1500), ("C1", [2, 3], 1500)], [(0, 1000), (0, 1000), (0, 10), (0, 10)])
    r = plan_group(d, T, NOW)
    assert r.outcome == "recommended", r.reason
    got = owned_by(r)
    assert sum(p in (0, 1) for p in got["C0"]) == 1 and sum(p in (0, 1) for p in got["C1"]) == 1
    # and balancing stops at the fill level (rate_aware_sticky, settle): mean utilisation 2,020 / 3,000
    # = 0.673, fill 0.673 + (0.98 - 0.673) / 2 = 0.827; 1,020 / 1,500 = 0.68 is below it, so the 10/s
    # partitions stay where they are
    assert sorted(r.plan.members.inflow) == [1000.0, 1020.0]


def test_defect5_the_lag_floor_stays_in_messages():
    # 3 messages behind at 1 msg/s is 3 messages, not 3,000 ms: idle
    r = plan_group(doc([("C0", [0], 10), ("C1", [1], 10)], [(3, 1), (0, 1)]), T, NOW)
    assert (r.outcome, r.reason) == ("idle", "total lag 3 < floor 1,000")


def test_defect6_handovers_of_unowned_partitions_count_as_moves():
    r = plan_group(doc([("A", [], None), ("B", [], None)], [(1000, None)] * 4), T, NOW)
    assert r.outcome == "recommended" and r.moves == 4 and r.plan.metrics.moves == 4
    # and the move budget bounds only the handovers beyond these forced ones
    assert plan_group(doc([("A", [], None), ("B", [], None)], [(1000, None)] * 4),
                      Thresholds(move_budget=0), NOW).outcome == "recommended"  # fmt: skip


# ---- hysteresis, payback ----------------------------------------------------------------------


def _back(minutes_ago: float, capacity=None, rates=(None, None, None)):
    # C0: p0 8,000 + p1 3,000 (p1 came from C1 recently); C1: p2 1,000. Every improving plan moves p1 back.
    moves = [{"topic": "t", "partition": 1, "from": "C1", "to": "C0",
              "at": (NOW - timedelta(minutes=minutes_ago)).isoformat()}]  # fmt: skip
    lags = (8_000, 3_000, 1_000)
    return doc([("C0", [0, 1], capacity), ("C1", [2], capacity)], list(zip(lags, rates, strict=True)),
               recent_moves=moves)  # fmt: skip


def test_hysteresis_holds_a_move_back_within_the_window():
    # the lag-only strategies all move p1 back (or nothing): held
    lag_only = Thresholds(strategies=("range", "roundrobin", "sticky", "lag_aware", "lag_aware_sticky"))
    r = plan_group(_back(10), lag_only, NOW)
    assert r.outcome == "held_by_hysteresis", r.reason
    assert r.plan is None and "would move 1 partition(s) back" in r.reason
    assert plan_group(_back(31), lag_only, NOW).outcome == "recommended"  # window 30 min passed
    # rate_aware_sticky avoids the move back (docs/concepts/decision-rules.md, "Hysteresis in the
    # strategies"): p0 -> C1 (C0 3,000, C1 9,000), then p2 -> C0 (4,000 and 8,000): the same max load
    # of 8.89/s as p1 back, in two handovers and none back
    r = plan_group(_back(10), T, NOW)
    assert r.outcome == "recommended" and r.plan.strategy == "rate_aware_sticky", r.reason
    assert owned_by(r) == {"C0": [1, 2], "C1": [0]} and r.best.moves_back == 0


def test_hysteresis_yields_when_the_move_back_removes_an_overload():
    # capacities 10/s: C0 inflow 5 + 6 = 11 >= 10 (overloaded); p1 back to C1 -> 5 and 7
    r = plan_group(_back(10, capacity=10, rates=(5, 6, 1)), T, NOW)
    assert r.outcome == "recommended", r.reason
    assert owned_by(r) == {"C0": [0], "C1": [1, 2]}


def test_pause_not_repaid_within_the_horizon():
    # capacity 100/s each; C0: p0 40,000 lag + p1, 10/s each; C1: p2 10/s. T(C0) = 40,000 / 80 = 500 s > 300.
    # Best move p1 -> C1: T(C0) = 40,000 / 90 = 444 s (-11 %). With a 3,000 s handover pause C1 starts with
    # 30,000 backlog: areas over 900 s: now 40,000*500 - 80*500^2/2 = 10.0 M; plan 8.89 M + 5.63 M = 14.5 M.
    d = doc([("C0", [0, 1], 100), ("C1", [2], 100)], [(40_000, 10), (0, 10), (0, 10)])
    assert plan_group(d, T, NOW).outcome == "recommended"  # 5 s pause: repaid
    r = plan_group(d, Thresholds(handover_cost_s=3000, capacity_margin=0), NOW)
    assert r.outcome == "not_repaid", r.reason
    assert "backlog area 10,000,000 ->" in r.reason
    # with the default 2 % margin the rule predicts against 98/s: area = 40,000^2 / (2 x 78) = 10,256,410
    r = plan_group(d, Thresholds(handover_cost_s=3000), NOW)
    assert r.outcome == "not_repaid" and "backlog area 10,256,410 ->" in r.reason, r.reason


# ---- the rule over time: a small fluid model of our own ---------------------------------------


def _step(lags: np.ndarray, owner: list[int], rates: np.ndarray, caps: list[float], dt: float) -> np.ndarray:
    """dt seconds: lags grow at their rates; each member works off min(capacity*dt, what it has) pro rata."""
    have = lags + rates * dt
    out = have.copy()
    for m, cap in enumerate(caps):
        mine = np.array([o == m for o in owner])
        total = have[mine].sum()
        if total > 0:
            out[mine] = have[mine] * max(total - cap * dt, 0.0) / total
    return out


def test_steady_after_convergence_and_a_plan_when_a_rate_jumps():
    rates = np.array([700, 400, 300, 300, 250, 250, 200, 200, 150, 100, 100, 50], dtype=float)  # 3,000/s
    caps = [1000.0] * 4
    owner = [i // 3 for i in range(12)]  # range-like: C0 gets 1,400/s (overloaded)
    lags = np.zeros(12)
    recent: list[dict] = []
    now = NOW
    changes = []
    for cycle in range(40):
        if cycle == 30:
            rates[4] *= 3  # 250 -> 750 msg/s: its owner (about 750/s before) is overloaded
        members = [(f"C{m}", [k for k in range(12) if owner[k] == m], caps[m]) for m in range(4)]
        d = doc(
            members, [(int(lag), float(r)) for lag, r in zip(lags, rates, strict=True)], recent_moves=recent
        )
        r = plan_group(d, T, now)
        if r.outcome == "recommended":
            new = {k: int(m[1:]) for m, ps in owned_by(r).items() for k in ps}
            for k, m in new.items():
                if owner[k] != m:
                    recent.append({"topic": "t", "partition": k, "from": f"C{owner[k]}", "to": f"C{m}",
                                   "at": now.isoformat()})  # fmt: skip
                    owner[k] = m
            changes.append(cycle)
        lags = _step(lags, owner, rates, caps, 60.0)
        now += timedelta(seconds=60)
        if cycle == 29:
            assert not [c for c in changes if c >= 10], changes  # 20 steady cycles, no plan change
    assert changes[0] == 0  # the overloaded start is fixed at once
    assert max(changes) >= 30  # the x3 jump brings a plan
