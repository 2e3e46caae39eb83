"""Lag rules (docs/architecture.md, "Lag"): the lag of a partition for a group, and the time lag of
a committed offset. Pure functions, no I/O.

committed c known:   lag = max(e - c, 0); c < log-start s is flagged (fell out of retention).
committed unknown:   lag = 0 under ``auto.offset.reset=latest``; e - s under ``earliest`` (or any
                     other value, as a consumer would then start at the beginning or fail).

Time lag of a committed offset (:func:`time_lags`): 0 when caught up, else the snapshot time - the
record timestamp the collector read, else lag / produce rate, else unknown.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from rebalance_advisor.domain.safe_regex import SafeRegex, compile_safe_regex
from rebalance_advisor.domain.snapshot_model import PartitionOffsets, RateEstimate, Snapshot, TimeLag
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

    rules: tuple[tuple[SafeRegex, str], ...] = ()
    default: str = "latest"

    @classmethod
    def parse(cls, spec: str | None, default: str = "latest") -> ResetPolicy:
        """``"orders-.*=earliest,audit=latest"``; a bare value sets the default."""
        rules: list[tuple[SafeRegex, str]] = []
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
            rules.append((compile_safe_regex(pattern.strip(), f"reset policy {item!r}: bad"), value))
        return cls(tuple(rules), default)

    def for_group(self, group_id: str) -> str:
        return next((value for pattern, value in self.rules if pattern.fullmatch(group_id)), self.default)


def lag_end_offset(offsets: PartitionOffsets, isolation_level: str) -> int | None:
    """The offset a lag is measured against: the last stable offset (LSO) when the snapshot was
    taken ``read_committed`` (what a read_committed consumer can reach), else the log end (HW)."""
    if isolation_level == "read_committed" and offsets.last_stable_offset is not None:
        return offsets.last_stable_offset
    return offsets.log_end_offset


def lag_against(isolation_level: str) -> str:
    """Which offsets a snapshot's lags are against, for people: ``log_end`` or ``last_stable``."""
    return "last_stable" if isolation_level == "read_committed" else "log_end"


@dataclass(frozen=True)
class PartitionLagRow:
    """One (group, partition) of a snapshot with its lag under the group's reset policy."""

    group_id: str
    topic: str
    partition: int
    committed: int | None
    log_start: int | None
    #: the offset the lag is against (:func:`lag_end_offset`: log end, or LSO under read_committed)
    log_end: int | None
    reset: str
    lag: int
    #: the committed offset fell out of retention (c < log-start): the consumer will reset
    below_log_start: bool
    #: who holds the partition now (member id), None when nobody does
    member_id: str | None = None
    #: the committed offset is past the end (unclean leader election, topic recreated under the
    #: same name): lag is clamped to 0 but the consumer will reset or skip records
    above_log_end: bool = False

    @property
    def committed_known(self) -> bool:
        return self.committed is not None


def above_log_end(committed: int | None, end: int | None) -> bool:
    """Committed offset beyond the end offset it is measured against (flagged, like below-log-start)."""
    return committed is not None and end is not None and committed > end


def below_log_start(committed: int | None, start: int | None) -> bool:
    """Committed offset that fell out of retention: the consumer will reset."""
    return committed is not None and start is not None and committed < start


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
    isolation = snapshot.isolation_level
    out: list[PartitionLagRow] = []
    for group_id in sorted(topics_of):
        reset = policy.for_group(group_id)
        for topic in sorted(topics_of[group_id]):
            for p in sorted(by_topic.get(topic, ()), key=lambda x: x.partition):
                c = committed.get((group_id, topic, p.partition))
                value = c.offset if c else None
                end = lag_end_offset(p, isolation)
                out.append(
                    PartitionLagRow(
                        group_id=group_id,
                        topic=topic,
                        partition=p.partition,
                        committed=value,
                        log_start=p.log_start_offset,
                        log_end=end,
                        reset=reset,
                        lag=partition_lag(value, p.log_start_offset, end, reset),
                        below_log_start=below_log_start(value, p.log_start_offset),
                        member_id=owner.get((group_id, topic, p.partition)),
                        above_log_end=above_log_end(value, end),
                    )
                )
    return out


def group_lag(
    snapshot: Snapshot, group_id: str, policy: ResetPolicy | None = None
) -> dict[tuple[str, int], int]:
    """(topic, partition) -> lag for one group: what an assignor takes as partition weights."""
    return {(x.topic, x.partition): x.lag for x in partition_lags(snapshot, policy) if x.group_id == group_id}


def time_lags(
    snapshot: Snapshot, produce: Mapping[tuple[str, int], RateEstimate]
) -> dict[tuple[str, str, int], TimeLag]:
    """Time lag per committed offset of ``snapshot`` (module docstring), with its smoothed produce
    rates (``estimates.step``) for offsets without a record timestamp."""
    ends = {(p.topic, p.partition): p for p in snapshot.partitions}
    taken_ms = snapshot.taken_at.timestamp() * 1000.0
    out: dict[tuple[str, str, int], TimeLag] = {}
    for c in snapshot.committed:
        key, tp = (c.group_id, c.topic, c.partition), (c.topic, c.partition)
        p = ends.get(tp)
        end = lag_end_offset(p, snapshot.isolation_level) if p is not None else None
        lag = None if end is None else max(end - c.offset, 0)
        if lag == 0:
            out[key] = TimeLag(0.0, "caught_up")
        elif (stamp := snapshot.record_timestamps.get(key)) is not None:
            out[key] = TimeLag(max(taken_ms - stamp, 0.0) / 1000.0, "record_timestamp")
        elif lag is not None and (rate := produce.get(tp, RateEstimate(None)).rate):
            out[key] = TimeLag(lag / rate, "rate_estimate")
        else:
            out[key] = TimeLag(None, None)
    return out


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
    """Produce and consume rates per (group, topic, partition) between two in-memory snapshots, unsmoothed.

    The stored, smoothed rates are ``estimates.step``'s (what the planner reads); this compares
    any two snapshots in memory.
    """
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
