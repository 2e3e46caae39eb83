"""What the advisor knows about a cluster between snapshots, and the one step that advances it
(docs/architecture.md, "What the advisor knows between snapshots"). Pure, no I/O.

:class:`Carried` is that knowledge after one snapshot: its time, log ends and committed offsets,
smoothed produce and consume rates, owners by member key, measured capacities as (value, when,
source), and recent moves. :func:`step` takes it and the next :class:`Observed` snapshot and gives
the snapshot's rates and capacities and the next :class:`Carried`. The store loads and saves it
(``store.snapshots``); the simulator (``domain.simulation``) holds one and calls the same
:func:`step` at each of its snapshots, so bench/drain.py measures production's rule.

Rates are exponentially weighted moving averages in time: each new interval's rate r over Δt
seconds updates the carried average R as R += α (r - R) with α = 1 - exp(-Δt / τ),
τ = :attr:`RateParameters.time_constant_s` (default 120 s). Unlike a window of the last N snapshots,
this needs only the carried average (no rescan), weighs irregular intervals by their length, and
forgets a rate change with the same time constant whatever the snapshot schedule. The first
interval's rate is taken as is.

Capacity per member: measured (Σ its consume rates over an interval in which it held the same
partitions with backlog on at least one at both ends, smoothed like rates, carried while it stays,
up to ``capacity_max_age_s``, never below what it consumed per second; backlog = lag above
``busy_backlog_s`` of the partition's produce rate) or reported by its client helper, or read from
its client telemetry (as records at a steady spacing while the group's evidence says so:
:attr:`Carried.arrivals_evidence`), else the median measured of the slowest class of measured
members that covers what it has done (:func:`peer_capacity`), else the configured value,
else unknown (``equal``). An estimate (the median, or a factor over the member's own rate) is never
below the member's proven rate (:class:`ProvenRate`): the most it consumed over an interval it kept up
through, carried up to ``capacity_max_age_s``.
"""

from __future__ import annotations

import math
import statistics
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta
from functools import cached_property
from typing import Any, NamedTuple, Protocol

import numpy as np
from rebalance_advisor_client.capacity_report import CapacityReport
from rebalance_advisor_client.handover_rules import decode_reported_mark

from rebalance_advisor.domain.group_spec import RecentMove
from rebalance_advisor.domain.lag import lag_end_offset
from rebalance_advisor.domain.safe_regex import SafeRegex, compile_safe_regex
from rebalance_advisor.domain.snapshot_model import (
    MEASURED_CAPACITY_SOURCES,
    MemberCapacity,
    ProvenRate,
    RateEstimate,
    Snapshot,
    SnapshotRates,
)
from rebalance_advisor.domain.telemetry import (
    RANDOM,
    STEADY,
    Arrivals,
    TelemetryCapacity,
    TelemetryParameters,
    TelemetryReadings,
    TelemetryReference,
    TelemetrySample,
    arrivals_evidence,
    consistency_evidence,
    steady_arrivals,
    telemetry_capacity,
)
from rebalance_advisor.domain.telemetry import SOURCE as TELEMETRY_SOURCE
from rebalance_advisor.errors import AdvisorError

#: (topic, partition)
TopicPartition = tuple[str, int]
#: (group, topic, partition)
GroupPartition = tuple[str, str, int]
#: (group, member key)
MemberRef = tuple[str, str]


@dataclass(frozen=True)
class RateParameters:
    """How rates and capacities are derived between consecutive snapshots (module docstring)."""

    #: EWMA time constant τ in seconds: a step change in rate is 63 % reflected after τ, and a
    #: steadily rising rate is read τ x its slope low. 120 s: it still averages 2-3 snapshots taken
    #: every 45-60 s, and follows drift within one 5-minute planning interval. With 300 s
    #: bench/drain.py rate_aware was overloaded 29.3 % of the time in medium-50-cap2x (4.3 % at 120 s,
    #: 7.2 % at 60 s; 5 seeds x 6 h, every bench/drain.py scenario run): the rates, and the
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
    #: measured capacities within this ratio of a class's lowest are one class of members (the same
    #: machine and code); an unmeasured member is estimated from the lowest class whose fastest
    #: member covers what it has shown it can do (:func:`peer_capacity`). The median of all measured
    #: capacities gave the slow members of a group x2 apart the middle of both classes once a fast
    #: member was measured: 1.5x their capacity (bench/drain.py cap2x-z1.5, seed 2: 202 s behind;
    #: docs/benchmarks/drain.md, "Classes of measured capacities"). Noise within a class is under 1.3.
    capacity_class_ratio: float = 1.3
    #: two measured capacities within this ratio are alike to the planner: the spread of one
    #: member's measurements (a consumer's commit interval shifts an interval's consume rate by up to
    #: 8 % at 5-s commits and 60-s snapshots, and a member that fell behind is capped at what it
    #: consumed), so a partition that fills a member is not moved for the difference
    #: (``group_planning.no_gain_between_peers``; bench/drain.py large-50x500-steps --commit-interval
    #: 5: 1.1 let 1,209 handovers an hour through, 1.15 589, 1.3 544, but 1.3 also held a member
    #: measured 1.2x its peer: docs/benchmarks/drain.md).
    capacity_noise_ratio: float = 1.15
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
    #: ... and only when the member's lag as a whole grew by more than this share of the sum of its
    #: partitions' floors: one partition stepped up just before the snapshot shows its new rate's
    #: in-flight records over a floor of the old rate while its member keeps up (bench/drain.py
    #: steps-cap2x-300s, commits every 5 s: fast members "measured" at 35-56 % of their capacity;
    #: 41.9 -> 35.0 % overloaded with 0.25; 1.0 cost large-500 3.6 -> 10.6 %, 0 let more through)
    growth_sample_member_share: float = 0.25
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
    #: a snapshot that gives no rates (no earlier snapshot of its cluster within ``max_interval_s``,
    #: or one too close) is followed by a second pass this many seconds later, so the first advice
    #: of a cluster has rates (:func:`wants_rate_pass`; docs/architecture.md, "What the advisor knows
    #: between snapshots"). Without it a 5-minute schedule leaves a fresh advisor blind for 5 minutes,
    #: in which every seed of bench/drain.py cap2x-z1.5 had a partition fall more than 30 s behind
    rate_pass_s: float = 30.0
    #: a plan applied while some member's capacity was unknown (``equal``) is followed by two more
    #: snapshots and advice, before the next scheduled one, so the members it loaded are measured
    #: soon (:func:`wants_capacity_pass`; docs/benchmarks/drain.md, "The capacity pass"): one
    #: ``capacity_pass_settle_s`` after the plan, its handovers over, which starts an interval over
    #: which those members hold their partitions (one that gained a partition is not measured over
    #: the interval it gained it in), and one this many seconds after that, which measures them.
    #: On a 5-minute schedule bench/drain.py cap2x-z1.5 otherwise ran 5 minutes on an even share
    #: that overloaded its slow members
    capacity_pass_s: float = 120.0
    #: see ``capacity_pass_s``; after the handovers of a plan (bench/drain.py's are 5 or 30 s, the
    #: broker-side assignor's plans are in force within 3 s, docs/benchmarks/closed-loop.md)
    capacity_pass_settle_s: float = 40.0
    #: moves older than this are not carried: the hysteresis window (``Thresholds.hysteresis_window_s``,
    #: 1,800 s) and the simulator's flap window look back no further
    recent_moves_s: float = 1800.0


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


def wants_rate_pass(rates: SnapshotRates) -> bool:
    """Whether the snapshot service should take a second pass after a snapshot with these rates
    (:attr:`RateParameters.rate_pass_s`): it gave none, so an advisor run on it could not plan on
    rates. One rule for the snapshot service and the simulator."""
    return rates.interval_s is None


def wants_capacity_pass(unknown_capacities: int, moves: int) -> bool:
    """Whether a plan applied with ``moves`` partitions moved, made while ``unknown_capacities``
    members had no capacity (``equal``), should be followed by an early snapshot and advice
    (:attr:`RateParameters.capacity_pass_s`): the members it loaded are measured only by a later
    snapshot. One rule for the advisor DAG and the simulator."""
    return unknown_capacities > 0 and moves > 0


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


def busy_capacity_sample(
    lag_before: Sequence[float],
    lag_after: Sequence[float],
    consume_rate: Sequence[float],
    floor: Sequence[float] | None = None,
    growth: bool = False,
    member_share: float = RateParameters.growth_sample_member_share,
) -> float | None:
    """A member's capacity sample over one interval: Σ its partitions' consume rates, when at least
    one of them had backlog at both ends; None otherwise, and None when that sum is 0. Backlog means a
    lag above the partition's ``floor`` (default 0; snapshots pass produce rate x
    :attr:`RateParameters.busy_backlog_s`: the lag of records fetched but not yet committed is not
    backlog).

    ``growth`` (long intervals, :attr:`RateParameters.growth_sample_min_interval_s`): a partition
    whose lag ends above its floor after growing by more than the floor counts too, when the member's
    lag as a whole grew by more than ``member_share`` of the sum of its floors: it fell behind by more
    than in-flight records explain, so it was saturated. One partition's growth alone is no evidence
    (:attr:`RateParameters.growth_sample_member_share`).

    One backlogged partition is enough: a consumer shares its fetches fairly among the partitions
    that have records, so while any of them has backlog it works at its full rate, and its light
    partitions, served in full, are caught up (requiring backlog on every partition almost never
    measures an overloaded member). A sum of 0 (a stalled member, or one that does not commit) says
    nothing about how fast it can consume. The caller checks that the member held the same
    partitions over the interval, with no handover pause.
    """
    floors = [0.0] * len(lag_before) if floor is None else floor
    pairs = list(zip(lag_before, lag_after, floors, strict=True))
    busy = any(a > f and b > f for b, a, f in pairs) or (
        growth
        and any(a > f and a - b > f for b, a, f in pairs)
        and fell_behind(sum(lag_after) - sum(lag_before), sum(floors), member_share)
    )
    if not busy:
        return None
    total = float(sum(consume_rate))
    return total if total > 0 else None


class NextCapacity(NamedTuple):
    """A member's measured capacity after a step (:func:`next_capacity`)."""

    value: float
    #: measured at this step (a new sample, or raised to what it consumed)
    fresh: bool
    #: the samples the value is the plain mean of (None: settled, the EWMA weighs each new one)
    sample_count: int | None


def next_capacity(
    sample: float | None,
    carried: float | None,
    carried_age_s: float,
    elapsed_s: float,
    params: RateParameters,
    consumed: float | None = None,
    reported: bool = False,
    sample_count: int | None = None,
) -> NextCapacity | None:
    """A member's measured capacity after an interval of ``elapsed_s``.

    A new sample is smoothed into the carried value like a rate (EWMA, τ = ``time_constant_s``, or
    ``capacity_report_time_constant_s`` for a member's own report or telemetry: ``reported``), but
    the first of those are averaged with equal weight (``sample_count`` of them so far) until the
    EWMA gives a new one more: with τ = 600 s and telemetry every 30 s the first reading would
    otherwise keep 64 % of its weight for 4.5 minutes, and one read 18 % high at a consumer's start
    did (docs/benchmarks/closed-loop.md, the run of 2026-11-29 14:52). Busy samples (τ = 120 s)
    are not counted: their EWMA weighs a new one 0.22-0.39 at 30-60 s already (bench/drain.py
    medium-50-cap2x, counted: 0.8 -> 1.3 % overloaded). Without a sample the carried value stays
    while it is at most ``capacity_max_age_s`` old; else unknown (None). ``consumed``: what the member
    consumed per second over the interval, busy or not. A member can not consume faster than its
    capacity, so a measured value below it is raised to it (fresh): an estimate taken while the
    member was slowed (or on a noisy interval) does not stick for a day.
    """
    if carried is not None and carried_age_s > params.capacity_max_age_s:
        carried = None
    if sample is not None and carried is None:
        value, fresh, count = sample, True, 1 if reported else None
    elif sample is not None:
        tau = params.capacity_report_time_constant_s if reported else None
        alpha = smoothing_weight(elapsed_s, params, tau)
        mean_weight = 1.0 / (sample_count + 1) if reported and sample_count is not None else 0.0
        value, fresh = smooth_rate(sample, carried, max(alpha, mean_weight)), True
        count = sample_count + 1 if mean_weight > alpha else None
    elif carried is not None:
        value, fresh, count = carried, False, sample_count
    else:
        return None
    if consumed is not None and consumed > value:
        return NextCapacity(consumed, True, count)
    return NextCapacity(value, fresh, count)


def capacity_sample(
    busy: float | None, reported: float | None, telemetry: float | None = None
) -> tuple[float | None, str | None]:
    """A member's capacity sample over one interval and its source: a busy measurement
    (:func:`busy_capacity_sample`: what it did while saturated) before its helper's own report,
    before its client's telemetry (:func:`rebalance_advisor.domain.telemetry.telemetry_capacity`);
    (None, None) without any, and the carried value keeps its source. One rule for snapshots and the
    simulator.

    Why this order: saturated work is the capacity itself; the helper measures time outside
    ``poll()`` exactly, over its own window; telemetry rests on the clients' idle-ratio formulas,
    corrected but measured within 10 % at best (docs/operations/telemetry.md, "Accuracy"). All three
    observe the member now, so each comes before an operator's static declaration (``configured``).
    A measured capacity also outranks later telemetry while it is carried
    (:func:`saturation_outranks_telemetry`).
    """
    if busy is not None:
        return busy, "measured"
    if reported is not None:
        return reported, "reported"
    if telemetry is not None:
        return telemetry, TELEMETRY_SOURCE
    return None, None


def saturation_outranks_telemetry(
    prior: CarriedCapacity | None, now: datetime, params: RateParameters
) -> TelemetryCapacity | None:
    """No telemetry sample while a capacity measured at saturation is carried (at most
    ``capacity_max_age_s`` old): why, or None when telemetry may speak.

    :func:`capacity_sample`'s order holds across intervals too. A busy share read low (records at a
    steady spacing read through the Poisson correction: +63 % at half busy) would otherwise undo
    at the next interval what saturation showed, and the rule would load the member back over its
    capacity (bench/drain.py cap2x-z1.5-telemetry-regular).
    """
    if prior is None or prior.source != "measured":
        return None
    age = (now - prior.at).total_seconds()
    if age > params.capacity_max_age_s:
        return None
    return TelemetryCapacity(
        None, None, f"telemetry not used: {prior.value:.1f}/s measured at saturation {age / 60:.0f} min ago"
    )


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
    proven: Sequence[float | None] | None = None,
    behind: Sequence[bool] | None = None,
) -> list[tuple[float | None, str]]:
    """(capacity, source) per member (``snapshot_model.CAPACITY_SOURCES``) from the measured ones.

    Unmeasured members, when some member of the group is measured, get the median measured capacity
    (``group_median``) of the slowest class of measured members that covers what they have done
    (:func:`peer_capacity`), unless their own consume rate is above that median: then ``factor`` x
    that rate (``own_rate``). An unmeasured member keeps up, so it can do at least its consume
    rate; one that consumes more than the median is faster than the measured (saturated, i.e. slow)
    ones, and the median would be biased low for it. Only then: raising every unmeasured member to
    ``factor`` x its rate would overestimate a nearly saturated member of a group of equal members
    (bench/drain.py large-500: overloaded 21 % -> 51 % of the time). ``factor`` defaults to
    :attr:`RateParameters.unmeasured_capacity_factor`. With none measured: the configured value, else
    unknown (``equal``). ``configured_members``: a value configured for one member
    (:meth:`CapacityPolicy.for_member`) comes before every estimate while the member is not measured;
    the median is of measured capacities only. ``measured_sources``: how each measured value was
    measured (``measured`` by default, ``reported`` by the member's client helper). ``proven``: each
    member's proven rate (:class:`ProvenRate`), under which no estimate goes: the median of the
    saturated (slow) members held the fast ones of a group x2 apart at half their capacity, and an
    own-rate estimate forgets what the member held before a step down (bench/drain.py
    steps-cap2x-300s, docs/benchmarks/drain.md). ``behind``: members whose lag grew over the
    interval (:func:`fell_behind`; :func:`unmeasured_estimate`).
    """
    factor = RateParameters.unmeasured_capacity_factor if factor is None else factor
    known = [c for c in measured if c is not None]
    classes = capacity_classes(known, RateParameters.capacity_class_ratio)
    rates = list(own_rate) if own_rate is not None else [None] * len(measured)
    declared = list(configured_members) if configured_members is not None else [None] * len(measured)
    how = list(measured_sources) if measured_sources is not None else ["measured"] * len(measured)
    floors = list(proven) if proven is not None else [None] * len(measured)
    lagging = list(behind) if behind is not None else [False] * len(measured)
    out: list[tuple[float | None, str]] = []
    for value, rate, mine, source, floor, late in zip(
        measured, rates, declared, how, floors, lagging, strict=True
    ):
        if value is not None:
            out.append((value, source))
        elif mine is not None:
            out.append((mine, "configured"))
        elif known:
            out.append(unmeasured_estimate(classes, rate, floor, 1.0 if late else factor))
        elif configured is not None:
            out.append((configured, "configured"))
        else:
            out.append((None, "equal"))
    return out


def unmeasured_estimate(
    classes: Sequence[tuple[float, float]], rate: float | None, proven: float | None, factor: float
) -> tuple[float, str]:
    """(capacity, source) of an unmeasured member of a group with measured ones
    (:func:`fill_capacities`): its class's median, or ``factor`` x its own rate above it; never under
    its ``proven`` rate. A member that fell behind gets factor 1: it did not keep up, so it can do
    no more than it did (bench/drain.py cap2x-z1.5: a slow member 1.04x over its capacity, its lag's
    growth spread over 16 partitions, was estimated at 1.2x what it consumed and loaded to 1.10x).
    A proven rate picks the class at 1 / :attr:`RateParameters.capacity_noise_ratio` of its value:
    it is the highest of many readings, and a slow member that once consumed at its full rate
    without being measured proved a hair more than its measured peers, so the fast class took it, at
    twice its capacity (211 s behind; docs/benchmarks/drain.md, "A member that fell behind is not
    estimated above its rate")."""
    shown = max(rate or 0.0, (proven or 0.0) / RateParameters.capacity_noise_ratio)
    peer = class_capacity(classes, shown)
    guess, kind = (factor * rate, "own_rate") if rate is not None and rate > peer else (peer, "group_median")
    return max(guess, proven or 0.0), kind


def peer_capacity(measured: Sequence[float], shown: float, class_ratio: float) -> float:
    """The capacity of an unmeasured member that has shown it can do ``shown`` records/s: the median
    of the lowest class of measured capacities (each within ``class_ratio`` of its class's lowest)
    whose fastest member did at least that, else of the highest class. The members that get
    measured are the saturated ones, so the lowest class that fits is the cautious guess
    (:attr:`RateParameters.capacity_class_ratio`); with one class, the median of all."""
    return class_capacity(capacity_classes(measured, class_ratio), shown)


def capacity_classes(measured: Sequence[float], class_ratio: float) -> list[tuple[float, float]]:
    """(fastest, median) of each class of ``measured`` (:func:`peer_capacity`), slowest first."""
    classes: list[list[float]] = []
    for value in sorted(measured):
        if classes and value <= class_ratio * classes[-1][0]:
            classes[-1].append(value)
        else:
            classes.append([value])
    return [(members[-1], statistics.median(members)) for members in classes]


def class_capacity(classes: Sequence[tuple[float, float]], shown: float) -> float:
    """:func:`peer_capacity` on classes built once (:func:`capacity_classes`) for a whole group."""
    return next((median for fastest, median in classes if fastest >= shown), classes[-1][1])


# ---- the carried state and one step ----------------------------------------------------------


@dataclass(frozen=True)
class CarriedCapacity:
    """A member's measured capacity (records/s), when it was measured, and how
    (``MEASURED_CAPACITY_SOURCES``)."""

    value: float
    at: datetime
    source: str = "measured"
    #: the samples it is the plain mean of, while the EWMA would weigh a new one less
    #: (:func:`next_capacity`); None: settled, or carried from before the count existed
    sample_count: int | None = None


@dataclass(frozen=True)
class Carried:
    """What the advisor knows about one cluster after a snapshot (module docstring). Immutable:
    :func:`step` and :meth:`after_plan` return a new one."""

    #: which cluster (:func:`cluster_key`): a step pairs snapshots of one cluster only
    cluster: str
    taken_at: datetime
    #: (topic, partition) -> log end offset
    log_ends: Mapping[TopicPartition, int | None]
    #: (topic, partition) -> the offset lags were against (log end, or LSO under read_committed)
    lag_ends: Mapping[TopicPartition, int | None]
    #: (topic, partition) -> smoothed produce rate (None: unknown)
    produce: Mapping[TopicPartition, float | None]
    #: (group, topic, partition) -> committed offset
    committed: Mapping[GroupPartition, int]
    #: (group, topic, partition) -> smoothed consume rate (None: unknown)
    consume: Mapping[GroupPartition, float | None]
    #: (group, topic, partition) -> the :func:`member_key` of its owner
    owners: Mapping[GroupPartition, str] = field(default_factory=dict)
    #: (group, member key) -> measured capacity, for members whose capacity was measured or reported
    capacities: Mapping[MemberRef, CarriedCapacity] = field(default_factory=dict)
    #: group -> its partitions' moves within ``RateParameters.recent_moves_s``, oldest first
    recent_moves: Mapping[str, tuple[RecentMove, ...]] = field(default_factory=dict)
    #: group -> the averaged evidence that its telemetry reads as records at a steady spacing
    #: (:func:`rebalance_advisor.domain.telemetry.arrivals_evidence`)
    arrivals_evidence: Mapping[str, float] = field(default_factory=dict)
    #: (group, member key) -> its telemetry readings at a consume rate, to compare with readings at
    #: another (:func:`rebalance_advisor.domain.telemetry.consistency_evidence`)
    telemetry_references: Mapping[MemberRef, TelemetryReference] = field(default_factory=dict)
    #: (group, member key) -> the most it consumed over an interval it kept up through
    proven_rates: Mapping[MemberRef, ProvenRate] = field(default_factory=dict)
    snapshot_id: int | None = None

    def after_plan(self, group_id: str, moves: Sequence[RecentMove]) -> Carried:
        """This state after a plan applied at its own instant (the simulator applies each plan as it
        observes): ``moves`` join the recent moves. The owners stay the snapshot's, as the store
        carries them: a member that gained or lost a partition is not measured over the next
        interval, its old owner included (docs/benchmarks/drain.md, "The simulator measured an
        old owner that production does not")."""
        recent = {**self.recent_moves, group_id: (*self.recent_moves.get(group_id, ()), *moves)}
        return replace(self, recent_moves=recent)

    @cached_property
    def held_counts(self) -> Counter[MemberRef]:
        """(group, member key) -> how many partitions it owned at this snapshot."""
        return Counter((g, owner) for (g, _, _), owner in self.owners.items())


class CapacityReports(Protocol):
    """Members' own capacity reports by (group, member key); a ``dict`` is one. Asked only for a
    member with no busy sample (a busy sample wins: :func:`capacity_sample`)."""

    def get(self, key: MemberRef, /) -> float | None: ...


@dataclass(frozen=True)
class ObservedMember:
    """One member of a group in a snapshot: its one record for the step."""

    group_id: str
    #: the name capacities are stored and planned under (member id, or a registered name)
    member_id: str
    #: how it is recognised across snapshots (:func:`member_key`)
    key: str
    #: what it holds now, in a stable order (sums over them run in this order)
    partitions: tuple[TopicPartition, ...]
    #: the capacity an operator configured for it (:meth:`CapacityPolicy.for_member`)
    configured_capacity: float | None = None


@dataclass(frozen=True)
class Observed:
    """One snapshot as :func:`step` reads it (:func:`observe_snapshot` builds it from a stored
    snapshot; the simulator from its fluid model)."""

    #: which cluster (:func:`cluster_key`)
    cluster: str
    taken_at: datetime
    log_ends: Mapping[TopicPartition, int | None]
    lag_ends: Mapping[TopicPartition, int | None]
    committed: Mapping[GroupPartition, int]
    #: every member of every group whose capacities are estimated, a group's members together
    members: tuple[ObservedMember, ...]
    reports: CapacityReports = field(default_factory=dict)
    #: (group, member key) -> the member's newest client telemetry (asked only without a busy
    #: sample or a report)
    telemetry: Mapping[MemberRef, TelemetrySample] = field(default_factory=dict)
    #: group -> the capacity configured for its members when none is measured
    group_capacity: Mapping[str, float] = field(default_factory=dict)
    snapshot_id: int | None = None


@dataclass(frozen=True)
class _Interval:
    """The interval since the carried snapshot: its length, why it gives no rates, the EWMA weight."""

    elapsed_s: float
    problem: str | None
    alpha: float

    @property
    def gives_rates(self) -> bool:
        return self.problem is None


def _interval(carried: Carried | None, observed: Observed, params: RateParameters) -> _Interval:
    if carried is None:
        return _Interval(0.0, "no previous snapshot of this cluster: rates from the next one on", 0.0)
    elapsed = (observed.taken_at - carried.taken_at).total_seconds()
    problem = rate_interval_problem(elapsed, params)
    return _Interval(elapsed, problem, smoothing_weight(elapsed, params) if problem is None else 0.0)


def cluster_key(cluster_id: str | None, bootstrap_servers: str) -> str:
    """How snapshots of one cluster are recognised: its cluster id when the snapshot has one, else
    its bootstrap servers (``store.snapshot_reader.same_cluster`` selects them the same way)."""
    return f"id:{cluster_id}" if cluster_id is not None else f"bootstrap:{bootstrap_servers}"


def step(
    carried: Carried | None, observed: Observed, params: RateParameters | None = None
) -> tuple[SnapshotRates, Carried]:
    """The rates and capacities of ``observed`` (module docstring), and what is carried to the next
    snapshot. ``carried`` None, or of another cluster: the cluster's first snapshot."""
    params = params or RateParameters()
    if carried is not None and carried.cluster != observed.cluster:
        carried = None
    interval = _interval(carried, observed, params)
    produce = _produce_rates(carried, observed, interval)
    consume, samples = _consume_rates(carried, observed, interval)
    rates = SnapshotRates(produce=produce, consume=consume, note=interval.problem)
    rates.interval_s = interval.elapsed_s if interval.gives_rates else None
    context = _StepContext(carried, observed, params, interval, samples, rates)
    evidence = [_member_evidence(m, context) for m in observed.members]
    moved, references = _telemetry_references(evidence, context)
    rates.arrivals_evidence = _arrivals_by_group(evidence, context, moved)
    estimates = [
        _member_estimate(e, context, steady_arrivals(rates.arrivals_evidence.get(e.member.group_id)))
        for e in evidence
    ]
    per_member = CarriedPerMember(references, _proven_rates(evidence, context))
    rates.capacity = _filled_capacities(estimates, observed, params, per_member)
    return rates, _next_carried(carried, observed, rates, estimates, params, per_member)


def _produce_rates(
    carried: Carried | None, observed: Observed, interval: _Interval
) -> dict[TopicPartition, RateEstimate]:
    """Δ log-end / Δt per partition, smoothed into the carried rate."""
    out: dict[TopicPartition, RateEstimate] = {}
    for key, e1 in observed.log_ends.items():
        if carried is None or interval.problem is not None:
            out[key] = RateEstimate(None, interval.problem)
            continue
        e0 = carried.log_ends.get(key)
        if e0 is None or e1 is None:
            out[key] = RateEstimate(None, "log end unknown in this or the previous snapshot")
        elif e1 < e0:
            out[key] = RateEstimate(None, f"log end went backwards ({e0} -> {e1}): topic recreated?")
        else:
            sample = (e1 - e0) / interval.elapsed_s
            out[key] = RateEstimate(smooth_rate(sample, carried.produce.get(key), interval.alpha))
    return out


def _consume_rates(
    carried: Carried | None, observed: Observed, interval: _Interval
) -> tuple[dict[GroupPartition, RateEstimate], dict[GroupPartition, float]]:
    """Δ committed / Δt per (group, partition), smoothed; and the interval's unsmoothed samples (what
    a busy member did: :func:`busy_capacity_sample`)."""
    out: dict[GroupPartition, RateEstimate] = {}
    samples: dict[GroupPartition, float] = {}
    for key, offset in observed.committed.items():
        if carried is None or interval.problem is not None:
            out[key] = RateEstimate(None, interval.problem)
            continue
        c0 = carried.committed.get(key)
        tp = (key[1], key[2])
        e0, e1 = carried.log_ends.get(tp), observed.log_ends.get(tp)
        if c0 is None:
            out[key] = RateEstimate(None, "nothing committed in the previous snapshot")
        elif offset < c0:
            out[key] = RateEstimate(
                None, f"committed offset went backwards ({c0} -> {offset}): offsets reset?"
            )
        elif e0 is not None and e1 is not None and e1 < e0:
            out[key] = RateEstimate(None, f"log end went backwards ({e0} -> {e1}): topic recreated?")
        else:
            sample = samples[key] = (offset - c0) / interval.elapsed_s
            out[key] = RateEstimate(smooth_rate(sample, carried.consume.get(key), interval.alpha))
    return out, samples


@dataclass(frozen=True)
class _MemberEstimate:
    """One member after the step: its measured capacity (None: not measured, or too old), when and
    how it was measured, and its own consume rate (Σ its partitions' smoothed rates)."""

    member: ObservedMember
    measured: float | None
    at: datetime | None
    source: str
    own_rate: float | None
    #: why its telemetry gave no sample, when it was asked and refused (distrusted, too idle, stale)
    note: str | None = None
    #: the samples its measured capacity is the plain mean of (:attr:`CarriedCapacity.sample_count`)
    sample_count: int | None = None
    #: its lag grew over the interval, though it gave no busy sample (:func:`fell_behind`)
    behind: bool = False


class _StepContext(NamedTuple):
    """What one :func:`step` reads, for the per-member rules."""

    carried: Carried | None
    observed: Observed
    params: RateParameters
    interval: _Interval
    samples: Mapping[GroupPartition, float]
    rates: SnapshotRates


class _Evidence(NamedTuple):
    """What the snapshot shows of one member's capacity before the rule weighs it."""

    member: ObservedMember
    work: _Work
    #: its helper's report, asked only without a busy sample (the simulator draws one when asked)
    reported: float | None
    prior: CarriedCapacity | None
    #: what its newest client telemetry says under each arrival model, when it pushed any
    heard: _Heard | None
    #: it gained or lost partitions over the interval: its telemetry was read against the partitions
    #: it holds now, since its last move (:func:`_moved_reading`)
    moved: bool = False

    @property
    def telemetry_asked(self) -> _Heard | None:
        """Its telemetry, where the capacity rule asks it: only without a busy sample or the
        member's report."""
        return self.heard if self.work.busy is None and self.reported is None else None


class _Heard(NamedTuple):
    """What one member's telemetry says over the interval, read under each arrival model: read once
    per snapshot, for the group's evidence and for the member's estimate."""

    random: TelemetryCapacity
    steady: TelemetryCapacity

    def read_as(self, arrivals: Arrivals) -> TelemetryCapacity:
        return self.steady if arrivals == STEADY else self.random

    @property
    def readings(self) -> TelemetryReadings:
        return TelemetryReadings(self.random.capacity, self.steady.capacity)


def _member_evidence(member: ObservedMember, context: _StepContext) -> _Evidence:
    """What the member did over the interval (:func:`_busy_sample`, when it held its partitions),
    its report, its carried capacity, and what its telemetry says: over the interval, or since its
    last move against the partitions it holds now when it gained or lost some (:func:`_moved_reading`)."""
    carried, interval = context.carried, context.interval
    work, moved = _NO_WORK, False
    if carried is not None and interval.gives_rates:
        if _held_throughout(member, carried):
            work = _busy_sample(member, carried, context)
        else:
            moved = True
    ref = (member.group_id, member.key)
    reported = context.observed.reports.get(ref) if work.busy is None else None
    prior = carried.capacities.get(ref) if carried else None
    sample = context.observed.telemetry.get(ref)
    heard = None
    if sample is not None and carried is not None and moved:
        window = _since_last_move(member, carried, context.observed.taken_at, interval.elapsed_s)
        heard = _heard(sample, _current_work(member, carried, context), context, window)
    elif sample is not None:
        heard = _heard(sample, work, context, interval.elapsed_s)
    return _Evidence(member, work, reported, prior, heard, moved)


def _heard(sample: TelemetrySample, work: _Work, context: _StepContext, window_s: float | None) -> _Heard:
    """What the member's telemetry says over the last ``window_s`` seconds (None: every push it
    kept), against ``work``, under each arrival model."""
    observed, interval = context.observed, context.interval
    readings = (
        telemetry_capacity(
            sample,
            work.consumed,
            work.lag_growth,
            observed.taken_at.timestamp(),
            window_s=window_s if interval.gives_rates else None,
            arrivals=arrivals,
        )
        for arrivals in (RANDOM, STEADY)
    )
    return _Heard(*readings)


def _current_work(member: ObservedMember, carried: Carried, context: _StepContext) -> _Work:
    """What the partitions the member holds now did over the interval, whoever held them (no busy
    sample): what the telemetry of a member that gained or lost partitions is read against
    (:func:`_moved_reading`). All None when an offset or a consume sample is missing."""
    done = _partition_work(member, carried, context)
    if done is None:
        return _NO_WORK
    return _Work(
        None, sum(w.consumed for _, w in done), float(sum(w.lag_after - w.lag_before for _, w in done))
    )


def _since_last_move(member: ObservedMember, carried: Carried, now: datetime, elapsed_s: float) -> float:
    """Seconds since the member's last partition move within the interval (the carried recent
    moves), or the whole interval when none is known: the pushes since then are of its new load."""
    names = {member.member_id, member.key}
    times = [
        move.at
        for move in carried.recent_moves.get(member.group_id, ())
        if move.at > carried.taken_at and names & {move.from_member, move.to_member}
    ]
    return min(elapsed_s, (now - max(times)).total_seconds()) if times else elapsed_s


def _moved_reading(heard: TelemetryCapacity, prior: CarriedCapacity | None) -> TelemetryCapacity:
    """A member's telemetry read over an interval it gained or lost partitions in: used where it
    lowers its carried capacity by more than noise (:attr:`RateParameters.capacity_noise_ratio`),
    or where none is carried.

    Why: a capacity over-read (records at a steady spacing at low load: 2.1x) is otherwise carried
    while every plan moves the member's partitions, for it is measured only over an interval it held
    them through (bench/drain.py cap2x-z1.5-telemetry-regular, seed 21: 1.3-1.6x its capacity for 25
    minutes). Its partitions' consumption over the interval includes their old owners' before the
    move, so the reading is less sure than one over a held interval: a raise, or a change within
    noise, waits for one (docs/benchmarks/drain.md, "Telemetry read over a moved interval")."""
    if (
        prior is None
        or heard.capacity is None
        or heard.capacity * RateParameters.capacity_noise_ratio < prior.value
    ):
        return heard
    return TelemetryCapacity(
        None,
        heard.busy,
        f"telemetry over an interval it gained or lost partitions in read {heard.capacity:.1f}/s, "
        f"not below the carried {prior.value:.1f}/s by more than noise",
    )


#: (a member's telemetry reference, its readings now at another consume rate)
_ReferencePair = tuple[TelemetryReference, TelemetryReference]
#: group -> its members' reference pairs
_MovedReadings = Mapping[str, Sequence[_ReferencePair]]


def _arrivals_by_group(
    evidence: Sequence[_Evidence], context: _StepContext, moved: _MovedReadings
) -> dict[str, float]:
    """group -> the evidence that its telemetry reads as records at a steady spacing, averaged over
    time (``TelemetryParameters.arrivals_time_constant_s``) into the carried value: against its
    members measured at saturation (:func:`rebalance_advisor.domain.telemetry.arrivals_evidence`),
    else across its members' own load changes (``moved``:
    :func:`rebalance_advisor.domain.telemetry.consistency_evidence`, averaged from 0: one noisy pair
    must not decide; bench/drain.py cap2x-z1.5-telemetry, 20 seeds: overloaded 2.0 % taken as it is,
    1.7 % from 0). Kept as carried without either (or when the interval gives no rates), dropped with
    the group."""
    carried = context.carried.arrivals_evidence if context.carried is not None else {}
    groups = {m.group_id for m in context.observed.members}
    kept = {group: value for group, value in carried.items() if group in groups}
    if not context.interval.gives_rates:
        return kept
    tau = TelemetryParameters().arrivals_time_constant_s
    alpha = smoothing_weight(context.interval.elapsed_s, context.params, tau)
    saturated = _arrival_pairs(evidence, context)
    for group in sorted(saturated.keys() | moved.keys()):
        against_truth = arrivals_evidence(saturated.get(group, ()))
        if against_truth is not None:  # a truth to compare with: taken as it is when none is carried
            kept[group] = smooth_rate(against_truth, kept.get(group), alpha)
            continue
        drift = consistency_evidence(moved.get(group, ()))
        if drift is not None:  # noisier, a few pairs a run: averaged from no preference (0)
            kept[group] = smooth_rate(drift, kept.get(group, 0.0), alpha)
    return kept


def _telemetry_references(
    evidence: Sequence[_Evidence], context: _StepContext
) -> tuple[dict[str, list[_ReferencePair]], dict[MemberRef, TelemetryReference]]:
    """Each member's telemetry reference after this snapshot, and per group the members whose
    consume rate moved past ``TelemetryParameters.reference_rate_change`` since theirs (the pair,
    whose newer half becomes the reference). A member without readings now keeps its reference."""
    carried = context.carried.telemetry_references if context.carried is not None else {}
    factor = TelemetryParameters().reference_rate_change
    moved: dict[str, list[_ReferencePair]] = {}
    references: dict[MemberRef, TelemetryReference] = {}
    for e in evidence:
        ref = (e.member.group_id, e.member.key)
        then, now = carried.get(ref), _reference_now(e)
        if then is None or now is None:
            current = now or then
        elif then.moved(now, factor):
            moved.setdefault(e.member.group_id, []).append((then, now))
            current = now
        else:
            current = then
        if current is not None:
            references[ref] = current
    return moved, references


def _reference_now(evidence: _Evidence) -> TelemetryReference | None:
    """The member's telemetry read under both models at its consume rate over the interval; None
    when it pushed none, consumed nothing, or either model refuses the sample."""
    consumed = evidence.work.consumed
    if evidence.heard is None or not consumed or consumed <= 0:
        return None
    readings = evidence.heard.readings
    if readings.random is None or readings.steady is None:
        return None
    return TelemetryReference(consumed, readings)


def _arrival_pairs(
    evidence: Sequence[_Evidence], context: _StepContext
) -> dict[str, list[tuple[float, TelemetryReadings]]]:
    """group -> (capacity measured at saturation, what the telemetry reads now under both models) of
    its members whose measurement outranks their telemetry (:func:`saturation_outranks_telemetry`)."""
    pairs: dict[str, list[tuple[float, TelemetryReadings]]] = {}
    for e in evidence:
        heard = e.telemetry_asked
        if heard is None or e.prior is None:
            continue
        if saturation_outranks_telemetry(e.prior, context.observed.taken_at, context.params) is None:
            continue
        measured = max(e.prior.value, e.work.consumed or 0.0)  # as next_capacity raises it
        pairs.setdefault(e.member.group_id, []).append((measured, heard.readings))
    return pairs


def _member_estimate(evidence: _Evidence, context: _StepContext, steady: str | None) -> _MemberEstimate:
    """The capacity rule for one member: a busy sample, else its own report, else its telemetry
    (read as records at a steady spacing when its group's are: ``steady``), smoothed into the
    carried value (:func:`capacity_sample`, :func:`next_capacity`)."""
    observed, params, interval = context.observed, context.params, context.interval
    member, prior, reported = evidence.member, evidence.prior, evidence.reported
    busy, consumed = evidence.work.busy, evidence.work.consumed
    heard, asked = None, evidence.telemetry_asked
    if asked is not None:
        heard = saturation_outranks_telemetry(prior, observed.taken_at, params) or asked.read_as(
            STEADY if steady else RANDOM
        )
        if evidence.moved:
            heard = _moved_reading(heard, prior)
    sample, fresh_source = capacity_sample(busy, reported, heard.capacity if heard else None)
    source = fresh_source or (prior.source if prior is not None else "measured")
    own_report = source in ("reported", TELEMETRY_SOURCE)
    if own_report and not interval.gives_rates:  # nothing to smooth over: taken as it is
        prior = None
    age = (observed.taken_at - prior.at).total_seconds() if prior is not None else 0.0
    value = next_capacity(
        sample,
        prior.value if prior else None,
        age,
        interval.elapsed_s,
        params,
        consumed,
        own_report,
        prior.sample_count if prior else None,
    )
    at = None if value is None else (observed.taken_at if value.fresh or prior is None else prior.at)
    own = [context.rates.consume.get((member.group_id, t, p), _UNKNOWN).rate for t, p in member.partitions]
    known = [r for r in own if r is not None]
    measured = None if value is None else value.value
    note = heard.reason if heard is not None and heard.capacity is None else None
    if steady is not None and source == TELEMETRY_SOURCE and note is None:
        note = steady
    count = None if value is None else value.sample_count
    work = evidence.work
    late = work.busy is None and fell_behind(
        work.lag_growth, work.in_flight, params.growth_sample_member_share
    )
    return _MemberEstimate(member, measured, at, source, sum(known) if known else None, note, count, late)


_UNKNOWN = RateEstimate(None)


def _held_throughout(member: ObservedMember, carried: Carried) -> bool:
    """Whether the member held exactly its partitions over the whole interval, as far as the carried
    owners tell: it owned each of them then, and as many as now (one that lost one is not measured)."""
    if not member.partitions:
        return False
    mine = [(member.group_id, t, p) for t, p in member.partitions]
    if any(carried.owners.get(k) != member.key for k in mine):
        return False
    return carried.held_counts[(member.group_id, member.key)] == len(mine)


class _Work(NamedTuple):
    """What a member did over the interval: its busy sample, Σ consume samples, Σ lag growth."""

    busy: float | None
    consumed: float | None
    lag_growth: float | None
    #: Σ its partitions' backlog floors: lag that is records in flight, not backlog
    in_flight: float = 0.0


_NO_WORK = _Work(None, None, None)


class _PartitionWork(NamedTuple):
    """What one partition did over the interval: its lag at both ends and its consume sample."""

    lag_before: int
    lag_after: int
    consumed: float


def _partition_work(
    member: ObservedMember, carried: Carried, context: _StepContext
) -> list[tuple[TopicPartition, _PartitionWork]] | None:
    """Per partition the member holds now, in its order, what it did over the interval, whoever held
    it; None when an offset or a consume sample is missing."""
    observed, samples = context.observed, context.samples
    done: list[tuple[TopicPartition, _PartitionWork]] = []
    for topic, partition in member.partitions:
        gtp, tp = (member.group_id, topic, partition), (topic, partition)
        e0, c0 = carried.lag_ends.get(tp), carried.committed.get(gtp)
        e1, c1 = observed.lag_ends.get(tp), observed.committed.get(gtp)
        if e0 is None or c0 is None or e1 is None or c1 is None or gtp not in samples:
            return None
        done.append((tp, _PartitionWork(e0 - c0, e1 - c1, samples[gtp])))
    return done


def _busy_sample(member: ObservedMember, carried: Carried, context: _StepContext) -> _Work:
    """(:func:`busy_capacity_sample`, Σ consume samples, Σ lag growth) of a member that held its
    partitions over the interval; all None when an offset or a consume sample is missing. The
    backlog floor of a partition whose produce rate is unknown is 0."""
    params, rates = context.params, context.rates
    done = _partition_work(member, carried, context)
    if done is None:
        return _NO_WORK
    before = [w.lag_before for _, w in done]
    after = [w.lag_after for _, w in done]
    consumed = [w.consumed for _, w in done]
    floors = [(rates.produce.get(tp, _UNKNOWN).rate or 0.0) * params.busy_backlog_s for tp, _ in done]
    growth = context.interval.elapsed_s >= params.growth_sample_min_interval_s
    # the bound is NumPy's (pairwise) sum, as the simulator first summed its arrays: bench/drain.py's
    # results stay identical to the last bit (the busy sample's own sum is a plain one, as before)
    busy = busy_capacity_sample(before, after, consumed, floors, growth, params.growth_sample_member_share)
    return _Work(busy, float(np.sum(consumed)), float(sum(after) - sum(before)), float(sum(floors)))


class CarriedPerMember(NamedTuple):
    """What a step carries per member besides its measured capacity, stored beside it (the store
    loads it back in this shape)."""

    references: Mapping[MemberRef, TelemetryReference]
    proven: Mapping[MemberRef, ProvenRate]


def next_proven_rate(
    prior: ProvenRate | None, kept_up: float | None, now: datetime, params: RateParameters
) -> ProvenRate | None:
    """A member's proven rate after an interval in which it kept up at ``kept_up`` records/s (None:
    it was busy, or did not hold its partitions throughout): the higher of the two, the carried one
    while it is at most ``capacity_max_age_s`` old (a member redeployed slower is not held to it)."""
    if prior is not None and (now - prior.at).total_seconds() > params.capacity_max_age_s:
        prior = None
    if kept_up is None or kept_up <= 0 or (prior is not None and kept_up <= prior.value):
        return prior
    return ProvenRate(kept_up, now)


def fell_behind(
    lag_growth: float | None,
    in_flight: float,
    member_share: float = RateParameters.growth_sample_member_share,
) -> bool:
    """Whether a member that held its partitions fell behind: its lag as a whole grew by more than
    ``member_share`` of its partitions' floors (``in_flight``), more than records in flight explain,
    though no partition's backlog may have measured it: the growth sample's own test
    (:func:`busy_capacity_sample`). Its own rate is then what it can do, not a lower bound
    (:func:`unmeasured_estimate`)."""
    return lag_growth is not None and lag_growth > member_share * in_flight


def _kept_up(work: _Work, elapsed_s: float) -> float | None:
    """What a member consumed per second over an interval without backlog, less the part of any lag
    it drained that was records in flight: commits late at the start must not read as a faster member
    (a proven rate keeps the highest sample, and would keep that noise), while a backlog it drained
    was real work."""
    if work.busy is not None or work.consumed is None or work.lag_growth is None or elapsed_s <= 0:
        return None
    drained = max(0.0, -work.lag_growth)
    return work.consumed - min(drained, work.in_flight) / elapsed_s


def _proven_rates(evidence: Sequence[_Evidence], context: _StepContext) -> dict[MemberRef, ProvenRate]:
    """(group, member key) -> proven rate of each member in the snapshot (:func:`next_proven_rate`);
    a member that left is dropped."""
    carried = context.carried.proven_rates if context.carried is not None else {}
    out: dict[MemberRef, ProvenRate] = {}
    for e in evidence:
        ref = (e.member.group_id, e.member.key)
        kept_up = _kept_up(e.work, context.interval.elapsed_s)
        proven = next_proven_rate(carried.get(ref), kept_up, context.observed.taken_at, context.params)
        if proven is not None:
            out[ref] = proven
    return out


def _filled_capacities(
    estimates: Sequence[_MemberEstimate], observed: Observed, params: RateParameters, kept: CarriedPerMember
) -> dict[MemberRef, MemberCapacity]:
    """(group, member id) -> capacity: measured ones as they are, the rest filled per group
    (:func:`fill_capacities`, no estimate under a proven rate); each with the member's telemetry
    reference and proven rate, stored beside it."""
    by_group: dict[str, list[_MemberEstimate]] = {}
    for e in estimates:
        by_group.setdefault(e.member.group_id, []).append(e)
    out: dict[MemberRef, MemberCapacity] = {}
    for group_id, members in by_group.items():
        filled = fill_capacities(
            [e.measured for e in members],
            [e.own_rate for e in members],
            observed.group_capacity.get(group_id),
            params.unmeasured_capacity_factor,
            [e.member.configured_capacity for e in members],
            [e.source for e in members],
            [p.value if (p := kept.proven.get((group_id, e.member.key))) else None for e in members],
            [e.behind for e in members],
        )
        for e, (value, source) in zip(members, filled, strict=True):
            measured = source in MEASURED_CAPACITY_SOURCES
            ref = (group_id, e.member.key)
            out[(group_id, e.member.member_id)] = MemberCapacity(
                value,
                source,
                e.at if measured else None,
                e.note,
                kept.references.get(ref),
                kept.proven.get(ref),
                e.sample_count if measured else None,
            )
    return out


def _next_carried(
    carried: Carried | None,
    observed: Observed,
    rates: SnapshotRates,
    estimates: Sequence[_MemberEstimate],
    params: RateParameters,
    per_member: CarriedPerMember,
) -> Carried:
    """What the next step needs of this snapshot: what the store saves with it and loads back."""
    cutoff = observed.taken_at - timedelta(seconds=params.recent_moves_s)
    recent = {
        g: kept
        for g, moves in (carried.recent_moves.items() if carried is not None else ())
        if (kept := tuple(m for m in moves if m.at >= cutoff))
    }
    return Carried(
        cluster=observed.cluster,
        taken_at=observed.taken_at,
        log_ends=observed.log_ends,
        lag_ends=observed.lag_ends,
        produce={k: r.rate for k, r in rates.produce.items()},
        committed=observed.committed,
        consume={k: r.rate for k, r in rates.consume.items()},
        owners={(m.group_id, t, p): m.key for m in observed.members for t, p in m.partitions},
        capacities={
            (e.member.group_id, e.member.key): CarriedCapacity(e.measured, e.at, e.source, e.sample_count)
            for e in estimates
            if e.measured is not None and e.at is not None
        },
        recent_moves=recent,
        arrivals_evidence=rates.arrivals_evidence,
        telemetry_references=per_member.references,
        proven_rates=per_member.proven,
        snapshot_id=observed.snapshot_id,
    )


def observe_snapshot(
    snapshot: Snapshot,
    carried: Carried | None,
    params: RateParameters | None = None,
    policy: CapacityPolicy | None = None,
    assigned: Mapping[str, Mapping[str, Sequence[TopicPartition]]] | None = None,
) -> Observed:
    """A stored snapshot as :func:`step` reads it.

    ``assigned``: group -> registered member -> the partitions its latest published plan gave it, for
    manual-assign (``assign()``) groups, which the broker lists without members; their members are
    measured against those. A group the snapshot lists with members is measured from those instead.
    Reports (:func:`reported_capacities`) count when written after the carried snapshot.
    """
    params = params or RateParameters()
    policy = policy or CapacityPolicy()
    members = _observed_members(snapshot, policy, assigned or {})
    groups = {m.group_id for m in members}
    isolation = snapshot.isolation_level
    cluster = cluster_key(snapshot.cluster_id, snapshot.bootstrap_servers)
    since = carried.taken_at if carried is not None and carried.cluster == cluster else None
    log_ends = {(p.topic, p.partition): p.log_end_offset for p in snapshot.partitions}
    return Observed(
        cluster=cluster,
        taken_at=snapshot.taken_at,
        log_ends=log_ends,
        lag_ends={(p.topic, p.partition): lag_end_offset(p, isolation) for p in snapshot.partitions}
        if isolation == "read_committed"
        else log_ends,  # lags are against the log end (lag.lag_end_offset)
        committed={(c.group_id, c.topic, c.partition): c.offset for c in snapshot.committed},
        members=tuple(members),
        reports=reported_capacities(snapshot, since, params),
        telemetry=telemetry_by_member(snapshot),
        group_capacity={g: v for g in sorted(groups) if (v := policy.for_group(g)) is not None},
        snapshot_id=snapshot.snapshot_id,
    )


def telemetry_by_member(snapshot: Snapshot) -> dict[MemberRef, TelemetrySample]:
    """(group, member key) -> the newest telemetry of each member the broker lists, matched by
    member id (the id the client pushes is the one the coordinator gave it)."""
    by_id = {(t.group, t.member_id): t for t in snapshot.telemetry}
    out: dict[MemberRef, TelemetrySample] = {}
    for g in snapshot.groups:
        for m in g.members:
            found = by_id.get((g.group_id, m.member_id))
            if found is not None:
                out[(g.group_id, member_key(m.member_id, m.group_instance_id))] = found
    return out


def _observed_members(
    snapshot: Snapshot, policy: CapacityPolicy, assigned: Mapping[str, Mapping[str, Sequence[TopicPartition]]]
) -> tuple[ObservedMember, ...]:
    """The members the broker lists, then the registered members of manual-assign groups it lists
    without members (listed members win: they are what the broker sees)."""
    members: list[ObservedMember] = []
    for g in snapshot.groups:
        for m in g.members:
            key = member_key(m.member_id, m.group_instance_id)
            configured = policy.for_member(g.group_id, key)
            members.append(ObservedMember(g.group_id, m.member_id, key, tuple(m.assignment), configured))
    listed = {m.group_id for m in members}
    for group_id, owned in assigned.items():
        if group_id not in listed:
            for name, parts in sorted(owned.items()):
                configured = policy.for_member(group_id, name)
                members.append(ObservedMember(group_id, name, name, tuple(parts), configured))
    return tuple(members)
