"""Lag rules (DESIGN.md, "Lag") and rates between two snapshots. Pure functions, no I/O.

committed c known:   lag = max(e - c, 0); c < log-start s is flagged (fell out of retention).
committed unknown:   lag = 0 under ``auto.offset.reset=latest``; e - s under ``earliest`` (or any
                     other value, as a consumer would then start at the beginning or fail).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from rebalance_advisor.domain.snapshot_model import Snapshot
from rebalance_advisor.errors import AdvisorError

RESET_VALUES = ("latest", "earliest", "none", "by_duration")


def partition_lag(
    committed: int | None, log_start: int | None, log_end: int | None, reset: str = "latest"
) -> int:
    """The lag of one partition for one group under ``reset`` (0 when the log end is unknown)."""
    if log_end is None:
        return 0
    if committed is not None:
        return max(log_end - committed, 0)
    if reset == "latest":
        return 0
    return max(log_end - (log_start or 0), 0)


@dataclass(frozen=True)
class ResetPolicy:
    """``auto.offset.reset`` per group pattern: first full-match wins, else ``default``."""

    rules: tuple[tuple[re.Pattern[str], str], ...] = ()
    default: str = "latest"

    @classmethod
    def parse(cls, spec: str | None, default: str = "latest") -> ResetPolicy:
        """``"orders-.*=earliest,audit=latest"``; a bare value sets the default."""
        rules: list[tuple[re.Pattern[str], str]] = []
        for item in (spec or "").split(","):
            item = item.strip()
            if not item:
                continue
            pattern, sep, value = item.rpartition("=")
            value = value.strip().lower()
            if value not in RESET_VALUES:
                raise AdvisorError(f"reset policy {item!r}: value must be one of {', '.join(RESET_VALUES)}")
            if not sep:
                default = value
                continue
            try:
                rules.append((re.compile(pattern.strip()), value))
            except re.error as error:
                raise AdvisorError(f"reset policy {item!r}: bad regex: {error}") from error
        return cls(tuple(rules), default)

    def for_group(self, group_id: str) -> str:
        return next((value for pattern, value in self.rules if pattern.fullmatch(group_id)), self.default)


@dataclass(frozen=True)
class PartitionLagRow:
    """One (group, partition) of a snapshot with its lag under the group's reset policy."""

    group_id: str
    topic: str
    partition: int
    committed: int | None
    log_start: int | None
    log_end: int | None
    reset: str
    lag: int
    #: the committed offset fell out of retention (c < log-start): the consumer will reset
    below_log_start: bool
    #: who holds the partition now (member id), None when nobody does
    member_id: str | None = None

    @property
    def committed_known(self) -> bool:
        return self.committed is not None


def partition_lags(snapshot: Snapshot, policy: ResetPolicy | None = None) -> list[PartitionLagRow]:
    """Every partition of every topic each group consumes, with its lag under the group's policy."""
    policy = policy or ResetPolicy()
    by_topic: dict[str, list] = {}
    for p in snapshot.partitions:
        by_topic.setdefault(p.topic, []).append(p)
    committed = snapshot.committed_map()
    topics_of: dict[str, set[str]] = {g.group_id: set() for g in snapshot.groups}
    owner: dict[tuple[str, str, int], str] = {}
    for g in snapshot.groups:
        for m in g.members:
            topics_of[g.group_id].update(m.subscribed_topics)
            for t, p in m.assignment:
                owner[(g.group_id, t, p)] = m.member_id
    for c in snapshot.committed:
        topics_of.setdefault(c.group_id, set()).add(c.topic)
    out: list[PartitionLagRow] = []
    for group_id in sorted(topics_of):
        reset = policy.for_group(group_id)
        for topic in sorted(topics_of[group_id]):
            for p in sorted(by_topic.get(topic, ()), key=lambda x: x.partition):
                c = committed.get((group_id, topic, p.partition))
                value = c.offset if c else None
                out.append(
                    PartitionLagRow(
                        group_id=group_id,
                        topic=topic,
                        partition=p.partition,
                        committed=value,
                        log_start=p.log_start_offset,
                        log_end=p.log_end_offset,
                        reset=reset,
                        lag=partition_lag(value, p.log_start_offset, p.log_end_offset, reset),
                        below_log_start=value is not None
                        and p.log_start_offset is not None
                        and value < p.log_start_offset,
                        member_id=owner.get((group_id, topic, p.partition)),
                    )
                )
    return out


def group_lag(
    snapshot: Snapshot, group_id: str, policy: ResetPolicy | None = None
) -> dict[tuple[str, int], int]:
    """(topic, partition) -> lag for one group: what an assignor takes as partition weights."""
    return {(x.topic, x.partition): x.lag for x in partition_lags(snapshot, policy) if x.group_id == group_id}


@dataclass(frozen=True)
class PartitionRate:
    group_id: str
    topic: str
    partition: int
    #: records/s appended (Δ log-end / Δt); None when the log went backwards (topic recreated)
    produce_rate: float | None
    #: records/s committed by the group (Δ committed / Δt); None without two committed offsets
    consume_rate: float | None
    lag: int
    #: time to drain the current lag at the consume rate; 0 when caught up, None when not draining
    lag_seconds: float | None


def rates(previous: Snapshot, current: Snapshot, policy: ResetPolicy | None = None) -> list[PartitionRate]:
    """Produce and consume rates per (group, topic, partition) between two snapshots, and lag in seconds."""
    elapsed = (current.taken_at - previous.taken_at).total_seconds()
    if elapsed <= 0:
        raise AdvisorError(
            f"snapshot {previous.snapshot_id} is not older than snapshot {current.snapshot_id}: no rates"
        )
    before_end = {(p.topic, p.partition): p.log_end_offset for p in previous.partitions}
    before_committed = previous.committed_map()
    out: list[PartitionRate] = []
    for x in partition_lags(current, policy):
        e0 = before_end.get((x.topic, x.partition))
        produce = None
        if e0 is not None and x.log_end is not None and x.log_end >= e0:
            produce = (x.log_end - e0) / elapsed
        c0 = before_committed.get((x.group_id, x.topic, x.partition))
        consume = None
        if c0 is not None and x.committed is not None and x.committed >= c0.offset:
            consume = (x.committed - c0.offset) / elapsed
        if x.lag == 0:
            seconds: float | None = 0.0
        elif consume:
            seconds = x.lag / consume
        else:
            seconds = None
        out.append(PartitionRate(x.group_id, x.topic, x.partition, produce, consume, x.lag, seconds))
    return out
