"""Advise one group: observed state -> every requested strategy -> metrics -> decision -> advice.

:func:`advise_group` is the one pure function the Spark planner (inside ``applyInPandas``), the
``plan`` CLI, the benchmarks and the simulator call; it only calls the assignors, metrics and the
decision rules of :mod:`rebalance_advisor.domain.decisions`. :func:`plan_group` is the same for a
spec *document* (the JSON shape built by :mod:`rebalance_advisor.domain.spec_documents`)::

    {"group_id": "g", "members": [...], "partitions": [...],   # parse_group_spec's format
     "weight": "lag",                                           # what partition "lag" means
     "note": null,                                             # why the spec may be missing
     "standing": {"plan_id": 3, "status": "recommended", "created_at": "..."} | null}

Both return a :class:`~rebalance_advisor.domain.advice.GroupAdvice` and never raise for a bad
group: an invalid spec becomes outcome ``error`` with the message, so one broken group cannot stop
the others from planning.
"""

from __future__ import annotations

import dataclasses
from datetime import datetime
from typing import Any

import numpy as np

from rebalance_advisor.domain.advice import (
    CandidatePlan,
    ChosenPlan,
    GroupAdvice,
    GroupObservation,
    StandingPlan,
)
from rebalance_advisor.domain.assignors import get_assignor
from rebalance_advisor.domain.decisions import Thresholds, cooldown_until, decide, is_flagged
from rebalance_advisor.domain.group_spec import GroupSpec, parse_group_spec
from rebalance_advisor.domain.metrics import GroupMetrics, compute_metrics, lower_bound_max_lag
from rebalance_advisor.errors import AdvisorError

NO_MEMBERS = "no members and no registered static members"


def strategy_options(strategy: str, thresholds: Thresholds) -> dict[str, Any]:
    """Options a strategy gets from the run's thresholds (only lag_aware_sticky takes the budget)."""
    if strategy == "lag_aware_sticky":
        return {"move_budget": thresholds.move_budget}
    return {}


def candidate_owners(spec: GroupSpec, thresholds: Thresholds) -> dict[str, np.ndarray]:
    """Every requested strategy's owners array for the spec (the exact assignor calls)."""
    return {
        name: get_assignor(name).owners(spec, **strategy_options(name, thresholds))
        for name in thresholds.strategies
    }


def _rounded(metrics: GroupMetrics) -> GroupMetrics:
    """Floats to 6 decimals: what is stored and compared across runs."""
    return dataclasses.replace(
        metrics,
        imbalance=round(float(metrics.imbalance), 6),
        lag_cv=round(float(metrics.lag_cv), 6),
        gap=round(float(metrics.gap), 6),
    )


def observe_document(doc: dict[str, Any]) -> GroupObservation:
    """A spec document -> the observation; an invalid spec raises AdvisorError."""
    group_id = str(doc.get("group_id"))
    standing_doc = doc.get("standing")
    standing = None
    if standing_doc:
        standing = StandingPlan(
            standing_doc["plan_id"],
            standing_doc["status"],
            datetime.fromisoformat(standing_doc["created_at"]),
        )
    common = {"weight": doc.get("weight", "lag"), "note": doc.get("note"), "standing": standing}
    if not doc.get("members"):
        total_lag = int(sum(int(p.get("lag", 0)) for p in doc.get("partitions") or []))
        return GroupObservation(group_id, None, total_lag, **common)
    spec = parse_group_spec({k: doc[k] for k in ("group_id", "members", "partitions") if k in doc})
    return GroupObservation(group_id, spec, int(spec.lag.sum()), **common)


def plan_group(doc: dict[str, Any], thresholds: Thresholds, now: datetime) -> GroupAdvice:
    """:func:`advise_group` for a spec document (module docstring); never raises for a bad group."""
    try:
        observation = observe_document(doc)
    except AdvisorError as error:
        group_id = str(doc.get("group_id"))
        total_lag = int(sum(int(p.get("lag", 0)) for p in doc.get("partitions") or [] if isinstance(p, dict)))
        return GroupAdvice(group_id, "error", f"invalid group spec: {error}", total_lag)
    return advise_group(observation, thresholds, now)


def advise_group(observation: GroupObservation, thresholds: Thresholds, now: datetime) -> GroupAdvice:
    """One group's outcome, numbers and (when a plan is stored) the chosen assignment."""
    group_id = observation.group_id
    spec = observation.spec
    if spec is None:
        return GroupAdvice(group_id, "no_members", observation.note or NO_MEMBERS, observation.total_lag)
    total_lag = int(spec.lag.sum())
    try:
        bound = lower_bound_max_lag(spec)
        current = _rounded(compute_metrics(spec, spec.owner, bound))
        unowned_lag = int(spec.lag[spec.owner < 0].sum())
        # Idle and balanced groups need no candidates: skipping them is most of a quiet cluster's work.
        flagged = is_flagged(current.imbalance, total_lag, unowned_lag, thresholds)
        owners_by_strategy = candidate_owners(spec, thresholds) if flagged else {}
    except AdvisorError as error:
        return GroupAdvice(group_id, "error", f"invalid group spec: {error}", total_lag)
    metrics_by_strategy = {
        name: _rounded(compute_metrics(spec, o, bound)) for name, o in owners_by_strategy.items()
    }
    candidates = tuple(
        CandidatePlan(name, m.max_member_lag, m.moves, m.imbalance) for name, m in metrics_by_strategy.items()
    )
    decision = decide(
        total_lag=total_lag,
        max_lag_before=current.max_member_lag,
        imbalance_before=current.imbalance,
        candidates=candidates,
        thresholds=thresholds,
        unowned_lag=unowned_lag,
        standing=observation.standing,
        now=now,
    )
    plan = None
    if decision.chosen is not None and decision.plan_status is not None:
        name = decision.chosen.strategy
        owners = owners_by_strategy[name]
        member_ids = spec.member_ids
        keys = spec.partition_keys
        lags = spec.lag.tolist()
        plan = ChosenPlan(
            strategy=name,
            status=decision.plan_status,
            weight=observation.weight,
            metrics=metrics_by_strategy[name],
            equivalent_strategies=tuple(
                sorted(
                    other
                    for other, o in owners_by_strategy.items()
                    if other != name and np.array_equal(o, owners)
                )
            ),
            assignments=tuple(
                (member_ids[m], keys[k][0], keys[k][1], lags[k])
                for k, m in enumerate(owners.tolist())
                if m >= 0
            ),
        )
    return GroupAdvice(
        group_id=group_id,
        outcome=decision.outcome,
        reason=decision.reason,
        total_lag=total_lag,
        current=current,
        unowned_lag=unowned_lag,
        candidates=candidates,
        best=decision.best,
        plan=plan,
    )


def hold_back(
    advice: GroupAdvice, standing: StandingPlan, now: datetime, thresholds: Thresholds
) -> GroupAdvice:
    """A recommendation that ``standing`` (a concurrent run's committed plan) now holds back, or as is.

    The same cool-down rule :func:`decide` applies, re-checked when the run is written, against plans
    committed while it planned: the recommendation becomes a ``skipped`` plan with outcome
    ``no_better_plan``, which is what the rules would have decided had they seen that plan.
    """
    until = cooldown_until(standing, now, thresholds)
    if until is None or advice.plan is None or advice.plan.status != "recommended":
        return advice
    return dataclasses.replace(
        advice,
        outcome="no_better_plan",
        reason=(
            f"cool-down: plan {standing.plan_id} ({standing.status}), written by a concurrent run, still "
            f"stands until {until.isoformat(timespec='seconds')}; candidate {advice.plan.strategy} kept as "
            f"skipped (was: {advice.reason})"
        ),
        plan=dataclasses.replace(advice.plan, status="skipped"),
    )
