"""What one snapshot of a cluster holds (DESIGN.md, "Data"), as plain values.

Kept apart from the Kafka adapter that fills them (:mod:`rebalance_advisor.adapters.kafka_snapshot`)
so the lag rules, the planner's documents and the store read snapshots without importing a Kafka
client. Nothing here does I/O.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import NamedTuple


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


@dataclass(frozen=True)
class Group:
    group_id: str
    state: str
    #: ``classic``, ``consumer`` (KIP-848) or ``simple`` (memberless, offsets only)
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
