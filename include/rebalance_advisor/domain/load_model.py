"""The load model: what an assignment does to each member's lag over time (docs/architecture.md, "The load model").

For an assignment, member m has inflow Λ = Σ produce rates of its partitions (messages/s), backlog
B = Σ lags (messages) and capacity μ (messages/s). It is *overloaded* when Λ ≥ μ (its lag grows
without bound); otherwise its predicted catch-up time is T = B / (μ − Λ) seconds. The group's
predicted catch-up is the max over members. Partitions no member owns form a pseudo-member with
μ = 0: their lag grows at their produce rate, so any of them with lag or inflow makes the group's
catch-up infinite.

Unknowns (documented choices):
- produce rate unknown for some partitions: they get the group's median known rate; unknown for
  all (a first snapshot): every rate is 0, so the model plans on backlog alone (:attr:`LoadInputs.note`).
- capacity unknown for some members: they get the median of the slowest class of known capacities
  (with one class, the group's median; the one fill rule, ``estimates.fill_capacities``; snapshots
  and the simulator also raise it to 1.2 x a member's own consume rate, which a spec does not
  carry); unknown for all:
  capacities are *unknown* — no overload or catch-up time can be predicted, and the model only
  compares member load w = Λ + B / horizon ("equal capacities"): the throughput a member needs to
  be caught up within the horizon.

Pure NumPy over arrays indexed like :class:`~rebalance_advisor.domain.group_spec.GroupSpec`.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass

import numpy as np

from rebalance_advisor.domain.assignors._common import SMALL_PARTITIONS
from rebalance_advisor.domain.estimates import fill_capacities
from rebalance_advisor.domain.group_spec import GroupSpec
from rebalance_advisor.domain.interval_evidence import IntervalObservation


@dataclass(frozen=True, eq=False)
class LoadInputs:
    """A spec's rates and capacities with unknowns filled (module docstring); read-only arrays."""

    rate: np.ndarray  # float64 [P], messages/s
    capacity: np.ndarray | None  # float64 [M], messages/s; None = unknown for every member
    rates_known: bool  # False: no rate known, the model plans on backlog alone
    note: str  # how unknowns were filled, "" when everything was known


def load_inputs(spec: GroupSpec) -> LoadInputs:
    """Rates and capacities of ``spec`` with unknowns filled as the module docstring says."""
    notes = []
    raw = spec.produce_rate
    if raw is None:
        rate = np.zeros(spec.num_partitions)
        rates_known = False
        if spec.num_partitions:
            notes.append("no produce rates known yet: planned on backlog alone")
    else:
        unknown = np.isnan(raw)
        rate = raw.copy()
        if unknown.any():
            rate[unknown] = float(np.median(raw[~unknown]))
            notes.append(f"produce rate unknown for {int(unknown.sum())} partition(s): group median used")
        rates_known = True
    caps = spec.capacity
    if caps is not None:
        unknown = np.isnan(caps)
        if unknown.any():
            # the one fill rule (estimates.fill_capacities); no consume rates: the slowest class
            filled = fill_capacities([None if u else float(c) for u, c in zip(unknown, caps, strict=True)])
            caps = np.asarray([value for value, _ in filled], dtype=np.float64)
            notes.append(
                f"capacity unknown for {int(unknown.sum())} member(s): median of the slowest class used"
            )
    for arr in (rate, caps):
        if arr is not None:
            arr.setflags(write=False)
    return LoadInputs(rate, caps, rates_known, "; ".join(notes))


def with_interval_evidence(
    spec: GroupSpec,
    inputs: LoadInputs,
    interval: IntervalObservation | None,
    departure: float,
    growth_floor_s: float,
) -> LoadInputs:
    """``inputs`` with the last interval's evidence (domain/interval_evidence.py) taken in.

    - A partition whose produce rate over the last interval departs from the smoothed one by more
      than ``departure`` (a fraction of the smoothed rate) plans on the interval's rate: a step shows
      in full at the first snapshot after it instead of 63 % after τ.
    - A member that held its partitions throughout the interval and whose backlog grew by more than
      ``growth_floor_s`` seconds of its inflow did not keep up: its partitions plan on the interval's
      rates whatever ``departure`` says, and its capacity is at most what it consumed (the interval's
      inflow less the growth), so the rule sees it overloaded now. Without any capacity known, that
      one is the group's measured capacity and the others get the median of its slowest class
      (``fill_capacities``), as when a snapshot measures one member.

    ``departure`` and ``growth_floor_s`` are the guards against a single noisy interval: a caught-up
    consumer shows up to its commit interval of production as lag (bench/drain.py --commit-interval
    measures them).
    """
    if interval is None or not inputs.rates_known or not spec.num_partitions:
        return inputs
    keys = spec.partition_keys
    observed = np.fromiter((interval.rates.get(k, np.nan) for k in keys), np.float64, len(keys))
    before = np.fromiter((interval.lags_before.get(k, np.nan) for k in keys), np.float64, len(keys))
    rate = inputs.rate.copy()
    known = ~np.isnan(observed)
    departs = known & (np.abs(observed - rate) > departure * rate)
    rate[departs] = observed[departs]
    behind = _behind_members(spec, interval, observed, before, growth_floor_s)
    if not departs.any() and not behind:
        return inputs
    for m in behind:
        mine = spec.owner == m
        rate[mine] = observed[mine]
    caps = _at_most_consumed(inputs.capacity, behind, spec.num_members)
    for arr in (rate, caps):
        if arr is not None:
            arr.setflags(write=False)
    return dataclasses.replace(inputs, rate=rate, capacity=caps)


def _at_most_consumed(caps: np.ndarray | None, behind: dict[int, float], members: int) -> np.ndarray | None:
    """Capacities with each member that fell behind at most what it consumed (module docstring)."""
    consumed = {m: c for m, c in behind.items() if c > 0}
    if not consumed:
        return None if caps is None else caps.copy()
    if caps is None:
        filled = fill_capacities([consumed.get(m) for m in range(members)])
        return np.asarray([value for value, _ in filled], dtype=np.float64)
    out = caps.copy()
    for m, c in consumed.items():
        out[m] = min(out[m], c)
    return out


def _behind_members(
    spec: GroupSpec, interval: IntervalObservation, observed: np.ndarray, before: np.ndarray, floor_s: float
) -> dict[int, float]:
    """Members whose backlog grew across the interval while they held the same partitions: member
    index -> what they consumed per second over it (their interval inflow less the growth)."""
    out: dict[int, float] = {}
    for m, member_id in enumerate(spec.member_ids):
        if member_id not in interval.held_throughout:
            continue
        mine = spec.owner == m
        if not mine.any() or np.isnan(observed[mine]).any() or np.isnan(before[mine]).any():
            continue
        inflow = float(observed[mine].sum())
        growth = float(spec.lag[mine].sum() - before[mine].sum())
        if growth > floor_s * inflow and growth > 0:
            out[m] = inflow - growth / interval.seconds
    return out


def catch_up_time(backlog: np.ndarray, inflow: np.ndarray, capacity: np.ndarray) -> np.ndarray:
    """T = B / (μ − Λ) per member in seconds; ∞ when overloaded (Λ ≥ μ); 0 for no backlog."""
    backlog = np.asarray(backlog, dtype=np.float64)
    headroom = np.asarray(capacity, dtype=np.float64) - np.asarray(inflow, dtype=np.float64)
    # no np.errstate: the divisor is never 0 (1.0 where the result is not read), so no warning can
    # arise, and entering errstate cost more than the division on a small group
    return np.where(headroom > 0, backlog / np.where(headroom > 0, headroom, 1.0), np.inf)


def backlog_area(
    backlog: np.ndarray, inflow: np.ndarray, capacity: np.ndarray, horizon_s: float
) -> np.ndarray:
    """∫₀ᴴ B(t) dt per member (message-seconds), B(t) = max(B + (Λ − μ) t, 0) (the fluid lag curve)."""
    b = np.asarray(backlog, dtype=np.float64)
    slope = np.asarray(inflow, dtype=np.float64) - np.asarray(capacity, dtype=np.float64)
    h = float(horizon_s)
    t_zero = np.where(slope < 0, b / np.where(slope < 0, -slope, 1.0), np.inf)  # divisor never 0
    t_end = np.minimum(t_zero, h)
    return b * t_end + slope * t_end * t_end / 2.0


def lag_curves(
    backlog: np.ndarray, inflow: np.ndarray, capacity: np.ndarray, times_s: np.ndarray
) -> np.ndarray:
    """Predicted lag B(t) = max(B + (Λ − μ) t, 0) per member (rows) at each time (columns)."""
    b = np.asarray(backlog, dtype=np.float64)[:, None]
    slope = (np.asarray(inflow, dtype=np.float64) - np.asarray(capacity, dtype=np.float64))[:, None]
    return np.maximum(b + slope * np.asarray(times_s, dtype=np.float64)[None, :], 0.0)


@dataclass(frozen=True)
class LoadSummary:
    """What the decision rules compare about one assignment under the load model.

    ``max_catch_up_s`` and ``backlog_area`` are None when capacities are unknown; ``max_catch_up_s``
    is ``inf`` when a member is overloaded or partitions no one owns have lag or inflow.
    ``max_load`` is the max member load w = Λ + B / horizon (messages/s), divided by μ when known.
    """

    overloaded: int
    max_catch_up_s: float | None
    max_load: float
    backlog_area: float | None
    unowned_backlog: int = 0
    unowned_inflow: float = 0.0
    #: max member utilisation Λ / usable μ (>= 1: overloaded); 0 without capacities
    worst_utilisation: float = 0.0
    #: Σ (Λ − usable μ)+ over members, messages/s: how fast overloaded members' backlog grows
    excess_inflow: float = 0.0
    #: Σ ((Λ / usable μ − 1)+)² over members (:func:`overload_severity`): what the rule ranks overload by
    overload_severity: float = 0.0


@dataclass(frozen=True)
class MemberLoad:
    """Per member (member order) inflow, backlog, capacity and predicted catch-up (∞ = overloaded)."""

    member_ids: tuple[str, ...]
    inflow: tuple[float, ...]
    backlog: tuple[int, ...]
    capacity: tuple[float, ...] | None
    catch_up_s: tuple[float, ...] | None


def member_totals(spec: GroupSpec, owners: np.ndarray, rate: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(inflow, backlog) per member for ``owners`` (-1 = unowned, not counted)."""
    if len(owners) <= SMALL_PARTITIONS and owners.max(initial=-1) >= 0:  # none held: bincount's int zeros
        return _small_member_totals(spec, owners, rate)
    held = owners >= 0
    who = owners[held]
    inflow = np.bincount(who, weights=rate[held], minlength=spec.num_members)
    backlog = np.bincount(who, weights=spec.lag[held].astype(np.float64), minlength=spec.num_members)
    return inflow, np.rint(backlog).astype(np.int64)


def _small_member_totals(
    spec: GroupSpec, owners: np.ndarray, rate: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """:func:`member_totals` in plain Python: the floats added in ``np.bincount``'s order (partition
    order, from 0.0), so the same sums to the last bit (tests/unit/test_metrics_paths.py)."""
    inflow, backlog = [0.0] * spec.num_members, [0.0] * spec.num_members
    for m, r, lag in zip(owners.tolist(), rate.tolist(), spec.lag.tolist(), strict=True):
        if m >= 0:
            inflow[m] += r
            backlog[m] += float(lag)
    return np.asarray(inflow, dtype=np.float64), np.rint(np.asarray(backlog, dtype=np.float64)).astype(
        np.int64
    )


def overload_severity(inflow: np.ndarray, usable: np.ndarray) -> tuple[float, float, float]:
    """(worst utilisation, excess inflow, severity) of members with ``inflow`` against ``usable``.

    Severity Σ ((u − 1)+)² over member utilisations u = Λ / μ: a member's time lag grows at 1 − 1/u
    of the clock, so one member at 150 % (severity 0.25) is worse than three at 101 % (0.0003), which
    a count of overloaded members would prefer (docs/architecture.md, "Imbalance and decisions"). The
    square makes spreading an overload over more members better than concentrating it, and is 0 iff
    no member is overloaded.
    """
    if not len(inflow):
        return 0.0, 0.0, 0.0
    util = np.where(  # divisor never 0: no np.errstate needed (catch_up_time)
        usable > 0, inflow / np.where(usable > 0, usable, 1.0), np.where(inflow > 0, np.inf, 0.0)
    )
    over = np.maximum(util - 1.0, 0.0)
    excess = float(np.maximum(inflow - usable, 0.0).sum())
    return float(util.max()), excess, float((over * over).sum())


def usable_capacity(caps: np.ndarray, margin: float) -> np.ndarray:
    """The capacity the rules plan against: ``(1 - margin)`` of it (the rule's ``capacity_margin``),
    a margin for rates estimated over past minutes that drift."""
    return caps * (1.0 - margin) if margin > 0 else caps


def summarize(
    spec: GroupSpec,
    owners: np.ndarray,
    inputs: LoadInputs,
    horizon_s: float,
    pause_s: float = 0.0,
    margin: float = 0.0,
) -> tuple[LoadSummary, MemberLoad]:
    """The load model of ``owners``; ``pause_s`` > 0 charges a handover pause to moved partitions.

    ``margin`` (the rule's ``capacity_margin``): the summary the rules compare counts a member
    overloaded at inflow >= (1 - margin) x capacity and predicts catch-up against that usable
    capacity, a margin for rates that are estimated over past minutes and drift; the per-member
    predictions (:class:`MemberLoad`, what people see) stay against the full capacity.

    A moved partition (one whose owner changes, or an unowned one that gets an owner) is not
    consumed for ``pause_s`` seconds while its producers go on, so its new owner starts with
    ``rate × pause_s`` more backlog — a slight overcharge (the member's other partitions are served
    meanwhile), so a plan is recommended only when it pays even so.
    """
    inflow, backlog, backlog_f, load, unowned = _member_loads(spec, owners, inputs, horizon_s, pause_s)
    caps = inputs.capacity
    if caps is None:
        return _no_capacity_summary(load, unowned), MemberLoad(
            spec.member_ids, tuple(inflow.tolist()), tuple(backlog.tolist()), None, None
        )
    t = catch_up_time(backlog_f, inflow, caps)
    summary = _summary_against_usable(
        inflow, backlog_f, load, usable_capacity(caps, margin), horizon_s, unowned, t if margin <= 0 else None
    )
    member = MemberLoad(
        spec.member_ids,
        tuple(inflow.tolist()),
        tuple(backlog.tolist()),
        tuple(caps.tolist()),
        tuple(t.tolist()),
    )
    return summary, member


def load_summary(
    spec: GroupSpec,
    owners: np.ndarray,
    inputs: LoadInputs,
    horizon_s: float,
    pause_s: float = 0.0,
    margin: float = 0.0,
) -> LoadSummary:
    """:func:`summarize`'s summary alone: what the rules compare of a candidate plan, without the
    per-member view against the full capacity that only a stored plan shows (bench/planner_cpu.py)."""
    inflow, _, backlog_f, load, unowned = _member_loads(spec, owners, inputs, horizon_s, pause_s)
    caps = inputs.capacity
    if caps is None:
        return _no_capacity_summary(load, unowned)
    return _summary_against_usable(
        inflow, backlog_f, load, usable_capacity(caps, margin), horizon_s, unowned, None
    )


def _member_loads(
    spec: GroupSpec, owners: np.ndarray, inputs: LoadInputs, horizon_s: float, pause_s: float
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, tuple[int, float]]:
    """Per member inflow, backlog, backlog with the pause charged and load w; the unowned (backlog, inflow)."""
    inflow, backlog = member_totals(spec, owners, inputs.rate)
    backlog_f = backlog.astype(np.float64)
    if pause_s > 0:
        moved = (owners >= 0) & (owners != spec.owner)
        extra = np.bincount(owners[moved], weights=inputs.rate[moved] * pause_s, minlength=spec.num_members)
        backlog_f = backlog_f + extra
    unowned = (owners < 0) & spec.assignable
    unowned_backlog, unowned_inflow = int(spec.lag[unowned].sum()), float(inputs.rate[unowned].sum())
    load = inflow + backlog_f / horizon_s
    return inflow, backlog, backlog_f, load, (unowned_backlog, unowned_inflow)


def _no_capacity_summary(load: np.ndarray, unowned: tuple[int, float]) -> LoadSummary:
    """The summary without capacities: only the max member load w can be compared."""
    return LoadSummary(
        overloaded=0, max_catch_up_s=None, max_load=float(load.max()) if len(load) else 0.0,
        backlog_area=None, unowned_backlog=unowned[0], unowned_inflow=unowned[1],
    )  # fmt: skip


def _summary_against_usable(
    inflow: np.ndarray, backlog_f: np.ndarray, load: np.ndarray, usable: np.ndarray, horizon_s: float,
    unowned: tuple[int, float], t_full: np.ndarray | None,
) -> LoadSummary:  # fmt: skip
    """What the rules compare: overload, catch-up and backlog area against the usable capacity;
    unowned backlog never catches up and accrues its inflow over the horizon. ``t_full``: the
    catch-up times already computed when usable equals full capacity (no margin)."""
    unowned_backlog, unowned_inflow = unowned
    t_usable = t_full if t_full is not None else catch_up_time(backlog_f, inflow, usable)
    max_t = float(t_usable.max()) if len(t_usable) else 0.0
    if unowned_backlog > 0 or unowned_inflow > 0:
        max_t = math.inf
    area = float(backlog_area(backlog_f, inflow, usable, horizon_s).sum())
    area += unowned_backlog * horizon_s + unowned_inflow * horizon_s * horizon_s / 2.0
    worst, excess, severity = overload_severity(inflow, usable)
    return LoadSummary(
        overloaded=int(np.count_nonzero(inflow >= usable)),
        max_catch_up_s=max_t,
        max_load=float((load / usable).max()) if len(load) else 0.0,
        backlog_area=area,
        unowned_backlog=unowned_backlog,
        unowned_inflow=unowned_inflow,
        worst_utilisation=worst,
        excess_inflow=excess,
        overload_severity=severity,
    )
