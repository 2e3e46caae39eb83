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


@settings(max_examples=300, deadline=None)
@given(spec=rated_groups(), horizon=st.sampled_from([None, 60.0, 900.0]))
def test_rate_aware_plain_python_equals_numpy(spec, horizon):
    fast, slow = both_paths(lambda: rate_aware.owners(spec, horizon_s=horizon))
    np.testing.assert_array_equal(fast, slow)
    assert (fast[spec.assignable] >= 0).all()


@settings(max_examples=300, deadline=None)
@given(
    spec=rated_groups(),
    budget=st.sampled_from([None, 0, 1, 3]),
    margin=st.sampled_from([None, 0.02]),
    min_gain=st.sampled_from([None, 0.0]),
)
def test_rate_aware_sticky_plain_python_equals_numpy(spec, budget, margin, min_gain):
    fast, slow = both_paths(
        lambda: rate_aware_sticky.owners(spec, move_budget=budget, margin=margin, min_gain=min_gain)
    )
    np.testing.assert_array_equal(fast, slow)
