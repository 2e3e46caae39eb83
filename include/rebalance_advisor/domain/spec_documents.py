"""Snapshot -> one spec document per group (``parse_group_spec``'s JSON shape plus planner keys).

Dynamic groups: members, their topics and the partitions they hold come from the snapshot.
Plans name a member by its ``group.instance.id`` when it has one (static membership survives
restarts, the member id does not), else by its member id. librdkafka does not expose a member's
subscription, so the snapshot stores the topics of its assignment; a member holding nothing is
taken to share the group's topics (the common single-subscription case) rather than to subscribe
to none.

Memberless groups (consumers using ``assign()``): members come from the ``static_members``
registry, with the topics registered there. The snapshot cannot see what such consumers hold, so
what they own is the group's latest ``published`` plan (``published``: what the consumers were
told to run): members no longer registered drop out, partitions no longer in the group's topics
are ignored; their capacities are measured against those owners when the snapshot is stored.
Without a published plan they own nothing (every partition counts as unowned lag);
the key ranges of a published ranged plan (``published_ranges``) go into ``current_ranges``, each
with how far behind its owner is from the derived range groups' commits
(``domain/key_range_advice.py``);
without registered members the document has no members and the group's outcome is ``no_members``.

Share groups (KIP-932): the broker assigns their partitions, so their document has no members,
``broker_assigned`` true, the broker's lag per started partition, and the note
:data:`SHARE_NOT_PLANNED`; their outcome is ``broker_assigned``.

Rates (stored with each snapshot, ``rebalance_advisor.domain.estimates.step``): each
partition carries ``produce_rate`` (records/s, null when unknown) and each member its ``capacity``
(records/s, null when unknown), the plan JSON's keys (docs/reference/plan-format.md). Beside them, outside what
``parse_group_spec`` reads, the document holds ``capacity_sources`` (member -> measured | reported |
group_median | own_rate | configured | equal), ``time_lags`` (one ``{topic, partition, seconds, method}`` per
partition), ``rates_note``, why a snapshot has no rates at all (the first of its cluster, say), and
``interval``, the last interval's own evidence (interval produce rates, lags at its start, members
that held their partitions throughout: ``domain/interval_evidence.py``) when the planner's reader
found the cluster's previous snapshot.

Lags are against the log end, or the last stable offset when the snapshot was taken read_committed.

Partition lag is in messages (the document's ``weight`` is always ``lag``; what a partition
weighs in time comes from its produce rate and its member's capacity, the load model's job). Lag
itself follows the lag module's rule and per-group ``auto.offset.reset`` policy.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from rebalance_advisor.domain.group_spec import RecentMove
from rebalance_advisor.domain.interval_evidence import IntervalObservation
from rebalance_advisor.domain.key_range_advice import CurrentRange
from rebalance_advisor.domain.key_range_groups import fold_range_tables, range_progress
from rebalance_advisor.domain.lag import ResetPolicy, lag_end_offset, partition_lag
from rebalance_advisor.domain.recent_moves import moves_document
from rebalance_advisor.domain.safe_regex import compile_safe_regex
from rebalance_advisor.domain.snapshot_model import SHARE_GROUP_TYPE, MemberCapacity, Snapshot, TimeLag

#: group -> member -> the (topic, partition) pairs of the group's latest published plan
#: (``rebalance_advisor.store.plans.published_assignments``); the owned partitions of manual-assign members.
PublishedAssignments = Mapping[str, Mapping[str, Sequence[tuple[str, int]]]]
#: group -> the key ranges of its latest published plan as (member, topic, partition, hash_lo, hash_hi)
#: (``rebalance_advisor.store.plans.published_key_ranges``); become the document's ``current_ranges``.
PublishedRanges = Mapping[str, Sequence[tuple[str, str, int, int, int]]]


@dataclass(frozen=True)
class StaticMember:
    """One registered manual-assign consumer instance."""

    group_id: str
    member_id: str
    topics: tuple[str, ...]


_EQUAL = MemberCapacity(None, "equal")
_CAUGHT_UP = TimeLag(0.0, "caught_up")
_NO_TIME_LAG = TimeLag(None, None)


@dataclass(frozen=True)
class SnapshotTables:
    """The parts of a snapshot the documents are built from, keyed for lookup.

    Why: a 10,000-group snapshot holds about a million committed offsets and a million member
    assignments; the planner's SQL reader (:mod:`rebalance_advisor.store.snapshot_reader`) fills these dicts
    straight from rows instead of building a dataclass per row, and both routes share
    :func:`build_docs_from_tables`, so there is one way from snapshot data to documents.
    """

    #: (topic, partition) -> (log start offset, end offset lags are against: log end or LSO)
    offsets: dict[tuple[str, int], tuple[int | None, int | None]]
    #: group -> {(topic, partition): committed offset}
    committed: dict[str, dict[tuple[str, int], int]]
    #: every group of the snapshot -> its members in the coordinator's order, each as
    #: (member id, group instance id, subscribed topics, assigned (topic, partition) pairs)
    members: dict[str, list[tuple[str, str | None, tuple[str, ...], tuple[tuple[str, int], ...]]]]
    #: (topic, partition) -> stored produce rate, records/s (known ones only)
    produce_rates: dict[tuple[str, int], float] = field(default_factory=dict)
    #: (group, member id) -> stored capacity and provenance
    capacities: dict[tuple[str, str], MemberCapacity] = field(default_factory=dict)
    #: (group, topic, partition) -> stored time lag (committed offsets only)
    time_lags: dict[tuple[str, str, int], TimeLag] = field(default_factory=dict)
    #: why the snapshot has no rates at all, if so
    rates_note: str | None = None
    #: seconds between the previous snapshot and this one when the rates come from that interval
    rate_interval_s: float | None = None
    #: share groups of the snapshot (never planned) and their broker-reported lags
    share_groups: frozenset[str] = frozenset()
    share_lags: dict[tuple[str, str, int], int | None] = field(default_factory=dict)
    #: group -> the last interval's own evidence (domain/interval_evidence.py), when the planner's
    #: reader found the previous snapshot of the cluster; the document's ``interval``
    interval: Mapping[str, IntervalObservation] = field(default_factory=dict)
    #: group -> its recent moves (domain/recent_moves.py: published and observed owner changes),
    #: the document's ``recent_moves``, which the hysteresis rule reads
    recent_moves: Mapping[str, tuple[RecentMove, ...]] = field(default_factory=dict)


#: the outcome reason of a share group
SHARE_NOT_PLANNED = "not planned: the broker assigns share groups"


def snapshot_tables(snapshot: Snapshot) -> SnapshotTables:
    """The :class:`SnapshotTables` of an in-memory snapshot."""
    committed: dict[str, dict[tuple[str, int], int]] = {}
    for c in snapshot.committed:
        committed.setdefault(c.group_id, {})[(c.topic, c.partition)] = c.offset
    isolation = snapshot.isolation_level
    rates = snapshot.rates
    return SnapshotTables(
        offsets={
            (p.topic, p.partition): (p.log_start_offset, lag_end_offset(p, isolation))
            for p in snapshot.partitions
        },
        committed=committed,
        produce_rates={tp: r.rate for tp, r in rates.produce.items() if r.rate is not None} if rates else {},
        capacities=dict(rates.capacity) if rates else {},
        time_lags=dict(rates.time_lag) if rates else {},
        rates_note=rates.note if rates else None,
        rate_interval_s=rates.interval_s if rates else None,
        share_groups=frozenset(g.group_id for g in snapshot.groups if g.group_type == SHARE_GROUP_TYPE),
        share_lags=dict(snapshot.share_lags),
        members={
            g.group_id: [
                (m.member_id, m.group_instance_id, tuple(m.subscribed_topics), tuple(m.assignment))
                for m in g.members
            ]
            for g in snapshot.groups
        },
    )


def build_group_docs(
    snapshot: Snapshot,
    static_members: Iterable[StaticMember] = (),
    *,
    group_pattern: str | None = None,
    reset: ResetPolicy | None = None,
    published: PublishedAssignments | None = None,
    published_ranges: PublishedRanges | None = None,
) -> list[dict[str, Any]]:
    """One document per group of the snapshot (and per registered manual-assign group), sorted by id."""
    return build_docs_from_tables(
        snapshot_tables(snapshot),
        static_members,
        group_pattern=group_pattern,
        reset=reset or ResetPolicy(),
        published=published,
        published_ranges=published_ranges,
    )


def build_docs_from_tables(
    tables: SnapshotTables,
    static_members: Iterable[StaticMember] = (),
    *,
    group_pattern: str | None = None,
    reset: ResetPolicy | None = None,
    published: PublishedAssignments | None = None,
    published_ranges: PublishedRanges | None = None,
) -> list[dict[str, Any]]:
    """:func:`build_group_docs` on :class:`SnapshotTables`; ``published`` and ``published_ranges``
    give manual-assign members what they own (module docstring)."""
    matcher = compile_safe_regex(group_pattern, "group pattern") if group_pattern else None
    progress = range_progress(tables.committed) if published_ranges else {}
    run = _DocRun(
        fold_range_tables(tables),  # key-range groups plan as their parent (domain/key_range_groups.py)
        static_members, reset or ResetPolicy(), published or {}, published_ranges or {}, progress,
    )  # fmt: skip
    group_ids = sorted(set(run.tables.members) | set(run.tables.committed))
    return [run.group_doc(g) for g in group_ids if matcher is None or matcher.fullmatch(g)]


class _DocRun:
    """What every group's document of one run reads: the folded tables, the partitions of each
    topic, the static-member registry, the reset policy and the published plans."""

    def __init__(
        self, tables: SnapshotTables, static_members: Iterable[StaticMember], policy: ResetPolicy,
        published: PublishedAssignments, published_ranges: PublishedRanges, progress: Mapping,
    ) -> None:  # fmt: skip
        self.tables, self.policy, self.progress = tables, policy, progress
        self.published, self.published_ranges = published, published_ranges
        self.partitions_of: dict[str, list[int]] = {}
        for topic, partition in sorted(tables.offsets):
            self.partitions_of.setdefault(topic, []).append(partition)
        self.registry: dict[str, list[StaticMember]] = {}
        for s in static_members:
            self.registry.setdefault(s.group_id, []).append(s)

    def group_doc(self, group_id: str) -> dict[str, Any]:
        tables = self.tables
        if group_id in tables.share_groups:
            return _share_group_doc(group_id, sorted(tables.committed.get(group_id, {})), tables)
        live = tables.members.get(group_id, ())
        members, capacity_sources = (
            _live_members(group_id, live, tables) if live else self._registered_members(group_id)
        )
        lags = self._lags(group_id, members)
        current_ranges: list[dict[str, Any]] = []
        if not live:
            self._give_published_partitions(group_id, members, lags)
            current_ranges = self._current_ranges(group_id, members, lags)
        partitions, partition_time_lags = _partition_entries(group_id, lags, tables)
        doc = {
            "group_id": group_id,
            "members": members,
            "partitions": partitions,
            "weight": "lag",  # partition lag is in messages (module docstring)
            "note": None if members else "no members and no registered static members",
            "capacity_sources": capacity_sources,
            "time_lags": partition_time_lags,
            "rates_note": tables.rates_note,
            "rate_interval_s": tables.rate_interval_s,
        }
        if current_ranges:
            doc["current_ranges"] = current_ranges
        if (evidence := tables.interval.get(group_id)) is not None:
            doc["interval"] = evidence.to_doc()
        if moves := tables.recent_moves.get(group_id):
            doc["recent_moves"] = moves_document(moves)
        return doc

    def _registered_members(self, group_id: str) -> tuple[list[dict[str, Any]], dict[str, str]]:
        """A memberless group's registered static members (manual-assign), by member id."""
        members, sources = [], {}
        for s in sorted(self.registry.get(group_id, ()), key=lambda s: s.member_id):
            capacity = self.tables.capacities.get((group_id, s.member_id), _EQUAL)  # from published owners
            members.append(_member_doc(s.member_id, None, list(s.topics), [], capacity))
            sources[s.member_id] = capacity.source
        return members, sources

    def _lags(self, group_id: str, members: list[dict[str, Any]]) -> dict[tuple[str, int], int]:
        """Every partition of the members' topics (else of the committed ones) -> its lag."""
        committed = self.tables.committed.get(group_id, {})
        topics = sorted({t for m in members for t in m["topics"]}) or sorted({t for t, _ in committed})
        reset_value = self.policy.for_group(group_id)
        lags = {}
        for topic in topics:
            for partition in self.partitions_of.get(topic, []):
                log_start, log_end = self.tables.offsets[(topic, partition)]
                lags[(topic, partition)] = partition_lag(
                    committed.get((topic, partition)), log_start, log_end, reset_value
                )
        return lags

    def _give_published_partitions(self, group_id: str, members: list[dict[str, Any]], lags: Mapping) -> None:
        """Manual-assign members own what the published plan gave them, still in the group's topics."""
        if plan := self.published.get(group_id):
            for member in members:
                member["owned"] = [[t, p] for t, p in plan.get(member["member_id"], ()) if (t, p) in lags]

    def _current_ranges(
        self, group_id: str, members: list[dict[str, Any]], lags: Mapping
    ) -> list[dict[str, Any]]:
        """The key ranges registered members hold under the published plan, with what each is behind."""
        registered, ranges = {m["member_id"] for m in members}, []
        committed, reset_value = self.tables.committed.get(group_id, {}), self.policy.for_group(group_id)
        for member_id, t, p, lo, hi in self.published_ranges.get(group_id, ()):
            if member_id not in registered or (t, p) not in lags:
                continue
            done = self.progress.get((group_id, t, p))
            start = done.start(lo, hi) if done is not None else committed.get((t, p), -1)
            log_start, log_end = self.tables.offsets[(t, p)]
            behind = partition_lag(start if start >= 0 else None, log_start, log_end, reset_value)
            ranges.append(CurrentRange(member_id, t, p, lo, hi, behind).to_doc())
        return ranges


def _member_doc(
    member_id: str, instance_id: str | None, topics: list[str], owned: list, capacity: MemberCapacity
) -> dict[str, Any]:
    return {
        "member_id": member_id,
        "group_instance_id": instance_id,
        "topics": topics,
        "owned": owned,
        "capacity": capacity.capacity,
    }


def _live_members(
    group_id: str, live: Sequence, tables: SnapshotTables
) -> tuple[list[dict[str, Any]], dict[str, str]]:
    """The group's members now, keyed by instance id else member id; a member that names no topic
    takes the group's (subscriptions and assignments of all its members)."""
    shared = sorted({t for m in live for t in m[2]} | {t for m in live for t, _ in m[3]})
    members, sources = [], {}
    for member_id, instance_id, subscribed, assignment in live:
        topics = sorted(set(subscribed) | {t for t, _ in assignment}) or shared
        capacity = tables.capacities.get((group_id, member_id), _EQUAL)
        owned = [[t, p] for t, p in assignment]
        members.append(_member_doc(instance_id or member_id, instance_id, topics, owned, capacity))
        sources[instance_id or member_id] = capacity.source
    return members, sources


def _partition_entries(group_id: str, lags: Mapping, tables: SnapshotTables) -> tuple[list[dict], list[dict]]:
    """Each partition's lag and produce rate, and its time lag (0 s when caught up, else unknown)."""
    partitions, time_lags = [], []
    for (t, p), lag in lags.items():
        time_lag = tables.time_lags.get((group_id, t, p)) or (_CAUGHT_UP if lag == 0 else _NO_TIME_LAG)
        partitions.append(
            {"topic": t, "partition": p, "lag": lag, "produce_rate": tables.produce_rates.get((t, p))}
        )
        time_lags.append({"topic": t, "partition": p, "seconds": time_lag.seconds, "method": time_lag.method})
    return partitions, time_lags


def _share_group_doc(group_id: str, started: list[tuple[str, int]], tables: SnapshotTables) -> dict[str, Any]:
    """A share group's document: no members (never planned), the broker's lags (module docstring)."""
    lags = [(t, p, tables.share_lags.get((group_id, t, p))) for t, p in started]
    return {
        "group_id": group_id,
        "members": [],
        "partitions": [
            {"topic": t, "partition": p, "lag": lag or 0, "produce_rate": tables.produce_rates.get((t, p))}
            for t, p, lag in lags
        ],
        "weight": "lag",
        "note": SHARE_NOT_PLANNED,
        "broker_assigned": True,
        "capacity_sources": {},
        "time_lags": [],
        "rates_note": tables.rates_note,
    }
