"""Capacities from KIP-714 client telemetry: the ``telemetry`` capacity source (pure, no I/O).

A consumer that processes on its poll thread is busy outside ``poll()``; its client pushes the share of
time it spent waiting inside (``poll.idle.ratio.avg``). Capacity = consume rate / busy share. The
clients' formulas are biased in ways measured by bench/telemetry_accuracy.py and corrected here per
client family (docs/operations/telemetry.md, "Accuracy"); the gates say when a sample is not used.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal

if TYPE_CHECKING:  # numpy is imported where the Java model runs: DAG files import this module
    import numpy as np

#: the capacity source's name (``snapshot_model.CAPACITY_SOURCES``)
SOURCE = "telemetry"
#: how records reach a group's consumers, as the corrections model it: at random (Poisson, the
#: default) or at a steady spacing (one at a time, as a producer on a timer sends them);
#: :func:`arrivals_evidence` says which fits a group
Arrivals = Literal["random", "steady"]
RANDOM: Arrivals = "random"
STEADY: Arrivals = "steady"


@dataclass(frozen=True)
class TelemetrySample:
    """The newest telemetry of one group member, as the broker plugin wrote it (times in epoch s)."""

    group: str
    member_id: str
    instance_id: str
    client_id: str
    software_name: str
    software_version: str
    idle_ratio: float | None
    idle_time: float
    records_consumed: float | None
    records_start: float
    records_time: float
    records_delta: bool
    push_interval_s: float
    received: float
    #: Java's mean time between two polls' starts (ms); None when not sent (librdkafka never does)
    time_between_poll_ms: float | None = None
    #: (client time in epoch s, idle ratio) of the member's last few pushes, oldest first, the newest
    #: included (the plugin keeps five within five push intervals: docs/operations/telemetry.md)
    recent_idle: tuple[tuple[float, float], ...] = ()

    @property
    def family(self) -> str:
        """``java`` (Apache Kafka's Java client) or ``librdkafka`` (every other client sent so far)."""
        return "java" if self.software_name.startswith("apache-kafka-java") else "librdkafka"


@dataclass(frozen=True)
class TelemetryParameters:
    """The gates and the per-family correction of the telemetry source (one place for each)."""

    #: below this busy share the sample says little (a consumer mostly waiting: capacity = rate / a
    #: small number, whose error explodes); no sample
    min_busy: float = 0.2
    #: a sample older than this many push intervals (at the snapshot's time) is ignored: the member
    #: left, or its client stopped pushing; the writer flushes every few seconds, so one is allowed
    max_age_intervals: float = 2.0
    #: off-thread processing: a member whose lag grew by more than this many seconds of its consume
    #: rate over the interval while its telemetry says it had idle time to spare is not trusted (as
    #: ``RateParameters.busy_backlog_s``: lag within it is records in flight, not a backlog)
    lag_growth_s: float = 10.0
    #: ... "idle time to spare": busy share below this
    off_thread_busy: float = 0.8
    #: how the recent pushes within the snapshot interval are summarised: "median" (default: one
    #: odd push does not decide; measured against "mean" and "newest" in
    #: docs/benchmarks/telemetry-accuracy.md, "One push or a few"), "mean" or "newest"
    summary: str = "median"
    #: a starved Java consumer: its polls return more than this many times the records the sensor
    #: model expects at the busy share it reads (docs/benchmarks/telemetry-accuracy.md, "A starved
    #: Java consumer"); its reading is not the model's and is distrusted
    starved_batch_factor: float = 3.0
    #: time constant (s) over which a group's evidence for the arrival models is averaged
    #: (:func:`arrivals_evidence`): one snapshot's readings are off by up to 20 % each, about the
    #: models' difference near full load (bench/drain.py cap2x-z1.5-telemetry-regular, 20 seeds:
    #: overloaded 8.3 % decided snapshot by snapshot, 5.2 % at 600 s, 4.9 % at 1,800 s)
    arrivals_time_constant_s: float = 1800.0
    #: a member's readings count as evidence of their own (:func:`consistency_evidence`) once its
    #: consume rate differs from its reference's by this factor, either way: the two models part by
    #: busy share, and over a smaller change one snapshot's noise outweighs their difference
    reference_rate_change: float = 1.25


@dataclass(frozen=True)
class TelemetryCapacity:
    """What the telemetry says of one member's capacity: a value, or None and why not."""

    capacity: float | None
    busy: float | None
    reason: str


@dataclass(frozen=True)
class TelemetryReadings:
    """What one member's telemetry reads under each arrival model (None: refused under it)."""

    random: float | None
    steady: float | None


@dataclass(frozen=True)
class TelemetryReference:
    """One member's telemetry readings at the consume rate they were read at, kept until it consumes
    at another rate (:attr:`TelemetryParameters.reference_rate_change`)."""

    consumed: float
    readings: TelemetryReadings

    def moved(self, now: TelemetryReference, factor: float) -> bool:
        """Whether ``now`` was read at a consume rate at least ``factor`` away from this one's."""
        return max(now.consumed / self.consumed, self.consumed / now.consumed) >= factor


def consistency_evidence(pairs: Sequence[tuple[TelemetryReference, TelemetryReference]]) -> float | None:
    """Which way a group's telemetry drifts across its members' own load changes: each pair is a
    member's reference and its readings now, at another consume rate. Per pair, how much the two
    models' mean capacity (geometric) fell as the member's load rose (or rose as it fell), in log
    units; the median over pairs; positive for records at a steady spacing; None without a pair.

    Why: a member's capacity does not change with its load, but each model's error where it is wrong
    does, growing as the member idles (docs/operations/telemetry.md, "Records at a steady spacing"):
    the random model over-reads steady records, so its capacity falls as load rises; the steady model
    under-reads random ones, so its capacity rises. The signs differ, so noise, which the models
    amplify differently, averages out instead of favouring one. Needs no member measured at
    saturation, which a group kept under its capacity never gives.
    """
    drifts = [
        math.copysign(1.0, then.consumed - now.consumed)
        * math.log(
            math.sqrt(
                now.readings.random * now.readings.steady / (then.readings.random * then.readings.steady)
            )
        )
        for then, now in pairs
        if then.readings.random and then.readings.steady and now.readings.random and now.readings.steady
    ]
    return statistics.median(drifts) if drifts else None


def arrivals_evidence(pairs: Sequence[tuple[float, TelemetryReadings]]) -> float | None:
    """How much closer a group's telemetry reads as records at a steady spacing than at random,
    against its members measured at saturation: each pair is a member's measured capacity and what
    its telemetry reads now under both models. The median |log(read / measured)| of the random
    model minus the steady model's; positive when the steady one reads closer; None without a pair.

    Why: the correction models records that arrive at random; records at a steady spacing make it
    read high (+33 to +67 % at half busy on a broker: docs/benchmarks/telemetry-accuracy.md,
    "Regular arrivals"), and each member learnt only by saturating costs an interval of overload.
    A group's members read the same topics, so they share the pattern; the models differ by busy
    share, so a plain ratio would not carry from one member to another.
    """
    usable = [(m, r.random, r.steady) for m, r in pairs if m > 0 and r.random and r.steady]
    if not usable:
        return None
    random_off = statistics.median(abs(math.log(read / m)) for m, read, _ in usable)
    steady_off = statistics.median(abs(math.log(read / m)) for m, _, read in usable)
    return random_off - steady_off


def steady_arrivals(evidence: float | None) -> str | None:
    """Why a group's telemetry is read as records at a steady spacing (its averaged
    :func:`arrivals_evidence` is positive), or None: read as random arrivals, the default."""
    if evidence is None or evidence <= 0:
        return None
    return (
        "telemetry read as records at a steady spacing: it fits the group's evidence (members measured "
        f"at saturation, else members' readings at two loads) {math.expm1(evidence):.0%} better so"
    )


def busy_share(sample: TelemetrySample, arrivals: Arrivals = RANDOM) -> float | None:
    """The share of time the member worked outside ``poll()``, corrected for its client's formula.

    See :func:`correct_busy`; None when the sample carries no usable idle ratio.
    """
    return _corrected_busy(sample.family, sample.idle_ratio, arrivals)


def _corrected_busy(family: str, idle: float | None, arrivals: Arrivals = RANDOM) -> float | None:
    """One idle ratio as a corrected busy share; None when it is missing, NaN or outside [0, 1]."""
    if idle is None or not math.isfinite(idle) or not 0.0 <= idle <= 1.0:
        return None
    return correct_busy(family, 1.0 - idle, arrivals)


def summary_busy(
    sample: TelemetrySample,
    now: float,
    window_s: float | None,
    summary: str = "median",
    arrivals: Arrivals = RANDOM,
) -> float | None:
    """The member's busy share over its recent pushes within ``window_s`` before ``now`` (all the
    plugin kept when None), summarised; the newest push's alone when none is recent or for "newest".

    The correction is monotonic, so the median of the corrected shares is the median push's.
    """
    recent = (
        _corrected_busy(sample.family, idle, arrivals)
        for at, idle in sample.recent_idle
        if window_s is None or at >= now - window_s
    )
    busies = [busy for busy in recent if busy is not None]
    if summary == "newest" or not busies:
        return busy_share(sample, arrivals)
    return statistics.median(busies) if summary == "median" else statistics.fmean(busies)


def correct_busy(family: str, reported_busy: float, arrivals: Arrivals = RANDOM) -> float:
    """The true busy share from the one a client reports (bench/telemetry_accuracy.py, "Calibration").

    Piecewise linear through the points modelled for the family and the arrivals, clamped to [0, 1].
    """
    table = STEADY_CALIBRATION if arrivals == STEADY else CALIBRATION
    return correct_busy_through(table.get(family, ((0.0, 0.0), (1.0, 1.0))), reported_busy)


def correct_busy_through(points: tuple[tuple[float, float], ...], reading: float) -> float:
    """Piecewise linear through ``points`` (ascending x), clamped to [0, 1]."""
    if reading <= points[0][0]:
        return max(points[0][1], 0.0)
    for (x0, y0), (x1, y1) in zip(points, points[1:], strict=False):
        if reading <= x1:
            return min(max(y0 + (y1 - y0) * (reading - x0) / (x1 - x0), 0.0), 1.0)
    return min(points[-1][1], 1.0)


def reported_busy(family: str, true_busy: float) -> float:
    """The busy share a client of ``family`` reports for ``true_busy``: :func:`correct_busy` run
    backwards through the same points (what the simulator pushes, read back exactly)."""
    points = CALIBRATION.get(family, ((0.0, 0.0), (1.0, 1.0)))
    return correct_busy_through(tuple((y, x) for x, y in points), true_busy)


def exponential_integral(x: float) -> float:
    """E1(x) for 0 < x <= 1 by its power series (converges in a few dozen terms there)."""
    total, term = 0.0, 1.0
    for k in range(1, 60):
        term *= -x / k
        total += term / k
    return -0.5772156649015329 - math.log(x) - total


def scaled_exponential_integral(x: float) -> float:
    """e^x E1(x) for x > 0: the series up to 1, E1's continued fraction above (no overflow)."""
    if x <= 1.0:
        return math.exp(x) * exponential_integral(x)
    # e^x E1(x) = 1 / (x + 1 - 1 / (x + 3 - 4 / (x + 5 - ...))), evaluated by the modified Lentz method
    denominator = x + 1.0
    lentz_c, lentz_d = 1e300, 1.0 / denominator
    value = lentz_d
    for i in range(1, 200):
        numerator = -float(i * i)
        denominator += 2.0
        lentz_d = 1.0 / (numerator * lentz_d + denominator)
        lentz_c = denominator + numerator / lentz_c
        step = lentz_c * lentz_d
        value *= step
        if abs(step - 1.0) < 1e-15:
            break
    return value


def _wait_share(x: float) -> float:
    """Mean of W / (W + b c) with W ~ Exp(l) and x = l b c: 1 - x e^x E1(x)."""
    return 1.0 - x * scaled_exponential_integral(x)


def librdkafka_reported_busy(true_busy: float) -> float:
    """The busy share librdkafka reports for a consumer busy ``true_busy`` of the time that takes one
    record per ``poll()`` and spends a fixed time on each, records arriving at random (Poisson).

    librdkafka averages, per poll cycle (poll start to next poll start), the share spent inside
    ``poll()`` — per cycle, not per second. With cost c and arrival rate l (true busy r = l c), a
    cycle finds its record already waiting with probability r (queueing: the share of departures
    that leave work behind, M/D/1) and idles 0; otherwise it waits W ~ Exp(l) and idles W / (W + c),
    whose mean is 1 - r e^r E1(r). So idle = (1 - r)(1 - r e^r E1(r)) and busy reads high at low load.
    """
    if true_busy <= 0.0:
        return 0.0
    if true_busy >= 1.0:
        return 1.0
    r = true_busy
    return 1.0 - (1.0 - r) * (1.0 - r * math.exp(r) * exponential_integral(r))


def java_reported_busy(true_busy: float) -> float:
    """The busy share (1 - idle) Java's sensor reports for a consumer busy ``true_busy`` of the time
    that handles every record a poll returns at a fixed cost c, records arriving at random.

    Java's fetcher buffers what arrived while the consumer worked, so the poll after a batch of b
    records returns at once with the N ~ Poisson(r b) that came meanwhile or, when none came, waits
    W ~ Exp(l) for one. The sensor records per poll wait / (wait + time since the previous poll's
    *start*) (KAFKA-17503) and averages per poll: a poll after a wait idles W / (W + W' + c), mean
    (1 - r + r^2 e^r E1(r)) / 2; one after a batch of b idles W / (W + b c). The shares of polls
    in each state come from the chain over batch sizes (:func:`_batch_chain`).
    """
    if true_busy <= 0.0:
        return 0.5
    if true_busy >= 1.0:
        return 1.0
    import numpy as np

    r = true_busy
    shares, batches, none_came = _batch_chain(r)
    after_wait = 0.5 * (1.0 - r + r * r * scaled_exponential_integral(r))
    # a poll after a batch that left nothing to wait for (e^-rb below 1e-15) adds nothing
    pairs = zip(batches[1:], none_came[1:], strict=True)
    idle_after = np.array([after_wait, *(_wait_share(r * b) if p > 1e-15 else 0.0 for b, p in pairs)])
    return 1.0 - float(np.sum(shares * none_came * idle_after))


def java_reported_busy_regular(true_busy: float) -> float:
    """The busy share (1 - idle) Java's sensor reports when records arrive at a steady spacing (one
    batch every tau, as a producer that sends on a timer), not at random.

    Each poll then waits the same tau (1 - r) and the previous poll started tau before, so every
    poll records tau (1 - r) / (tau (1 - r) + tau): idle = (1 - r) / (2 - r) whatever the batch.
    Read through the Poisson model (:func:`correct_busy`) that is less busy than it is: capacity
    over-read by 63 % at half busy (x 1.99 at 20 %, refused there by the 20 % gate; +1 % at 90 %),
    more than measured on Java (+33 to +41 %) and about librdkafka's (+67 %):
    docs/benchmarks/telemetry-accuracy.md, "Regular arrivals". What the simulator pushes for
    ``Scenario.telemetry_arrivals`` "regular".
    """
    r = min(max(true_busy, 0.0), 1.0)
    return 1.0 - (1.0 - r) / (2.0 - r)


def java_records_per_poll(true_busy: float) -> float:
    """The mean records a Java poll returns for a consumer busy ``true_busy`` of the time, as
    :func:`java_reported_busy` models it (a poll after a wait returns one; one after a batch of b
    the records that came meanwhile)."""
    import numpy as np

    shares, batches, none_came = _batch_chain(min(max(true_busy, 0.01), 0.98))
    # a state's share is of polls; the poll leaving state b returns the records it found there
    return float(np.sum(shares * batches))


def _batch_chain(r: float) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Stationary shares of polls per state, each state's batch size, and the chance no record came.

    State 0: the poll waited and returned one record; state b >= 1: it found b records waiting.
    Batches past 5 / (1 - r) + 10 are folded into the last state (their share is negligible).
    """
    import numpy as np

    size = int(5.0 / (1.0 - r)) + 10
    batches = np.concatenate(([1.0], np.arange(1.0, size + 1.0)))
    counts = np.arange(size + 1.0)
    log_factorials = np.array([math.lgamma(n + 1.0) for n in counts])
    means = r * batches[:, None]
    arrivals = np.exp(-means + counts[None, :] * np.log(means) - log_factorials[None, :])
    arrivals[:, -1] += 1.0 - arrivals.sum(axis=1)
    # column n of ``arrivals`` is the next state (n = 0: none came, it waits: state 0)
    balance = arrivals.T - np.eye(size + 1)
    balance[-1, :] = 1.0
    target = np.zeros(size + 1)
    target[-1] = 1.0
    shares = np.linalg.solve(balance, target)
    return shares, batches, arrivals[:, 0]


#: (reported busy, true busy) points per client family (docs/benchmarks/telemetry-accuracy.md has
#: the runs of bench/telemetry_accuracy.py that check them); no point is fitted to a load:
#: - java (4.3.1): each poll records poll time / (poll time + time since the previous poll's *start*),
#:   which already holds the previous poll (KAFKA-17503): :func:`java_reported_busy`, inverted
#:   through its values at every 2 % of true busy. On the readings taken at load 4.5-13 it gives
#:   capacities within -5 to +5 % at 20/50/90 % busy, where busy = 1 - 2 x idle gave -13 to +8 %.
#: - librdkafka (2.16.0): idle per poll cycle, averaged per cycle: :func:`librdkafka_reported_busy`,
#:   inverted through its values at every 2 % of true busy. At load 5 it gives capacities within
#:   -7 to 0 % at 20/50/90 % busy; on a machine at load 20 it reads busier (-27 to -46 %: capacity
#:   under-estimated, the safe side). The table fitted at load 37-56 before it over-estimated
#:   capacities by 20-30 % on a quiet machine.
class _ModelPoints(dict):
    """Each family's points, computed from its model on first use: the Java model needs numpy, and
    the DAG files that import this module must stay light."""

    def __init__(self, models: dict[str, Callable[[float], float]]) -> None:
        super().__init__()
        self.models = models

    def get(self, family: str, default: tuple | None = None) -> tuple | None:  # type: ignore[override]
        if family not in self and family in self.models:
            self[family] = tuple((self.models[family](step / 50), step / 50) for step in range(51))
        return super().get(family, default)


CALIBRATION: dict[str, tuple[tuple[float, float], ...]] = _ModelPoints(
    {"java": java_reported_busy, "librdkafka": librdkafka_reported_busy}
)
#: the same for records at a steady spacing (docs/benchmarks/telemetry-accuracy.md, "Regular
#: arrivals"): Java's sensor as :func:`java_reported_busy_regular` models it; librdkafka's per-cycle
#: average is then the true share as it reads (no points)
STEADY_CALIBRATION: dict[str, tuple[tuple[float, float], ...]] = _ModelPoints(
    {"java": java_reported_busy_regular}
)


def telemetry_capacity(
    sample: TelemetrySample | None,
    consume_rate: float | None,
    lag_growth: float | None,
    now: float,
    params: TelemetryParameters = TelemetryParameters(),
    window_s: float | None = None,
    arrivals: Arrivals = RANDOM,
) -> TelemetryCapacity:
    """The member's capacity from its telemetry over the last snapshot interval, with the gates.

    ``consume_rate``: records/s the member consumed over the interval; ``lag_growth``: how much its
    lag grew over it (records, negative when it shrank); ``now``: the snapshot's time (epoch s);
    ``window_s``: the interval's length (the pushes within it are summarised: :func:`summary_busy`);
    ``arrivals``: which model corrects the reading (:data:`RANDOM` or :data:`STEADY`).
    """
    if sample is None:
        return TelemetryCapacity(None, None, "no telemetry")
    age = now - max(sample.idle_time, sample.received)
    if age > params.max_age_intervals * max(sample.push_interval_s, 1.0):
        return TelemetryCapacity(None, None, f"telemetry {age:.0f} s old")
    busy = summary_busy(sample, now, window_s, params.summary, arrivals)
    if busy is None:
        return TelemetryCapacity(None, None, "no idle ratio in the telemetry")
    if not consume_rate or consume_rate <= 0 or not math.isfinite(consume_rate):
        return TelemetryCapacity(None, busy, "consumed nothing over the interval")
    distrust = _distrusted(sample, busy, consume_rate, lag_growth, params)
    if distrust is not None:
        return TelemetryCapacity(None, busy, distrust)
    if busy < params.min_busy:
        return TelemetryCapacity(None, busy, f"busy {busy:.0%} < {params.min_busy:.0%}: too idle to say")
    return TelemetryCapacity(consume_rate / busy, busy, f"{consume_rate:.1f}/s at {busy:.0%} busy")


def _distrusted(
    sample: TelemetrySample,
    busy: float,
    consume_rate: float,
    lag_growth: float | None,
    params: TelemetryParameters,
) -> str | None:
    """Why the reading is not the consumer the correction models, or None: processing off the poll
    thread (idle while the lag grows), or a Java consumer whose polls return far more records than
    the sensor model expects at its reading (starved of CPU, or batching)."""
    growing = lag_growth is not None and lag_growth > params.lag_growth_s * consume_rate
    if growing and busy < params.off_thread_busy:
        return (
            f"distrusted: idle {1 - busy:.0%} of the time while its lag grew by {lag_growth:.0f} "
            "(processing off the poll thread)"
        )
    between = sample.time_between_poll_ms
    if sample.family != "java" or between is None or not math.isfinite(between) or between <= 0:
        return None
    seen = consume_rate * between / 1000.0
    expected = java_records_per_poll(busy)
    if seen > params.starved_batch_factor * expected:
        return (
            f"distrusted: {seen:.1f} records per poll, the model expects {expected:.1f} at "
            f"{busy:.0%} busy (starved of CPU or batching)"
        )
    return None
