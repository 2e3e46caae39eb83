"""Plan one group: spec document -> every requested strategy -> metrics -> decision -> result dict.

This is the per-group work the Spark job runs inside ``applyInPandas`` and the benchmark runs in a
plain loop; it only calls the assignors, metrics and decision rules. Input and output are plain
JSON-able dicts so they cross the Arrow boundary as one string column each.

Input (one group, built by :mod:`rebalance_advisor.domain.spec_documents`)::

    {"group_id": "g", "members": [...], "partitions": [...],   # parse_group_spec's format
     "weight": "lag",                                           # what partition "lag" means
     "note": null,                                             # why the spec may be missing
     "standing": {"plan_id": 3, "status": "recommended", "created_at": "..."} | null}

Output: see :func:`plan_group` (keys group_id, outcome, reason, numbers, ``plan`` or null).
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

import numpy as np

from rebalance_advisor.domain.assignors import get_assignor
from rebalance_advisor.domain.decisions import Candidate, StandingPlan, Thresholds, decide
from rebalance_advisor.domain.group_spec import GroupSpec, parse_group_spec
from rebalance_advisor.domain.metrics import compute_metrics, lower_bound_max_lag
from rebalance_advisor.errors import AdvisorError


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


def _round(metrics: dict[str, Any]) -> dict[str, Any]:
    for key in ("imbalance", "lag_cv", "gap"):
        metrics[key] = round(float(metrics[key]), 6)
    return metrics


def _empty_result(group_id: str, outcome: str, reason: str, total_lag: int) -> dict[str, Any]:
    return {
        "group_id": group_id,
        "outcome": outcome,
        "reason": reason,
        "total_lag": total_lag,
        "max_lag_before": None,
        "imbalance_before": None,
        "spread_before": None,
        "metrics_before": None,
        "best_strategy": None,
        "max_lag_after": None,
        "imbalance_after": None,
        "moves": None,
        "candidates": [],
        "plan": None,
    }


def _standing(doc: dict[str, Any] | None) -> StandingPlan | None:
    if not doc:
        return None
    return StandingPlan(doc["plan_id"], doc["status"], datetime.fromisoformat(doc["created_at"]))


def plan_group(doc: dict[str, Any], thresholds: Thresholds, now: datetime) -> dict[str, Any]:
    """One group's outcome, numbers and (when a plan is stored) the chosen assignment.

    Never raises for a bad group: an invalid spec becomes outcome ``error`` with the message, so
    one broken group cannot stop the others from planning.
    """
    group_id = str(doc.get("group_id"))
    total_lag = int(sum(int(p.get("lag", 0)) for p in doc.get("partitions") or []))
    if doc.get("note") and not doc.get("members"):
        return _empty_result(group_id, "no_members", doc["note"], total_lag)
    if not doc.get("members"):
        return _empty_result(group_id, "no_members", "no members and no registered static members", total_lag)
    try:
        spec = parse_group_spec({k: doc[k] for k in ("group_id", "members", "partitions") if k in doc})
        total_lag = int(spec.lag.sum())
        bound = lower_bound_max_lag(spec)
        current = compute_metrics(spec, spec.owner, bound)
        unowned_lag = int(spec.lag[spec.owner < 0].sum())
        # Idle and balanced groups need no candidates: skipping them is most of a quiet cluster's work.
        flagged = total_lag >= thresholds.lag_floor and (
            unowned_lag > 0 or current.imbalance >= thresholds.imbalance_threshold
        )
        owners_by_strategy = candidate_owners(spec, thresholds) if flagged else {}
    except AdvisorError as error:
        return _empty_result(group_id, "error", f"invalid group spec: {error}", total_lag)
    metrics_by_strategy = {name: compute_metrics(spec, o, bound) for name, o in owners_by_strategy.items()}
    candidates = [Candidate(name, m.max_member_lag, m.moves) for name, m in metrics_by_strategy.items()]
    decision = decide(
        total_lag=total_lag,
        max_lag_before=current.max_member_lag,
        imbalance_before=current.imbalance,
        candidates=candidates,
        thresholds=thresholds,
        unowned_lag=unowned_lag,
        standing=_standing(doc.get("standing")),
        now=now,
    )
    result = _empty_result(group_id, decision.outcome, decision.reason, total_lag)
    result.update(
        max_lag_before=current.max_member_lag,
        imbalance_before=round(current.imbalance, 6),
        spread_before=current.partition_count_spread,
        metrics_before=_round(current.to_dict()) | {"unowned_lag": unowned_lag},
        candidates=[
            {
                "strategy": name,
                "max_lag": m.max_member_lag,
                "moves": m.moves,
                "imbalance": round(m.imbalance, 6),
            }
            for name, m in metrics_by_strategy.items()
        ],
    )
    if decision.best is not None:
        best = metrics_by_strategy[decision.best.strategy]
        result.update(
            best_strategy=decision.best.strategy,
            max_lag_after=best.max_member_lag,
            imbalance_after=round(best.imbalance, 6),
            moves=best.moves,
        )
    if decision.chosen is not None:
        name = decision.chosen.strategy
        owners = owners_by_strategy[name]
        after = metrics_by_strategy[name]
        member_ids = spec.member_ids
        keys = spec.partition_keys
        lags = spec.lag.tolist()
        result["plan"] = {
            "strategy": name,
            "status": decision.plan_status,
            "weight": doc.get("weight", "lag"),
            "metrics_after": _round(after.to_dict()),
            "equivalent_strategies": sorted(
                other
                for other, o in owners_by_strategy.items()
                if other != name and np.array_equal(o, owners)
            ),
            "assignments": [
                [member_ids[m], keys[k][0], keys[k][1], lags[k]]
                for k, m in enumerate(owners.tolist())
                if m >= 0
            ],
        }
    return result
