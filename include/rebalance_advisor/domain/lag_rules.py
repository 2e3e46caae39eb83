"""Lag rules (docs/architecture.md, "Lag"), and the rates, time lags and capacities a snapshot adds over its
predecessor. Pure functions, no I/O.

committed c known:   lag = max(e - c, 0); c < log-start s is flagged (fell out of retention).
committed unknown:   lag = 0 under ``auto.offset.reset=latest``; e - s under ``earliest`` (or any
                     other value, as a consumer would then start at the beginning or fail).

Rates (:func:`derive_rates`) are exponentially weighted moving averages in time: each new
interval's rate r over Δt seconds updates the stored average R as R += α (r - R) with
α = 1 - exp(-Δt / τ), τ = :attr:`RateParameters.time_constant_s` (default 120 s). Unlike a
window of the last N snapshots, this needs only the previous snapshot's stored average (no
rescan), weighs irregular intervals by their length, and forgets a rate change with the same time
constant whatever the snapshot schedule. The first interval's rate is taken as is.
"""

from __future__ import annotations

import math
import statistics
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

import numpy as np
from rebalance_advisor_client.capacity_report import CapacityReport
from rebalance_advisor_client.handover_rules import decode_reported_mark

from rebalance_advisor.domain.safe_regex import SafeRegex, compile_safe_regex
from rebalance_advisor.domain.snapshot_model import (
    MEASURED_CAPACITY_SOURCES,
    MemberCapacity,
    PartitionOffsets,
    RateEstimate,
    Snapshot,
    SnapshotRates,
    TimeLag,
)
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


# --------------------------------------------------------------------------- rates between snapshots


@dataclass(frozen=True)
class RateParameters:
    """How rates and capacities are derived between consecutive snapshots (module docstring)."""

    #: EWMA time constant τ in seconds: a step change in rate is 63 % reflected after τ, and a
    #: steadily rising rate is read τ x its slope low. 120 s: it still averages 2-3 snapshots taken
    #: every 45-60 s, and follows drift within one 5-minute planning interval. With 300 s
    #: bench/drain.py rate_aware was overloaded 29.3 % of the time in medium-50-cap2x (4.3 % at 120 s,
    #: 7.2 % at 60 s; 5 seeds x 6 h, every scenario in the session-5 notes): the rates, and the
    #: capacities smoothed with the same τ, lagged the drift by more than the rule's margin.
    time_constant_s: float = 120.0
    #: intervals shorter than this give no rate: offsets are read over a pass of up to a second or
    #: so, which would dominate Δt
    min_interval_s: float = 5.0
    #: intervals longer than this give no rate: the average would hide what happened in between
    max_interval_s: float = 3600.0
    #: a measured capacity is carried to later snapshots (while its member stays) this long. A day:
    #: capacity can only be measured while the member is saturated, and a good plan keeps it from
    #: being saturated, so a short age forgets exactly the members a plan fixed (with 1 h,
    #: bench/drain.py cap2x-z1.5 saw every capacity expire and the advisor call an overloaded group
    #: idle); a member that got slower is re-measured as soon as it saturates
    capacity_max_age_s: float = 86400.0
    #: an unmeasured member that consumes more than the group's median measured capacity gets this
    #: factor x its own consume rate instead of the median (:func:`fill_capacities`): it keeps up, so
    #: it can do at least that, and the median is biased low for it (the members that get measured
    #: are the saturated, i.e. the slow, ones; bench/drain.py, capacities x2 apart).
    unmeasured_capacity_factor: float = 1.2
    #: a partition counts as backlogged (so its member as busy, :func:`busy_capacity_sample`) only
    #: while its lag is more than this many seconds of its produce rate. A caught-up consumer still
    #: shows lag: what it fetched but has not committed yet (commits every 1-5 s, prefetched records).
    #: Counting that as backlog "measured" an idle member's capacity as its inflow (bench/closed_loop.py
    #: run B: a 279 msg/s consumer measured at 137-154 msg/s with time lags under 1 s), so every member
    #: looked saturated and no plan could improve the group.
    busy_backlog_s: float = 10.0
    #: with snapshots at least this far apart, an interval in which a partition's lag grew by more
    #: than its backlog floor, and ends above it, also measures its member (:func:`busy_capacity_sample`):
    #: waiting for a second backlogged snapshot costs a whole interval of overload, and plans move an
    #: overloaded member's partitions at the very snapshot that shows its backlog, so it was almost
    #: never measured (bench/drain.py large-500, 5-minute snapshots: no member measured for 4.8 h,
    #: overloaded 15 % -> 2.5 % of the time with it). At shorter intervals the second snapshot comes
    #: soon (medium-50-cap2x, 1 minute: 3.9 % -> 6.0 % with it, 12 seeds)
    growth_sample_min_interval_s: float = 120.0
    #: a member's own capacity report (written by the client helper into its commits' marks,
    #: rebalance_advisor_client.capacity_report) is a new sample when written after the previous
    #: snapshot; at a cluster's first snapshot, when written at most this many seconds before it
    capacity_report_max_age_s: float = 300.0
    #: EWMA time constant of reported capacities (``time_constant_s`` smooths the busy samples): a
    #: member's speed changes with a deploy or a new instance, not with traffic, and a longer
    #: average keeps the noise of single reports out of the plans (bench/drain.py
    #: cap2x-z1.5-reported, reports off by up to 5 %: 8.2 moves/h and 0.4 flaps at 120 s, 7.0 and 0
    #: at 600 s; off by up to 10 %: 20.1 and 4.6 at 120 s, 12.0 and 0.6 at 600 s)
    capacity_report_time_constant_s: float = 600.0


@dataclass(frozen=True)
class CapacityPolicy:
    """Configured capacity (records/s), first full match wins: ``"orders-.*=500,audit=50"``.

    ``GROUP_REGEX=N`` is used for every member of a group with no measured member.
    ``MEMBER_REGEX@GROUP_REGEX=N`` is one member's (named by :func:`member_key`), used while that
    member is not measured: an operator who knows the instance types of a group whose consumers
    differ (capacities x2 apart) says so. Estimating them instead costs overload: a member is
    measured only while saturated (bench/drain.py cap2x-z1.5 against cap2x-z1.5-configured).
    """

    rules: tuple[tuple[SafeRegex, float], ...] = ()
    member_rules: tuple[tuple[SafeRegex, SafeRegex, float], ...] = ()

    @classmethod
    def parse(cls, spec: str | None) -> CapacityPolicy:
        rules: list[tuple[SafeRegex, float]] = []
        member_rules: list[tuple[SafeRegex, SafeRegex, float]] = []
        for item in (spec or "").split(","):
            item = item.strip()
            if not item:
                continue
            pattern, sep, value = item.rpartition("=")
            try:
                number = float(value)
            except ValueError:
                number = math.nan
            member, at, group = pattern.partition("@")
            if not at:
                member, group = "", pattern
            if not sep or not group.strip() or (at and not member.strip()):
                raise AdvisorError(
                    f"member capacity {item!r}: expected GROUP_REGEX=RECORDS_PER_SECOND "
                    "or MEMBER_REGEX@GROUP_REGEX=RECORDS_PER_SECOND"
                )
            if not (math.isfinite(number) and number > 0):
                raise AdvisorError(f"member capacity {item!r}: records/s must be a number > 0")
            group_re = compile_safe_regex(group.strip(), f"member capacity {item!r}: bad")
            if at:
                member_re = compile_safe_regex(member.strip(), f"member capacity {item!r}: bad")
                member_rules.append((member_re, group_re, number))
            else:
                rules.append((group_re, number))
        return cls(tuple(rules), tuple(member_rules))

    def for_group(self, group_id: str) -> float | None:
        return next((value for pattern, value in self.rules if pattern.fullmatch(group_id)), None)

    def for_member(self, group_id: str, key: str) -> float | None:
        """The capacity configured for one member (its :func:`member_key`), or None."""
        return next(
            (
                value
                for member, group, value in self.member_rules
                if group.fullmatch(group_id) and member.fullmatch(key)
            ),
            None,
        )


def member_key(member_id: str, group_instance_id: str | None) -> str:
    """How a member is recognised across snapshots (and named in plans): its static instance id
    when it has one (it survives restarts), else its member id."""
    return group_instance_id or member_id


@dataclass(frozen=True)
class PreviousSnapshotState:
    """What :func:`derive_rates` needs from the previous snapshot, as stored (no older snapshot)."""

    snapshot_id: int
    taken_at: datetime
    #: (topic, partition) -> log end offset
    log_ends: Mapping[tuple[str, int], int | None]
    #: (topic, partition) -> the offset lags were against (log end, or LSO under read_committed)
    lag_ends: Mapping[tuple[str, int], int | None]
    #: (topic, partition) -> stored smoothed produce rate
    produce: Mapping[tuple[str, int], float | None]
    #: (group, topic, partition) -> committed offset
    committed: Mapping[tuple[str, str, int], int]
    #: (group, topic, partition) -> stored smoothed consume rate
    consume: Mapping[tuple[str, str, int], float | None]
    #: (group, topic, partition) -> the :func:`member_key` of its owner then
    owners: Mapping[tuple[str, str, int], str] = field(default_factory=dict)
    #: (group, member key) -> (capacity, measured at) of members whose capacity was measured
    capacities: Mapping[tuple[str, str], tuple[float, datetime]] = field(default_factory=dict)
    #: (group, member key) -> how it was measured (``MEASURED_CAPACITY_SOURCES``; default measured)
    capacity_sources: Mapping[tuple[str, str], str] = field(default_factory=dict)


def rate_interval_problem(elapsed: float, params: RateParameters) -> str | None:
    """Why an interval of ``elapsed`` seconds between two snapshots gives no rate (None: it does)."""
    if elapsed <= 0:
        return f"clock went backwards ({elapsed:.1f} s since the previous snapshot)"
    if elapsed < params.min_interval_s:
        return f"interval {elapsed:.1f} s is shorter than {params.min_interval_s:g} s"
    if elapsed > params.max_interval_s:
        return f"interval {elapsed:.0f} s is longer than {params.max_interval_s:g} s"
    return None


def smoothing_weight(elapsed: float, params: RateParameters, time_constant_s: float | None = None) -> float:
    """α of the EWMA in time (module docstring) for an interval of ``elapsed`` seconds, with τ =
    ``params.time_constant_s`` unless another ``time_constant_s`` is given (reported capacities)."""
    tau = params.time_constant_s if time_constant_s is None else time_constant_s
    return 1.0 - math.exp(-elapsed / tau)


def smooth_rate(sample: Any, previous: Any, alpha: float) -> Any:
    """The EWMA update R += α (r - R); the first sample is taken as is (``previous`` None, or NaN in
    an array). One rule for the stored snapshot rates and the simulator's observations (per
    partition arrays)."""
    if previous is None:
        return sample
    if isinstance(previous, np.ndarray):
        return np.where(np.isnan(previous), sample, previous + alpha * (sample - previous))
    return previous + alpha * (sample - previous)


def record_time_lag(taken_ms: float, stamp_ms: float) -> TimeLag:
    """The time lag from the timestamp of the record at the committed offset. A stamp after the
    snapshot's own time is clock skew, not a caught-up group: say so instead of showing 0 s."""
    if stamp_ms > taken_ms:
        return TimeLag(0.0, "future_timestamp")
    return TimeLag((taken_ms - stamp_ms) / 1000.0, "record_timestamp")


def derive_rates(
    current: Snapshot,
    previous: PreviousSnapshotState | None,
    params: RateParameters | None = None,
    capacities: CapacityPolicy | None = None,
    assigned: Mapping[str, Mapping[str, Sequence[tuple[str, int]]]] | None = None,
) -> SnapshotRates:
    """Produce and consume rates, time lags and member capacities of ``current`` (module docstring).

    Rates are unknown, with the reason, for a partition whose log end (or a group's committed
    offset) went backwards, when the clock went backwards or the interval is out of bounds, and
    without a previous observation. Time lag per committed offset: 0 when caught up, else snapshot
    time - the record timestamp the collector read (``current.record_timestamps``), else lag /
    produce rate, else unknown. Capacity per member: measured (Σ its consume rates over an interval
    in which it owned the same partitions with backlog on at least one at both ends, smoothed like rates,
    carried while it stays, up to ``capacity_max_age_s``, never below what it consumed per second;
    backlog = lag above ``busy_backlog_s`` of the partition's produce rate), else the group's median measured, else
    the configured value for the group, else unknown (``equal``).

    ``assigned``: group -> registered member -> the partitions its latest published plan gave it, for
    manual-assign (``assign()``) groups, which the broker lists without members. Their members'
    capacities follow the same rule with those owners (the caller puts them into
    ``previous.owners`` only when the same plan was in force at the previous snapshot); a group the
    snapshot lists with members is measured from those members instead.
    """
    params = params or RateParameters()
    capacities = capacities or CapacityPolicy()
    out = SnapshotRates()
    isolation = current.isolation_level
    ends = {(p.topic, p.partition): p for p in current.partitions}
    problem: str | None = None
    elapsed = 0.0
    if previous is None:
        problem = out.note = "no previous snapshot of this cluster: rates from the next one on"
    else:
        elapsed = (current.taken_at - previous.taken_at).total_seconds()
        problem = out.note = rate_interval_problem(elapsed, params)
        out.interval_s = elapsed if problem is None else None
    alpha = smoothing_weight(elapsed, params) if problem is None else 0.0

    # produce: Δ log-end / Δt per partition
    produce_sample: dict[tuple[str, int], float] = {}
    for key, p in ends.items():
        if problem is not None:
            out.produce[key] = RateEstimate(None, problem)
            continue
        assert previous is not None
        e0, e1 = previous.log_ends.get(key), p.log_end_offset
        if e0 is None or e1 is None:
            out.produce[key] = RateEstimate(None, "log end unknown in this or the previous snapshot")
        elif e1 < e0:
            out.produce[key] = RateEstimate(None, f"log end went backwards ({e0} -> {e1}): topic recreated?")
        else:
            sample = produce_sample[key] = (e1 - e0) / elapsed
            out.produce[key] = RateEstimate(smooth_rate(sample, previous.produce.get(key), alpha))

    # consume: Δ committed / Δt per (group, partition); time lag per committed offset
    consume_sample: dict[tuple[str, str, int], float] = {}
    taken_ms = current.taken_at.timestamp() * 1000.0
    for c in current.committed:
        key = (c.group_id, c.topic, c.partition)
        tp = (c.topic, c.partition)
        if problem is not None:
            out.consume[key] = RateEstimate(None, problem)
        else:
            assert previous is not None
            c0 = previous.committed.get(key)
            if c0 is None:
                out.consume[key] = RateEstimate(None, "nothing committed in the previous snapshot")
            elif c.offset < c0:
                out.consume[key] = RateEstimate(
                    None, f"committed offset went backwards ({c0} -> {c.offset}): offsets reset?"
                )
            elif (e0 := previous.log_ends.get(tp)) is not None and (
                (e1 := ends[tp].log_end_offset if tp in ends else None) is not None and e1 < e0
            ):
                out.consume[key] = RateEstimate(
                    None, f"log end went backwards ({e0} -> {e1}): topic recreated?"
                )
            else:
                sample = consume_sample[key] = (c.offset - c0) / elapsed
                out.consume[key] = RateEstimate(smooth_rate(sample, previous.consume.get(key), alpha))
        p = ends.get(tp)
        end = lag_end_offset(p, isolation) if p is not None else None
        lag = None if end is None else max(end - c.offset, 0)
        if lag == 0:
            out.time_lag[key] = TimeLag(0.0, "caught_up")
        elif (stamp := current.record_timestamps.get(key)) is not None:
            out.time_lag[key] = record_time_lag(taken_ms, stamp)
        elif lag is not None and (rate := out.produce.get(tp, RateEstimate(None)).rate):
            out.time_lag[key] = TimeLag(lag / rate, "rate_estimate")
        else:
            out.time_lag[key] = TimeLag(None, None)

    out.capacity = _capacities(
        current,
        previous,
        params,
        capacities,
        consume_sample,
        out.consume,
        out.produce,
        problem is None,
        assigned or {},
    )
    return out


# ---- the capacity rule: one copy, used by snapshots (derive_rates) and the simulator -----------


def busy_capacity_sample(
    lag_before: Sequence[float],
    lag_after: Sequence[float],
    consume_rate: Sequence[float],
    floor: Sequence[float] | None = None,
    growth: bool = False,
) -> float | None:
    """A member's capacity sample over one interval: Σ its partitions' consume rates, when at least
    one of them had backlog at both ends; None otherwise, and None when that sum is 0. Backlog means a
    lag above the partition's ``floor`` (default 0; snapshots pass produce rate x
    :attr:`RateParameters.busy_backlog_s`: the lag of records fetched but not yet committed is not
    backlog).

    ``growth`` (long intervals, :attr:`RateParameters.growth_sample_min_interval_s`): a partition
    whose lag ends above its floor after growing by more than the floor counts too: its member fell
    behind by more than in-flight records explain, so it was saturated.

    One backlogged partition is enough: a consumer shares its fetches fairly among the partitions
    that have records, so while any of them has backlog it works at its full rate, and its light
    partitions, served in full, are caught up (requiring backlog on every partition almost never
    measures an overloaded member). A sum of 0 (a stalled member, or one that does not commit) says
    nothing about how fast it can consume. The caller checks that the member held the same
    partitions over the interval, with no handover pause.
    """
    floors = [0.0] * len(lag_before) if floor is None else floor
    busy = any(
        a > f and (b > f or (growth and a - b > f))
        for b, a, f in zip(lag_before, lag_after, floors, strict=True)
    )
    if not busy:
        return None
    total = float(sum(consume_rate))
    return total if total > 0 else None


def next_capacity(
    sample: float | None,
    carried: float | None,
    carried_age_s: float,
    elapsed_s: float,
    params: RateParameters,
    consumed: float | None = None,
    reported: bool = False,
) -> tuple[float, bool] | None:
    """A member's measured capacity after an interval of ``elapsed_s``: (value, freshly measured).

    A new sample is smoothed into the carried value like a rate (EWMA, τ = ``time_constant_s``, or
    ``capacity_report_time_constant_s`` for a member's own report: ``reported``); without
    one the carried value stays while it is at most ``capacity_max_age_s`` old; else unknown (None).
    ``consumed``: what the member consumed per second over the interval, busy or not. A member can
    not consume faster than its capacity, so a measured value below it is raised to it (fresh): an
    estimate taken while the member was slowed (or on a noisy interval) does not stick for a day.
    """
    if carried is not None and carried_age_s > params.capacity_max_age_s:
        carried = None
    if sample is not None:
        tau = params.capacity_report_time_constant_s if reported else None
        value, fresh = smooth_rate(sample, carried, smoothing_weight(elapsed_s, params, tau)), True
    elif carried is not None:
        value, fresh = carried, False
    else:
        return None
    if consumed is not None and consumed > value:
        return consumed, True
    return value, fresh


def capacity_sample(busy: float | None, reported: float | None) -> tuple[float | None, str | None]:
    """A member's capacity sample over one interval and its source: a busy measurement
    (:func:`busy_capacity_sample`: what it did while saturated) before its helper's own report; (None,
    None) without either, and the carried value keeps its source. One rule for snapshots and the
    simulator."""
    if busy is not None:
        return busy, "measured"
    if reported is not None:
        return reported, "reported"
    return None, None


def reported_capacities(
    current: Snapshot, previous_taken_at: datetime | None, params: RateParameters
) -> dict[tuple[str, str], float]:
    """(group, member) -> the capacity the member's client helper reported in its commits' marks
    (``rebalance_advisor_client.capacity_report``), the newest of its partitions', when written
    after the previous snapshot (at a first snapshot: at most ``capacity_report_max_age_s`` old).
    The member is the one the mark names: what the helper was started with, the name plans use."""
    taken = current.taken_at.timestamp()
    since = (
        previous_taken_at.timestamp()
        if previous_taken_at is not None
        else taken - params.capacity_report_max_age_s
    )
    newest: dict[tuple[str, str], CapacityReport] = {}
    for c in current.committed:
        found = decode_reported_mark(c.metadata)
        if found is None or found[1].at <= since:
            continue
        mark, report = found
        key = (c.group_id, mark.member)
        if key not in newest or report.at > newest[key].at:
            newest[key] = report
    return {key: report.capacity for key, report in newest.items()}


def fill_capacities(
    measured: Sequence[float | None],
    own_rate: Sequence[float | None] | None = None,
    configured: float | None = None,
    factor: float | None = None,
    configured_members: Sequence[float | None] | None = None,
    measured_sources: Sequence[str] | None = None,
) -> list[tuple[float | None, str]]:
    """(capacity, source) per member (``snapshot_model.CAPACITY_SOURCES``) from the measured ones.

    Unmeasured members, when some member of the group is measured, get the median measured capacity
    (``group_median``), unless their own consume rate is above it: then ``factor`` x that rate
    (``own_rate``). An unmeasured member keeps up, so it can do at least its consume rate; one that
    consumes more than the median is faster than the measured (saturated, i.e. slow) ones, and the
    median would be biased low for it. Only then: raising every unmeasured member to ``factor`` x its
    rate would overestimate a nearly saturated member of a group of equal members (bench/drain.py
    large-500: overloaded 21 % -> 51 % of the time). ``factor`` defaults to
    :attr:`RateParameters.unmeasured_capacity_factor`. With none measured: the configured value, else
    unknown (``equal``). ``configured_members``: a value configured for one member
    (:meth:`CapacityPolicy.for_member`) comes before every estimate while the member is not measured;
    the median is of measured capacities only. ``measured_sources``: how each measured value was
    measured (``measured`` by default, ``reported`` by the member's client helper).
    """
    factor = RateParameters.unmeasured_capacity_factor if factor is None else factor
    known = [c for c in measured if c is not None]
    median = statistics.median(known) if known else None
    rates = list(own_rate) if own_rate is not None else [None] * len(measured)
    declared = list(configured_members) if configured_members is not None else [None] * len(measured)
    how = list(measured_sources) if measured_sources is not None else ["measured"] * len(measured)
    out: list[tuple[float | None, str]] = []
    for value, rate, mine, source in zip(measured, rates, declared, how, strict=True):
        if value is not None:
            out.append((value, source))
        elif mine is not None:
            out.append((mine, "configured"))
        elif median is not None:
            faster = rate is not None and rate > median
            out.append((factor * rate, "own_rate") if faster else (median, "group_median"))  # type: ignore[operator]
        elif configured is not None:
            out.append((configured, "configured"))
        else:
            out.append((None, "equal"))
    return out


def _capacities(
    current: Snapshot,
    previous: PreviousSnapshotState | None,
    params: RateParameters,
    policy: CapacityPolicy,
    consume_sample: Mapping[tuple[str, str, int], float],
    consume: Mapping[tuple[str, str, int], RateEstimate],
    produce: Mapping[tuple[str, int], RateEstimate],
    interval_ok: bool,
    assigned: Mapping[str, Mapping[str, Sequence[tuple[str, int]]]],
) -> dict[tuple[str, str], MemberCapacity]:
    isolation = current.isolation_level
    ends = {(p.topic, p.partition): lag_end_offset(p, isolation) for p in current.partitions}
    committed = {(c.group_id, c.topic, c.partition): c.offset for c in current.committed}
    held_before: Counter[tuple[str, str]] = Counter()
    if previous is not None:
        held_before.update((g, owner) for (g, _, _), owner in previous.owners.items())
    elapsed = (current.taken_at - previous.taken_at).total_seconds() if previous is not None else 0.0
    # group -> its members as (stored member id, key across snapshots, owned partitions)
    roster: dict[str, list[tuple[str, str, tuple[tuple[str, int], ...]]]] = {
        g.group_id: [
            (m.member_id, member_key(m.member_id, m.group_instance_id), tuple(m.assignment))
            for m in g.members
        ]
        for g in current.groups
        if g.members
    }
    for group_id, owned in assigned.items():
        if group_id not in roster:  # listed members win: they are what the broker sees
            roster[group_id] = [(member, member, tuple(parts)) for member, parts in sorted(owned.items())]
    reports = reported_capacities(current, previous.taken_at if previous is not None else None, params)
    out: dict[tuple[str, str], MemberCapacity] = {}
    for group_id, members in roster.items():
        measured: list[float | None] = []
        measured_at: list[datetime | None] = []
        how: list[str] = []
        own_rate: list[float | None] = []
        for _, key, assignment in members:
            sample = consumed = None
            if (
                interval_ok
                and previous is not None
                and assignment
                and held_before[(group_id, key)] == len(assignment)
            ):
                sample, consumed = _capacity_sample(
                    group_id, key, assignment, previous, ends, committed, consume_sample, produce, params,
                    elapsed,
                )  # fmt: skip
            carried = previous.capacities.get((group_id, key)) if previous is not None else None
            sample, fresh_source = capacity_sample(sample, reports.get((group_id, key)))
            if fresh_source is not None:
                source = fresh_source
            elif carried is not None:
                source = previous.capacity_sources.get((group_id, key), "measured")  # type: ignore[union-attr]
            else:
                source = "measured"
            if source == "reported" and not interval_ok:  # nothing to smooth over: taken as it is
                carried = None
            age = (current.taken_at - carried[1]).total_seconds() if carried is not None else 0.0
            value = next_capacity(
                sample, carried[0] if carried else None, age, elapsed, params, consumed, source == "reported"
            )
            measured.append(None if value is None else value[0])
            measured_at.append(
                None if value is None else (current.taken_at if value[1] else carried[1])  # type: ignore[index]
            )
            how.append(source)
            rates = [consume.get((group_id, t, p), RateEstimate(None)).rate for t, p in assignment]
            known = [r for r in rates if r is not None]
            own_rate.append(sum(known) if known else None)
        filled = fill_capacities(
            measured,
            own_rate,
            policy.for_group(group_id),
            params.unmeasured_capacity_factor,
            [policy.for_member(group_id, key) for _, key, _ in members],
            how,
        )
        for (member_id, _, _), (value, source), at in zip(members, filled, measured_at, strict=True):
            out[(group_id, member_id)] = MemberCapacity(
                value, source, at if source in MEASURED_CAPACITY_SOURCES else None
            )
    return out


def _capacity_sample(
    group_id: str,
    key: str,
    assignment: tuple[tuple[str, int], ...],
    previous: PreviousSnapshotState,
    ends: Mapping[tuple[str, int], int | None],
    committed: Mapping[tuple[str, str, int], int],
    consume_sample: Mapping[tuple[str, str, int], float],
    produce: Mapping[tuple[str, int], RateEstimate],
    params: RateParameters,
    elapsed_s: float,
) -> tuple[float | None, float | None]:
    """(:func:`busy_capacity_sample`, Σ consume rates) of a member that held the same partitions (the
    caller checked the count) over the interval; (None, None) when an offset or a consume rate is
    missing. The backlog floor of a partition whose produce rate is unknown is 0."""
    before: list[int] = []
    after: list[int] = []
    rates: list[float] = []
    floors: list[float] = []
    for topic, partition in assignment:
        gtp = (group_id, topic, partition)
        if previous.owners.get(gtp) != key or gtp not in consume_sample:
            return None, None
        e0, c0 = previous.lag_ends.get((topic, partition)), previous.committed.get(gtp)
        e1, c1 = ends.get((topic, partition)), committed.get(gtp)
        if e0 is None or c0 is None or e1 is None or c1 is None:
            return None, None
        before.append(e0 - c0)
        after.append(e1 - c1)
        rates.append(consume_sample[gtp])
        rate = produce.get((topic, partition), RateEstimate(None)).rate
        floors.append((rate or 0.0) * params.busy_backlog_s)
    growth = elapsed_s >= params.growth_sample_min_interval_s
    return busy_capacity_sample(before, after, rates, floors, growth), float(sum(rates))


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

    The stored, smoothed rates are :func:`derive_rates`' (what the planner reads); this compares
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
