"""Decision rules: from a group's current load and its candidate plans to one outcome.

Pure functions, no I/O, so the same rules run inside Spark, in the CLI and in the simulator. Each
rule is one function here; :func:`decide` applies them in order. Defaults (docs/concepts/decision-rules.md):

The rule is in *time* when capacities are known (the load model, ``load_model``):

- **idle** (:func:`is_idle`): total lag < ``lag_floor`` (1,000 messages, always messages), no
  member overloaded, no inflow on partitions no member owns and, with capacities, no predicted
  catch-up over ``target_catch_up_s``.
- **flagged** (:func:`flag_reasons`): partitions no member owns have lag or inflow; a member owns
  nothing while an eligible peer holds two or more; a member is overloaded (inflow ≥ (1 −
  ``capacity_margin``) × capacity: 98 % by default, a margin for rates estimated over past minutes
  that drift; catch-up and the payback area are predicted against that usable capacity too); the
  predicted catch-up exceeds ``target_catch_up_s`` (300 s). Without capacities the time rule cannot
  apply and the load w = inflow + backlog / horizon is compared instead: flagged when
  max / mean member load ≥ ``imbalance_threshold`` (1.25) — with no rates either, w is lag / horizon
  and this is the old lag-balance rule.
- **move budget** (:func:`within_move_budget`): a candidate may hand over at most ``move_budget``
  partitions (None: any), counting unowned ones that get an owner; the forced handovers (partitions
  no one owns) never count against it.
- **hysteresis** (:func:`held_by_hysteresis`): a candidate that moves a partition back to an owner
  it left within ``hysteresis_window_s`` (1,800 s) is held back unless it relieves an overload.
- **improvement** (:func:`improvement_reason`): the plan assigns unowned partitions, feeds an empty
  member or relieves overload (:func:`relieves_overload`: its severity falls by ``min_improvement``,
  or fewer members are over the line at no higher severity); or it cuts the predicted catch-up (with capacities) or the max member
  load (without) by at least ``min_improvement`` (10 %).
- **payback** (:func:`repaid`): with capacities, the plan's backlog area over ``horizon_s`` (900 s),
  charged a pause of ``handover_cost_s`` (5 s) per handed-over partition, is below the current one.
  Handing over unowned partitions and feeding empty members are never blocked by it; relieving
  overload (also partial relief, 8 -> 7) may cost up to ``min_improvement`` more area
  (:func:`repaid`). Without capacities the pause is charged in the
  load: the receiving member's backlog grows by rate x ``handover_cost_s``.
- **repack** (:func:`proportionate`): a plan handing over more than ``repack_share`` (50 %) of the
  group's partitions, forced handovers aside, must cut the max member load or the excess inflow by
  ``repack_min_gain`` (5 %); otherwise ``no_better_plan`` (rescues may still act).
- ``cooldown_minutes`` (default 0, off): the old fixed silence after a standing plan, kept for runs
  that ask for it; outcome ``held_by_cooldown``.
- **rescues** (:class:`Rescue`, the order in :mod:`rebalance_advisor.domain.rescues`): while the
  outcome is ``no_better_plan``, the next rescue makes its plan. One judged by the rules joins the
  candidates and the rules run again: taken when it is chosen (its reason appended) or when the
  outcome changes. A trial (:func:`trial_allowed`) needs a move budget of one handover and is
  recommended when it moves nothing back. A rescue that does not help may say why in the reason.

Outcomes: ``error``, ``no_members``, ``idle``, ``balanced``, then for flagged groups
``recommended``, ``held_by_hysteresis`` (a better plan exists but moves partitions back),
``not_repaid`` (its pause is not repaid within the horizon), ``held_by_cooldown``, or
``no_better_plan`` (no candidate improves enough, or none fits the move budget).

Best candidate (:func:`rank_key`): least severe overload (:func:`relieves_overload`: one member at
150 % is worse than three at 101 %), then fewest overloaded members, then shortest predicted catch-up,
then lowest max load, then fewest handovers, then :data:`STRATEGY_PREFERENCE`. On a full tie
``lag_aware`` wins: naming it after the published KAFKA-5337 algorithm makes it reproducible.
The plan recommended is the one with the fewest handovers among those within ``min_improvement``
of that best (:func:`fewest_moves_near_best`, :func:`as_good`): a full repack that is barely better
than a sticky plan is not worth its extra handovers.
"""

from __future__ import annotations

import dataclasses
import functools
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from rebalance_advisor.domain.advice import STANDING_STATUSES, CandidatePlan, StandingPlan
from rebalance_advisor.domain.assignors import ASSIGNORS, OPT_IN_STRATEGIES
from rebalance_advisor.domain.load_model import LoadSummary
from rebalance_advisor.domain.parameters import Thresholds
from rebalance_advisor.domain.timestamps import as_utc, timestamp_text

#: tie order between strategies with equal numbers (earlier wins); see module docstring.
STRATEGY_PREFERENCE: tuple[str, ...] = (
    "lag_aware",
    "lag_aware_sticky",
    "rate_aware_sticky",
    "rate_aware",
    "sticky",
    "roundrobin",
    "range",
)
DEFAULT_STRATEGIES: tuple[str, ...] = tuple(n for n in ASSIGNORS if n not in OPT_IN_STRATEGIES)

OUTCOMES = (
    "balanced",
    "recommended",
    "no_better_plan",
    "held_by_hysteresis",
    "not_repaid",
    "held_by_cooldown",
    "held_by_rejection",  # domain/plan_identity.py: a standing rejection holds the group back
    "idle",
    "no_members",
    "broker_assigned",
    "error",
)
#: outcomes of a group the flag rule caught (:func:`flag_reasons`): the ones a run reports as flagged.
FLAGGED_OUTCOMES = (
    "recommended",
    "no_better_plan",
    "held_by_hysteresis",
    "not_repaid",
    "held_by_cooldown",
    "held_by_rejection",
)

# re-exported: callers import them here (Thresholds: the rule knobs of domain/parameters.py)
__all__ = ["STANDING_STATUSES", "CandidatePlan", "StandingPlan", "Thresholds"]


@dataclass(frozen=True)
class GroupState:
    """What the rules know about the group's current assignment."""

    total_lag: int
    load: LoadSummary
    load_imbalance: float  # max / mean member load w (1.0 when there is none)
    empty_members: int  # members owning nothing while an eligible peer holds two or more
    capacities_known: bool
    note: str = ""  # how unknown rates/capacities were filled (load_model.LoadInputs.note)
    partitions: int = 0  # partitions of the group (0: unknown, the repack rule does not apply)


@dataclass(frozen=True)
class Decision:
    """One group's outcome; ``chosen`` is the candidate to store and ``plan_status`` its status."""

    outcome: str
    reason: str
    chosen: CandidatePlan | None = None
    plan_status: str | None = None  # "recommended", "skipped" or None (no plan row)
    best: CandidatePlan | None = field(default=None)  # best candidate, stored or not


@dataclass(frozen=True)
class Rescue:
    """A plan tried only while the outcome is ``no_better_plan`` (module docstring, "rescues")."""

    name: str
    #: makes and measures the plan (only when tried): the candidate and why, or None (nothing to try)
    attempt: Callable[[], tuple[CandidatePlan, str] | None]
    #: judged by the trial rule (:func:`trial_allowed`), not by the improvement rules
    trial: bool = False
    #: why nothing helps, for the reason of an outcome it leaves at ``no_better_plan`` (None: nothing to say)
    explain: Callable[[], str | None] = lambda: None


def seconds(value: float | None) -> str:
    """A catch-up time for a reason line: '42 s', 'inf' (overloaded), 'unknown'."""
    if value is None:
        return "unknown"
    return "inf" if math.isinf(value) else f"{value:,.0f} s"


# ---- the rules ----------------------------------------------------------------------------


def is_idle(state: GroupState, thresholds: Thresholds) -> bool:
    """The idle rule: little lag (messages), nobody overloaded, nothing flowing into unowned partitions,
    and (with capacities) what lag there is clears within the target: a member just under its line
    grows a small lag for minutes, and the floor alone would hide it (bench/closed_loop.py, run C)."""
    return (
        state.total_lag < thresholds.lag_floor
        and state.load.overloaded == 0
        and state.load.unowned_inflow == 0
        and not catch_up_over_target(state, thresholds)
    )


def catch_up_over_target(state: GroupState, thresholds: Thresholds) -> bool:
    """With capacities: the predicted catch-up of the slowest member exceeds ``target_catch_up_s``."""
    slowest = state.load.max_catch_up_s
    return state.capacities_known and slowest is not None and slowest > thresholds.target_catch_up_s


def flag_reasons(state: GroupState, thresholds: Thresholds) -> list[str]:
    """The flag rule: why the group needs a plan (empty list: it does not), with the numbers."""
    reasons = []
    load = state.load
    if load.unowned_backlog > 0 or load.unowned_inflow > 0:
        reasons.append(
            f"lag {load.unowned_backlog:,} and inflow {load.unowned_inflow:,.1f}/s on partitions no member owns"
        )
    if state.empty_members:
        reasons.append(f"{state.empty_members} member(s) own nothing while a peer holds two or more")
    if state.capacities_known:
        if load.overloaded:
            at = (
                "capacity"
                if not thresholds.capacity_margin_in_force
                else f"{1 - thresholds.capacity_margin_in_force:.0%} of capacity"
            )
            reasons.append(
                f"{load.overloaded} member(s) overloaded (inflow >= {at}), worst at "
                f"{load.worst_utilisation:.1%} of usable capacity, excess inflow {load.excess_inflow:,.1f}/s"
            )
        elif catch_up_over_target(state, thresholds):
            reasons.append(
                f"predicted catch-up {seconds(load.max_catch_up_s)} > target {thresholds.target_catch_up_s:g} s"
            )
    elif state.load_imbalance >= thresholds.imbalance_threshold:
        reasons.append(f"load imbalance {state.load_imbalance:.3f} >= {thresholds.imbalance_threshold}")
    return reasons


def is_flagged(state: GroupState, thresholds: Thresholds) -> bool:
    """Flagged = not idle and some flag reason applies."""
    return not is_idle(state, thresholds) and bool(flag_reasons(state, thresholds))


def within_move_budget(handovers: int, forced: int, move_budget: int | None) -> bool:
    """The move-budget rule: handovers beyond the forced ones (unowned partitions) within the budget."""
    return move_budget is None or handovers - forced <= move_budget


#: the hysteresis rule lets a move back through when it cuts the overload's severity by at least this
#: much (or leaves fewer members over the line at no higher severity): a cut of ``min_improvement``
#: let plans trade partitions back and forth between overloaded members (bench/drain.py
#: large-50x500-steps)
HYSTERESIS_RELIEF = 0.5


def relieves_overload(
    after: LoadSummary, before: LoadSummary, thresholds: Thresholds, cut: float | None = None
) -> bool:
    """The overload rule: ``after`` relieves the overload of ``before``.

    Overload is ranked by its severity (``load_model.overload_severity``: Σ ((u − 1)+)² over member
    utilisations against the usable capacity), not by how many members are over the line: a plan
    that cuts the severity by ``cut`` (default ``min_improvement``) relieves, even with more members just over the
    line (one member at 150 % -> three at 101 %: 0.25 -> 0.0003), and fewer overloaded members
    relieve only when the severity does not rise (never one member at 130 % for two at 101 %).
    Counting members first left a group at full load with one member at 144-160 % for 46 minutes
    (docs/architecture.md, "Imbalance and decisions").
    """
    if before.overloaded == 0:
        return False
    cut = thresholds.min_improvement if cut is None else cut
    if before.overload_severity > 0 and after.overload_severity <= before.overload_severity * (1.0 - cut):
        return True
    return (
        after.overloaded < before.overloaded and after.overload_severity <= before.overload_severity + 1e-12
    )


def overload_text(load: LoadSummary) -> str:
    """The overload numbers of a reason: how many members, the worst one's utilisation, the excess."""
    return (
        f"{load.overloaded} overloaded, worst member at {load.worst_utilisation:.1%} of usable capacity, "
        f"excess inflow {load.excess_inflow:,.1f}/s"
    )


def held_by_hysteresis(candidate: CandidatePlan, current: LoadSummary, thresholds: Thresholds) -> bool:
    """The hysteresis rule: moving a partition back to an owner it recently left needs an overload relieved."""
    return candidate.moves_back > 0 and not relieves_overload(
        candidate.load, current, thresholds, cut=max(HYSTERESIS_RELIEF, thresholds.min_improvement)
    )


def _relative_drop(before: float | None, after: float | None) -> float:
    if before is None or after is None or before <= 0:
        return 0.0
    if math.isinf(before):
        return 1.0 if not math.isinf(after) else 0.0
    return (before - after) / before


def improvement_reason(candidate: CandidatePlan, state: GroupState, thresholds: Thresholds) -> str | None:
    """The improvement rule: why ``candidate`` is worth it, or None (module docstring)."""
    load, cur = candidate.load, state.load
    if (
        cur.unowned_backlog > 0 or cur.unowned_inflow > 0
    ) and load.unowned_backlog + load.unowned_inflow == 0:
        return "assigns every unowned partition"
    if state.empty_members and candidate.empty_members < state.empty_members:
        return f"gives partitions to {state.empty_members - candidate.empty_members} empty member(s)"
    if relieves_overload(load, cur, thresholds):
        return (
            f"overloaded members {cur.overloaded} -> {load.overloaded} (worst member "
            f"{cur.worst_utilisation:.1%} -> {load.worst_utilisation:.1%} of usable capacity, excess inflow "
            f"{cur.excess_inflow:,.1f} -> {load.excess_inflow:,.1f}/s)"
        )
    if state.capacities_known:
        drop = _relative_drop(cur.max_catch_up_s, load.max_catch_up_s)
        if drop >= thresholds.min_improvement and drop > 0:
            return f"predicted catch-up {seconds(cur.max_catch_up_s)} -> {seconds(load.max_catch_up_s)} (-{drop:.1%})"
        return None
    drop = _relative_drop(cur.max_load, load.max_load)
    if drop >= thresholds.min_improvement and drop > 0:
        return (
            f"max member load {cur.max_load:,.2f} -> {load.max_load:,.2f} msg/s of inflow plus backlog over "
            f"the {thresholds.horizon_s:g} s horizon (-{drop:.1%})"
        )
    return None


def repaid(candidate: CandidatePlan, state: GroupState, thresholds: Thresholds) -> bool:
    """The payback rule: with the handover pause charged, less backlog over the horizon than now.

    Never blocks handing over orphans or feeding an empty member, nor relieving a member over its
    full capacity (its backlog grows without bound). A plan that relieves an overload within the
    capacity margin (every member under its full capacity: a forecast of overload, no growing
    backlog yet; :func:`relieves_overload`, also partial relief, 8 -> 7 members) may end with a
    backlog area up to ``min_improvement`` above the current one: between members that stay
    overloaded a move only shifts the growth, so a strict area would refuse every step of a fix that
    takes more than one plan (8 -> 7 at +1.3 %). More is not repaid: at full group load a full repack
    of 70 handovers "relieved" a member 0.6 % over its usable capacity and added 18-36 % of backlog
    area in pauses, every few minutes (bench/drain.py full-load, 5 seeds x 6 h: 207 -> 101 moves/h,
    673 -> 184 flaps per run). Held beyond the margin too, medium-50-cap2x was overloaded 7.6 % of
    the time instead of 4.6 %.
    """
    if feeds_orphans_or_empty(state):
        return True
    before, after = state.load.backlog_area, candidate.load.backlog_area
    if before is None or after is None:
        return True  # no capacities: the pause cannot be priced
    if relieves_overload(candidate.load, state.load, thresholds):
        beyond = state.load.worst_utilisation * (1.0 - thresholds.capacity_margin_in_force) >= 1.0
        return beyond or after <= before * (1.0 + thresholds.min_improvement)
    return after < before


def feeds_orphans_or_empty(state: GroupState) -> bool:
    """Partitions no member owns, or a member owning nothing while a peer holds two or more: a plan
    that hands them over is never held by payback (:func:`repaid`) or the repack rule."""
    return state.load.unowned_backlog > 0 or state.load.unowned_inflow > 0 or bool(state.empty_members)


def proportionate(candidate: CandidatePlan, state: GroupState, forced: int, thresholds: Thresholds) -> bool:
    """The repack rule: a plan handing over more than ``repack_share`` of the partitions (forced
    handovers aside) must gain ``repack_min_gain`` (:func:`repack_gain`).

    Relieving an overload passes the improvement and payback rules at any size: a traced
    bench/drain.py run repacked 985 of 1,000 partitions for a worst member about 2 % lower.
    Orphans and empty members are never blocked by it (:func:`repaid`).
    """
    if state.partitions <= 0 or feeds_orphans_or_empty(state):
        return True
    if candidate.moves - forced <= thresholds.repack_share * state.partitions:
        return True
    return repack_gain(candidate, state) >= thresholds.repack_min_gain


def repack_gain(candidate: CandidatePlan, state: GroupState) -> float:
    """What a repack buys: the relative drop of the max member load, or, when the repack leaves no
    member overloaded, the larger drop of the excess inflow (how fast overloaded members' backlog
    grows; all of it when the overload is gone). A repack that leaves overload and only spreads it
    over more members buys a lower excess on paper: with a partition stepped above every member's
    capacity, or capacities still estimates, the next snapshot shows the overload again, and the
    next repack moves nearly every partition once more (bench/drain.py medium-50-cap2x: 292 -> 129
    handovers per hour and 3.1 -> 0.9 % overloaded without them; docs/benchmarks/drain.md)."""
    load, cur = candidate.load, state.load
    gain = _relative_drop(cur.max_load, load.max_load)
    if load.overloaded > 0:
        return gain
    return max(gain, _relative_drop(cur.excess_inflow, load.excess_inflow))


def cooldown_until(
    standing: StandingPlan | None, now: datetime | None, thresholds: Thresholds
) -> datetime | None:
    """The optional cool-down rule: until when ``standing`` holds the group at ``now`` (None: it does not)."""
    if standing is None or now is None or thresholds.cooldown_minutes <= 0:
        return None
    until = as_utc(standing.created_at) + timedelta(minutes=thresholds.cooldown_minutes)
    return until if as_utc(now) < until else None


def cooldown_reason(standing: StandingPlan, until: datetime, candidate: str, concurrent: bool = False) -> str:
    """The reason of a ``held_by_cooldown`` outcome. The candidate is not stored as a plan (only the
    outcome row keeps it), so the text says it was held back, not kept."""
    source = ", written by a concurrent run," if concurrent else ""
    return (
        f"cool-down: plan {standing.plan_id} ({standing.status}){source} still stands until "
        f"{timestamp_text(until)}; candidate {candidate} held back, no plan stored"
    )


def rank_key(candidate: CandidatePlan) -> tuple:
    """Sort key of the best-candidate rule (module docstring)."""
    try:
        preference = STRATEGY_PREFERENCE.index(candidate.strategy)
    except ValueError:
        preference = len(STRATEGY_PREFERENCE)
    load = candidate.load
    catch_up = math.inf if load.max_catch_up_s is None else load.max_catch_up_s
    severity = round(load.overload_severity, 9)
    return (severity, load.overloaded, catch_up, round(load.max_load, 9), candidate.moves, preference)


def best_candidate(candidates: Sequence[CandidatePlan]) -> CandidatePlan | None:
    return min(candidates, key=rank_key, default=None)


def margin_slack(thresholds: Thresholds) -> float:
    """A tenth (``min_improvement``) of the capacity margin, in units of usable capacity
    (min_improvement x margin / (1 - margin)): utilisations of two plans closer than this are alike,
    noise against the margin the rule already keeps (:func:`within_margin_severity`,
    :func:`drains_as_well_overloaded`). 0 without a margin in force."""
    margin = thresholds.capacity_margin_in_force
    if not 0 < margin < 1:
        return 0.0
    return thresholds.min_improvement * margin / (1.0 - margin)


def within_margin_severity(thresholds: Thresholds) -> float:
    """The overload severity of one member over its usable capacity by :func:`margin_slack`:
    severities closer than this are alike (:func:`as_good`). The whole margin (one member at its
    full capacity) made cap2x-z1.5 (8 % margin) overloaded 10.0 % of the time instead of 8.9 %; a
    tenth or three tenths of it left every bench/drain.py scenario tried as it was (cap2x-z1.5,
    -telemetry, full-load: 5 seeds x 6 h)."""
    return margin_slack(thresholds) ** 2


def as_good(candidate: CandidatePlan, best: CandidatePlan, thresholds: Thresholds) -> bool:
    """Whether ``candidate`` is within ``min_improvement`` of ``best`` (the fewer-moves rule).

    No more severe overload (within ``min_improvement``; none when the best has none; or, both
    overloaded, as deep and draining as much: :func:`drains_as_well_overloaded`), no more empty
    members and no more left unowned; then, with capacities, a predicted
    catch-up within ``min_improvement`` of max(best's, ``target_catch_up_s``): every catch-up within
    the target meets it, as the flag rule reads it (bench/drain.py large-500: a sticky plan of 175
    handovers at 250 s lost to a full repack of 3,192 at 154 s), or a backlog area over the horizon
    (handover pauses charged) within ``min_improvement`` of the best's: a shorter catch-up that
    drains no more backlog does not pay for its handovers (bench/drain.py large-50x500-steps: full
    repacks of 490 handovers for a catch-up 14 % shorter than a sticky plan's of 23 with a backlog
    area 2 % larger were 83 % of the moves); otherwise, or when both are infinite, a max load at
    most ``min_improvement`` higher. Severities are compared with the slack of
    :func:`within_margin_severity`: a repack of 485 handovers leaving a member at 100.013 % of its
    usable capacity beat a sticky plan of 32 leaving one at 100.017 % (bench/drain.py
    large-50x500-steps).
    """
    c, b = candidate.load, best.load
    tolerance = thresholds.min_improvement
    slack = within_margin_severity(thresholds)
    if (
        c.overload_severity > b.overload_severity * (1.0 + tolerance) + slack + 1e-12
        and not drains_as_well_overloaded(c, b, thresholds)
    ) or (b.overload_severity == 0 and c.overloaded > b.overloaded):
        return False
    if (
        candidate.empty_members > best.empty_members
        or c.unowned_backlog + c.unowned_inflow > b.unowned_backlog + b.unowned_inflow
    ):
        return False
    if c.max_catch_up_s is not None and b.max_catch_up_s is not None:
        if math.isinf(b.max_catch_up_s) != math.isinf(c.max_catch_up_s):
            return False
        if not math.isinf(b.max_catch_up_s):
            level = max(b.max_catch_up_s, thresholds.target_catch_up_s)
            area = c.backlog_area is not None and b.backlog_area is not None
            return c.max_catch_up_s <= level * (1.0 + tolerance) + 1e-9 or (
                area and c.backlog_area <= b.backlog_area * (1.0 + tolerance) + 1e-9
            )
    return c.max_load <= b.max_load * (1.0 + tolerance) + 1e-12


def drains_as_well_overloaded(c: LoadSummary, b: LoadSummary, thresholds: Thresholds) -> bool:
    """Both plans leave overload: a less even spread of it is as good when its worst member is no
    deeper (within :func:`margin_slack`) and its backlog area over the horizon, handover pauses
    charged, is no larger. A repack of 116 of 128 partitions left the same worst member (104.2 %)
    as a sticky plan of 12 with twice its backlog area, and was taken for a severity 14 % lower
    (bench/drain.py cap2x-z1.5, docs/benchmarks/drain.md)."""
    if b.overload_severity <= 0 or c.backlog_area is None or b.backlog_area is None:
        return False
    deeper = margin_slack(thresholds)
    return c.worst_utilisation <= b.worst_utilisation + deeper + 1e-12 and c.backlog_area <= b.backlog_area


def fewest_moves_near_best(
    candidates: Sequence[CandidatePlan], thresholds: Thresholds
) -> CandidatePlan | None:
    """The fewer-moves rule: of the candidates :func:`as_good` as the best, the one with fewest
    handovers (then :func:`rank_key`). A full repack that is barely better than a sticky plan does
    not pay for its extra handovers in churn: each pauses a partition and is one more move to flap."""
    best = best_candidate(candidates)
    if best is None:
        return None
    close = [c for c in candidates if as_good(c, best, thresholds)]
    return min(close, key=lambda c: (c.moves, rank_key(c)))


def trial_allowed(candidate: CandidatePlan, forced: int, move_budget: int | None) -> bool:
    """The trial rule: a trial hands over one partition (the budget must allow one) and never moves a
    partition back to an owner it just left (it would undo a move to learn nothing)."""
    return within_move_budget(1, forced, move_budget) and candidate.moves_back == 0


# ---- the decision -------------------------------------------------------------------------


def decide(
    state: GroupState,
    candidates: Sequence[CandidatePlan],
    thresholds: Thresholds,
    *,
    forced_handovers: int = 0,
    standing: StandingPlan | None = None,
    now: datetime | None = None,
    rescues: Sequence[Rescue] = (),
) -> Decision:
    """Apply the rules of the module docstring to a group that has members and a valid spec; while
    the outcome is ``no_better_plan``, try the ``rescues`` in order."""
    rules = functools.partial(
        _judge, state, thresholds=thresholds, forced=forced_handovers, standing=standing, now=now
    )
    decision = rules(candidates)
    tried = list(candidates)
    for rescue in rescues:
        if decision.outcome != "no_better_plan":
            break
        decision = _rescued(decision, rescue, tried, rules, forced_handovers, thresholds)
    return decision


def _rescued(
    decision: Decision,
    rescue: Rescue,
    tried: list[CandidatePlan],
    rules: Callable[[Sequence[CandidatePlan]], Decision],
    forced: int,
    thresholds: Thresholds,
) -> Decision:
    """``decision`` (a ``no_better_plan``) after ``rescue`` is tried (module docstring, "rescues")."""
    if rescue.trial and not within_move_budget(1, forced, thresholds.move_budget):
        return decision
    made = rescue.attempt()
    if made is not None:
        candidate, why = made
        tried.append(candidate)
        if rescue.trial:
            if trial_allowed(candidate, forced, thresholds.move_budget):
                reason = f"{decision.reason}; {rescue.name}: {why}"
                decision = Decision("recommended", reason, candidate, "recommended", candidate)
        else:
            again = rules(tried)
            if again.chosen is not None and again.chosen.strategy == rescue.name:
                decision = dataclasses.replace(again, reason=f"{again.reason}; {rescue.name}: {why}")
            elif again.outcome != "no_better_plan":
                decision = again
    if decision.outcome == "no_better_plan" and (said := rescue.explain()):
        decision = dataclasses.replace(decision, reason=f"{decision.reason}; {said}")
    return decision


def _judge(
    state: GroupState,
    candidates: Sequence[CandidatePlan],
    *,
    thresholds: Thresholds,
    forced: int,
    standing: StandingPlan | None,
    now: datetime | None,
) -> Decision:
    """The rules of the module docstring over ``candidates``, rescues aside: idle or balanced, else the
    candidates that fit the budget, improve, are not held back and are repaid, then the plan."""
    note = f" ({state.note})" if state.note else ""
    if is_idle(state, thresholds):
        what = (
            "no lag"
            if state.total_lag == 0
            else f"total lag {state.total_lag:,} < floor {thresholds.lag_floor:,}"
        )
        return Decision("idle", what + note)
    reasons = flag_reasons(state, thresholds)
    if not reasons:
        return Decision("balanced", _balanced(state, thresholds) + note)
    flagged = "; ".join(reasons) + note
    fitting = [c for c in candidates if within_move_budget(c.moves, forced, thresholds.move_budget)]
    if not fitting:
        fewest = min(candidates, key=lambda c: (c.moves, rank_key(c)), default=None)
        detail = f"; fewest: {fewest.moves} by {fewest.strategy}" if fewest else ""
        return Decision(
            "no_better_plan",
            f"{flagged}, but no candidate within move budget {thresholds.move_budget}{detail}",
        )
    worth = {c.strategy: improvement_reason(c, state, thresholds) for c in fitting}
    improving = [c for c in fitting if worth[c.strategy]]
    if not improving:
        return _not_improved(best_candidate(fitting), state, flagged, thresholds)
    allowed = [c for c in improving if not held_by_hysteresis(c, state.load, thresholds)]
    paying = [c for c in allowed if repaid(c, state, thresholds)]
    sized = [c for c in paying if proportionate(c, state, forced, thresholds)]
    if not sized:
        if paying:
            return _not_proportionate(best_candidate(paying), state, flagged, thresholds)
        return _held_back(improving, allowed, worth, state, flagged, thresholds)
    paying = sized
    chosen = fewest_moves_near_best(paying, thresholds)
    assert chosen is not None  # paying is not empty
    return _plan_decision(chosen, worth, state, flagged, thresholds, standing, now)


def _balanced(state: GroupState, thresholds: Thresholds) -> str:
    if state.capacities_known:
        return (
            f"no member overloaded, predicted catch-up {seconds(state.load.max_catch_up_s)} "
            f"<= target {thresholds.target_catch_up_s:g} s"
        )
    return f"load imbalance {state.load_imbalance:.3f} < threshold {thresholds.imbalance_threshold}"


def _not_improved(b: CandidatePlan, state: GroupState, flagged: str, thresholds: Thresholds) -> Decision:
    """``no_better_plan``: the best candidate that fits does not improve enough."""
    unit = (  # max_load's unit (load_model): the group's messages/s, or a share of capacity
        " x usable capacity"
        if state.capacities_known
        else f" msg/s of inflow plus backlog over the {thresholds.horizon_s:g} s horizon"
    )
    return Decision(
        "no_better_plan",
        f"{flagged}, but best ({b.strategy}) does not improve enough: catch-up "
        f"{seconds(state.load.max_catch_up_s)} -> {seconds(b.load.max_catch_up_s)}, max load "
        f"{state.load.max_load:,.2f} -> {b.load.max_load:,.2f}{unit}, {overload_text(state.load)} -> "
        f"{overload_text(b.load)} (min improvement {thresholds.min_improvement:.0%})",
        best=b,
    )


def _not_proportionate(
    b: CandidatePlan | None, state: GroupState, flagged: str, thresholds: Thresholds
) -> Decision:
    """``no_better_plan``: every candidate left is a repack that gains too little (:func:`proportionate`)."""
    assert b is not None
    return Decision(
        "no_better_plan",
        f"{flagged}, but best ({b.strategy}) repacks {b.moves} of {state.partitions} partitions for max load "
        f"{state.load.max_load:,.3f} -> {b.load.max_load:,.3f}, excess inflow {state.load.excess_inflow:,.1f} -> "
        f"{b.load.excess_inflow:,.1f}/s (gain {repack_gain(b, state):.1%} < repack min gain "
        f"{thresholds.repack_min_gain:.0%})",
        best=b,
    )


def _held_back(
    improving: list[CandidatePlan],
    allowed: list[CandidatePlan],
    worth: dict[str, str | None],
    state: GroupState,
    flagged: str,
    thresholds: Thresholds,
) -> Decision:
    """Candidates improve, but the hysteresis rule holds them all, or none is repaid."""
    if not allowed:
        b = best_candidate(improving)
        assert b is not None
        return Decision(
            "held_by_hysteresis",
            f"{flagged}; best ({b.strategy}: {worth[b.strategy]}) would move {b.moves_back} partition(s) back "
            f"to an owner they left within {thresholds.hysteresis_window_s:g} s without removing an overload",
            best=b,
        )
    b = best_candidate(allowed)
    assert b is not None
    return Decision(
        "not_repaid",
        f"{flagged}; best ({b.strategy}: {worth[b.strategy]}) is not repaid within "
        f"{thresholds.horizon_s:g} s: backlog area {state.load.backlog_area:,.0f} -> "
        f"{b.load.backlog_area:,.0f} msg*s with {b.moves} handover(s) x {thresholds.handover_cost_s:g} s",
        best=b,
    )


def _plan_decision(
    chosen: CandidatePlan,
    worth: dict[str, str | None],
    state: GroupState,
    flagged: str,
    thresholds: Thresholds,
    standing: StandingPlan | None,
    now: datetime | None,
) -> Decision:
    """``recommended``, or ``held_by_cooldown`` while a standing plan's cool-down runs (never while
    partitions no member owns have lag or inflow)."""
    change = f"{chosen.strategy}: {worth[chosen.strategy]}, {chosen.moves} handover(s)"
    until = cooldown_until(standing, now, thresholds)
    if (
        until is not None
        and standing is not None
        and state.load.unowned_backlog + state.load.unowned_inflow == 0
    ):
        return Decision(
            "held_by_cooldown",
            cooldown_reason(standing, until, change),
            chosen=chosen,
            plan_status="skipped",
            best=chosen,
        )
    return Decision("recommended", f"{flagged}; {change}", chosen, "recommended", chosen)
