"""Rescues: plans tried only for a flagged group that no strategy's plan improves.

Each is a registered candidate (:data:`RESCUES`): made only while the outcome is still
``no_better_plan``, measured like any strategy's plan, and judged by the one
:func:`~rebalance_advisor.domain.decisions.decide` (its "rescues" rule). They are tried in this order,
as Cruise Control tries its goals in priority order:

1. ``isolate_backlog`` (:func:`isolate_backlog`): the bottleneck member keeps its most backlogged
   partition alone, its other partitions go to measured members. Judged by the rules like any
   strategy's plan. When the outcome is still ``no_better_plan``, the reason says what the
   capacities allow at best (:func:`catch_up_floor`).
2. ``capacity_probe`` (:func:`capacity_probe`): one handover that tests an estimated capacity, the
   hot partition as alone on its new member as the bottleneck's room allows (:func:`_isolate`).
   Judged by the trial rule: it must fit a move budget of one handover and moves nothing back.

Both plan whole partitions: a group whose published key ranges are in force gets none. Pure
functions, no I/O (docs/architecture.md, "Layers").
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from rebalance_advisor.domain.decisions import Thresholds, seconds
from rebalance_advisor.domain.group_spec import GroupSpec
from rebalance_advisor.domain.load_model import LoadInputs, catch_up_time, member_totals, usable_capacity

#: a rescue's plan: (owners, why), or None when it has nothing to try
RescuePlan = tuple[np.ndarray, str] | None


def catch_up_floor(spec: GroupSpec, inputs: LoadInputs, thresholds: Thresholds) -> tuple[float, str] | None:
    """The shortest predicted catch-up any plan can reach, and the partition that sets it.

    A backlogged partition p drains at best alone on the subscribed member with the most usable
    capacity μ: T ≥ lag_p / (μ − λ_p) (a member's T = B / (μ − Λ) with B ≥ lag_p and Λ ≥ λ_p; a
    handover pause only adds backlog). When the current catch-up is within the minimum improvement
    of this floor, holding is physics, not a candidate the search missed (bench/closed_loop.py, the
    advisor loop's run: "catch-up 147 s -> 144 s", floor 133 s). None without capacities or backlog.
    """
    caps = inputs.capacity
    if caps is None or not (spec.lag > 0).any():
        return None
    usable = usable_capacity(caps, thresholds.capacity_margin_in_force)
    best = None
    for part in np.flatnonzero(spec.lag > 0).tolist():
        members = spec.topic_subscribers[int(spec.topic_index[part])]
        if len(members) == 0:
            continue
        fastest = float(np.max(usable[members]))
        t = float(
            catch_up_time(
                np.array([float(spec.lag[part])]), np.array([inputs.rate[part]]), np.array([fastest])
            )[0]
        )
        if best is None or t > best[0]:
            topic, number = spec.partition_keys[part]
            best = (
                t,
                f"{topic}-{number}'s lag {int(spec.lag[part]):,} at {inputs.rate[part]:,.1f}/s drains at best "
                f"on the fastest member ({fastest:,.1f}/s usable)",
            )
    return best


@dataclass
class _Members:
    """Each member's load under the current owners: usable capacity, inflow, backlog, predicted
    catch-up, and the bottleneck (the member with backlog whose catch-up is longest)."""

    usable: np.ndarray
    inflow: np.ndarray
    backlog: np.ndarray  # float
    catch_up: np.ndarray
    worst: int


def _members(spec: GroupSpec, inputs: LoadInputs, caps: np.ndarray, thresholds: Thresholds) -> _Members:
    usable = usable_capacity(caps, thresholds.capacity_margin_in_force)
    inflow, backlog = member_totals(spec, spec.owner, inputs.rate)
    back = backlog.astype(np.float64)
    t = catch_up_time(back, inflow, usable)
    return _Members(usable, inflow, back, t, int(np.argmax(np.where(backlog > 0, t, -1.0))))


#: the strategy name of the plan :func:`isolate_backlog` makes
ISOLATE_BACKLOG = "isolate_backlog"


def isolate_backlog(
    spec: GroupSpec, inputs: LoadInputs, thresholds: Thresholds, estimated: frozenset[str] = frozenset()
) -> RescuePlan:
    """Leave the bottleneck member its most backlogged partition alone: its other partitions go, one by
    one (hottest first), to the member whose predicted catch-up stays the shortest with it (its lag
    plus a handover pause of production), while that stays below the bottleneck's current catch-up.

    The plan that reaches :func:`catch_up_floor` when the hot partition already sits on the fastest
    member; the strategies balance load and did not find it (bench/closed_loop.py, the advisor loop's
    run: the rule held a group above its target that this plan relieved, and a capacity probe then
    moved the hot partition off the fastest member). None without capacities, when the bottleneck
    has no backlog or one partition, or when nothing can move.

    Only measured members (not in ``estimated``) receive: an estimated capacity is a guess, or, for a
    member that just received a partition, raised to what its current load needs
    (group_planning.optimistic_estimates), so backlog sent there is predicted to fit when it may not
    (bench/drain.py medium-50-cap2x, 3 seeds: overloaded 6.1 % -> 12.5 % of the time when estimated
    members could receive, 6.1 % when they cannot). Testing an estimate is the probe's job.
    """
    caps = inputs.capacity
    if caps is None or spec.num_members < 2:
        return None
    load = _members(spec, inputs, caps, thresholds)
    worst = load.worst
    held = np.flatnonzero(spec.owner == worst)
    if load.backlog[worst] <= 0 or len(held) < 2:
        return None
    hot = int(held[np.argmax(spec.lag[held])])
    if spec.lag[hot] <= 0:
        return None
    bound = float(load.catch_up[worst])
    owners, moved = _move_off(spec, inputs, thresholds, load, [int(k) for k in held if k != hot], estimated)
    if not moved:
        return None
    topic, number = spec.partition_keys[hot]
    left = catch_up_time(
        load.backlog[worst : worst + 1], load.inflow[worst : worst + 1], load.usable[worst : worst + 1]
    )[0]
    why = (
        f"{moved} partition(s) off {spec.member_ids[worst]} (predicted catch-up {seconds(bound)}), so that "
        f"{topic}-{number} (lag {int(spec.lag[hot]):,}, {inputs.rate[hot]:,.1f}/s) drains faster there "
        f"({seconds(float(left))})"
    )
    return owners, why


def _move_off(
    spec: GroupSpec,
    inputs: LoadInputs,
    thresholds: Thresholds,
    load: _Members,
    partitions: list[int],
    estimated: frozenset[str],
) -> tuple[np.ndarray, int]:
    """Owners with ``partitions`` (the bottleneck's, hottest first) moved one by one to the measured
    member whose catch-up stays shortest with it, while below the bottleneck's; ``load`` follows."""
    worst, back, inflow = load.worst, load.backlog, load.inflow
    bound = float(load.catch_up[worst])
    owners = spec.owner.copy()
    moved = 0
    for q in sorted(partitions, key=lambda k: -float(inputs.rate[k])):
        rate = float(inputs.rate[q])
        extra = float(spec.lag[q]) + rate * thresholds.handover_cost_s
        members = [
            int(m)
            for m in spec.topic_subscribers[int(spec.topic_index[q])]
            if m != worst and spec.member_ids[int(m)] not in estimated
        ]
        if not members:
            continue
        after = catch_up_time(back[members] + extra, inflow[members] + rate, load.usable[members])
        pick = int(np.argmin(after))
        if not (after[pick] < bound):
            continue
        m = members[pick]
        owners[q] = m
        back[m] += extra
        inflow[m] += rate
        back[worst] -= float(spec.lag[q])
        inflow[worst] -= rate
        moved += 1
    return owners, moved


#: the strategy name of the plan :func:`capacity_probe` makes
CAPACITY_PROBE = "capacity_probe"


def capacity_probe(
    spec: GroupSpec, inputs: LoadInputs, thresholds: Thresholds, estimated: frozenset[str]
) -> RescuePlan:
    """One handover that tests an estimated capacity, when no candidate improves a flagged group.

    The deadlock it breaks (bench/closed_loop.py, the advisor loop's run): the member with the
    longest predicted catch-up holds a hot backlogged partition, and every member that could take it
    has a capacity that is only an estimate (the group median, or 1.2 x what it consumes), because
    it has never been saturated, so it is never measured. Every candidate then predicts an overload
    and the group stays stuck. The probe hands that member's most backlogged partition to the
    estimated member with the most estimated headroom, which hands the bottleneck its own
    partitions while they fit there (:func:`_isolate`). If that member is faster than its estimate
    it drains the backlog; if not, it is saturated with backlog, so the next snapshot measures it and
    the next plan uses the measured value (and may move the partition back: moving back to remove
    an overload is allowed). None when the bottleneck's own capacity is an estimate (it is saturated
    now, so it is being measured), when it has no backlog, or when no other member is estimated.
    """
    caps = inputs.capacity
    if caps is None or not estimated or spec.num_members < 2:
        return None
    est = np.array([m in estimated for m in spec.member_ids])
    load = _members(spec, inputs, caps, thresholds)
    worst = load.worst
    if load.backlog[worst] <= 0 or est[worst] or not (load.catch_up[worst] > thresholds.target_catch_up_s):
        return None
    held = np.flatnonzero(spec.owner == worst)
    part = int(held[np.argmax(spec.lag[held])])
    if spec.lag[part] <= 0:
        return None
    subscribed = np.zeros(spec.num_members, dtype=bool)
    subscribed[spec.topic_subscribers[int(spec.topic_index[part])]] = True
    headroom = np.where(est & subscribed, load.usable - load.inflow, -np.inf)
    headroom[worst] = -np.inf
    target = int(np.argmax(headroom))
    if not np.isfinite(headroom[target]):
        return None
    owners = spec.owner.copy()
    owners[part] = target
    swap = _isolate(spec, inputs, owners, load, (worst, target, part), thresholds.move_budget)
    topic, number = spec.partition_keys[part]
    why = (
        f"{topic}-{number} (lag {int(spec.lag[part]):,}, {inputs.rate[part]:,.1f}/s) from "
        f"{spec.member_ids[worst]} (predicted catch-up {seconds(float(load.catch_up[worst]))}) to "
        f"{spec.member_ids[target]}, whose capacity {caps[target]:,.1f}/s is an estimate (never "
        f"saturated, so not measured){swap}: it drains the backlog or gets measured"
    )
    return owners, why


def _isolate(
    spec: GroupSpec, inputs: LoadInputs, owners: np.ndarray, load: _Members, probe: tuple[int, int, int],
    budget: int | None,
) -> str:  # fmt: skip
    """The probe's target keeps the hot partition ``part`` as alone as the bottleneck's room allows:
    the target's partitions the bottleneck subscribes to go to it, lightest first, while it stays
    within its usable capacity (it is measured), and the lightest one in any case when the probe
    would leave it empty (a flag of its own); no more than the move ``budget`` allows besides the
    probe's own handover. ``probe``: (bottleneck, target, hot partition); ``owners`` changed in
    place; returns what the reason says of it.

    A probe tests one estimate with one partition. On top of the target's own load it also overloads
    every partition there, and tests nothing more: in bench/drain.py steps-10 a target holding
    1,146/s got a 1,258/s partition (capacities 1,382/s, the estimates right), 174 % of its capacity
    (docs/benchmarks/drain.md, "Own-rate estimates bounded, and the capacity probe isolates")."""
    worst, target, part = probe
    theirs = np.flatnonzero((spec.owner == target) & subscribed_by(spec, worst))
    room = float(load.usable[worst] - load.inflow[worst] + inputs.rate[part])
    alone = not np.any((spec.owner == worst) & (np.arange(spec.num_partitions) != part))
    most = len(theirs) if budget is None else budget - 1
    given: list[int] = []
    for k in theirs[np.argsort(inputs.rate[theirs], kind="stable")].tolist():
        must = alone and not given  # the one that keeps the bottleneck from owning nothing
        if not must and (float(inputs.rate[k]) > room or len(given) >= most):
            break
        owners[k] = worst
        room -= float(inputs.rate[k])
        given.append(k)
    if not given:
        return ""
    if len(given) > 1:
        return f", which gives {spec.member_ids[worst]} its {len(given)} lightest partitions"
    topic, number = spec.partition_keys[given[0]]
    return f", which gives {spec.member_ids[worst]} its lightest partition {topic}-{number}"


def subscribed_by(spec: GroupSpec, member: int) -> np.ndarray:
    """Mask of the partitions whose topic ``member`` subscribes to."""
    return spec.class_topics[int(spec.member_class[member])][spec.topic_index]


def floor_reason(spec: GroupSpec, inputs: LoadInputs, thresholds: Thresholds) -> str | None:
    """Why nothing improves, when capacities say so: what the fastest member allows (:func:`catch_up_floor`)."""
    floor = catch_up_floor(spec, inputs, thresholds)
    if floor is None:
        return None
    return f"on these capacities no plan catches up in under {seconds(floor[0])}: {floor[1]}"


def _no_reason(_spec: GroupSpec, _inputs: LoadInputs, _thresholds: Thresholds) -> str | None:
    return None


@dataclass(frozen=True)
class Rescuer:
    """A registered rescue: its strategy name, how it plans, how it is judged, and what the reason says
    when it does not help."""

    name: str
    plan: Callable[[GroupSpec, LoadInputs, Thresholds, frozenset[str]], RescuePlan]
    #: judged by the trial rule (decisions.trial_allowed) instead of the improvement rules
    trial: bool = False
    explain: Callable[[GroupSpec, LoadInputs, Thresholds], str | None] = _no_reason


#: the rescues, in the order they are tried (module docstring)
RESCUES: tuple[Rescuer, ...] = (
    Rescuer(ISOLATE_BACKLOG, isolate_backlog, explain=floor_reason),
    Rescuer(CAPACITY_PROBE, capacity_probe, trial=True),
)
