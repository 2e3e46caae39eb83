"""How evenly an assignment spreads lag, how far it is from the best possible, and what it moves.

Definitions (M members, member lag = sum of the lags of its partitions):

- ``imbalance`` = max member lag / mean member lag; 1.0 when the group has no lag at all.
- ``lag_cv`` = population standard deviation / mean of member lags; 0.0 when there is no lag.
- ``partition_count_spread`` = max - min partitions per member over all members;
  ``topic_partition_count_spread[t]`` the same over the subscribers of topic t.
- ``moves`` = partitions whose current owner (``GroupSpec.owner``: the member that owns it after
  the generation rule) differs from their new member. Unowned partitions never count.
- ``gap`` = max member lag / lower bound - 1 (0.0 when both are 0).

Lower bound on the max member lag. It must hold for every count-balanced assignment: with one
shared subscription that is every assignment where each member's partition count is within one
of the others' overall (sticky) or per topic (range, lag_aware). Both give every member at least
F = sum over topics t of floor(P_t / M) partitions (overall balance gives floor(P / M) >= F).
Let L_1 >= L_2 >= ... be the lags of a set of partitions that must all go to some C members.

1. Averaging: some member gets at least sum(L) / C.
2. Pigeonhole: for j >= 0 with jC + 1 <= n, the top jC + 1 partitions are spread over C members,
   so one member holds j + 1 of them, whose lags sum to at least L_{jC-j+1} + ... + L_{jC+1} (the
   j + 1 smallest of the top set). That member holds at least F partitions in all, so F - j - 1
   others, disjoint from those, whose lags sum to at least the F - j - 1 smallest lags of the whole
   group (the k-th smallest of a subset is >= the k-th smallest of the set). j = 0 is "the largest
   partition plus the smallest partitions its holder must also take".

Both are applied to the whole group (C = M) and to each topic alone (C = its subscribers).
With differing subscriptions a member need not hold anything, so F = 0 there; instead the bounds
are applied to every subscriber set S with all partitions of topics whose subscribers lie inside
S (they can only go to S, C = |S|) — skipped for very many distinct sets, which only weakens it.
Member lags are integers, so the bound is rounded up.

An assignment that gives some member fewer than F partitions (rate-aware plans may: they balance
load, not counts) is outside the premise; its ``lower_bound_max_lag`` is then the bound for *any*
assignment (F = 0 above), so the gap is never negative for an assignment that owns every partition.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from itertools import accumulate
from typing import Any

import numpy as np

from rebalance_advisor.domain.assignors._common import SMALL_PARTITIONS, member_sums, small_member_sums
from rebalance_advisor.domain.group_spec import Assignment, GroupSpec

_SUBSET_WORK_LIMIT = 50_000_000


@dataclass(frozen=True)
class GroupMetrics:
    """The numbers a plan is judged by; ``to_dict`` is the ``metrics`` object of the plan JSON."""

    member_lag: dict[str, int]
    member_partitions: dict[str, int]
    max_member_lag: int
    imbalance: float
    lag_cv: float
    partition_count_spread: int
    topic_partition_count_spread: dict[str, int]
    moves: int
    lower_bound_max_lag: int
    gap: float

    def to_dict(self) -> dict[str, Any]:
        return {
            "member_lag": dict(self.member_lag),
            "max_member_lag": self.max_member_lag,
            "imbalance": self.imbalance,
            "lag_cv": self.lag_cv,
            "partition_count_spread": self.partition_count_spread,
            "moves": self.moves,
            "lower_bound_max_lag": self.lower_bound_max_lag,
            "gap": self.gap,
            "member_partitions": dict(self.member_partitions),
            "max_topic_partition_count_spread": max(self.topic_partition_count_spread.values(), default=0),
        }


def as_owners(spec: GroupSpec, assignment: Assignment | Mapping | np.ndarray) -> np.ndarray:
    """Accept either form of an assignment and return the owners array."""
    if isinstance(assignment, np.ndarray):
        return assignment
    return spec.owners_from_assignment(assignment)


def moves(spec: GroupSpec, assignment: Assignment | np.ndarray) -> int:
    """Partitions that leave their current owner."""
    owners = as_owners(spec, assignment)
    held = spec.owner >= 0
    return int(np.count_nonzero(owners[held] != spec.owner[held]))


#: Up to this many (topic, member) cells :func:`topic_count_spread` counts in a dense table; above it,
#: from a sort of the held pairs. The table is a few NumPy calls on a group of the usual size, where
#: the sort's dozen calls were most of the cost; both give the same spreads (tests/unit/test_metrics_paths.py).
DENSE_SPREAD_CELLS = 65_536
_INT64_MAX = int(np.iinfo(np.int64).max)  # built once: np.iinfo per call was a tenth of the count spread


def topic_count_spread(spec: GroupSpec, owners: np.ndarray) -> np.ndarray:
    """Per topic: max - min partitions of that topic over its subscribers.

    Precisely, over the members holding some of it (subscribed or not): the highest count minus the
    lowest, where the lowest is 0 while fewer members hold the topic than subscribe to it; 0 for a
    topic nobody holds.
    """
    if len(owners) <= SMALL_PARTITIONS:
        return _small_topic_count_spread(spec, owners)
    if len(spec.topics) * spec.num_members <= DENSE_SPREAD_CELLS:
        return _dense_topic_count_spread(spec, owners)
    return _sorted_topic_count_spread(spec, owners)


def _small_topic_count_spread(spec: GroupSpec, owners: np.ndarray) -> np.ndarray:
    """:func:`topic_count_spread` of a few partitions, counted in plain Python (integers: the same
    spreads as the table's, tests/unit/test_metrics_paths.py)."""
    counts: list[dict[int, int]] = [{} for _ in spec.topics]
    for t, m in zip(spec.topic_index.tolist(), owners.tolist(), strict=True):
        if m >= 0:
            counts[t][m] = counts[t].get(m, 0) + 1
    spread = [
        max(held.values()) - (0 if len(held) < subscribers else min(held.values())) if held else 0
        for held, subscribers in zip(counts, spec.topic_subscriber_count.tolist(), strict=True)
    ]
    return np.asarray(spread, dtype=np.int64)


def _dense_topic_count_spread(spec: GroupSpec, owners: np.ndarray) -> np.ndarray:
    """:func:`topic_count_spread` from a [topics, members] table of counts."""
    num_members = spec.num_members
    held = owners >= 0
    cells = np.bincount(
        spec.topic_index[held].astype(np.int64) * num_members + owners[held],
        minlength=len(spec.topics) * num_members,
    ).reshape(len(spec.topics), num_members)
    highest = cells.max(axis=1, initial=0)
    lowest = np.where(cells > 0, cells, highest[:, None]).min(axis=1, initial=_INT64_MAX)
    holders = np.count_nonzero(cells, axis=1)
    lowest = np.where(holders < spec.topic_subscriber_count, 0, lowest)
    return np.where(holders > 0, highest - lowest, 0).astype(np.int64, copy=False)


def _sorted_topic_count_spread(spec: GroupSpec, owners: np.ndarray) -> np.ndarray:
    """:func:`topic_count_spread` from the sorted (topic, member) pairs held: for many topics × members."""
    num_members = spec.num_members
    held = owners >= 0
    key = spec.topic_index[held].astype(np.int64) * num_members + owners[held]
    keys, counts = np.unique(key, return_counts=True)
    topics_of = keys // num_members
    spread = np.zeros(len(spec.topics), dtype=np.int64)
    if not len(keys):
        return spread
    starts = np.flatnonzero(np.r_[True, topics_of[1:] != topics_of[:-1]])
    t_ids = topics_of[starts]
    highest = np.maximum.reduceat(counts, starts)
    lowest = np.minimum.reduceat(counts, starts)
    holders = np.diff(np.r_[starts, len(keys)])
    subscribers = np.array([len(spec.topic_subscribers[t]) for t in t_ids.tolist()], dtype=np.int64)
    lowest = np.where(holders < subscribers, 0, lowest)
    spread[t_ids] = highest - lowest
    return spread


def _pigeonhole(desc: np.ndarray, members: int, floor_count: int, smallest_prefix: np.ndarray) -> float:
    """Bounds 1 and 2 of the module docstring for partitions ``desc`` (sorted descending) on C members."""
    n = len(desc)
    if n == 0 or members == 0:
        return 0.0
    csum = np.concatenate([[0], np.cumsum(desc, dtype=np.int64)])
    j = np.arange((n - 1) // members + 1)
    top = j * members + 1
    held = csum[top] - csum[top - j - 1]
    rest = np.clip(floor_count - j - 1, 0, len(smallest_prefix) - 1)
    return max(float((held + smallest_prefix[rest]).max()), float(csum[-1]) / members)


def balanced_floor(spec: GroupSpec) -> int:
    """F of the module docstring: the partitions every member of a count-balanced assignment holds
    (0 with differing subscriptions, where a member need hold nothing)."""
    if not spec.identical_subscriptions or not spec.num_members:
        return 0
    sizes = np.diff(spec.topic_start)[spec.class_topics[0]]
    return int((sizes // spec.num_members).sum())


def lower_bound_max_lag(spec: GroupSpec, balanced: bool = True) -> int:
    """A lower bound on the max member lag of any count-balanced assignment (``balanced``), or of any
    assignment at all (module docstring)."""
    # a small group that subscribes alike: in plain Python, integers throughout (assignors/_common.py)
    if spec.identical_subscriptions and len(spec.lag) <= SMALL_PARTITIONS:
        return _small_bound(spec, balanced)
    assignable = spec.assignable
    lags = spec.lag
    asc_all = np.sort(lags[assignable])
    if not len(asc_all):
        return 0
    smallest_prefix = np.concatenate([[0], np.cumsum(asc_all, dtype=np.int64)])
    num_members = spec.num_members
    starts = spec.topic_start
    if spec.identical_subscriptions:
        floor_count = balanced_floor(spec) if balanced else 0
        bound = _pigeonhole(asc_all[::-1], num_members, floor_count, smallest_prefix)
        topics = np.flatnonzero(spec.class_topics[0]).tolist()
        # one topic: its partitions are the group's, so its bound is the one just computed
        for t in topics if len(topics) > 1 else ():
            topic_desc = np.sort(lags[starts[t] : starts[t + 1]])[::-1]
            bound = max(bound, _pigeonhole(topic_desc, num_members, floor_count, smallest_prefix))
        return math.ceil(bound)
    return _differing_bound(spec, asc_all, smallest_prefix)


def _differing_bound(spec: GroupSpec, asc_all: np.ndarray, smallest_prefix: np.ndarray) -> int:
    """:func:`lower_bound_max_lag` of a group whose members subscribe differently."""
    lags, num_members = spec.lag, spec.num_members
    bound = _pigeonhole(asc_all[::-1], num_members, 0, smallest_prefix)
    class_topics = spec.class_topics
    columns, column_of_topic = np.unique(class_topics.T, axis=0, return_inverse=True)
    column_of_topic = column_of_topic.reshape(-1)
    subscribed = columns.any(axis=1)
    topic_pattern = [columns[c] for c in range(len(columns))]
    do_subsets = len(columns) ** 2 * class_topics.shape[0] <= _SUBSET_WORK_LIMIT
    class_sizes = np.bincount(spec.member_class, minlength=class_topics.shape[0])
    for c, pattern in enumerate(topic_pattern):
        if not subscribed[c]:
            continue
        if do_subsets:
            inside = ~(columns & ~pattern).any(axis=1) & subscribed  # patterns contained in this one
        else:
            inside = np.zeros(len(columns), dtype=bool)
            inside[c] = True
        topic_mask = inside[column_of_topic]
        part_mask = topic_mask[spec.topic_index]
        desc = np.sort(lags[part_mask])[::-1]
        size = int(class_sizes[pattern].sum())
        bound = max(bound, _pigeonhole(desc, size, 0, smallest_prefix))
    return math.ceil(bound)


def _small_bound(spec: GroupSpec, balanced: bool) -> int:
    """:func:`lower_bound_max_lag` of a group whose members subscribe alike, on Python ints."""
    lags = spec.lag.tolist()
    asc_all = sorted(x for x, a in zip(lags, spec.assignable.tolist(), strict=True) if a)
    if not asc_all:
        return 0
    prefix = list(accumulate(asc_all, initial=0))
    members, starts = spec.num_members, spec.topic_start.tolist()
    topics = [t for t, s in enumerate(spec.class_topics[0].tolist()) if s]
    floor_count = sum((starts[t + 1] - starts[t]) // members for t in topics) if balanced and members else 0
    bound = _small_pigeonhole(asc_all[::-1], members, floor_count, prefix)
    # one topic: its partitions are the group's, so its bound is the one just computed
    for t in topics if len(topics) > 1 else ():
        topic_desc = sorted(lags[starts[t] : starts[t + 1]], reverse=True)
        bound = max(bound, _small_pigeonhole(topic_desc, members, floor_count, prefix))
    return math.ceil(bound)


def _small_pigeonhole(desc: list[int], members: int, floor_count: int, smallest_prefix: list[int]) -> float:
    """:func:`_pigeonhole` on Python ints."""
    n = len(desc)
    if n == 0 or members == 0:
        return 0.0
    csum = list(accumulate(desc, initial=0))
    last = len(smallest_prefix) - 1
    held = max(
        csum[j * members + 1]
        - csum[j * members - j]
        + smallest_prefix[min(max(floor_count - j - 1, 0), last)]
        for j in range((n - 1) // members + 1)
    )
    return max(float(held), float(csum[-1]) / members)


def _general_bound(spec: GroupSpec) -> int:
    return lower_bound_max_lag(spec, balanced=False)


def _lag_totals(lags: np.ndarray | list[int]) -> tuple[int, int, float]:
    """(total, max member lag, imbalance) of the member lags: the imbalance rule's one place."""
    if isinstance(lags, list):  # a small group's, as Python ints (assignors/_common.py)
        total, max_lag = sum(lags), max(lags)
    else:
        total, max_lag = int(lags.sum()), int(lags.max())
    return total, max_lag, max_lag / (total / len(lags)) if total else 1.0


def max_lag_and_imbalance(spec: GroupSpec, owners: np.ndarray) -> tuple[int, float]:
    """The max member lag and imbalance :func:`compute_metrics` gives ``owners``, without the rest:
    what the decision rules compare of a candidate plan (the rest is stored for the chosen one only)."""
    if len(owners) <= SMALL_PARTITIONS:
        lags: np.ndarray | list[int] = small_member_sums(owners, spec.lag, spec.num_members)
    else:
        lags = member_sums(owners, spec.lag, spec.num_members)
    _, max_lag, imbalance = _lag_totals(lags)
    return max_lag, imbalance


def compute_metrics(
    spec: GroupSpec,
    assignment: Assignment | np.ndarray,
    lower_bound: int | None = None,
    moved: int | None = None,
) -> GroupMetrics:
    """All metrics of one assignment; pass ``lower_bound`` (the count-balanced bound) to reuse it
    across plans of one spec, and ``moved`` to count the moves the caller's way (a plan counts its
    handovers, unowned partitions that get an owner included)."""
    owners = as_owners(spec, assignment)
    lags = member_sums(owners, spec.lag, spec.num_members)
    counts = np.bincount(owners[owners >= 0], minlength=spec.num_members)
    total, max_lag, imbalance = _lag_totals(lags)
    mean = total / spec.num_members
    bound = lower_bound_max_lag(spec) if lower_bound is None else lower_bound
    if len(counts) and int(counts.min()) < spec.derived("balanced_floor", balanced_floor):
        # not count-balanced: the general bound (of the spec alone, so computed once per spec)
        bound = min(bound, spec.derived("general_bound", _general_bound))
    topic_spread = topic_count_spread(spec, owners)
    ids = spec.member_ids
    return GroupMetrics(
        member_lag=dict(zip(ids, lags.tolist(), strict=True)),
        member_partitions=dict(zip(ids, counts.tolist(), strict=True)),
        max_member_lag=max_lag,
        imbalance=imbalance,
        lag_cv=float(lags.std() / mean) if total else 0.0,
        partition_count_spread=int(counts.max() - counts.min()),
        topic_partition_count_spread=dict(zip(spec.topics, topic_spread.tolist(), strict=True)),
        moves=moves(spec, owners) if moved is None else moved,
        lower_bound_max_lag=bound,
        gap=max_lag / bound - 1.0 if bound else 0.0,
    )
