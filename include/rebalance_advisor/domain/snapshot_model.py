"""What one snapshot of a cluster holds (docs/architecture.md, "Data"), as plain values.

Kept apart from the Kafka adapter that fills them (:mod:`rebalance_advisor.adapters.kafka_snapshot`)
so the lag rules, the planner's documents and the store read snapshots without importing a Kafka
client. Nothing here does I/O.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import datetime
from typing import NamedTuple

from rebalance_advisor.domain.telemetry import TelemetryReference, TelemetrySample


class PartitionOffsets(NamedTuple):
    """Log offsets of one partition; ``last_stable_offset`` only with read_committed collection.

    A named tuple rather than a frozen dataclass: a snapshot holds one per partition (tens of
    thousands), and a frozen dataclass costs ~3.5x as much to build.
    """

    topic: str
    partition: int
    log_start_offset: int | None
    log_end_offset: int | None
    leader: int | None = None
    last_stable_offset: int | None = None


@dataclass(frozen=True)
class GroupMemberSnapshot:
    """A group member as the coordinator describes it; ``position`` keeps the coordinator's order."""

    member_id: str
    client_id: str
    host: str
    group_instance_id: str | None = None
    rack: str | None = None
    #: topics the member consumes, *inferred*: confluent-kafka's ``MemberDescription`` has no
    #: subscription field, so this is the topics of its current (and, for KIP-848 groups, target)
    #: assignment. A member holding nothing has ``()`` here; the planner
    #: (:mod:`rebalance_advisor.domain.spec_documents`) then takes it to subscribe to the union of
    #: its group's topics.
    subscribed_topics: tuple[str, ...] = ()
    #: (topic, partition) pairs currently assigned, sorted
    assignment: tuple[tuple[str, int], ...] = ()
    position: int = 0


#: ``Group.group_type`` of a share group (KIP-932): the broker assigns its partitions, records go to
#: whichever member fetches them, so the advisor reports it and never plans it.
SHARE_GROUP_TYPE = "share"


@dataclass(frozen=True)
class Group:
    group_id: str
    state: str
    #: ``classic``, ``consumer`` (KIP-848), ``simple`` (memberless, offsets only) or ``share``
    #: (:data:`SHARE_GROUP_TYPE`; its committed offsets are share-partition start offsets)
    group_type: str
    assignor: str | None
    coordinator_id: int | None
    coordinator_host: str | None
    members: tuple[GroupMemberSnapshot, ...] = ()

    @property
    def member_count(self) -> int:
        return len(self.members)


class CommittedOffset(NamedTuple):
    """One committed offset; a named tuple for the same reason as :class:`PartitionOffsets`."""

    group_id: str
    topic: str
    partition: int
    offset: int
    leader_epoch: int | None = None
    metadata: str | None = None


@dataclass(frozen=True)
class SnapshotError:
    """A per-group or per-topic failure recorded with the snapshot instead of aborting it."""

    stage: str
    reason: str
    group_id: str | None = None
    topic: str | None = None
    partition: int | None = None
    error_code: str | None = None


class RateEstimate(NamedTuple):
    """A smoothed rate in records/s, or None with the reason it is unknown."""

    rate: float | None
    #: why ``rate`` is None (topic recreated, clock went backwards, interval too short/long, ...)
    unknown_reason: str | None = None


#: How a time lag was obtained: the timestamp of the record at the committed offset, read from the
#: broker; lag / produce rate; or 0 because the group is caught up on the partition.
#: ``future_timestamp``: that record is stamped after the snapshot was taken (the producer's clock,
#: or a CreateTime set by hand, runs ahead), so the time lag is unknown: 0 s, and flagged.
TIME_LAG_METHODS = ("record_timestamp", "rate_estimate", "caught_up", "future_timestamp")


class TimeLag(NamedTuple):
    """Seconds a group is behind on one partition, and which method of ``TIME_LAG_METHODS`` gave it."""

    seconds: float | None
    method: str | None


#: Where a member's capacity came from: measured from its own consume rate while it had backlog on
#: at least one partition it owned; reported by the member's client helper (records per second spent
#: outside ``poll()``, at any load: rebalance_advisor_client.capacity_report); the median of its
#: group's measured members; 1.2 x its own consume
#: rate when that is above the median (``own_rate``: it keeps up, so it can do at least that); a
#: configured value (``configured``: the member's own while it is not measured, else the group's
#: when none of its members is); or unknown, the planner then taking capacities as equal
#: (``estimates.fill_capacities``).
CAPACITY_SOURCES = ("measured", "reported", "telemetry", "group_median", "own_rate", "configured", "equal")
#: sources that measured the member itself: carried to later snapshots, in the group median
MEASURED_CAPACITY_SOURCES = ("measured", "reported", "telemetry")
#: sources that are estimates for a member never seen saturated: its true capacity is only known to
#: be at least what it consumes (group_planning's capacity probe may test it)
ESTIMATED_CAPACITY_SOURCES = ("group_median", "own_rate")


def estimated_capacity_members(sources: Iterable[tuple[str, str | None]]) -> frozenset[str]:
    """The members (from (member, capacity source) pairs) whose capacity is an estimate: the set the
    planner's capacity probe and optimistic estimates act on. One rule for the spec document (the
    Spark planner and the ``plan`` CLI) and the simulator."""
    return frozenset(str(m) for m, source in sources if source in ESTIMATED_CAPACITY_SOURCES)


def own_rate_capacity_members(sources: Iterable[tuple[str, str | None]]) -> frozenset[str]:
    """The members whose capacity is a guess from their own consume rate (``own_rate``): they keep
    up with their load, and nothing says by how much; the planner then balances fully instead of
    settling at the fill level (``rate_aware_sticky``'s ``settle``)."""
    return frozenset(str(m) for m, source in sources if source == "own_rate")


class ProvenRate(NamedTuple):
    """The most a member consumed per second over a whole interval in which it held its partitions
    and kept up (no backlog): its capacity is at least this, whatever an estimate says
    (``rebalance_advisor.domain.estimates.fill_capacities``)."""

    value: float
    #: the snapshot that ended that interval
    at: datetime


class MemberCapacity(NamedTuple):
    """Records/s a member can consume (None with source ``equal``) and its provenance."""

    capacity: float | None
    source: str
    #: when the measurement it rests on was taken (``MEASURED_CAPACITY_SOURCES`` only)
    measured_at: datetime | None = None
    #: why a source the member has was not used (its telemetry distrusted: domain/telemetry.py)
    note: str | None = None
    #: its telemetry readings at a consume rate, carried to the next snapshot
    #: (``rebalance_advisor.domain.telemetry.consistency_evidence``)
    telemetry_reference: TelemetryReference | None = None
    #: its proven rate, carried to the next snapshot
    proven_rate: ProvenRate | None = None
    #: the samples its measured capacity is the plain mean of, carried to the next snapshot
    #: (``rebalance_advisor.domain.estimates.CarriedCapacity.sample_count``)
    sample_count: int | None = None


@dataclass
class SnapshotRates:
    """What a snapshot adds over its predecessor: rates, time lags, member capacities.

    Computed when the snapshot is stored (``rebalance_advisor.domain.estimates.step``) from
    the previous snapshot's stored values, and stored with it, so readers never rescan old snapshots.
    """

    #: (topic, partition) -> produce rate (Δ log-end / Δt, smoothed)
    produce: dict[tuple[str, int], RateEstimate] = field(default_factory=dict)
    #: (group, topic, partition) -> consume rate (Δ committed / Δt, smoothed)
    consume: dict[tuple[str, str, int], RateEstimate] = field(default_factory=dict)
    #: (group, topic, partition) -> time lag, for every committed offset
    time_lag: dict[tuple[str, str, int], TimeLag] = field(default_factory=dict)
    #: (group, member id) -> capacity
    capacity: dict[tuple[str, str], MemberCapacity] = field(default_factory=dict)
    #: set when nothing could be derived for the whole snapshot (first snapshot, other cluster, ...)
    note: str | None = None
    #: seconds between the previous snapshot and this one, when the rates come from that interval
    interval_s: float | None = None
    #: group -> the averaged evidence that its telemetry reads as records at a steady spacing
    #: (``rebalance_advisor.domain.telemetry.arrivals_evidence``; carried to the next snapshot)
    arrivals_evidence: dict[str, float] = field(default_factory=dict)


@dataclass
class Snapshot:
    """One pass over the cluster, in memory. ``snapshot_id`` is set once stored or loaded."""

    taken_at: datetime
    bootstrap_servers: str
    cluster_id: str | None
    duration_s: float
    groups: list[Group] = field(default_factory=list)
    committed: list[CommittedOffset] = field(default_factory=list)
    partitions: list[PartitionOffsets] = field(default_factory=list)
    errors: list[SnapshotError] = field(default_factory=list)
    isolation_level: str = "read_uncommitted"
    snapshot_id: int | None = None
    airflow_run_id: str | None = None
    #: (group, topic, partition) -> timestamp (ms since the epoch) of the first record at or after the
    #: committed offset, read from the broker for lagging partitions (the time lag's source)
    record_timestamps: dict[tuple[str, str, int], int] = field(default_factory=dict)
    #: rates, time lags and capacities; set when stored or loaded
    rates: SnapshotRates | None = None
    #: (share group, topic, partition) -> lag as the broker reports it (``kafka-share-groups
    #: --describe``): records not yet delivered and acknowledged, None where the broker gives none
    share_lags: dict[tuple[str, str, int], int | None] = field(default_factory=dict)
    #: (share group, topic, partition) of the group's topics the group has not started on (no
    #: share-partition state yet): ``kafka-share-groups --describe`` prints them with ``-`` offsets
    share_unstarted: list[tuple[str, str, int]] = field(default_factory=list)
    #: the newest client telemetry of the listed members (the broker plugin's topic; empty without it)
    telemetry: list[TelemetrySample] = field(default_factory=list)

    @property
    def status(self) -> str:
        return "partial" if self.errors else "complete"

    @property
    def member_count(self) -> int:
        return sum(g.member_count for g in self.groups)

    def group(self, group_id: str) -> Group | None:
        return next((g for g in self.groups if g.group_id == group_id), None)

    def partition_map(self) -> dict[tuple[str, int], PartitionOffsets]:
        return {(p.topic, p.partition): p for p in self.partitions}

    def committed_map(self, group_id: str | None = None) -> dict[tuple[str, str, int], CommittedOffset]:
        return {
            (c.group_id, c.topic, c.partition): c
            for c in self.committed
            if group_id is None or c.group_id == group_id
        }

    def summary(self) -> str:
        """One line for people: id, counts and duration."""
        ident = f"snapshot {self.snapshot_id}" if self.snapshot_id is not None else "snapshot"
        return (
            f"{ident} ({self.status}) of {self.bootstrap_servers} in {self.duration_s:.2f} s: "
            f"{len(self.groups)} groups, {self.member_count} members, "
            f"{len(self.partitions)} partitions, {len(self.committed)} committed offsets, "
            f"{len(self.errors)} errors"
        )
