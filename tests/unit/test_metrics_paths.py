"""``topic_count_spread`` counts in a dense table for groups of the usual size and from a sort of the
held pairs for very many topics × members, in plain Python for a few partitions; all three paths must give the same spreads, for any owners
array (unowned partitions, owners not subscribed to the topic, members holding nothing)."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st
from rebalance_advisor.domain import metrics
from rebalance_advisor.domain.group_spec import parse_group_spec


@st.composite
def groups_and_owners(draw):
    """A group with differing subscriptions and an arbitrary owners array over its members."""
    topics = [f"t{i}" for i in range(draw(st.integers(1, 4)))]
    sizes = {t: draw(st.integers(1, 12)) for t in topics}
    partitions = [
        {"topic": t, "partition": p, "lag": draw(st.integers(0, 50))} for t in topics for p in range(sizes[t])
    ]
    count = draw(st.integers(1, 8))
    members = [
        {"member_id": f"m{m}", "topics": draw(st.lists(st.sampled_from(topics), min_size=1, unique=True))}
        for m in range(count)
    ]
    spec = parse_group_spec({"group_id": "g", "members": members, "partitions": partitions})
    owners = np.asarray(
        draw(st.lists(st.integers(-1, count - 1), min_size=len(partitions), max_size=len(partitions))),
        dtype=np.int32,
    )
    return spec, owners


def by_hand(spec, owners) -> list[int]:
    """The documented rule, one topic at a time in plain Python (an independent reading of it)."""
    out = []
    for t in range(len(spec.topics)):
        counts: dict[int, int] = {}
        for k in range(spec.num_partitions):
            if spec.topic_index[k] == t and owners[k] >= 0:
                counts[int(owners[k])] = counts.get(int(owners[k]), 0) + 1
        subscribers = sum(1 for m in spec.members if spec.topics[t] in m.topics)
        if not counts:
            out.append(0)
            continue
        lowest = 0 if len(counts) < subscribers else min(counts.values())
        out.append(max(counts.values()) - lowest)
    return out


@settings(deadline=None)
@given(case=groups_and_owners())
def test_dense_and_sorted_spreads_agree_with_the_rule(case):
    spec, owners = case
    dense = metrics._dense_topic_count_spread(spec, owners)
    ordered = metrics._sorted_topic_count_spread(spec, owners)
    small = metrics._small_topic_count_spread(spec, owners)
    expected = by_hand(spec, owners)
    assert dense.tolist() == expected
    assert ordered.tolist() == expected
    assert small.dtype == dense.dtype and small.tolist() == expected
    assert dense.dtype == ordered.dtype == np.int64


def test_the_threshold_picks_the_path(monkeypatch):
    """Small groups take the dense table, large ones the sort (each path's twin is made to fail)."""
    spec = parse_group_spec(
        {
            "group_id": "g",
            "members": [{"member_id": "a", "topics": ["t"]}, {"member_id": "b", "topics": ["t"]}],
            "partitions": [{"topic": "t", "partition": p, "lag": 1} for p in range(3)],
        }
    )
    owners = np.array([0, 0, 1], dtype=np.int32)

    def unused(*_):
        raise AssertionError("wrong path")

    with monkeypatch.context() as patch:
        patch.setattr(metrics, "_sorted_topic_count_spread", unused)
        assert metrics.topic_count_spread(spec, owners).tolist() == [1]
    with monkeypatch.context() as patch:
        patch.setattr(metrics, "DENSE_SPREAD_CELLS", 1)
        patch.setattr(metrics, "_dense_topic_count_spread", unused)
        assert metrics.topic_count_spread(spec, owners).tolist() == [1]


def _bound_doc(rng) -> dict:
    """A small group whose members subscribe alike (or not): topics nobody subscribes (unassignable
    partitions), members from one to more than partitions, lags from none to large."""
    topics = [f"t{i}" for i in range(rng.randint(1, 4))]
    top = rng.choice([0, 9, 1000, 10**12])
    partitions = [
        {"topic": t, "partition": p, "lag": rng.randint(0, top)}
        for t in topics
        for p in range(rng.randint(1, 20))
    ]
    subscribed = rng.sample(topics, rng.randint(1, len(topics)))
    members = [
        {"member_id": f"m{m}", "topics": subscribed if rng.random() < 0.8 else rng.sample(topics, 1)}
        for m in range(rng.randint(1, 12))
    ]
    return {"group_id": "g", "members": members, "partitions": partitions}


def test_small_lag_bound_is_numpys(monkeypatch):
    """A small group's lag bound in plain Python (``metrics._small_bound``) is NumPy's, balanced or not."""
    import random

    rng = random.Random(2026)
    specs = [parse_group_spec(_bound_doc(rng)) for _ in range(500)]
    taken = []
    small = metrics._small_bound
    monkeypatch.setattr(metrics, "_small_bound", lambda *a: taken.append(1) or small(*a))
    fast = [(metrics.lower_bound_max_lag(s), metrics.lower_bound_max_lag(s, balanced=False)) for s in specs]
    monkeypatch.setattr(metrics, "SMALL_PARTITIONS", -1)
    slow = [(metrics.lower_bound_max_lag(s), metrics.lower_bound_max_lag(s, balanced=False)) for s in specs]
    assert len(taken) > 400  # most specs subscribe alike: the Python path was taken
    assert sum(a != b for a, b in fast) > 0  # the count-balanced floor mattered
    assert len({b for b, _ in fast}) > 100
    assert fast == slow


def _sums_case(rng):
    """A spec of up to 64 partitions (lags small, large, past 2**53), owners with unowned and members
    holding nothing, and rates of mixed magnitudes (float sums that depend on their order)."""
    top = rng.choice([9, 10**6, 2**50])
    count = rng.randint(1, 64)
    partitions = [{"topic": "t", "partition": p, "lag": rng.randint(0, top)} for p in range(count)]
    members = [{"member_id": f"m{m}", "topics": ["t"]} for m in range(rng.randint(1, 9))]
    spec = parse_group_spec({"group_id": "g", "members": members, "partitions": partitions})
    owners = np.asarray([rng.randint(-1, spec.num_members - 1) for _ in range(count)], dtype=np.int32)
    rate = np.asarray([rng.random() * 10 ** rng.randint(-3, 6) for _ in range(count)], dtype=np.float64)
    return spec, owners, rate


def test_small_member_sums_and_totals_are_numpys(monkeypatch):
    """Per-member sums in plain Python (``member_sums``, ``load_model.member_totals`` up to
    ``SMALL_PARTITIONS``) are NumPy's to the last bit: same dtypes, same values."""
    import random

    from rebalance_advisor.domain import load_model
    from rebalance_advisor.domain.assignors import _common

    rng = random.Random(64)
    cases = [_sums_case(rng) for _ in range(400)]

    def both(case):
        spec, owners, rate = case
        sums = _common.member_sums(owners, spec.lag, spec.num_members)
        inflow, backlog = load_model.member_totals(spec, owners, rate)
        return [(a.dtype.str, a.tobytes()) for a in (sums, inflow, backlog)]

    fast = [both(c) for c in cases]
    monkeypatch.setattr(_common, "SMALL_PARTITIONS", -1)
    monkeypatch.setattr(load_model, "SMALL_PARTITIONS", -1)
    slow = [both(c) for c in cases]
    assert sum(int(c[0].lag.sum()) >= 2**53 for c in cases) > 50  # NumPy's exact add.at path too
    assert fast == slow


def test_small_empty_members_are_numpys(monkeypatch):
    """``group_planning.empty_members`` counted in plain Python for a small group is NumPy's count."""
    import random

    from rebalance_advisor.domain import group_planning

    rng = random.Random(7)
    cases = [_sums_case(rng) for _ in range(400)]
    fast = [group_planning.empty_members(spec, owners) for spec, owners, _ in cases]
    monkeypatch.setattr(group_planning, "SMALL_PARTITIONS", -1)
    slow = [group_planning.empty_members(spec, owners) for spec, owners, _ in cases]
    assert sum(n > 0 for n in fast) > 50 and sum(n == 0 for n in fast) > 50
    assert fast == slow


def _claimed_spec(rng):
    """A small group whose members subscribe alike and claim partitions at random (ties, topics
    nobody subscribes, members claiming many or none)."""
    topics = {f"t{t}": rng.randint(1, 9) for t in range(rng.randint(1, 3))}
    names = sorted(topics)
    subscribed = rng.sample(names, rng.randint(1, len(names)))
    members = [
        {"member_id": f"m{m}", "topics": subscribed,
         "owned": [[t, rng.randrange(topics[t])] for t in rng.choices(names, k=rng.randint(0, 8))]}
        for m in range(rng.randint(1, 7))
    ]  # fmt: skip
    partitions = [
        {"topic": t, "partition": p, "lag": rng.randint(0, 9)} for t in names for p in range(topics[t])
    ]
    return parse_group_spec({"group_id": "g", "members": members, "partitions": partitions})


def test_small_sticky_owners_are_numpys():
    """sticky's owners for a small group that subscribes alike, in plain Python, are NumPy's."""
    import random

    from rebalance_advisor.domain.assignors import sticky

    rng = random.Random(48)
    specs = [_claimed_spec(rng) for _ in range(600)]
    fast = [sticky._small_constrained(s) for s in specs]
    slow = [sticky._constrained(s) for s in specs]
    assert sum((s.owner_valid.sum() > 0) for s in specs) > 400  # claims kept
    assert sum(bool((f != s.owner).any()) for f, s in zip(fast, specs, strict=True)) > 200  # and moved
    assert [(f.dtype.str, f.tolist()) for f in fast] == [(s.dtype.str, s.tolist()) for s in slow]


def test_small_max_lag_and_imbalance_are_numpys(monkeypatch):
    """A candidate's max member lag and imbalance from Python ints are NumPy's, to the last bit."""
    import random

    rng = random.Random(11)
    cases = [_sums_case(rng) for _ in range(400)]
    fast = [metrics.max_lag_and_imbalance(spec, owners) for spec, owners, _ in cases]
    monkeypatch.setattr(metrics, "SMALL_PARTITIONS", -1)
    slow = [metrics.max_lag_and_imbalance(spec, owners) for spec, owners, _ in cases]
    assert len({imbalance for _, imbalance in fast}) > 300
    assert [(type(a), a, b.hex()) for a, b in fast] == [(type(a), a, float(b).hex()) for a, b in slow]
