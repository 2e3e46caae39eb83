"""The group spec: the one immutable input every assignor, metric and plan reads.

A :class:`GroupSpec` is built once per group (by the CLI from JSON, by the snapshot or by the
Spark planner from rows) and then only read, so assignors stay pure functions. Partitions are
held column-wise in NumPy arrays sorted by (topic, partition) because a group can have 500,000
of them and Python objects per partition would dominate the run time; members stay small frozen
dataclasses, kept in Kafka's member order (see :func:`member_order`).

Partition *index* ``k`` (0 .. P-1) is the position in those sorted arrays; assignors work on an
``owners`` array (member index per partition index, -1 = unassigned) and
:meth:`GroupSpec.to_assignment` turns it into the public :data:`Assignment` form.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from functools import cached_property
from typing import Any, TypeVar

import numpy as np

from rebalance_advisor.domain.timestamps import assume_utc
from rebalance_advisor.errors import AdvisorError
from rebalance_advisor.gcpause import gc_paused

#: member id -> its partitions as (topic, partition), sorted; every member present.
Assignment = dict[str, list[tuple[str, int]]]

_T = TypeVar("_T")

#: generation assumed for a member that reports none (Kafka's DEFAULT_GENERATION).
NO_GENERATION = -1


@dataclass(frozen=True)
class Member:
    """One consumer of the group: what it subscribes to and what it owned at the last rebalance."""

    member_id: str
    group_instance_id: str | None = None
    topics: tuple[str, ...] = ()
    owned: tuple[tuple[str, int], ...] = ()
    generation: int | None = None
    capacity: float | None = None  # messages/s it can process; None = unknown


@dataclass(frozen=True)
class RecentMove:
    """A partition that left ``from_member`` for ``to_member`` at ``at`` (the hysteresis rule reads these)."""

    topic: str
    partition: int
    from_member: str
    to_member: str
    at: datetime


@dataclass(frozen=True)
class PartitionLag:
    """One partition of a subscribed topic with the group's lag on it (messages)."""

    topic: str
    partition: int
    lag: int


def _java_key(text: str) -> bytes:
    """Sort key matching Java's String.compareTo (UTF-16 code units), which Kafka uses."""
    return text.encode("utf-16-be", "surrogatepass")


def member_order(members: Iterable[Member]) -> tuple[Member, ...]:
    """Kafka's member order: static members (group instance id) first by that id, then by member id."""
    return tuple(
        sorted(
            members,
            key=lambda m: (
                (0, _java_key(m.group_instance_id), _java_key(m.member_id))
                if m.group_instance_id is not None
                else (1, b"", _java_key(m.member_id))
            ),
        )
    )


@dataclass(frozen=True, eq=False)
class GroupSpec:
    """An immutable consumer group: members in Kafka order, partitions column-wise.

    Build it with :meth:`build` (validates) rather than the constructor. The arrays are
    read-only. ``owner`` is the member index that currently owns each partition after the
    generation rule (a partition claimed twice goes to the higher generation, to neither on a
    tie), -1 if none; ``owner_valid`` says whether that owner is still subscribed to its topic.
    """

    group_id: str
    members: tuple[Member, ...]
    topics: tuple[str, ...]
    topic_index: np.ndarray  # int32 [P], index into topics
    partition: np.ndarray  # int32 [P]
    lag: np.ndarray  # int64 [P]
    topic_start: np.ndarray  # int64 [T+1], partitions of topic t are [start[t], start[t+1])
    member_class: np.ndarray  # int32 [M], index into subscription_classes
    class_topics: np.ndarray = field(repr=False)  # bool [K, T]: class k subscribes topic t
    owner: np.ndarray = field(repr=False)  # int32 [P]
    owner_valid: np.ndarray = field(repr=False)  # bool [P]
    #: produce rate per partition (messages/s), NaN where unknown; None when no rate is known at all
    produce_rate: np.ndarray | None = field(default=None, repr=False)  # float64 [P]

    # ---- construction -------------------------------------------------------------------

    @classmethod
    def build(
        cls,
        group_id: str,
        members: Iterable[Member],
        partitions: Iterable[PartitionLag] | None = None,
        *,
        topic: Sequence[str] | None = None,
        partition: Sequence[int] | np.ndarray | None = None,
        lag: Sequence[int] | np.ndarray | None = None,
        produce_rate: Sequence[float | None] | np.ndarray | None = None,
    ) -> GroupSpec:
        """Validate and build. Partitions come either as PartitionLag objects or as three columns.

        ``produce_rate`` (optional, with the columns) is messages/s per partition, None/NaN = unknown.
        """
        members = member_order(members)
        if not members:
            raise AdvisorError(f"group {group_id!r}: no members")
        _check_unique_members(members)
        if partitions is not None:
            plist = list(partitions)
            topic = [p.topic for p in plist]
            partition = [p.partition for p in plist]
            lag = [p.lag for p in plist]
        if topic is None or partition is None or lag is None:
            raise AdvisorError(f"group {group_id!r}: partitions missing")
        topics, topic_index, part_arr, lag_arr, order = _sorted_partitions(topic, partition, lag)
        rate_arr = None
        if produce_rate is not None:
            rate_arr = _rate_column(produce_rate, order, topics, topic_index, part_arr)
        for m in members:
            _check_capacity(m.member_id, m.capacity)
        num_topics = len(topics)
        topic_start = np.searchsorted(topic_index, np.arange(num_topics + 1)).astype(np.int64)
        topic_pos = {t: i for i, t in enumerate(topics)}
        member_class, class_topics = _subscription_classes(members, topic_pos)
        owner, owner_valid = _resolve_owners(
            members, topic_pos, topic_index, part_arr, member_class, class_topics
        )
        arrays = (topic_index, part_arr, lag_arr, topic_start, member_class, class_topics, owner, owner_valid)
        for arr in (*arrays, *([] if rate_arr is None else [rate_arr])):
            arr.setflags(write=False)
        return cls(
            group_id=group_id,
            members=members,
            topics=topics,
            topic_index=topic_index,
            partition=part_arr,
            lag=lag_arr,
            topic_start=topic_start,
            member_class=member_class,
            class_topics=class_topics,
            owner=owner,
            owner_valid=owner_valid,
            produce_rate=rate_arr,
        )

    # ---- derived views (cached; the spec itself never changes) --------------------------

    def derived(self, name: str, compute: Callable[[GroupSpec], _T]) -> _T:
        """``compute(self)``, computed once per spec under ``name``: for values of the spec alone
        that another module defines (metrics' bounds), asked for again by every candidate plan."""
        cache = self.__dict__.setdefault("_derived", {})  # frozen: the instance dict, not setattr
        if name not in cache:
            cache[name] = compute(self)
        return cache[name]

    @property
    def num_members(self) -> int:
        return len(self.members)

    @property
    def num_partitions(self) -> int:
        return int(self.partition.shape[0])

    @cached_property
    def member_ids(self) -> tuple[str, ...]:
        return tuple(m.member_id for m in self.members)

    @cached_property
    def identical_subscriptions(self) -> bool:
        """True when every member subscribes to the same topics (Kafka's constrained case)."""
        return self.class_topics.shape[0] == 1

    @cached_property
    def topic_subscribers(self) -> tuple[np.ndarray, ...]:
        """Per topic, the subscribing member indices in member order (shared arrays per class set)."""
        member_of_class = [np.flatnonzero(self.member_class == k) for k in range(self.class_topics.shape[0])]
        cache: dict[bytes, np.ndarray] = {}
        result = []
        for t in range(len(self.topics)):
            col = self.class_topics[:, t]
            key = col.tobytes()
            if key not in cache:
                parts = [member_of_class[k] for k in np.flatnonzero(col)]
                cache[key] = np.sort(np.concatenate(parts)) if parts else np.empty(0, np.int64)
            result.append(cache[key])
        return tuple(result)

    @cached_property
    def topic_subscriber_count(self) -> np.ndarray:
        """Per topic, how many members subscribe to it (int64 [T])."""
        class_sizes = np.bincount(self.member_class, minlength=self.class_topics.shape[0])
        counts = class_sizes.astype(np.int64) @ self.class_topics.astype(np.int64)
        counts.setflags(write=False)
        return counts

    @cached_property
    def assignable(self) -> np.ndarray:
        """Mask of partitions whose topic has at least one subscriber (the others stay unassigned)."""
        subscribed = self.class_topics.any(axis=0)
        return subscribed[self.topic_index]

    @cached_property
    def partition_keys(self) -> tuple[tuple[str, int], ...]:
        """(topic, partition) per partition index, built once for output (shared topic strings)."""
        with gc_paused():
            names = map(self.topics.__getitem__, self.topic_index.tolist())
            return tuple(zip(names, self.partition.tolist(), strict=True))

    @cached_property
    def _partition_key_array(self) -> np.ndarray:
        """:attr:`partition_keys` as an object array: a fancy-index gathers them in C."""
        keys = np.empty(self.num_partitions, dtype=object)
        keys[:] = self.partition_keys
        return keys

    @cached_property
    def capacity(self) -> np.ndarray | None:
        """Capacity per member (messages/s), NaN where unknown; None when no member's is known."""
        if all(m.capacity is None for m in self.members):
            return None
        caps = np.array(
            [np.nan if m.capacity is None else m.capacity for m in self.members], dtype=np.float64
        )
        caps.setflags(write=False)
        return caps

    # ---- conversions --------------------------------------------------------------------

    def to_assignment(self, owners: np.ndarray) -> Assignment:
        """Owners array -> {member id: sorted [(topic, partition)]}, every member present.

        One stable argsort groups the partitions by owner while keeping (topic, partition) order;
        each member's list is then a slice of one list of the shared key tuples, gathered in C,
        so no Python code runs per partition.
        """
        order = np.argsort(owners, kind="stable")  # stable keeps (topic, partition) order
        bounds = np.searchsorted(owners[order], np.arange(self.num_members + 1)).tolist()
        with gc_paused():
            ordered = self._partition_key_array[order].tolist()
            return {
                member_id: ordered[bounds[i] : bounds[i + 1]] for i, member_id in enumerate(self.member_ids)
            }

    def owners_from_assignment(self, assignment: Mapping[str, Iterable[tuple[str, int]]]) -> np.ndarray:
        """Assignment -> owners array; unknown members or partitions, or a partition twice, raise."""
        index = {m: i for i, m in enumerate(self.member_ids)}
        topics: list[str] = []
        numbers: list[int] = []
        who: list[int] = []
        for member_id, parts in assignment.items():
            if member_id not in index:
                raise AdvisorError(f"assignment names unknown member {member_id!r}")
            plist = list(parts)
            topics.extend(p[0] for p in plist)
            numbers.extend(p[1] for p in plist)
            who.extend([index[member_id]] * len(plist))
        owners = np.full(self.num_partitions, -1, dtype=np.int32)
        if not who:
            return owners
        ks = self.partition_positions(topics, numbers, what="assigned")
        counts = np.bincount(ks, minlength=self.num_partitions)
        if (counts > 1).any():
            k = int(np.flatnonzero(counts > 1)[0])
            raise AdvisorError(f"assignment gives partition {self.partition_keys[k]} to two members")
        owners[ks] = np.asarray(who, dtype=np.int32)
        return owners

    def partition_positions(self, topics: Sequence[str], partitions: Sequence[int], what: str) -> np.ndarray:
        """Partition indices of (topic, partition) pairs; a pair not in the spec raises AdvisorError."""
        topic_pos = {t: i for i, t in enumerate(self.topics)}
        return _positions(topic_pos, self.topic_index, self.partition, topics, partitions, what)


# ---- build helpers ----------------------------------------------------------------------


def _check_unique_members(members: tuple[Member, ...]) -> None:
    seen: set[str] = set()
    seen_instances: set[str] = set()
    for m in members:
        if m.member_id in seen:
            raise AdvisorError(f"duplicate member id {m.member_id!r}")
        seen.add(m.member_id)
        if m.group_instance_id is not None:
            if m.group_instance_id in seen_instances:
                raise AdvisorError(f"duplicate group instance id {m.group_instance_id!r}")
            seen_instances.add(m.group_instance_id)


def _sorted_partitions(
    topic: Sequence[str], partition: Sequence[int] | np.ndarray, lag: Sequence[int] | np.ndarray
) -> tuple[tuple[str, ...], np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Columns -> (sorted topic names, topic index, partition, lag, the sort order) by (topic, partition)."""
    topic_list = list(topic)
    topics = tuple(sorted(dict.fromkeys(topic_list)))
    pos = {t: i for i, t in enumerate(topics)}
    topic_index = np.fromiter((pos[t] for t in topic_list), dtype=np.int32, count=len(topic_list))
    part_arr = np.asarray(partition)
    lag_arr = np.asarray(lag)
    if part_arr.shape != topic_index.shape or lag_arr.shape != topic_index.shape:
        raise AdvisorError("partition columns differ in length")
    if part_arr.size and part_arr.dtype.kind not in "iu":
        raise AdvisorError("partition numbers must be integers")
    if lag_arr.size and lag_arr.dtype.kind not in "iu":
        raise AdvisorError("lags must be integers")
    if part_arr.size and (part_arr.min() < 0 or part_arr.max() > 2**31 - 1):
        k = int(np.argmin(part_arr)) if part_arr.min() < 0 else int(np.argmax(part_arr))
        raise AdvisorError(f"partition {topic_list[k]}-{part_arr[k]}: partition number out of range")
    if lag_arr.size and lag_arr.min() < 0:
        k = int(np.argmin(lag_arr))
        raise AdvisorError(f"partition {topic_list[k]}-{part_arr[k]}: lag must be >= 0, got {lag_arr[k]}")
    part_arr = part_arr.astype(np.int32, copy=False)
    lag_arr = lag_arr.astype(np.int64, copy=False)
    order = np.lexsort((part_arr, topic_index))
    topic_index, part_arr, lag_arr = topic_index[order], part_arr[order], lag_arr[order]
    dup = (topic_index[1:] == topic_index[:-1]) & (part_arr[1:] == part_arr[:-1])
    if dup.any():
        k = int(np.flatnonzero(dup)[0])
        raise AdvisorError(f"partition {topics[topic_index[k]]}-{part_arr[k]} listed twice")
    return topics, topic_index, part_arr, lag_arr, order


def _rate_column(
    produce_rate: Sequence[float | None] | np.ndarray,
    order: np.ndarray,
    topics: tuple[str, ...],
    topic_index: np.ndarray,
    part_arr: np.ndarray,
) -> np.ndarray | None:
    """The produce rates in the partitions' sorted ``order`` (NaN = unknown); None when none is known."""
    raw = np.asarray([np.nan if r is None else r for r in produce_rate], dtype=np.float64)
    if raw.shape != order.shape:
        raise AdvisorError("produce_rate column differs in length from the partitions")
    rate_arr = raw[order]
    bad = ~np.isnan(rate_arr) & ~(np.isfinite(rate_arr) & (rate_arr >= 0))
    if bad.any():
        k = int(np.flatnonzero(bad)[0])
        raise AdvisorError(
            f"partition {topics[topic_index[k]]}-{part_arr[k]}: {RATE_RULE}, got {rate_arr[k]!r}"
        )
    return None if np.isnan(rate_arr).all() else rate_arr


def _subscription_classes(
    members: tuple[Member, ...], topic_pos: dict[str, int]
) -> tuple[np.ndarray, np.ndarray]:
    """Group members by subscribed topic set; members sharing a tuple cost one lookup."""
    by_tuple: dict[tuple[str, ...], int] = {}
    by_set: dict[frozenset[str], int] = {}
    rows: list[np.ndarray] = []
    member_class = np.empty(len(members), dtype=np.int32)
    for i, m in enumerate(members):
        k = by_tuple.get(m.topics)
        if k is None:
            topic_set = frozenset(m.topics)
            k = by_set.get(topic_set)
            if k is None:
                for t in sorted(topic_set):
                    if t not in topic_pos:
                        raise AdvisorError(
                            f"member {m.member_id!r} subscribes to topic {t!r}, which has no partitions"
                        )
                row = np.zeros(len(topic_pos), dtype=bool)
                row[[topic_pos[t] for t in topic_set]] = True
                k = len(rows)
                rows.append(row)
                by_set[topic_set] = k
            by_tuple[m.topics] = k
        member_class[i] = k
    return member_class, np.vstack(rows)


def _lookup(
    topic_pos: dict[str, int],
    topic_index: np.ndarray,
    part_arr: np.ndarray,
    topics: Sequence[str],
    partitions: Sequence[int],
) -> tuple[np.ndarray, np.ndarray]:
    """Vectorised lookup of (topic, partition) pairs: (position, found mask)."""
    n = len(topics)
    tix = np.fromiter((topic_pos.get(t, -1) for t in topics), dtype=np.int64, count=n)
    pnum = np.asarray(partitions, dtype=np.int64).reshape(n)
    keys = topic_index.astype(np.int64) << 32 | part_arr.astype(np.int64)
    wanted = tix << 32 | pnum
    if not len(keys):
        return np.zeros(n, dtype=np.int64), np.zeros(n, dtype=bool)
    pos = np.minimum(np.searchsorted(keys, wanted), len(keys) - 1)
    ok = (tix >= 0) & (pnum >= 0) & (keys[pos] == wanted)
    return pos, ok


def _positions(
    topic_pos: dict[str, int],
    topic_index: np.ndarray,
    part_arr: np.ndarray,
    topics: Sequence[str],
    partitions: Sequence[int],
    what: str,
) -> np.ndarray:
    """Like _lookup, but a missing pair raises AdvisorError naming it."""
    pos, ok = _lookup(topic_pos, topic_index, part_arr, topics, partitions)
    if not ok.all():
        j = int(np.flatnonzero(~ok)[0])
        raise AdvisorError(f"{what} partition {topics[j]}-{partitions[j]} does not exist")
    return pos


def _resolve_owners(
    members: tuple[Member, ...],
    topic_pos: dict[str, int],
    topic_index: np.ndarray,
    part_arr: np.ndarray,
    member_class: np.ndarray,
    class_topics: np.ndarray,
) -> tuple[np.ndarray, np.ndarray]:
    """Current owner per partition: the highest-generation claimant; nobody on a tie at the top."""
    small = _small_owners(members, topic_pos, topic_index, part_arr)
    if small is not None:
        return _owner_arrays(small, topic_index, member_class, class_topics)
    num_parts = len(part_arr)
    owner = np.full(num_parts, -1, dtype=np.int32)
    claim_topics, claim_parts, claim_members, claim_gens = _claims(members)
    if not claim_members:
        return owner, np.zeros(num_parts, dtype=bool)
    pos, found = _lookup(topic_pos, topic_index, part_arr, claim_topics, claim_parts)
    if not found.all():
        j = int(np.flatnonzero(~found)[0])
        raise AdvisorError(
            f"member {members[claim_members[j]].member_id!r} owns partition "
            f"{claim_topics[j]}-{claim_parts[j]}, which does not exist"
        )
    cm = np.asarray(claim_members, dtype=np.int64)
    cg = np.asarray(claim_gens, dtype=np.int64)
    # one claim per (member, partition)
    _, first = np.unique(pos * len(members) + cm, return_index=True)
    pos, cm, cg = pos[first], cm[first], cg[first]
    # sort by partition, then generation descending: the first claim per partition is the top one
    order = np.lexsort((-cg, pos))
    pos, cm, cg = pos[order], cm[order], cg[order]
    starts = np.flatnonzero(np.r_[True, pos[1:] != pos[:-1]])
    ends = np.r_[starts[1:], len(pos)]
    top_unique = np.ones(len(starts), dtype=bool)
    has_second = ends - starts > 1
    second = np.minimum(starts + 1, len(pos) - 1)
    top_unique[has_second] = cg[starts[has_second]] != cg[second[has_second]]
    winners = starts[top_unique]
    owner[pos[winners]] = cm[winners]
    valid = np.zeros(num_parts, dtype=bool)
    held = owner >= 0
    valid[held] = class_topics[member_class[owner[held]], topic_index[held]]
    return owner, valid


def _claims(members: tuple[Member, ...]) -> tuple[list[str], list[int], list[int], list[int]]:
    """Every (topic, partition) a member claims to own, as columns: topic, partition, member, generation."""
    claim_topics: list[str] = []
    claim_parts: list[int] = []
    claim_members: list[int] = []
    claim_gens: list[int] = []
    for i, m in enumerate(members):
        if not m.owned:
            continue
        gen = NO_GENERATION if m.generation is None else m.generation
        for tp in m.owned:
            claim_topics.append(tp[0])
            claim_parts.append(tp[1])
        claim_members.extend([i] * len(m.owned))
        claim_gens.extend([gen] * len(m.owned))
    return claim_topics, claim_parts, claim_members, claim_gens


#: claims up to which :func:`_resolve_owners` decides in plain Python: on a small group its NumPy
#: calls on a handful of values cost more than the work (bench/planner_cpu.py); integers only, so
#: the very same owners (tests/unit/test_planning_shortcuts.py compares both paths)
SMALL_CLAIMS = 64


def _small_owners(
    members: tuple[Member, ...], topic_pos: dict[str, int], topic_index: np.ndarray, part_arr: np.ndarray
) -> list[int] | None:
    """The owner of each partition position (-1: nobody) as :func:`_resolve_owners` decides, in plain
    Python; None beyond :data:`SMALL_CLAIMS` or when a claim is not a plain int (NumPy's path then
    decides, its errors included)."""
    if sum(len(m.owned) for m in members) > SMALL_CLAIMS:
        return None
    if any(type(m.generation) is not int and m.generation is not None for m in members):
        return None
    if any(type(p) is not int or not 0 <= p < 2**31 for m in members for _, p in m.owned):
        return None
    where = {tp: k for k, tp in enumerate(zip(topic_index.tolist(), part_arr.tolist(), strict=True))}
    best: dict[int, list] = {}  # position -> [generation, member, tied at the top]
    for i, m in enumerate(members):
        gen = NO_GENERATION if m.generation is None else m.generation
        for t, p in m.owned:
            k = where.get((topic_pos.get(t, -1), p))
            if k is None:
                raise AdvisorError(f"member {m.member_id!r} owns partition {t}-{p}, which does not exist")
            top = best.get(k)
            if top is None or gen > top[0]:
                best[k] = [gen, i, False]
            elif gen == top[0] and i != top[1]:
                top[2] = True
    owner = [-1] * len(topic_index)
    for k, (_, i, tied) in best.items():
        if not tied:
            owner[k] = i
    return owner


def _owner_arrays(
    owner: list[int], topic_index: np.ndarray, member_class: np.ndarray, class_topics: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """(owner, owner subscribes to the partition's topic) as arrays, from :func:`_small_owners`."""
    subscribed = class_topics.tolist()
    classes = member_class.tolist()
    valid = [o >= 0 and subscribed[classes[o]][t] for o, t in zip(owner, topic_index.tolist(), strict=True)]
    return np.array(owner, dtype=np.int32), np.array(valid, dtype=bool)


# ---- JSON input -------------------------------------------------------------------------


#: The keys the documented JSON shape allows, per object; any other key is refused (a misspelt
#: optional key such as ``"owend"`` would otherwise be silently ignored).
GROUP_KEYS = ("group_id", "members", "partitions", "recent_moves", "rate_interval_s")
MEMBER_KEYS = ("member_id", "group_instance_id", "topics", "owned", "generation", "capacity")
PARTITION_KEYS = ("topic", "partition", "lag", "produce_rate")
RECENT_MOVE_KEYS = ("topic", "partition", "from", "to", "at")


def _check_keys(obj: dict, allowed: tuple[str, ...], where: str) -> None:
    unknown = [k for k in obj if k not in allowed]
    if unknown:
        raise AdvisorError(f"{where}: unknown key {unknown[0]!r} (allowed: {', '.join(allowed)})")


def parse_group_spec(data: Any) -> GroupSpec:
    """Validate the documented JSON shape (see the ``plan`` command) and build the spec.

    Every problem raises AdvisorError naming the offending member, topic or partition; so does a
    key the shape does not define, in the group, a member or a partition object.
    """
    if not isinstance(data, dict):
        raise AdvisorError("input must be a JSON object with group_id, members and partitions")
    group_id = data.get("group_id")
    if not isinstance(group_id, str) or not group_id:
        raise AdvisorError("group_id must be a non-empty string")
    _check_keys(data, GROUP_KEYS, f"group {group_id!r}")
    raw_members = data.get("members")
    if not isinstance(raw_members, list) or not raw_members:
        raise AdvisorError(f"group {group_id!r}: no members (members must be a non-empty list)")
    raw_parts = data.get("partitions")
    if not isinstance(raw_parts, list):
        raise AdvisorError(f"group {group_id!r}: partitions must be a list")
    members = [_parse_member(i, m) for i, m in enumerate(raw_members)]
    columns = _plain_partition_columns(raw_parts)
    topics, parts, lags, rates = columns if columns is not None else _checked_partition_columns(raw_parts)
    return GroupSpec.build(
        group_id,
        members,
        topic=topics,
        partition=np.asarray(parts, dtype=np.int64),
        lag=np.asarray(lags, dtype=np.int64),
        produce_rate=rates if any(r is not None for r in rates) else None,
    )


#: Partition objects' keys as a set, for the bulk check of :func:`_plain_partition_columns`.
_PARTITION_KEY_SET = frozenset(PARTITION_KEYS)


def _plain_partition_columns(
    raw_parts: list,
) -> tuple[list[str], list[int], list[int], list[float | None]] | None:
    """The partitions' columns when every entry is plainly valid, checked in bulk; else None.

    Why: one check per field per partition was a sixth of planning a group of 100 partitions. Only
    what JSON produces for a valid document passes (exact types: str, int, float or null rates); at
    the first doubt it returns None and :func:`_checked_partition_columns` decides and names the
    problem, so the result or the error is always that of the checking loop.
    """
    try:
        if not all(type(p) is dict and p.keys() <= _PARTITION_KEY_SET for p in raw_parts):
            return None
        topics = [p["topic"] for p in raw_parts]
        parts = [p["partition"] for p in raw_parts]
        lags = [p["lag"] for p in raw_parts]
    except KeyError:
        return None
    rates = [p.get("produce_rate") for p in raw_parts]
    if not (
        all(type(t) is str and t for t in topics)
        and all(type(n) is int for n in parts)
        and all(type(lag) is int for lag in lags)
        and all(r is None or (type(r) is float and 0.0 <= r < math.inf) for r in rates)
    ):
        return None
    if parts and (min(parts) < 0 or max(parts) >= 2**63 or min(lags) < 0 or max(lags) >= 2**63):
        return None
    return topics, parts, lags, rates


def _checked_partition_columns(raw_parts: list) -> tuple[list[str], list[int], list[int], list[float | None]]:
    """The partitions' columns, each entry checked; the first problem raises AdvisorError naming it."""
    topics: list[str] = []
    parts: list[int] = []
    lags: list[int] = []
    rates: list[float | None] = []
    for j, p in enumerate(raw_parts):
        if not isinstance(p, dict):
            raise AdvisorError(f"partitions[{j}] must be an object with topic, partition, lag")
        _check_keys(p, PARTITION_KEYS, f"partitions[{j}]")
        topic, number, lag = p.get("topic"), p.get("partition"), p.get("lag")
        if not isinstance(topic, str) or not topic:
            raise AdvisorError(f"partitions[{j}]: topic must be a non-empty string")
        if not _is_int(number) or number < 0:
            raise AdvisorError(
                f"partitions[{j}] ({topic}): partition must be an integer >= 0, got {number!r}"
            )
        if not _is_int(lag) or lag < 0:
            raise AdvisorError(f"partition {topic}-{number}: lag must be an integer >= 0, got {lag!r}")
        if lag >= 2**63:
            raise AdvisorError(f"partition {topic}-{number}: lag {lag} is too large")
        rate = p.get("produce_rate")
        if rate is not None and not _is_rate(rate):
            raise AdvisorError(f"partition {topic}-{number}: {RATE_RULE}, got {rate!r}")
        topics.append(topic)
        parts.append(number)
        lags.append(lag)
        rates.append(rate)
    return topics, parts, lags, rates


def parse_recent_moves(data: Any) -> tuple[RecentMove, ...]:
    """The optional ``recent_moves`` list of the plan JSON: [{topic, partition, from, to, at}, ...].

    ``from``/``to`` are member ids (``to`` may be null for a partition left unowned), ``at`` an ISO
    8601 time (UTC when it has no zone). The hysteresis rule reads them (``decisions``).
    """
    if data is None:
        return ()
    if not isinstance(data, list):
        raise AdvisorError("recent_moves must be a list of {topic, partition, from, to, at} objects")
    moves = []
    for j, move in enumerate(data):
        if not isinstance(move, dict):
            raise AdvisorError(f"recent_moves[{j}] must be an object with topic, partition, from, to, at")
        _check_keys(move, RECENT_MOVE_KEYS, f"recent_moves[{j}]")
        topic, number, source, target, at = (move.get(k) for k in RECENT_MOVE_KEYS)
        if not isinstance(topic, str) or not topic or not _is_int(number) or number < 0:
            raise AdvisorError(f"recent_moves[{j}]: topic must be a name and partition an integer >= 0")
        if not isinstance(source, str) or not source or (target is not None and not isinstance(target, str)):
            raise AdvisorError(f"recent_moves[{j}]: from must be a member id, to a member id or null")
        try:
            when = datetime.fromisoformat(at) if isinstance(at, str) else None
        except ValueError:
            when = None
        if when is None:
            raise AdvisorError(f"recent_moves[{j}]: at must be an ISO 8601 time, got {at!r}")
        moves.append(RecentMove(topic, number, source, target or "", assume_utc(when)))
    return tuple(moves)


def parse_rate_interval(value: Any) -> float | None:
    """The optional ``rate_interval_s`` of the plan JSON: seconds between the two snapshots the
    rates come from (it sets the auto capacity margin); null when unknown."""
    if value is None:
        return None
    if not _is_rate(value) or value <= 0:
        raise AdvisorError(f"rate_interval_s must be a finite number of seconds > 0 or null, got {value!r}")
    return float(value)


#: the produce-rate rule, one text for the JSON reader and :meth:`GroupSpec.build` (NaN there = unknown)
RATE_RULE = "produce_rate must be a finite number >= 0 (messages/s) or null"


def _check_capacity(member_id: str, capacity: Any) -> None:
    """The capacity rule, for the JSON reader and :meth:`GroupSpec.build`: null, or a finite number > 0."""
    if capacity is not None and not (_is_rate(capacity) and capacity > 0):
        raise AdvisorError(
            f"member {member_id!r}: capacity must be a finite number > 0 (messages/s) or null, got {capacity!r}"
        )


def _is_rate(value: Any) -> bool:
    """A finite number >= 0 (JSON's NaN/Infinity extensions and booleans are not)."""
    return (
        isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value) and value >= 0
    )


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _parse_member(i: int, m: Any) -> Member:
    if not isinstance(m, dict):
        raise AdvisorError(f"members[{i}] must be an object")
    member_id = m.get("member_id")
    if not isinstance(member_id, str) or not member_id:
        raise AdvisorError(f"members[{i}]: member_id must be a non-empty string")
    _check_keys(m, MEMBER_KEYS, f"member {member_id!r}")
    instance = m.get("group_instance_id")
    if instance is not None and (not isinstance(instance, str) or not instance):
        raise AdvisorError(f"member {member_id!r}: group_instance_id must be a non-empty string or null")
    topics = m.get("topics")
    if not isinstance(topics, list) or not all(isinstance(t, str) and t for t in topics):
        raise AdvisorError(f"member {member_id!r}: topics must be a list of topic names")
    if not topics:
        raise AdvisorError(f"member {member_id!r}: subscribes to no topics")
    owned_raw = m.get("owned", [])
    if owned_raw is None:
        owned_raw = []
    if not isinstance(owned_raw, list):
        raise AdvisorError(f"member {member_id!r}: owned must be a list of [topic, partition] pairs")
    owned = []
    for tp in owned_raw:
        if (
            not isinstance(tp, list | tuple)
            or len(tp) != 2
            or not isinstance(tp[0], str)
            or not _is_int(tp[1])
            or tp[1] < 0
        ):
            raise AdvisorError(f"member {member_id!r}: owned entry {tp!r} is not a [topic, partition] pair")
        owned.append((tp[0], tp[1]))
    generation = m.get("generation")
    if generation is not None and not _is_int(generation):
        raise AdvisorError(f"member {member_id!r}: generation must be an integer or null")
    capacity = m.get("capacity")
    _check_capacity(member_id, capacity)
    return Member(
        member_id=member_id,
        group_instance_id=instance,
        topics=tuple(topics),
        owned=tuple(owned),
        generation=generation,
        capacity=None if capacity is None else float(capacity),
    )
