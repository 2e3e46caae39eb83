"""One consistent pass over a Kafka cluster: every consumer group, its members and committed offsets,
and the log-start/log-end offsets of every partition those groups touch.

Everything is batched through confluent-kafka's AdminClient: one ListGroups, one DescribeGroups call
for all groups, the per-group OffsetFetch calls all in flight together (librdkafka takes one group per
call), one ListOffsets call each for earliest and latest over every partition. Every call has a
timeout. The result is an in-memory :class:`Snapshot`; writing it is ``rebalance_advisor.store``'s job.

Failure policy: a fault that means "the cluster is not answering" (transport, timeout, all brokers
down) aborts the whole pass with :class:`SnapshotAborted`, so nothing partial lands. A fault that
belongs to one group or topic (not authorized, group gone, topic deleted) is recorded in
``Snapshot.errors`` and the rest of the snapshot still lands.
"""

from __future__ import annotations

import logging
import re
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from rebalance_advisor.errors import AdvisorError

log = logging.getLogger(__name__)

DEFAULT_TIMEOUT_S = 30.0

#: Error codes that mean the cluster (not one group) is unreachable: the pass is aborted.
_FATAL_CODE_NAMES = (
    "_TRANSPORT",
    "_TIMED_OUT",
    "_TIMED_OUT_QUEUE",
    "_ALL_BROKERS_DOWN",
    "_RESOLVE",
    "_DESTROY",
    "_AUTHENTICATION",
    "_SSL",
    "NETWORK_EXCEPTION",
    "REQUEST_TIMED_OUT",
    "SASL_AUTHENTICATION_FAILED",
)


class SnapshotAborted(AdvisorError):
    """The cluster stopped answering (or never did): no snapshot was taken."""


# ----------------------------------------------------------------------------------------- data


@dataclass(frozen=True)
class PartitionOffsets:
    """Log offsets of one partition; ``last_stable_offset`` only with read_committed collection."""

    topic: str
    partition: int
    log_start_offset: int | None
    log_end_offset: int | None
    leader: int | None = None
    last_stable_offset: int | None = None


@dataclass(frozen=True)
class Member:
    """A group member as the coordinator describes it; ``position`` keeps the coordinator's order."""

    member_id: str
    client_id: str
    host: str
    group_instance_id: str | None = None
    rack: str | None = None
    #: topics the member consumes. librdkafka does not expose the subscription itself, so this is
    #: the topics of its current (and, for KIP-848 groups, target) assignment.
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
    members: tuple[Member, ...] = ()

    @property
    def member_count(self) -> int:
        return len(self.members)


@dataclass(frozen=True)
class CommittedOffset:
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

    def topic_partitions(self, topic: str) -> list[int]:
        return sorted(p.partition for p in self.partitions if p.topic == topic)


# ---------------------------------------------------------------------------------------- options


@dataclass(frozen=True)
class GroupFilter:
    """Include/exclude regexes over group ids (full match, as Kafka's Java tools use ``matches()``)."""

    include: re.Pattern[str] | None = None
    exclude: re.Pattern[str] | None = None

    @classmethod
    def parse(cls, include: str | None = None, exclude: str | None = None) -> GroupFilter:
        return cls(_compile(include, "--groups"), _compile(exclude, "--exclude-groups"))

    def accepts(self, group_id: str) -> bool:
        if self.include is not None and not self.include.fullmatch(group_id):
            return False
        return not (self.exclude is not None and self.exclude.fullmatch(group_id))


def _compile(pattern: str | None, what: str) -> re.Pattern[str] | None:
    if pattern is None or pattern == "":
        return None
    try:
        return re.compile(pattern)
    except re.error as error:
        raise AdvisorError(f"invalid {what} regex {pattern!r}: {error}") from error


def is_internal_topic(topic: str) -> bool:
    """Kafka's own topics (``__consumer_offsets``, ``__transaction_state``, ...)."""
    return topic.startswith("__")


@dataclass(frozen=True)
class SnapshotOptions:
    groups: GroupFilter = field(default_factory=GroupFilter)
    include_internal_topics: bool = False
    #: also fetch read_committed end offsets (the last stable offset) for transactional topics
    read_committed: bool = False
    timeout_s: float = DEFAULT_TIMEOUT_S


def read_client_config(path: str | Path) -> dict[str, str]:
    """A librdkafka ``.properties`` file (``key=value`` lines, ``#`` comments) as a dict."""
    path = Path(path)
    try:
        text = path.read_text()
    except OSError as error:
        raise AdvisorError(f"cannot read client config {path}: {error.strerror or error}") from error
    config: dict[str, str] = {}
    for number, raw in enumerate(text.splitlines(), start=1):
        line = raw.strip()
        if not line or line.startswith(("#", "!")):
            continue
        key, sep, value = line.partition("=")
        if not sep or not key.strip():
            raise AdvisorError(f"{path}:{number}: expected key=value, got {raw.strip()!r}")
        config[key.strip()] = value.strip()
    return config


# ------------------------------------------------------------------------------------- collection


def _error_parts(error: BaseException) -> tuple[str | None, str, bool]:
    """(code name, readable reason, fatal?) for anything a future may raise."""
    kafka_error = error.args[0] if error.args else None
    if hasattr(kafka_error, "name") and hasattr(kafka_error, "str"):
        name = kafka_error.name()
        return name, f"{name}: {kafka_error.str()}", name in _FATAL_CODE_NAMES
    if isinstance(error, TimeoutError):
        return "_TIMED_OUT", "timed out waiting for the broker", True
    return None, f"{type(error).__name__}: {error}", False


class _Collector:
    """Holds the admin client, options and deadline-bound helpers for one pass."""

    def __init__(self, admin: Any, bootstrap: str, options: SnapshotOptions) -> None:
        self.admin = admin
        self.bootstrap = bootstrap
        self.options = options
        self.timeout = options.timeout_s
        self.errors: list[SnapshotError] = []

    def abort(self, stage: str, reason: str) -> SnapshotAborted:
        return SnapshotAborted(
            f"snapshot of {self.bootstrap} aborted while {stage}: {reason}. Nothing was stored; "
            "check that the brokers are up and reachable (and the client config, e.g. security settings)."
        )

    def result(self, future: Any, stage: str) -> Any:
        """The future's value; fatal errors abort, others are re-raised for the caller to record."""
        try:
            return future.result(timeout=self.timeout + 5)
        except Exception as error:
            _, reason, fatal = _error_parts(error)
            if fatal:
                raise self.abort(stage, reason) from error
            raise

    def record(self, stage: str, error: BaseException, **where: Any) -> None:
        code, reason, _ = _error_parts(error)
        self.errors.append(SnapshotError(stage=stage, reason=reason, error_code=code, **where))

    def list_groups(self) -> list[str]:
        from confluent_kafka import ConsumerGroupType

        types = {ConsumerGroupType.CLASSIC, ConsumerGroupType.CONSUMER}
        try:
            listing = self.result(
                self.admin.list_consumer_groups(request_timeout=self.timeout, types=types), "listing groups"
            )
        except SnapshotAborted:
            raise
        except Exception as error:
            code, reason, _ = _error_parts(error)
            if code not in ("UNSUPPORTED_VERSION", "_UNSUPPORTED_FEATURE", "INVALID_REQUEST"):
                raise self.abort("listing groups", reason) from error
            # Brokers before KIP-848 cannot filter by type: list everything.
            listing = self.result(
                self.admin.list_consumer_groups(request_timeout=self.timeout), "listing groups"
            )
        if listing.errors:
            # A broker that did not answer ListGroups leaves the picture incomplete: not consistent.
            raise self.abort("listing groups", "; ".join(str(e) for e in listing.errors))
        return sorted(g.group_id for g in listing.valid if self.options.groups.accepts(g.group_id))

    def describe(self, group_ids: list[str]) -> dict[str, Any]:
        if not group_ids:
            return {}
        return self.admin.describe_consumer_groups(group_ids, request_timeout=self.timeout)

    def offsets(self, group_ids: list[str]) -> dict[str, Any]:
        from confluent_kafka import ConsumerGroupTopicPartitions

        futures: dict[str, Any] = {}
        for group_id in group_ids:
            futures.update(
                self.admin.list_consumer_group_offsets(
                    [ConsumerGroupTopicPartitions(group_id)], request_timeout=self.timeout
                )
            )
        return futures

    def metadata(self) -> Any:
        try:
            return self.admin.list_topics(timeout=self.timeout)
        except Exception as error:
            _, reason, _ = _error_parts(error)
            raise self.abort("reading cluster metadata", reason) from error

    def log_offsets(self, wanted: list[tuple[str, int]], spec: Any, isolation: Any = None) -> dict:
        """One ListOffsets call for all partitions; per-partition errors recorded, fatal ones abort."""
        from confluent_kafka import TopicPartition

        if not wanted:
            return {}
        kwargs: dict[str, Any] = {"request_timeout": self.timeout}
        if isolation is not None:
            kwargs["isolation_level"] = isolation
        futures = self.admin.list_offsets({TopicPartition(t, p): spec for t, p in wanted}, **kwargs)
        found: dict[tuple[str, int], int] = {}
        for tp, future in futures.items():
            try:
                found[(tp.topic, tp.partition)] = self.result(future, "listing log offsets").offset
            except SnapshotAborted:
                raise
            except Exception as error:
                self.record("log_offsets", error, topic=tp.topic, partition=tp.partition)
        return found


def _group_type(description: Any) -> str:
    if description.is_simple_consumer_group:
        return "simple"
    kind = getattr(description.type, "name", str(description.type)).lower()
    return kind if kind in ("classic", "consumer") else kind or "unknown"


def _members(description: Any, keep_topic: Callable[[str], bool]) -> tuple[Member, ...]:
    members = []
    for position, m in enumerate(description.members):
        assigned = sorted(
            (tp.topic, tp.partition)
            for tp in (m.assignment.topic_partitions if m.assignment else [])
            if keep_topic(tp.topic)
        )
        target = getattr(m, "target_assignment", None)
        target_topics = {tp.topic for tp in (target.topic_partitions if target else [])}
        topics = sorted({t for t, _ in assigned} | {t for t in target_topics if keep_topic(t)})
        members.append(
            Member(
                member_id=m.member_id,
                client_id=m.client_id,
                host=m.host,
                group_instance_id=m.group_instance_id or None,
                subscribed_topics=tuple(topics),
                assignment=tuple(assigned),
                position=position,
            )
        )
    return tuple(members)


def collect(
    bootstrap_servers: str,
    client_config: dict[str, str] | None = None,
    options: SnapshotOptions | None = None,
    on_stage: Callable[[str], None] | None = None,
) -> Snapshot:
    """Take one snapshot of ``bootstrap_servers``. ``on_stage(name)`` is called between stages."""
    from confluent_kafka import IsolationLevel
    from confluent_kafka.admin import AdminClient, OffsetSpec

    options = options or SnapshotOptions()
    conf: dict[str, Any] = {**(client_config or {}), "bootstrap.servers": bootstrap_servers}
    conf.setdefault("socket.timeout.ms", int(options.timeout_s * 1000))
    try:
        admin = AdminClient(conf, logger=logging.getLogger("rebalance_advisor.librdkafka"))
    except Exception as error:  # bad property names or values in the client config
        raise AdvisorError(f"invalid Kafka client config: {error}") from error
    stage = on_stage or (lambda _name: None)
    keep_topic = (
        (lambda _t: True) if options.include_internal_topics else (lambda t: not is_internal_topic(t))
    )

    started = time.monotonic()
    taken_at = datetime.now(UTC)
    c = _Collector(admin, bootstrap_servers, options)
    group_ids = c.list_groups()
    stage("listed")

    # Describe all groups and fetch every group's offsets: all requests in flight together.
    described_f = c.describe(group_ids)
    offsets_f = c.offsets(group_ids)
    metadata = c.metadata()
    cluster_id = metadata.cluster_id
    stage("requested")

    groups: list[Group] = []
    for group_id in group_ids:
        try:
            d = c.result(described_f[group_id], "describing groups")
        except SnapshotAborted:
            raise
        except Exception as error:
            c.record("describe", error, group_id=group_id)
            continue
        if getattr(d.state, "name", "") == "DEAD":
            c.errors.append(SnapshotError("describe", "group was deleted during the snapshot", group_id))
            continue
        coordinator = d.coordinator
        groups.append(
            Group(
                group_id=group_id,
                state=getattr(d.state, "name", str(d.state)).lower(),
                group_type=_group_type(d),
                assignor=d.partition_assignor or None,
                coordinator_id=getattr(coordinator, "id", None),
                coordinator_host=f"{coordinator.host}:{coordinator.port}" if coordinator else None,
                members=_members(d, keep_topic),
            )
        )
    stage("described")

    described = {g.group_id for g in groups}
    committed: list[CommittedOffset] = []
    failed_offsets: set[str] = set()
    for group_id in group_ids:
        try:
            result = c.result(offsets_f[group_id], "fetching committed offsets")
        except SnapshotAborted:
            raise
        except Exception as error:
            failed_offsets.add(group_id)
            if group_id in described:
                c.record("committed_offsets", error, group_id=group_id)
            continue
        for tp in result.topic_partitions:
            if not keep_topic(tp.topic):
                continue
            if tp.error is not None:
                c.errors.append(
                    SnapshotError("committed_offsets", str(tp.error), group_id, tp.topic, tp.partition)
                )
                continue
            if tp.offset < 0:  # OFFSET_INVALID: nothing committed for this partition
                continue
            committed.append(
                CommittedOffset(
                    group_id, tp.topic, tp.partition, tp.offset, tp.leader_epoch, tp.metadata or None
                )
            )
    # A group whose offsets could not be read is not usable for planning: keep only the error.
    groups = [g for g in groups if g.group_id not in failed_offsets]
    if group_ids and not groups:
        raise c.abort("reading groups", f"every group failed: {c.errors[0].reason if c.errors else '?'}")
    stage("committed")

    # Every partition of every topic a kept group is assigned or has committed on.
    kept = {g.group_id for g in groups}
    committed = [o for o in committed if o.group_id in kept]
    topics = {t for g in groups for m in g.members for t in m.subscribed_topics}
    topics |= {o.topic for o in committed}
    wanted: list[tuple[str, int]] = []
    leaders: dict[tuple[str, int], int] = {}
    for topic in sorted(topics):
        meta = metadata.topics.get(topic)
        if meta is None or meta.error is not None:
            reason = str(meta.error) if meta is not None else "topic does not exist (deleted?)"
            c.errors.append(SnapshotError("metadata", reason, topic=topic))
            continue
        for partition, pmeta in sorted(meta.partitions.items()):
            wanted.append((topic, partition))
            leaders[(topic, partition)] = pmeta.leader

    earliest = c.log_offsets(wanted, OffsetSpec.earliest())
    latest = c.log_offsets(wanted, OffsetSpec.latest())
    stable = (
        c.log_offsets(wanted, OffsetSpec.latest(), IsolationLevel.READ_COMMITTED)
        if options.read_committed
        else {}
    )
    partitions = [
        PartitionOffsets(
            t, p, earliest.get((t, p)), latest.get((t, p)), leaders.get((t, p)), stable.get((t, p))
        )
        for t, p in wanted
    ]
    stage("log_offsets")

    return Snapshot(
        taken_at=taken_at,
        bootstrap_servers=bootstrap_servers,
        cluster_id=cluster_id,
        duration_s=time.monotonic() - started,
        groups=groups,
        committed=committed,
        partitions=partitions,
        errors=c.errors,
        isolation_level="read_committed" if options.read_committed else "read_uncommitted",
    )


def with_run_id(snapshot: Snapshot, run_id: str | None) -> Snapshot:
    """The same snapshot tagged with the Airflow run that took it."""
    return replace(snapshot, airflow_run_id=run_id)


def summarize(snapshot: Snapshot) -> str:
    """One line for people: id, counts and duration."""
    ident = f"snapshot {snapshot.snapshot_id}" if snapshot.snapshot_id is not None else "snapshot"
    return (
        f"{ident} ({snapshot.status}) of {snapshot.bootstrap_servers} in {snapshot.duration_s:.2f} s: "
        f"{len(snapshot.groups)} groups, {snapshot.member_count} members, "
        f"{len(snapshot.partitions)} partitions, {len(snapshot.committed)} committed offsets, "
        f"{len(snapshot.errors)} errors"
    )
