"""Hand-checked cases per strategy (expected values worked out by hand or taken from Kafka's tests)."""

from __future__ import annotations

import pytest
from rebalance_advisor.domain.assignors import ASSIGNORS, get_assignor
from rebalance_advisor.domain.group_spec import parse_group_spec
from rebalance_advisor.domain.metrics import compute_metrics, moves
from rebalance_advisor.errors import AdvisorError

from tests._groups import group, spec_of

WORKED = ([("C0", ["t0"]), ("C1", ["t0"])], {"t0": [100_000, 60_000, 50_000]})


def plan(name, members, partitions, **options):
    return ASSIGNORS[name].assign(spec_of(members, partitions), **options)


def test_worked_example_lag_aware():
    assert plan("lag_aware", *WORKED) == {"C0": [("t0", 0)], "C1": [("t0", 1), ("t0", 2)]}
    assert plan("lag_aware", *WORKED, lag_scope="topic") == {"C0": [("t0", 0)], "C1": [("t0", 1), ("t0", 2)]}


def test_worked_example_classic():
    assert plan("range", *WORKED) == {"C0": [("t0", 0), ("t0", 1)], "C1": [("t0", 2)]}
    assert plan("roundrobin", *WORKED) == {"C0": [("t0", 0), ("t0", 2)], "C1": [("t0", 1)]}


def test_range_two_topics_kafka_case():
    members = [("c1", ["t1", "t2"]), ("c2", ["t1", "t2"])]
    got = plan("range", members, {"t1": [0, 0, 0], "t2": [0, 0, 0]})
    assert got == {"c1": [("t1", 0), ("t1", 1), ("t2", 0), ("t2", 1)], "c2": [("t1", 2), ("t2", 2)]}


def test_range_mixed_subscriptions_kafka_case():
    members = [("consumer1", ["topic1"]), ("consumer2", ["topic1", "topic2"]), ("consumer3", ["topic1"])]
    got = plan("range", members, {"topic1": [0, 0, 0], "topic2": [0, 0]})
    assert got == {
        "consumer1": [("topic1", 0)],
        "consumer2": [("topic1", 1), ("topic2", 0), ("topic2", 1)],
        "consumer3": [("topic1", 2)],
    }


def test_range_static_members_first():
    members = [("a", ["t0"]), ("b", ["t0"], (), None, "z"), ("c", ["t0"], (), None, "y")]
    got = plan("range", members, {"t0": [0] * 5})
    # order: c (instance y), b (instance z), a
    assert got == {"c": [("t0", 0), ("t0", 1)], "b": [("t0", 2), ("t0", 3)], "a": [("t0", 4)]}


def test_roundrobin_kafka_cases():
    members = [("c1", ["t1", "t2"]), ("c2", ["t1", "t2"])]
    got = plan("roundrobin", members, {"t1": [0, 0, 0], "t2": [0, 0, 0]})
    assert got == {"c1": [("t1", 0), ("t1", 2), ("t2", 1)], "c2": [("t1", 1), ("t2", 0), ("t2", 2)]}
    members = [("consumer1", ["topic1"]), ("consumer2", ["topic1", "topic2"]), ("consumer3", ["topic1"])]
    got = plan("roundrobin", members, {"topic1": [0, 0, 0], "topic2": [0, 0]})
    assert got == {
        "consumer1": [("topic1", 0)],
        "consumer2": [("topic1", 1), ("topic2", 0), ("topic2", 1)],
        "consumer3": [("topic1", 2)],
    }


def test_roundrobin_skips_and_continues_across_topics():
    # a subscribes t0,t1; b only t1; c only t0. t0: a,c,a ; dealer then at b: t1: b,a,b
    members = [("a", ["t0", "t1"]), ("b", ["t1"]), ("c", ["t0"])]
    got = plan("roundrobin", members, {"t0": [0, 0, 0], "t1": [0, 0, 0]})
    assert got == {"a": [("t0", 0), ("t0", 2), ("t1", 1)], "b": [("t1", 0), ("t1", 2)], "c": [("t0", 1)]}


def test_lag_aware_group_and_topic_scope():
    members = [("C0", ["t0", "t1"]), ("C1", ["t0", "t1"])]
    parts = {"t0": [10, 30], "t1": [20, 5]}
    assert plan("lag_aware", members, parts) == {"C0": [("t0", 1), ("t1", 1)], "C1": [("t0", 0), ("t1", 0)]}
    assert plan("lag_aware", members, parts, lag_scope="topic") == {
        "C0": [("t0", 1), ("t1", 0)],
        "C1": [("t0", 0), ("t1", 1)],
    }


def test_lag_aware_ties_lower_partition_then_member_order():
    got = plan("lag_aware", [("b", ["t0"]), ("a", ["t0"])], {"t0": [5, 5, 5]})
    assert got == {"a": [("t0", 0), ("t0", 2)], "b": [("t0", 1)]}


def test_sticky_constrained_by_hand():
    members = [
        ("A", ["t0"], [("t0", 0), ("t0", 1), ("t0", 2), ("t0", 3)], 1),
        ("B", ["t0"], [("t0", 4)], 1),
        ("C", ["t0"]),
    ]
    got = plan("sticky", members, {"t0": [0] * 7})
    assert got == {
        "A": [("t0", 0), ("t0", 1), ("t0", 2)],
        "B": [("t0", 3), ("t0", 4)],
        "C": [("t0", 5), ("t0", 6)],
    }


def test_sticky_generation_conflicts():
    members = [
        ("A", ["t0"], [("t0", 0)], 2),
        ("B", ["t0"], [("t0", 0), ("t0", 1)], 1),
        ("C", ["t0"], [("t0", 2)], 3),
        ("D", ["t0"], [("t0", 2)], 3),
    ]
    spec = spec_of(members, {"t0": [0] * 4})
    # t0-0 -> A (higher generation); t0-1 -> B; t0-2 claimed by C and D at generation 3 -> nobody
    assert [spec.member_ids[i] if i >= 0 else None for i in spec.owner.tolist()] == ["A", "B", None, None]
    got = ASSIGNORS["sticky"].assign(spec)
    assert got["A"] == [("t0", 0)] and got["B"] == [("t0", 1)]
    assert sorted(got["C"] + got["D"]) == [("t0", 2), ("t0", 3)]


def test_sticky_differing_subscriptions_by_hand():
    members = [("A", ["t0"]), ("B", ["t0", "t1"])]
    got = plan("sticky", members, {"t0": [0, 0], "t1": [0] * 4})
    assert got == {"A": [("t0", 0), ("t0", 1)], "B": [("t1", 0), ("t1", 1), ("t1", 2), ("t1", 3)]}


def test_sticky_differing_moves_only_what_balance_forces():
    # B owns everything; A can only take t0; balance moves all of t0 to A (3 / 3), nothing of t1
    owned = [("t0", p) for p in range(3)] + [("t1", p) for p in range(3)]
    members = [("A", ["t0"]), ("B", ["t0", "t1"], owned, 1)]
    got = plan("sticky", members, {"t0": [0] * 3, "t1": [0] * 3})
    assert got == {"A": [("t0", 0), ("t0", 1), ("t0", 2)], "B": [("t1", 0), ("t1", 1), ("t1", 2)]}


def test_lag_aware_sticky_by_hand():
    owned_c0 = [("t0", 0), ("t0", 1)]
    owned_c1 = [("t0", 2), ("t0", 3)]
    data = group([("C0", ["t0"], owned_c0, 1), ("C1", ["t0"], owned_c1, 1)], {"t0": [100, 60, 50, 1]})
    spec = parse_group_spec(data)
    owners = ASSIGNORS["lag_aware_sticky"].owners(spec)
    m = compute_metrics(spec, owners)
    assert m.max_member_lag == 110  # the optimum: {100, 1} / {60, 50}
    assert m.lower_bound_max_lag == 110
    assert m.moves == 2
    frozen = ASSIGNORS["lag_aware_sticky"].owners(spec, move_budget=0)
    assert moves(spec, frozen) == 0
    assert compute_metrics(spec, frozen).max_member_lag == 160


def test_every_member_listed_even_when_empty():
    got = plan("range", [("a", ["t0"]), ("b", ["t0"]), ("c", ["t0"])], {"t0": [1]})
    assert got == {"a": [("t0", 0)], "b": [], "c": []}


def test_options_are_validated():
    spec = spec_of(*WORKED)
    with pytest.raises(AdvisorError, match="no option 'bogus'"):
        ASSIGNORS["range"].assign(spec, bogus=1)
    with pytest.raises(AdvisorError, match="lag_scope"):
        ASSIGNORS["lag_aware"].assign(spec, lag_scope="cluster")
    with pytest.raises(AdvisorError, match="move_budget"):
        ASSIGNORS["lag_aware_sticky"].assign(spec, move_budget="-3")
    with pytest.raises(AdvisorError, match="unknown strategy"):
        get_assignor("cooperative")
    assert ASSIGNORS["lag_aware_sticky"].assign(spec, move_budget="unlimited", min_gain="auto")


def test_lag_aware_heterogeneous_subscriptions_by_hand():
    # A on t0 and t1, B only t0, C only t1; member order A, B, C.
    members = [("A", ["t0", "t1"]), ("B", ["t0"]), ("C", ["t1"])]
    parts = {"t0": [50, 40, 10], "t1": [30, 20, 5, 5]}
    # group scope. t0 (A, B): round 1 deals 50, 40 to A, B (both 0, member order) -> A 50, B 40;
    # round 2: 10 to B (40 < 50) -> B 50. t1 (A, C) starts from the group loads A 50, C 0:
    # round 1 deals 30 to C, 20 to A -> C 30, A 70; round 2 (t1-2, t1-3 tie at 5, lower id first):
    # t1-2 to C, t1-3 to A -> A 75, B 50, C 35.
    assert plan("lag_aware", members, parts) == {
        "A": [("t0", 0), ("t1", 1), ("t1", 3)],
        "B": [("t0", 1), ("t0", 2)],
        "C": [("t1", 0), ("t1", 2)],
    }
    # topic scope: t0 as above; t1 starts from A 0, C 0, so A (first in order) takes 30, C 20;
    # round 2: t1-2 to C (20 < 30), t1-3 to A -> A 85, B 50, C 25.
    assert plan("lag_aware", members, parts, lag_scope="topic") == {
        "A": [("t0", 0), ("t1", 0), ("t1", 3)],
        "B": [("t0", 1), ("t0", 2)],
        "C": [("t1", 1), ("t1", 2)],
    }


def test_lag_aware_sticky_multi_topic_by_hand():
    # Two members on t0 (lags 100, 80, 1) and t1 (70, 2). C0 owns t0-0, t0-1, t1-0 (250),
    # C1 owns t0-2, t1-1 (3). Quotas are 3 and 2 (5 partitions), so sticky keeps everything.
    members = [
        ("C0", ["t0", "t1"], [("t0", 0), ("t0", 1), ("t1", 0)], 1),
        ("C1", ["t0", "t1"], [("t0", 2), ("t1", 1)], 1),
    ]
    parts = {"t0": [100, 80, 1], "t1": [70, 2]}
    spec = spec_of(members, parts)
    assert ASSIGNORS["sticky"].assign(spec) == {
        "C0": [("t0", 0), ("t0", 1), ("t1", 0)],
        "C1": [("t0", 2), ("t1", 1)],
    }
    # Step 1, A = C0 (250), B = C1 (3); C0 holds more partitions, so moves are allowed:
    # moving 100 gives max(150, 103) = 150; 80 gives 170; 70 gives 180; the best swap
    # (100 for 1) gives max(151, 102) = 151. So t0-0 moves to C1.
    # Step 2, A = C0 (150, 2 partitions), B = C1 (103, 3): no move (C0 holds fewer); a swap
    # must pass 0 < a - b < 47, but the pairs differ by 79, 78, 69, 68. Stop after one move.
    # 150 is the lower bound: the top three (100, 80, 70) put two on one member, >= 80 + 70.
    got = ASSIGNORS["lag_aware_sticky"].assign(spec)
    assert got == {"C0": [("t0", 1), ("t1", 0)], "C1": [("t0", 0), ("t0", 2), ("t1", 1)]}
    m = compute_metrics(spec, got)
    assert (m.max_member_lag, m.lower_bound_max_lag, m.moves) == (150, 150, 1)
    # lag_aware for comparison: t0 deals 100 to C0, 80 then 1 to C1 (80 < 100); t1 from
    # C0 100, C1 81: 70 to C1, 2 to C0 -> C0 102, C1 151, with 3 moves.
    la = ASSIGNORS["lag_aware"].assign(spec)
    assert la == {"C0": [("t0", 0), ("t1", 1)], "C1": [("t0", 1), ("t0", 2), ("t1", 0)]}
    assert (compute_metrics(spec, la).max_member_lag, moves(spec, la)) == (151, 3)
    # move_budget=0: sticky's plan as is.
    assert ASSIGNORS["lag_aware_sticky"].assign(spec, move_budget=0) == ASSIGNORS["sticky"].assign(spec)
