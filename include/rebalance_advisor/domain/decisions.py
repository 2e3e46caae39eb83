"""Decision rules: from a group's current metrics and its candidate plans to one outcome.

Pure functions, no I/O, so the same rules run inside Spark, in tests and in the CLI. Defaults
(also in README "Decision rules"):

- ``imbalance_threshold`` 1.25: a group is *flagged* when max / mean member lag >= 1.25
  **and** its total lag >= ``lag_floor`` (1,000 messages) — a few hundred messages spread
  unevenly are noise, not load.
- ``min_improvement`` 0.10: the best candidate is recommended only when it lowers the max member
  lag by at least 10 % of the current max.
- ``move_budget`` None (unlimited): candidates moving more partitions than the budget are not
  considered (``lag_aware_sticky`` is also given the budget so it stops in time).
- ``cooldown_minutes`` 30: while a group's last recommended/approved/published plan is younger
  than this, a run adds no new recommendation; the candidate is kept as a ``skipped`` plan.

Lag on partitions no member owns (a manual-assign group with no published plan yet, partitions
its published plan does not cover, or members that hold nothing yet) flags the group whatever
its imbalance, and any plan that assigns it counts as an improvement (the min-improvement rule
compares owned lag only).

Outcomes, checked in this order: ``error`` (the spec is invalid), ``no_members`` (no members and
no registered static members), ``idle`` (total lag < floor, including 0), ``balanced`` (imbalance
< threshold), then for flagged groups ``recommended`` or ``no_better_plan`` (improvement too
small, nothing within the move budget, or cool-down).

Best candidate: lowest max member lag; ties -> fewer moves; then :data:`STRATEGY_PREFERENCE`.
On a full tie (same max lag, same moves) ``lag_aware`` wins over ``lag_aware_sticky``: the two
then usually hold the very same assignment, and naming it after the published KAFKA-5337
algorithm makes it reproducible by anyone; whenever ``lag_aware_sticky`` reaches the same max lag
with fewer moves (its purpose) the moves tie-break already picks it.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta

from rebalance_advisor.domain.advice import STANDING_STATUSES, CandidatePlan, StandingPlan
from rebalance_advisor.domain.assignors import ASSIGNORS
from rebalance_advisor.domain.parameters import Thresholds

#: tie order between strategies with equal max lag and moves (earlier wins); see module docstring.
STRATEGY_PREFERENCE: tuple[str, ...] = ("lag_aware", "lag_aware_sticky", "sticky", "roundrobin", "range")
DEFAULT_STRATEGIES: tuple[str, ...] = tuple(ASSIGNORS)

OUTCOMES = ("balanced", "recommended", "no_better_plan", "idle", "no_members", "error")
#: outcomes of a group the flag rule caught (:func:`is_flagged`): the ones a run reports as flagged.
FLAGGED_OUTCOMES = ("recommended", "no_better_plan")

# re-exported: callers import them here (Thresholds: the rule knobs of domain/parameters.py)
__all__ = ["STANDING_STATUSES", "CandidatePlan", "StandingPlan", "Thresholds"]


@dataclass(frozen=True)
class Decision:
    """One group's outcome; ``chosen`` is the candidate to store and ``plan_status`` its status."""

    outcome: str
    reason: str
    chosen: CandidatePlan | None = None
    plan_status: str | None = None  # "recommended", "skipped" or None (no plan row)
    best: CandidatePlan | None = field(default=None)  # best candidate, stored or not


def as_utc(moment: datetime) -> datetime:
    """Aware UTC datetime; naive ones are UTC (SQLite hands timestamps back without a zone)."""
    return moment.replace(tzinfo=UTC) if moment.tzinfo is None else moment.astimezone(UTC)


def is_idle(total_lag: int, thresholds: Thresholds) -> bool:
    """The idle rule: total lag under the floor (including none) is noise, not load."""
    return total_lag < thresholds.lag_floor


def is_flagged(imbalance: float, total_lag: int, unowned_lag: int, thresholds: Thresholds) -> bool:
    """The flag rule: not idle, and lag no member owns or uneven (imbalance >= threshold)."""
    return not is_idle(total_lag, thresholds) and (
        unowned_lag > 0 or imbalance >= thresholds.imbalance_threshold
    )


def within_move_budget(moves: int, move_budget: int | None) -> bool:
    """The move-budget rule: a candidate may move at most ``move_budget`` partitions (None: any)."""
    return move_budget is None or moves <= move_budget


def cooldown_until(
    standing: StandingPlan | None, now: datetime | None, thresholds: Thresholds
) -> datetime | None:
    """The cool-down rule: until when ``standing`` holds the group at ``now`` (None: it does not)."""
    if standing is None or now is None or thresholds.cooldown_minutes <= 0:
        return None
    until = as_utc(standing.created_at) + timedelta(minutes=thresholds.cooldown_minutes)
    return until if as_utc(now) < until else None


def rank_key(candidate: CandidatePlan) -> tuple[int, int, int]:
    """Sort key of the best-candidate rule: max lag, then moves, then strategy preference."""
    try:
        preference = STRATEGY_PREFERENCE.index(candidate.strategy)
    except ValueError:
        preference = len(STRATEGY_PREFERENCE)
    return (candidate.max_lag, candidate.moves, preference)


def best_candidate(candidates: Sequence[CandidatePlan], move_budget: int | None) -> CandidatePlan | None:
    """The best candidate within the move budget, or None when none fits."""
    eligible = [c for c in candidates if within_move_budget(c.moves, move_budget)]
    return min(eligible, key=rank_key, default=None)


def improvement(before: int, after: int) -> float:
    """Relative drop of the max member lag (0.0 when there was none)."""
    return (before - after) / before if before > 0 else 0.0


def improves_enough(before: int, after: int, unowned_lag: int, thresholds: Thresholds) -> bool:
    """The improvement rule: max lag down by ``min_improvement``; assigning unowned lag always counts."""
    return unowned_lag > 0 or improvement(before, after) >= thresholds.min_improvement


def decide(
    *,
    total_lag: int,
    max_lag_before: int,
    imbalance_before: float,
    candidates: Sequence[CandidatePlan],
    thresholds: Thresholds,
    unowned_lag: int = 0,
    standing: StandingPlan | None = None,
    now: datetime | None = None,
) -> Decision:
    """Apply the rules of the module docstring to a group that has members and a valid spec."""
    if is_idle(total_lag, thresholds):
        what = "no lag" if total_lag == 0 else f"total lag {total_lag:,} < floor {thresholds.lag_floor:,}"
        return Decision("idle", what)
    if unowned_lag > 0:
        flagged = f"lag {unowned_lag:,} on partitions no member owns"
    elif not is_flagged(imbalance_before, total_lag, unowned_lag, thresholds):
        return Decision(
            "balanced", f"imbalance {imbalance_before:.3f} < threshold {thresholds.imbalance_threshold}"
        )
    else:
        flagged = f"imbalance {imbalance_before:.3f} >= {thresholds.imbalance_threshold}"
    best = best_candidate(candidates, thresholds.move_budget)
    if best is None:
        fewest = min(candidates, key=lambda c: (c.moves, rank_key(c)), default=None)
        detail = f"; fewest: {fewest.moves} by {fewest.strategy}" if fewest else ""
        return Decision(
            "no_better_plan",
            f"{flagged}, but no candidate within move budget {thresholds.move_budget}{detail}",
        )
    gain = improvement(max_lag_before, best.max_lag)
    if not improves_enough(max_lag_before, best.max_lag, unowned_lag, thresholds):
        return Decision(
            "no_better_plan",
            f"{flagged}, but best ({best.strategy}) lowers max lag {max_lag_before:,} -> {best.max_lag:,} "
            f"only {gain:.1%} < {thresholds.min_improvement:.0%}",
            best=best,
        )
    change = f"max lag {max_lag_before:,} -> {best.max_lag:,}, {best.moves} moves"
    if unowned_lag == 0:
        change = f"max lag {max_lag_before:,} -> {best.max_lag:,} (-{gain:.1%}), {best.moves} moves"
    until = cooldown_until(standing, now, thresholds)
    if until is not None and standing is not None:
        return Decision(
            "no_better_plan",
            f"cool-down: plan {standing.plan_id} ({standing.status}) still stands until "
            f"{until.isoformat(timespec='seconds')}; candidate {best.strategy} ({change}) kept as skipped",
            chosen=best,
            plan_status="skipped",
            best=best,
        )
    return Decision("recommended", f"{flagged}; {best.strategy}: {change}", best, "recommended", best)
