"""``key_range``: more consumers than partitions, or a partition hotter than one consumer.

A split partition is cut into k contiguous ranges of the key-hash space; each range goes to a
distinct member, which consumes the whole partition and keeps only the records whose key hash
lies in its range (the client helper), so per-key order holds. Only manual-assign consumers
running the client helper can do that filtering.

Hash space: ``toPositive(murmur2(serialized key))``, the value Kafka's default partitioner takes
modulo the partition count, so hashes are 0 .. 2**31 - 1 (``HASH_SPACE``) and a range is the
half-open ``[hash_lo, hash_hi)``; the ranges of a split partition tile ``[0, 2**31)`` with no
gap and no overlap. A record with a null key counts as hash 0 (``NULL_KEY_HASH``): it goes to the
range holding 0, the first one (null keys have no order to keep).

Opt-in at three levels, all required (:class:`KeySharingPolicy`): the run allows sharing, the
partition's topic is allow-listed (exact names or a regular expression), and a member takes
ranges only when its registry entry carries the share-keys flag. Members without the flag still
take whole partitions.

When to split: while members would stay idle (fewer pieces than members that can hold one), or
while a piece's load exceeds one member's capacity, the heaviest splittable partition gets one
more range. Loads are per partition in any unit (records/s of inflow, or inflow plus backlog
over a horizon; without one given, the lag); capacity, when known, is in the same unit.

Cut points follow the observed load, not the hash width: a bounded sample of the partition's
recent records gives a count per observed hash, and the k ranges minimise the largest range's
share of the sample (an exact min-max contiguous partition by binary search over the threshold);
a cut falls midway between two neighbouring observed hashes. A single hash is indivisible: a key
hotter than one member's capacity, or one that alone makes the heaviest range so that more ranges
would not help, is reported as a hot key in the reason (by hash, not by its bytes, which may be
personal data), and not split. A partition without a sample is not split.

Whole partitions are dealt as ``lag_aware`` deals them (count first, then lag), so with nothing
split ``key_range`` equals ``lag_aware``. Then the ranges, largest first, each to the least loaded
flagged subscriber that holds no other range of the partition (ties: the partition's current
owner, then member order).
"""

from __future__ import annotations

import heapq
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from rebalance_advisor_client.key_hash import HASH_SPACE, positive_hashes, range_cover_problem

from rebalance_advisor.domain.assignors import lag_aware
from rebalance_advisor.domain.group_spec import GroupSpec
from rebalance_advisor.domain.parameters import Thresholds
from rebalance_advisor.errors import AdvisorError

NAME = "key_range"


@dataclass(frozen=True)
class KeySharingPolicy:
    """The run- and topic-level opt-in, plus the members whose registry entry opted in.

    The run level is the advisor parameter ``key_sharing``; the topic level is ``topics`` (exact
    names) or ``topic_pattern`` (a regular expression matched against the whole name; the
    parameter ``key_sharing_topics``); ``members`` are the member ids flagged ``--share-keys`` in
    the registry. :meth:`from_run` builds it from the run's parameters.
    """

    allowed: bool = False
    topics: frozenset[str] = frozenset()
    topic_pattern: str | None = None
    members: frozenset[str] = frozenset()
    _compiled: re.Pattern[str] | None = field(default=None, init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        if self.topic_pattern is not None:
            try:
                object.__setattr__(self, "_compiled", re.compile(self.topic_pattern))
            except re.error as error:
                raise AdvisorError(
                    f"key-sharing topic pattern {self.topic_pattern!r} is not a regular expression: {error}"
                ) from None

    @classmethod
    def from_run(cls, thresholds: Thresholds, members: Iterable[str]) -> KeySharingPolicy:
        """The run's parameters (``key_sharing``, ``key_sharing_topics``) plus the registry's flagged members."""
        return cls(
            allowed=thresholds.key_sharing,
            topic_pattern=thresholds.key_sharing_topics,
            members=frozenset(members),
        )

    def topic_allowed(self, topic: str) -> bool:
        return topic in self.topics or (
            self._compiled is not None and self._compiled.fullmatch(topic) is not None
        )

    def refusal(self, topic: str, member_id: str) -> str | None:
        """Why ``member_id`` may not take a key range of ``topic`` under this policy, or None."""
        if not self.allowed:
            return "key sharing is not enabled for this run"
        if not self.topic_allowed(topic):
            return f"topic {topic!r} is not allow-listed for key sharing"
        if member_id not in self.members:
            return f"member {member_id!r} has not opted in to key sharing (members add --share-keys)"
        return None


@dataclass(frozen=True, eq=False)
class KeySample:
    """Observed key hashes of one partition's recent records: distinct hashes ascending, count each."""

    hashes: np.ndarray  # int64 [D], ascending, distinct, within [0, HASH_SPACE)
    counts: np.ndarray  # int64 [D], >= 1

    @classmethod
    def from_hashes(cls, hashes: Iterable[int] | np.ndarray) -> KeySample:
        arr = np.asarray(list(hashes) if not isinstance(hashes, np.ndarray) else hashes, dtype=np.int64)
        if arr.size and (arr.min() < 0 or arr.max() >= HASH_SPACE):
            raise AdvisorError(f"key sample: hashes must be within [0, {HASH_SPACE})")
        distinct, counts = np.unique(arr, return_counts=True)
        return cls(distinct, counts.astype(np.int64))

    @classmethod
    def from_keys(cls, keys: Sequence[bytes | None]) -> KeySample:
        """From sampled record keys (a null key counts as hash 0)."""
        return cls.from_hashes(positive_hashes(keys))

    @property
    def total(self) -> int:
        return int(self.counts.sum())


@dataclass(frozen=True)
class RangeShare:
    """One key range of a split partition and the member that takes it; ``load`` is estimated."""

    topic: str
    partition: int
    member_id: str
    hash_lo: int
    hash_hi: int
    load: float


@dataclass(frozen=True)
class HotKey:
    """A key hash whose records alone load one range (it cannot be split)."""

    topic: str
    partition: int
    key_hash: int
    share: float  # of the partition's sampled records
    load: float
    over_capacity: bool


@dataclass(frozen=True, eq=False)
class KeyRangePlan:
    """The result: whole partitions in ``owners`` (-1 where split or unassigned), ranges in ``ranges``."""

    spec: GroupSpec
    owners: np.ndarray  # int32 [P]
    ranges: tuple[RangeShare, ...]  # sorted by (topic, partition, hash_lo)
    member_load: np.ndarray  # float64 [M]
    hot_keys: tuple[HotKey, ...]
    reason: str

    @property
    def split_partitions(self) -> tuple[tuple[str, int], ...]:
        return tuple(dict.fromkeys((r.topic, r.partition) for r in self.ranges))

    def member_ranges(self) -> dict[str, list[tuple[str, int, int | None, int | None]]]:
        """member id -> [(topic, partition, hash_lo, hash_hi)], None bounds for a whole partition."""
        out: dict[str, list[tuple[str, int, int | None, int | None]]] = {
            m: [(t, p, None, None) for t, p in parts]
            for m, parts in self.spec.to_assignment(self.owners).items()
        }
        for r in self.ranges:
            out[r.member_id].append((r.topic, r.partition, r.hash_lo, r.hash_hi))
        for parts in out.values():
            parts.sort(key=lambda x: (x[0], x[1], x[2] or 0))
        return out


# ---- option parsers -----------------------------------------------------------------------


def _typed(name: str, kind: type, allow_none: bool = True):
    def parse(value: Any) -> Any:
        if value is None and allow_none:
            return None
        if not isinstance(value, kind):
            raise AdvisorError(f"option {name}: expected {kind.__name__}, got {type(value).__name__}")
        return value

    return parse


def _capacity(value: Any) -> float | None:
    if value is None or (isinstance(value, str) and value.strip().lower() in {"", "none", "unknown"}):
        return None
    try:
        number = float(value) if not isinstance(value, bool) else -1.0
    except (TypeError, ValueError):
        raise AdvisorError(f"option capacity={value!r}: must be a number > 0 or 'none'") from None
    if not 0 < number < float("inf"):
        raise AdvisorError(f"option capacity={value!r}: must be a number > 0 or 'none'")
    return number


def _samples(value: Any) -> Mapping[tuple[str, int], KeySample]:
    if value is None:
        return {}
    if not isinstance(value, Mapping) or not all(isinstance(s, KeySample) for s in value.values()):
        raise AdvisorError("option samples: expected a mapping (topic, partition) -> KeySample")
    return value


def _load(value: Any) -> np.ndarray | None:
    if value is None:
        return None
    arr = np.asarray(value, dtype=np.float64)
    if arr.ndim != 1 or not np.isfinite(arr).all() or (arr < 0).any():
        raise AdvisorError("option load: expected finite loads >= 0, one per partition")
    return arr


OPTIONS = {
    "sharing": _typed("sharing", KeySharingPolicy),
    "samples": _samples,
    "capacity": _capacity,
    "load": _load,
}


# ---- cut points -----------------------------------------------------------------------------


def _groups_at(cum: np.ndarray, limit: int) -> list[int] | None:
    """Greedy ends (exclusive indices into the distinct hashes) of groups weighing <= limit each."""
    ends = []
    start, n = 0, len(cum) - 1
    while start < n:
        end = int(np.searchsorted(cum, cum[start] + limit, side="right")) - 1
        if end <= start:
            return None  # one hash alone weighs more than limit
        ends.append(end)
        start = end
    return ends


def min_max_groups(counts: np.ndarray, k: int) -> list[int]:
    """Ends of at most ``k`` contiguous groups of ``counts`` whose heaviest group is as light as possible."""
    cum = np.concatenate([[0], np.cumsum(counts, dtype=np.int64)])
    total = int(cum[-1])
    lo = max(int(counts.max()), -(-total // k))
    hi = total
    while lo < hi:
        mid = (lo + hi) // 2
        ends = _groups_at(cum, mid)
        if ends is not None and len(ends) <= k:
            hi = mid
        else:
            lo = mid + 1
    ends = _groups_at(cum, lo)
    assert ends is not None and len(ends) <= k
    return ends


def cut_ranges(sample: KeySample, k: int) -> list[tuple[int, int, int]]:
    """At most ``k`` ranges ``(hash_lo, hash_hi, sampled records)`` tiling [0, HASH_SPACE) by sampled load."""
    ends = min_max_groups(sample.counts, k)
    cum = np.concatenate([[0], np.cumsum(sample.counts)])
    h = sample.hashes
    bounds = [0] + [(int(h[e - 1]) + int(h[e]) + 1) // 2 for e in ends[:-1]] + [HASH_SPACE]
    starts = [0, *ends[:-1]]
    return [(bounds[i], bounds[i + 1], int(cum[ends[i]] - cum[starts[i]])) for i in range(len(ends))]


# ---- the assignor ---------------------------------------------------------------------------


@dataclass
class _Split:
    index: int  # partition index
    load: float
    sample: KeySample
    sharers: int
    cuts: list[tuple[int, int, int]]
    limited_by_key: bool = False

    @property
    def heaviest(self) -> float:
        return self.load * max(c[2] for c in self.cuts) / self.sample.total


def plan(
    spec: GroupSpec,
    sharing: KeySharingPolicy | None = None,
    samples: Mapping[tuple[str, int], KeySample] | None = None,
    capacity: float | None = None,
    load: np.ndarray | None = None,
) -> KeyRangePlan:
    """Split and assign (see the module docs). Pure: same inputs, same plan."""
    sharing = sharing or KeySharingPolicy()
    samples = samples or {}
    loads = spec.lag.astype(np.float64) if load is None else np.asarray(load, dtype=np.float64)
    if loads.shape != (spec.num_partitions,):
        raise AdvisorError(
            f"load: expected {spec.num_partitions} values (one per partition), got {loads.shape}"
        )
    flagged = np.array([m.member_id in sharing.members for m in spec.members], dtype=bool)
    holders = int(np.count_nonzero(spec.class_topics.any(axis=1)[spec.member_class]))
    splits, notes = _candidates(spec, sharing, samples, loads, flagged)
    _grow_ranges(splits, int(np.count_nonzero(spec.assignable)), holders, capacity)
    hot = _hot_keys(spec, splits, capacity)
    owners, ranges, member_load = _deal(
        spec, loads, flagged, {k: s for k, s in splits.items() if len(s.cuts) > 1}
    )
    owners.setflags(write=False)
    reason = _plan_reason(ranges, notes, hot, capacity)
    return KeyRangePlan(spec, owners, tuple(ranges), member_load, tuple(hot), reason)


def _candidates(
    spec: GroupSpec, sharing: KeySharingPolicy, samples: Mapping[tuple[str, int], KeySample],
    loads: np.ndarray, flagged: np.ndarray,
) -> tuple[dict[int, _Split], list[str]]:  # fmt: skip
    """Partitions all three levels allow (run, topic, members), with a sample and some load, each
    one range for now; and notes on what the run did not allow."""
    splits: dict[int, _Split] = {}
    if not sharing.allowed:
        return splits, ["key sharing not enabled for this run"]
    notes, refused_topics = [], []
    for t, topic in enumerate(spec.topics):
        if not sharing.topic_allowed(topic):
            refused_topics.append(topic)
            continue
        sharers = int(np.count_nonzero(flagged[spec.topic_subscribers[t]]))
        for k in range(int(spec.topic_start[t]), int(spec.topic_start[t + 1])):
            sample = samples.get((topic, int(spec.partition[k])))
            if sharers >= 2 and loads[k] > 0 and sample is not None and sample.total > 0:
                splits[k] = _Split(k, float(loads[k]), sample, sharers, [(0, HASH_SPACE, sample.total)])
    if refused_topics:
        more = " ..." if len(refused_topics) > 5 else ""
        notes.append(f"not allow-listed: {', '.join(refused_topics[:5])}{more}")
    if not flagged.any():
        notes.append("no member opted in (--share-keys)")
    return splits, notes


def _grow_ranges(splits: dict[int, _Split], pieces: int, holders: int, capacity: float | None) -> None:
    """Grow the heaviest candidate's range count while members idle (fewer pieces than members that
    can hold one) or a piece is over ``capacity``; in place."""
    heap = [(-s.heaviest, s.index) for s in splits.values()]
    heapq.heapify(heap)
    while heap:
        neg, k = heapq.heappop(heap)
        s = splits[k]
        if not (pieces < holders or (capacity is not None and -neg > capacity)):
            break
        if len(s.cuts) >= s.sharers:
            continue
        if int(s.sample.counts.max()) == max(c[2] for c in s.cuts):
            s.limited_by_key = True  # the heaviest range is one hash: more ranges cannot help
            continue
        cuts = cut_ranges(s.sample, len(s.cuts) + 1)
        new_heaviest = s.load * max(c[2] for c in cuts) / s.sample.total
        pieces += len(cuts) - len(s.cuts)
        s.cuts = cuts
        heapq.heappush(heap, (-new_heaviest, k))


def _plan_reason(ranges: Sequence, notes: list[str], hot: Sequence, capacity: float | None) -> str:
    split_count = len({(r.topic, r.partition) for r in ranges})
    if split_count:
        reason = f"split {split_count} partition(s) into {len(ranges)} key ranges"
    else:
        reason = "no partition split" + (f" ({'; '.join(notes)})" if notes else "")
    if hot:
        reason += "; hot key(s) not split: " + ", ".join(
            f"{h.topic}-{h.partition} hash {h.key_hash} ({h.share:.0%} of the partition, load {h.load:g}"
            + (f" > capacity {capacity:g})" if h.over_capacity else ")")
            for h in hot[:5]
        )
    return reason


def _hot_keys(spec: GroupSpec, splits: Mapping[int, _Split], capacity: float | None) -> list[HotKey]:
    hot = []
    for k, s in sorted(splits.items()):
        top = int(np.argmax(s.sample.counts))
        share = float(s.sample.counts[top]) / s.sample.total
        key_load = s.load * share
        over = capacity is not None and key_load > capacity
        if over or s.limited_by_key:
            topic = spec.topics[spec.topic_index[k]]
            hot.append(
                HotKey(topic, int(spec.partition[k]), int(s.sample.hashes[top]), share, key_load, over)
            )
    return hot


def _deal(
    spec: GroupSpec, loads: np.ndarray, flagged: np.ndarray, splits: Mapping[int, _Split]
) -> tuple[np.ndarray, list[RangeShare], np.ndarray]:
    """Whole partitions as lag_aware deals them; then each range, largest first, to the least loaded
    flagged subscriber holding no other range of its partition (ties: current owner, member order)."""
    owners = lag_aware.owners(spec).copy()
    split_index = np.fromiter(splits, dtype=np.int64, count=len(splits))
    owners[split_index] = -1
    held = owners >= 0
    member_load = np.bincount(owners[held], weights=loads[held], minlength=spec.num_members).astype(
        np.float64
    )
    pieces = sorted(
        ((s.load * c[2] / s.sample.total, k, i) for k, s in splits.items() for i, c in enumerate(s.cuts)),
        key=lambda x: (-x[0], x[1], x[2]),
    )
    taken: dict[int, list[int]] = {}
    ranges: list[RangeShare] = []
    subs = spec.topic_subscribers
    for piece_load, k, i in pieces:
        cand = subs[spec.topic_index[k]]
        cand = cand[flagged[cand]]
        used = taken.setdefault(k, [])
        if used:
            cand = cand[~np.isin(cand, used)]
        loads_c = member_load[cand]
        best = cand[loads_c == loads_c.min()]
        cur = int(spec.owner[k])
        pick = cur if cur in best else int(best[0])
        member_load[pick] += piece_load
        used.append(pick)
        lo, hi, _ = splits[k].cuts[i]
        topic = spec.topics[spec.topic_index[k]]
        ranges.append(RangeShare(topic, int(spec.partition[k]), spec.member_ids[pick], lo, hi, piece_load))
    ranges.sort(key=lambda r: (r.topic, r.partition, r.hash_lo))
    return owners, ranges, member_load


def owners(spec: GroupSpec, **options: Any) -> np.ndarray:
    """Whole-partition owners of :func:`plan` (-1 where a partition is split into ranges)."""
    return plan(spec, **options).owners


# ---- checking a ranged assignment (hand-written plans, records) ------------------------------


def check_ranged_assignment(
    spec: GroupSpec,
    assignment: Mapping[str, Iterable[tuple[str, int, int | None, int | None]]],
    sharing: KeySharingPolicy,
) -> None:
    """Raise AdvisorError with the reason when a ranged assignment is not usable.

    Every range must be allowed by all three opt-in levels; the ranges of a partition must tile
    the hash space (no overlap, no gap) with one member per range; a split partition must not
    also be assigned whole; a member appears at most once per partition.
    """
    members = set(spec.member_ids)
    by_partition: dict[tuple[str, int], list[tuple[int, int, str]]] = {}
    whole: dict[tuple[str, int], str] = {}
    for member_id, parts in assignment.items():
        if member_id not in members:
            raise AdvisorError(f"assignment names unknown member {member_id!r}")
        seen: set[tuple[str, int]] = set()
        for topic, partition, lo, hi in parts:
            tp = (topic, partition)
            if tp in seen:
                raise AdvisorError(f"member {member_id!r} holds {topic}-{partition} twice")
            seen.add(tp)
            if lo is None and hi is None:
                if tp in whole:
                    raise AdvisorError(f"partition {topic}-{partition} is given whole to two members")
                whole[tp] = member_id
                continue
            if lo is None or hi is None:
                raise AdvisorError(f"member {member_id!r}: {topic}-{partition} has only one range bound")
            problem = sharing.refusal(topic, member_id)
            if problem:
                raise AdvisorError(f"key range of {topic}-{partition} for {member_id!r} refused: {problem}")
            by_partition.setdefault(tp, []).append((lo, hi, member_id))
    spec.partition_positions(
        [tp[0] for tp in [*whole, *by_partition]], [tp[1] for tp in [*whole, *by_partition]], what="assigned"
    )
    for (topic, partition), rs in by_partition.items():
        if (topic, partition) in whole:
            raise AdvisorError(f"partition {topic}-{partition} is both split into key ranges and given whole")
        problem = range_cover_problem([(lo, hi) for lo, hi, _ in rs])
        if problem:
            raise AdvisorError(f"key ranges of {topic}-{partition}: {problem}")
