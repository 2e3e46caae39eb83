"""Metrics by hand, and the lower bound against brute force over all count-balanced assignments."""

from __future__ import annotations

import itertools

from hypothesis import given, settings
from rebalance_advisor.domain.assignors import ASSIGNORS
from rebalance_advisor.domain.group_spec import parse_group_spec
from rebalance_advisor.domain.metrics import compute_metrics, lower_bound_max_lag

from tests._groups import random_groups, spec_of


def test_metrics_by_hand():
    spec = spec_of(
        [("C0", ["t0"], [("t0", 0), ("t0", 2)], 1), ("C1", ["t0"], [("t0", 1)], 1)],
        {"t0": [100_000, 60_000, 50_000]},
    )
    m = compute_metrics(spec, {"C0": [("t0", 0), ("t0", 1)], "C1": [("t0", 2)]})
    assert m.member_lag == {"C0": 160_000, "C1": 50_000}
    assert m.member_partitions == {"C0": 2, "C1": 1}
    assert m.max_member_lag == 160_000
    assert abs(m.imbalance - 160_000 / 105_000) < 1e-12
    assert abs(m.lag_cv - 55_000 / 105_000) < 1e-12
    assert m.partition_count_spread == 1
    assert m.moves == 2  # t0-1 leaves C1, t0-2 leaves C0
    assert m.lower_bound_max_lag == 110_000  # two of the top three share a member: 60k + 50k
    assert abs(m.gap - (160_000 / 110_000 - 1)) < 1e-12
    d = m.to_dict()
    for key in (
        "member_lag",
        "max_member_lag",
        "imbalance",
        "lag_cv",
        "partition_count_spread",
        "moves",
        "lower_bound_max_lag",
        "gap",
    ):
        assert key in d


def test_zero_lag_group():
    m = compute_metrics(
        spec_of([("a", ["t"]), ("b", ["t"])], {"t": [0, 0, 0]}), {"a": [("t", 0)], "b": [("t", 1), ("t", 2)]}
    )
    assert (m.imbalance, m.lag_cv, m.lower_bound_max_lag, m.gap) == (1.0, 0.0, 0, 0.0)


def test_topic_spread_counts_idle_subscribers():
    spec = spec_of([("a", ["t", "u"]), ("b", ["t", "u"])], {"t": [1, 1, 1], "u": [1, 1]})
    m = compute_metrics(spec, {"a": [("t", 0), ("t", 1), ("t", 2)], "b": [("u", 0), ("u", 1)]})
    assert m.topic_partition_count_spread == {"t": 3, "u": 2}
    assert m.partition_count_spread == 1


def test_largest_plus_smallest_bound():
    # 2 members, 4 partitions: floor 2; the 1000 partition's holder takes at least one more (>= 1)
    spec = spec_of([("a", ["t"]), ("b", ["t"])], {"t": [1000, 1, 2, 3]})
    assert lower_bound_max_lag(spec) == 1001


def test_a_plan_that_is_not_count_balanced_is_compared_with_the_bound_for_any_plan():
    # the hot partition alone on a (fewer than its floor of 2): 1,001 bounds count-balanced plans only
    spec = spec_of([("a", ["t"]), ("b", ["t"])], {"t": [1000, 1, 2, 3]})
    alone = compute_metrics(spec, {"a": [("t", 0)], "b": [("t", 1), ("t", 2), ("t", 3)]})
    assert (alone.max_member_lag, alone.lower_bound_max_lag, alone.gap) == (1000, 1000, 0.0)
    assert lower_bound_max_lag(spec, balanced=False) == 1000
    paired = compute_metrics(spec, {"a": [("t", 0), ("t", 1)], "b": [("t", 2), ("t", 3)]})
    assert (paired.lower_bound_max_lag, paired.max_member_lag) == (1001, 1001)


def brute_force_best(data):
    """min over all assignments that are count-balanced overall or per topic of the max member lag."""
    spec = parse_group_spec(data)
    members = range(spec.num_members)
    k_idx = [k for k in range(spec.num_partitions) if spec.assignable[k]]
    topics = spec.topic_index.tolist()
    lags = spec.lag.tolist()
    best = None
    for combo in itertools.product(members, repeat=len(k_idx)):
        counts = [combo.count(m) for m in members]
        overall = max(counts) - min(counts) <= 1
        per_topic = all(
            max(c) - min(c) <= 1
            for t in set(topics[k] for k in k_idx)
            for c in [
                [sum(1 for i, k in enumerate(k_idx) if topics[k] == t and combo[i] == m) for m in members]
            ]
        )
        if not (overall or per_topic):
            continue
        load = [0] * spec.num_members
        for i, k in enumerate(k_idx):
            load[combo[i]] += lags[k]
        value = max(load)
        best = value if best is None else min(best, value)
    return best


@settings(deadline=None)
@given(random_groups(identical=True, max_members=3, max_topics=2, max_parts=3))
def test_lower_bound_never_exceeds_brute_force_optimum(data):
    assert lower_bound_max_lag(parse_group_spec(data)) <= brute_force_best(data)


@settings(deadline=None)
@given(random_groups())
def test_lower_bound_below_every_plan(data):
    spec = parse_group_spec(data)
    bound = lower_bound_max_lag(spec)
    for name, assignor in ASSIGNORS.items():  # range too: it is count-balanced per topic
        owners = assignor.owners(spec)
        m = compute_metrics(spec, owners, lower_bound=bound)
        if not name.startswith("rate_aware"):
            assert bound == m.lower_bound_max_lag, name
        # rate-aware plans need not be count-balanced (a hot partition may sit alone): their bound is
        # the one for any assignment, still below the plan
        if (owners[spec.assignable] >= 0).all():
            assert m.lower_bound_max_lag <= m.max_member_lag, name
            assert m.gap >= 0, name
