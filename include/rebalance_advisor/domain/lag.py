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


def committed_lag_end(offsets: PartitionOffsets, isolation_level: str, committed: int | None) -> int | None:
    """:func:`lag_end_offset` for one committed offset. Under read_committed, an offset between the
    LSO and the log end (a read_uncommitted consumer at the end) is its own end: lag 0, not negative
    and not above the log end, which stays the high watermark (an offset past it lags against it)."""
    end = lag_end_offset(offsets, isolation_level)
    high = offsets.log_end_offset
    if committed is not None and end is not None and high is not None and end < committed:
        return min(committed, high)
    return end


def lag_against(isolation_level: str) -> str:
    """Which offsets a snapshot's lags are against, for people: ``log_end`` or ``last_stable``."""
    return "last_stable" if isolation_level == "read_committed" else "log_end"


@dataclass(frozen=True)
class PartitionLagRow:
    """One (group, partition) of a snapshot: its offsets, its lag under the group's reset policy and
    what is odd about its committed offset. Built by :func:`lag_row` only; the web pages
    (:func:`partition_lags`) and ``lag``'s report (``services/lag_report.py``) both read it."""

    group_id: str
    topic: str
    partition: int
    committed: int | None
    log_start: int | None
    #: the offset the lag is against (:func:`committed_lag_end`: log end, or LSO under read_committed)
    log_end: int | None
    reset: str
    #: never negative: what an assignor weighs (:func:`partition_lag`)
    lag: int
    #: the committed offset fell out of retention (c < log-start): the consumer will reset; None
    #: when nothing is committed or the log start is unknown
    below_log_start: bool | None
    #: who holds the partition now (member id), None when nobody does
    member_id: str | None = None
    #: the committed offset is past the end (unclean leader election, topic recreated under the
    #: same name): lag is clamped to 0 but the consumer will reset or skip records; None when
    #: nothing is committed or the end is unknown
    above_log_end: bool | None = None
    #: the high watermark and the last stable offset as the snapshot read them
    log_end_offset: int | None = None
    last_stable_offset: int | None = None

    @property
    def offset_lag(self) -> int | None:
        """End - committed as ``kafka-consumer-groups`` prints it (negative past the end); None when
        nothing is committed or the end is unknown."""
        return None if self.committed is None or self.log_end is None else self.log_end - self.committed


def above_log_end(committed: int | None, end: int | None) -> bool:
    """Committed offset beyond the end offset it is measured against (flagged, like below-log-start)."""
    return committed is not None and end is not None and committed > end


def below_log_start(committed: int | None, start: int | None) -> bool:
    """Committed offset that fell out of retention: the consumer will reset."""
    return committed is not None and start is not None and committed < start


def lag_row(
    group_id: str,
    topic: str,
    partition: int,
    offsets: PartitionOffsets | None,
    isolation_level: str,
    committed: int | None,
    reset: str,
    member_id: str | None = None,
) -> PartitionLagRow:
    """The lag row of one (group, partition): the one place one is assembled. ``offsets`` None: the
    snapshot holds no offsets for the partition (ends unknown, lag 0)."""
    start = offsets.log_start_offset if offsets else None
    end = committed_lag_end(offsets, isolation_level, committed) if offsets else None
    return PartitionLagRow(
        group_id, topic, partition, committed, start, end, reset,
        lag=partition_lag(committed, start, end, reset),
        below_log_start=None if committed is None or start is None else below_log_start(committed, start),
        member_id=member_id,
        above_log_end=None if committed is None or end is None else above_log_end(committed, end),
        log_end_offset=offsets.log_end_offset if offsets else None,
        last_stable_offset=offsets.last_stable_offset if offsets else None,
    )  # fmt: skip


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
                key = (group_id, topic, p.partition)
                c = committed.get(key)
                out.append(
                    lag_row(*key, p, snapshot.isolation_level, c.offset if c else None, reset, owner.get(key))
                )
    return out


def record_time_lag(taken_ms: float, stamp_ms: float) -> TimeLag:
    """The time lag from the timestamp of the record at the committed offset. A stamp after the
    snapshot's own time is clock skew, not a caught-up group: say so instead of showing 0 s."""
    if stamp_ms > taken_ms:
        return TimeLag(0.0, "future_timestamp")
    return TimeLag((taken_ms - stamp_ms) / 1000.0, "record_timestamp")


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
            out[key] = record_time_lag(taken_ms, stamp)
        elif lag is not None and (rate := produce.get(tp, RateEstimate(None)).rate):
            out[key] = TimeLag(lag / rate, "rate_estimate")
        else:
            out[key] = TimeLag(None, None)
    return out
