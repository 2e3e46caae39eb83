"""``key_range``: range cover properties (hypothesis), the three opt-in levels, cut points by
observed load, hot keys, and refusals of bad ranged assignments. Expected values are computed by
hand or by brute force, not by the code under test."""

from __future__ import annotations

import itertools
import random

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from rebalance_advisor.domain.assignors import ASSIGNORS, get_assignor
from rebalance_advisor.domain.assignors.key_range import (
    KeySample,
    KeySharingPolicy,
    check_ranged_assignment,
    min_max_groups,
    plan,
)
from rebalance_advisor.domain.decisions import DEFAULT_STRATEGIES
from rebalance_advisor.domain.group_spec import GroupSpec, Member, PartitionLag
from rebalance_advisor.errors import AdvisorError
from rebalance_advisor_client.key_hash import HASH_SPACE, positive_hashes

ALL = KeySharingPolicy(
    allowed=True, topics=frozenset({"hot"}), members=frozenset({f"m{i}" for i in range(8)})
)


def _spec(members: int, partitions: dict[str, list[int]], topics_of=None) -> GroupSpec:
    ms = [Member(f"m{i}", topics=tuple(topics_of(i) if topics_of else partitions)) for i in range(members)]
    parts = [PartitionLag(t, p, lag) for t, lags in partitions.items() for p, lag in enumerate(lags)]
    return GroupSpec.build("g", ms, parts)


def _uniform_sample(n: int = 20000, seed: int = 1) -> KeySample:
    rng = random.Random(seed)
    return KeySample.from_keys([f"k{rng.randrange(10**6)}".encode() for _ in range(n)])


def _cover_ok(ranges: list[tuple[int, int]]) -> bool:
    """Independent check: sorted bounds chain 0 -> HASH_SPACE with every hi equal to the next lo."""
    rs = sorted(ranges)
    chain = [rs[0][0]] + [b for r in rs for b in r]
    return (
        rs[0][0] == 0
        and rs[-1][1] == HASH_SPACE
        and all(chain[2 * i] == chain[2 * i + 1] for i in range(len(rs)))
    )


# ---- cut points -------------------------------------------------------------------------------


@settings(deadline=None)
@given(st.lists(st.integers(1, 9), min_size=1, max_size=7), st.integers(1, 5))
def test_min_max_groups_is_optimal_against_brute_force(counts, k):
    ends = min_max_groups(np.asarray(counts), k)
    assert len(ends) <= k and ends[-1] == len(counts) and ends == sorted(set(ends))
    starts = [0, *ends[:-1]]
    got = max(sum(counts[a:b]) for a, b in zip(starts, ends, strict=True))
    best = sum(counts)
    for parts in range(1, min(k, len(counts)) + 1):
        for cuts in itertools.combinations(range(1, len(counts)), parts - 1):
            bounds = [0, *cuts, len(counts)]
            best = min(best, max(sum(counts[a:b]) for a, b in zip(bounds, bounds[1:], strict=False)))
    assert got == best


def test_cut_points_follow_observed_load_not_hash_width():
    # all sampled keys in the lowest eighth of the hash space: equal-width cuts would give one
    # range everything; cuts by load give each of 4 ranges about a quarter of the records
    rng = np.random.default_rng(3)
    hashes = rng.integers(0, HASH_SPACE // 8, size=40000)
    spec = _spec(4, {"hot": [1000]})
    p = plan(spec, sharing=ALL, samples={("hot", 0): KeySample.from_hashes(hashes)})
    assert len(p.ranges) == 4
    shares = [np.count_nonzero((hashes >= r.hash_lo) & (hashes < r.hash_hi)) / len(hashes) for r in p.ranges]
    assert all(abs(s - 0.25) < 0.01 for s in shares), shares
    assert p.ranges[-1].hash_lo < HASH_SPACE // 8  # the last cut is inside the populated eighth


# ---- when to split -------------------------------------------------------------------------------


def test_more_members_than_partitions_splits_the_hot_partition():
    spec = _spec(4, {"hot": [900, 100]})
    sample = _uniform_sample()
    p = plan(spec, sharing=ALL, samples={("hot", 0): sample, ("hot", 1): sample})
    # pieces: 2 partitions for 4 members -> split the heaviest (900) until 4 pieces: 900 into 3
    assert p.split_partitions == (("hot", 0),)
    assert len(p.ranges) == 3 and len({r.member_id for r in p.ranges}) == 3
    assert all(abs(r.load - 300) < 15 for r in p.ranges)
    whole_owner = p.spec.member_ids[p.owners[1]]
    assert whole_owner not in {r.member_id for r in p.ranges}  # 100 goes to the fourth member
    assert p.owners[0] == -1
    assert "split 1 partition(s) into 3 key ranges" in p.reason


def test_capacity_splits_even_when_members_do_not_outnumber_partitions():
    spec = _spec(4, {"hot": [4000, 10, 10, 10]})
    samples = {("hot", k): _uniform_sample(seed=k) for k in range(4)}
    assert plan(spec, sharing=ALL, samples=samples).ranges == ()  # 4 members, 4 partitions, no capacity
    p = plan(spec, sharing=ALL, samples=samples, capacity=1500)
    # 4000 > 1500 -> 2 ranges (2000 > 1500) -> 3 ranges (~1333 <= 1500): stop
    assert p.split_partitions == (("hot", 0),) and len(p.ranges) == 3


def test_nothing_splits_unless_all_three_levels_allow():
    spec = _spec(4, {"hot": [1000]})
    samples = {("hot", 0): _uniform_sample()}
    members = frozenset({"m0", "m1", "m2", "m3"})
    assert len(plan(spec, sharing=ALL, samples=samples).ranges) == 4
    refused = [
        KeySharingPolicy(allowed=False, topics=frozenset({"hot"}), members=members),
        KeySharingPolicy(allowed=True, topics=frozenset({"other"}), members=members),
        KeySharingPolicy(allowed=True, topics=frozenset({"hot"}), members=frozenset()),
        KeySharingPolicy(allowed=True, topics=frozenset({"hot"}), members=frozenset({"m2"})),  # one sharer
    ]
    reasons = []
    for policy in refused:
        p = plan(spec, sharing=policy, samples=samples)
        assert p.ranges == () and p.owners[0] >= 0
        reasons.append(p.reason)
    assert (
        "not enabled" in reasons[0] and "not allow-listed: hot" in reasons[1] and "--share-keys" in reasons[2]
    )
    # only flagged members take ranges; a pattern allows the topic
    policy = KeySharingPolicy(allowed=True, topic_pattern="h.t", members=frozenset({"m1", "m3"}))
    p = plan(spec, sharing=policy, samples=samples)
    assert sorted(r.member_id for r in p.ranges) == ["m1", "m3"]
    assert not plan(
        spec, sharing=KeySharingPolicy(True, topic_pattern="ho", members=members), samples=samples
    ).ranges


def test_policy_from_the_run_parameters():
    from rebalance_advisor.domain.parameters import AdvisorParams, ParameterError, Thresholds

    t = Thresholds(key_sharing=True, key_sharing_topics="orders-.*")
    policy = KeySharingPolicy.from_run(t, ["m1"])
    assert policy.refusal("orders-in", "m1") is None
    assert "not allow-listed" in policy.refusal("billing", "m1")
    assert "opted in" in policy.refusal("orders-in", "m2")
    assert "not enabled" in KeySharingPolicy.from_run(Thresholds(), ["m1"]).refusal("orders-in", "m1")
    assert "key_range" not in Thresholds().strategies  # a candidate only when named
    assert AdvisorParams(strategies=("key_range",)).strategies == ("key_range",)
    with pytest.raises(ParameterError, match="key_sharing_topics"):
        Thresholds.parse({"key_sharing_topics": "("})


def test_without_sharing_key_range_equals_lag_aware_and_is_not_a_default_candidate():
    rng = random.Random(9)
    for _ in range(20):
        spec = _spec(rng.randint(1, 6), {"a": [rng.randint(0, 99) for _ in range(rng.randint(1, 9))]})
        np.testing.assert_array_equal(
            get_assignor("key_range").owners(spec), ASSIGNORS["lag_aware"].owners(spec)
        )
    assert "key_range" in ASSIGNORS and "key_range" not in DEFAULT_STRATEGIES


def test_partition_without_sample_is_not_split():
    spec = _spec(4, {"hot": [1000]})
    assert plan(spec, sharing=ALL, samples={}).ranges == ()


# ---- hot keys -------------------------------------------------------------------------------------


def test_single_hot_key_is_reported_and_not_split():
    rng = random.Random(4)
    hot = b"the-hot-key"
    keys = [hot] * 6000 + [f"k{rng.randrange(10**6)}".encode() for _ in range(4000)]
    hot_hash = int(positive_hashes([hot])[0])
    spec = _spec(4, {"hot": [1000]})
    p = plan(spec, sharing=ALL, samples={("hot", 0): KeySample.from_keys(keys)}, capacity=400)
    # the hot key carries 60% = 600 > capacity 400: reported, and it lies inside exactly one range
    assert len(p.hot_keys) == 1
    h = p.hot_keys[0]
    assert h.key_hash == hot_hash and abs(h.share - 0.6) < 1e-9 and h.over_capacity
    assert f"hash {hot_hash} (60% of the partition, load 600 > capacity 400)" in p.reason
    assert sum(r.hash_lo <= hot_hash < r.hash_hi for r in p.ranges) == 1
    hot_range = next(r for r in p.ranges if r.hash_lo <= hot_hash < r.hash_hi)
    assert abs(hot_range.load - 600) < 1e-6  # the hot key's range holds nothing else
    assert len(p.ranges) >= 2
    assert b"the-hot-key" not in p.reason.encode()  # reported by hash, never by its bytes


# ---- cover properties ------------------------------------------------------------------------------


@st.composite
def sharing_cases(draw):
    members = draw(st.integers(1, 8))
    topics = {t: draw(st.lists(st.integers(0, 5000), min_size=1, max_size=4)) for t in ("hot", "cold")}
    flagged = frozenset(f"m{i}" for i in range(members) if draw(st.integers(0, 3)) > 0)
    subs = {i: draw(st.sampled_from([("hot",), ("cold",), ("hot", "cold")])) for i in range(members)}
    seed = draw(st.integers(0, 10**6))
    skew = draw(st.sampled_from([0.0, 1.1, 3.0]))
    capacity = draw(st.sampled_from([None, 100.0, 1000.0]))
    return members, topics, flagged, subs, seed, skew, capacity


def _sample(seed: int, skew: float, n: int = 2000) -> KeySample:
    rng = np.random.default_rng(seed)
    ids = rng.zipf(skew, n) if skew > 1 else rng.integers(0, 10**6, n)
    return KeySample.from_keys([f"key-{int(i)}".encode() for i in ids])


@settings(deadline=None)
@given(sharing_cases())
def test_ranges_tile_the_hash_space_one_member_each_and_every_key_has_one_owner(case):
    members, topics, flagged, subs, seed, skew, capacity = case
    spec = _spec(members, topics, topics_of=lambda i: subs[i])
    policy = KeySharingPolicy(allowed=True, topics=frozenset({"hot"}), members=flagged)
    samples = {("hot", p): _sample(seed + p, skew) for p in range(len(topics["hot"]))}
    p = plan(spec, sharing=policy, samples=samples, capacity=capacity)
    probe = positive_hashes([f"probe-{i}".encode() for i in range(500)] + [None])
    for tp in p.split_partitions:
        rs = [r for r in p.ranges if (r.topic, r.partition) == tp]
        assert tp[0] == "hot" and len(rs) >= 2
        assert _cover_ok([(r.hash_lo, r.hash_hi) for r in rs])
        assert len({r.member_id for r in rs}) == len(rs)  # one member per range, distinct
        assert all(r.member_id in flagged and "hot" in subs[int(r.member_id[1:])] for r in rs)
        owners_of_key = np.zeros(len(probe), dtype=int)
        for r in rs:
            owners_of_key += (probe >= r.hash_lo) & (probe < r.hash_hi)
        assert (owners_of_key == 1).all()
        assert rs[0].hash_lo == 0  # the null key (hash 0) goes to the first range
        k = p.spec.partition_positions([tp[0]], [tp[1]], "split")[0]
        assert p.owners[k] == -1
    # every partition with a subscriber is held whole or split, never both
    split = set(p.split_partitions)
    for k, (t, n) in enumerate(p.spec.partition_keys):
        subscribed = any(t in subs[i] for i in range(members))
        assert ((t, n) in split) == (subscribed and p.owners[k] == -1)
    # the whole assignment passes the same checks a hand-written one must
    check_ranged_assignment(spec, p.member_ranges(), policy)


# ---- bad input -----------------------------------------------------------------------------------


def test_bad_ranged_assignments_are_refused_with_the_reason():
    spec = _spec(3, {"hot": [10], "cold": [5]})
    policy = KeySharingPolicy(allowed=True, topics=frozenset({"hot"}), members=frozenset({"m0", "m1"}))
    half = HASH_SPACE // 2
    good = {
        "m0": [("hot", 0, 0, half)],
        "m1": [("hot", 0, half, HASH_SPACE)],
        "m2": [("cold", 0, None, None)],
    }
    check_ranged_assignment(spec, good, policy)
    cases = {
        "overlap: ranges [0, 1073741824) and [1000, 2147483648)": {
            "m0": [("hot", 0, 0, half)],
            "m1": [("hot", 0, 1000, HASH_SPACE)],
        },
        "gap: hashes [1073741824, 1073741900) are in no range": {
            "m0": [("hot", 0, 0, half)],
            "m1": [("hot", 0, half + 76, HASH_SPACE)],
        },
        "gap: hashes [1073741824, 2147483648) are in no range": {"m0": [("hot", 0, 0, half)]},
        "member 'm2' has not opted in": {"m0": [("hot", 0, 0, half)], "m2": [("hot", 0, half, HASH_SPACE)]},
        "topic 'cold' is not allow-listed": {
            "m0": [("cold", 0, 0, half)],
            "m1": [("cold", 0, half, HASH_SPACE)],
        },
        "both split into key ranges and given whole": {**good, "m2": [("hot", 0, None, None)]},
        "partition hot-7 does not exist": {"m0": [("hot", 7, 0, half)], "m1": [("hot", 7, half, HASH_SPACE)]},
        "outside [0, 2147483648)": {"m0": [("hot", 0, 0, HASH_SPACE + 1)]},
    }
    for message, assignment in cases.items():
        with pytest.raises(
            AdvisorError, match=message.replace("[", r"\[").replace("(", r"\(").replace(")", r"\)")
        ):
            check_ranged_assignment(spec, assignment, policy)
    off = KeySharingPolicy(allowed=False, topics=frozenset({"hot"}), members=frozenset({"m0", "m1"}))
    with pytest.raises(AdvisorError, match="not enabled for this run"):
        check_ranged_assignment(spec, good, off)


def test_bad_options_are_refused():
    spec = _spec(2, {"hot": [10]})
    with pytest.raises(AdvisorError, match="capacity"):
        get_assignor("key_range").owners(spec, capacity="-1")
    with pytest.raises(AdvisorError, match="regular expression"):
        KeySharingPolicy(allowed=True, topic_pattern="(")
    with pytest.raises(AdvisorError, match="one per partition"):
        plan(spec, load=[1.0, 2.0])
    with pytest.raises(AdvisorError, match="within"):
        KeySample.from_hashes([-1])
