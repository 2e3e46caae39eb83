"""rate_aware and rate_aware_sticky plan small groups in plain Python (``SCALAR_MEMBERS``) and large
ones with NumPy; both paths must give the same owners, ties included (equal rates, lags and
capacities are drawn on purpose), so that the speed-up changes no decision."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from rebalance_advisor.domain.assignors import rate_aware, rate_aware_sticky
from rebalance_advisor.domain.group_spec import parse_group_spec


@st.composite
def rated_groups(draw):
    """A group with one shared subscription, produce rates, some owned partitions and capacities
    (all known, some unknown, or none), drawn from few values so that ties are common."""
    topics = [f"t{i}" for i in range(draw(st.integers(1, 3)))]
    sizes = {t: draw(st.integers(1, 30)) for t in topics}
    few = st.sampled_from([0.0, 1.0, 2.5, 10.0])
    partitions = [
        {
            "topic": t,
            "partition": p,
            "lag": draw(st.sampled_from([0, 1, 900, 5000]) | st.integers(0, 10**6)),
            "produce_rate": draw(few | st.floats(0, 1000)),
        }
        for t in topics
        for p in range(sizes[t])
    ]
    keys = [(t, p) for t in topics for p in range(sizes[t])]
    count = draw(st.integers(1, 12))
    caps = draw(st.sampled_from(["none", "known", "some"]))
    members = []
    for m in range(count):
        member = {
            "member_id": f"m{m:02d}",
            "topics": topics,
            "owned": [
                list(k) for k in draw(st.lists(st.sampled_from(keys), unique=True, max_size=len(keys)))
            ],
        }
        if caps != "none":
            known = caps == "known" or draw(st.booleans())
            member["capacity"] = draw(st.sampled_from([5.0, 20.0]) | st.floats(1, 500)) if known else None
        members.append(member)
    return parse_group_spec({"group_id": "g", "members": members, "partitions": partitions})


def both_paths(fn):
    """(owners with the plain-Python paths, owners with NumPy for every group size)."""
    fast = fn()
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(rate_aware, "SCALAR_MEMBERS", 0)
        slow = fn()
    return fast, slow


@settings(deadline=None)
@given(spec=rated_groups(), horizon=st.sampled_from([None, 60.0, 900.0]))
def test_rate_aware_plain_python_equals_numpy(spec, horizon):
    fast, slow = both_paths(lambda: rate_aware.owners(spec, horizon_s=horizon))
    np.testing.assert_array_equal(fast, slow)
    assert (fast[spec.assignable] >= 0).all()


@settings(deadline=None)
@given(
    spec=rated_groups(),
    budget=st.sampled_from([None, 0, 1, 3]),
    margin=st.sampled_from([None, 0.02]),
    min_gain=st.sampled_from([None, 0.0]),
    settle=st.booleans(),
)
def test_rate_aware_sticky_plain_python_equals_numpy(spec, budget, margin, min_gain, settle):
    fast, slow = both_paths(
        lambda: rate_aware_sticky.owners(
            spec, move_budget=budget, margin=margin, min_gain=min_gain, settle=settle
        )
    )
    np.testing.assert_array_equal(fast, slow)


def _caught_up(holds: dict[str, list[tuple[int, float]]], capacity: float = 100.0):
    """A caught-up group: member -> [(partition, produce rate)], every capacity ``capacity``."""
    members, partitions = [], []
    for member, held in holds.items():
        members.append(
            {"member_id": member, "topics": ["t"], "owned": [["t", p] for p, _ in held], "capacity": capacity}
        )
        partitions += [{"topic": "t", "partition": p, "lag": 0, "produce_rate": r} for p, r in held]
    partitions.sort(key=lambda p: p["partition"])
    return parse_group_spec({"group_id": "g", "members": members, "partitions": partitions})


def test_settle_stops_balancing_at_the_fill_level():
    # A 95/s of 100, B and C 30/s: mean utilisation 155 / 300 = 0.517, fill 0.517 + (0.98 - 0.517) / 2
    # = 0.748. The best move off A is p1 (35/s) to B (A 0.60, B 0.65); then the top, B at 0.65, is below
    # the fill level: one handover. Without settle balancing goes on (B's p2 to C: B 0.35, C 0.60).
    spec = _caught_up({"A": [(0, 60.0), (1, 35.0)], "B": [(2, 30.0)], "C": [(3, 30.0)]})
    settled = rate_aware_sticky.owners(spec, margin=0.02, settle=True)
    assert settled.tolist() == [0, 1, 1, 2]
    balanced = rate_aware_sticky.owners(spec, margin=0.02)
    assert (balanced != spec.owner).sum() > 1


def test_a_member_no_move_helps_does_not_end_the_plan():
    # A holds one partition at 120/s: no plan helps it. B is overloaded too (105/s) and p2 (45/s) fits
    # on C (10/s). Until now the plan ended at A and left B overloaded; now A is skipped.
    spec = _caught_up({"A": [(0, 120.0)], "B": [(1, 60.0), (2, 45.0)], "C": [(3, 10.0)]})
    owners = rate_aware_sticky.owners(spec, margin=0.02)
    assert owners.tolist() == [0, 1, 2, 2]
