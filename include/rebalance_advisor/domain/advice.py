"""The typed values of advising one group: what was observed, what was weighed, what was decided.

:class:`GroupObservation` is the input of :func:`rebalance_advisor.domain.group_planning.advise_group`
(the group's spec, its standing plan, its recent moves); :class:`GroupAdvice` is the output, read by
the plan store, the Spark planner, the CLI and the simulator. They cross the Spark/Arrow boundary as
JSON (:meth:`GroupAdvice.to_json` / :meth:`GroupAdvice.from_json`, pydantic does the conversion).
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field, fields
from datetime import datetime
from functools import cache
from typing import Any

from pydantic import TypeAdapter

from rebalance_advisor.domain.group_spec import GroupSpec, RecentMove
from rebalance_advisor.domain.interval_evidence import IntervalObservation
from rebalance_advisor.domain.key_range_advice import CurrentRange, KeySharingInputs
from rebalance_advisor.domain.load_model import LoadSummary, MemberLoad
from rebalance_advisor.domain.metrics import GroupMetrics

#: plan statuses that hold a group (its newest such plan is the group's "standing" plan).
STANDING_STATUSES = ("recommended", "approved", "published")


@dataclass(frozen=True)
class StandingPlan:
    """The group's newest plan that still holds it (recommended, approved or published)."""

    plan_id: int
    status: str
    created_at: datetime


@dataclass(frozen=True, eq=False)
class GroupObservation:
    """One group as the advisor sees it: ``spec`` None when it has no members (``note`` says why)."""

    group_id: str
    spec: GroupSpec | None
    total_lag: int = 0
    weight: str = "lag"
    note: str | None = None
    standing: StandingPlan | None = None
    recent_moves: tuple[RecentMove, ...] = ()
    #: a share group (KIP-932): the broker assigns it, the advisor never plans it
    broker_assigned: bool = False
    #: flagged members and key samples for key_range (domain/key_range_advice.py)
    key_sharing: KeySharingInputs | None = None
    #: the key ranges of the group's latest published plan (domain/key_range_advice.py)
    current_ranges: tuple[CurrentRange, ...] = ()
    #: members whose capacity is an estimate (``snapshot_model.ESTIMATED_CAPACITY_SOURCES``): never
    #: seen saturated, so they may be faster than the estimate (group_planning's capacity probe)
    estimated_capacity: frozenset[str] = frozenset()
    #: members whose capacity is a guess from their own consume rate (``own_rate``): while any is,
    #: rate_aware_sticky balances fully instead of settling at the fill level
    own_rate_capacity: frozenset[str] = frozenset()
    #: seconds between the snapshots the rates come from (None: unknown); sets the auto capacity
    #: margin (``Thresholds.for_rate_interval``)
    rate_interval_s: float | None = None
    #: the last snapshot interval's own evidence (domain/interval_evidence.py; None: none, e.g. a
    #: hand-written plan document): what the load model adds to the smoothed rates
    interval: IntervalObservation | None = None


@dataclass(frozen=True)
class CandidatePlan:
    """One strategy's plan for a group, reduced to what the decision rules compare and store.

    ``moves`` counts handovers: partitions that get a new owner, unowned ones included. ``load`` is
    the load model of the plan with the handover pause charged; ``moves_back`` the partitions it
    hands back to an owner they left within the hysteresis window; ``empty_members`` the members it
    leaves with nothing while a peer holds two or more.
    """

    strategy: str
    max_lag: int
    moves: int
    imbalance: float = 0.0
    load: LoadSummary = field(default_factory=lambda: LoadSummary(0, None, 0.0, None))
    moves_back: int = 0
    empty_members: int = 0


@dataclass(frozen=True)
class ChosenPlan:
    """The plan stored for the group: its assignment as (member, topic, partition, lag) rows."""

    strategy: str
    status: str  # "recommended" or "skipped"
    weight: str
    metrics: GroupMetrics
    equivalent_strategies: tuple[str, ...] = ()
    assignments: tuple[tuple[str, str, int, int], ...] = ()
    members: MemberLoad | None = None  # the load model per member (no pause charged)
    #: key ranges of split partitions (key_range, domain/assignors/key_range.py): (member, topic, partition, lag,
    #: hash_lo, hash_hi), half-open [hash_lo, hash_hi) of the positive murmur2 key hash
    key_ranges: tuple[tuple[str, str, int, int, int, int], ...] = ()


@dataclass(frozen=True)
class GroupAdvice:
    """One group's outcome for one run, the numbers it rests on and the plan to store (if any)."""

    group_id: str
    outcome: str
    reason: str
    total_lag: int
    current: GroupMetrics | None = None
    unowned_lag: int = 0
    current_load: LoadSummary | None = None
    current_members: MemberLoad | None = None
    candidates: tuple[CandidatePlan, ...] = ()
    best: CandidatePlan | None = None  # the best candidate, stored or not
    plan: ChosenPlan | None = field(default=None)
    #: members planned without a known capacity (source ``equal``): a plan applied on them is
    #: followed by an early snapshot (``estimates.wants_capacity_pass``)
    unknown_capacities: int = 0

    # ---- the flat numbers the outcome and plan rows hold ---------------------------------

    @property
    def max_lag_before(self) -> int | None:
        return None if self.current is None else self.current.max_member_lag

    @property
    def imbalance_before(self) -> float | None:
        return None if self.current is None else self.current.imbalance

    @property
    def spread_before(self) -> int | None:
        return None if self.current is None else self.current.partition_count_spread

    @property
    def best_strategy(self) -> str | None:
        return None if self.best is None else self.best.strategy

    @property
    def max_lag_after(self) -> int | None:
        return None if self.best is None else self.best.max_lag

    @property
    def imbalance_after(self) -> float | None:
        return None if self.best is None else self.best.imbalance

    @property
    def moves(self) -> int | None:
        return None if self.best is None else self.best.moves

    def metrics_record(self) -> dict[str, Any] | None:
        """The ``metrics`` JSON of a stored plan row (before, after, candidates), or None without a plan."""
        if self.plan is None or self.current is None:
            return None
        return {
            "before": self.current.to_dict() | {"unowned_lag": self.unowned_lag},
            "after": self.plan.metrics.to_dict(),
            "weight": self.plan.weight,
            "candidates": [
                {
                    "strategy": c.strategy,
                    "max_lag": c.max_lag,
                    "moves": c.moves,
                    "imbalance": c.imbalance,
                    "load": finite(_fields_of(c.load)),
                    "moves_back": c.moves_back,
                }
                for c in self.candidates
            ],
            "equivalent_strategies": list(self.plan.equivalent_strategies),
            "load_before": finite(_fields_of(self.current_load)) if self.current_load else None,
            "members_before": finite(_fields_of(self.current_members)) if self.current_members else None,
            "members_after": finite(_fields_of(self.plan.members)) if self.plan.members else None,
            "unknown_capacities": self.unknown_capacities,
        }

    # ---- JSON (the Spark boundary) -------------------------------------------------------

    def to_json(self) -> str:
        """JSON with ``Infinity`` for an infinite catch-up (Python's json reads it back)."""
        return json.dumps(_adapter().dump_python(self))

    @classmethod
    def from_json(cls, text: str | bytes) -> GroupAdvice:
        return _adapter().validate_python(json.loads(text))


def _fields_of(value: Any) -> dict[str, Any]:
    """A flat dataclass (LoadSummary, MemberLoad) as a dict of its fields, in field order: what
    ``dataclasses.asdict`` gives for one whose values are numbers and tuples of numbers, once
    :func:`finite` has made the tuples lists, without asdict's recursive deep copy (a tenth of
    planning a small group, bench/pipeline.py)."""
    return {name: getattr(value, name) for name in _field_names(type(value))}


@cache
def _field_names(cls: type) -> tuple[str, ...]:
    return tuple(f.name for f in fields(cls))


def finite(value: Any) -> Any:
    """``value`` with infinite floats as None (database JSON has no Infinity): None = never catches up."""
    if isinstance(value, float):
        return None if math.isinf(value) else value
    if isinstance(value, dict):
        return {k: finite(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [finite(v) for v in value]
    return value


@cache
def _adapter() -> TypeAdapter[GroupAdvice]:
    return TypeAdapter(GroupAdvice)


@dataclass(frozen=True)
class OutcomeLine:
    """One group's outcome in one run, as stored (``group_outcomes``) and printed (the DAG summary,
    ``advise``, the demo). JSON-able through :meth:`to_dict` / :meth:`from_dict` (Airflow's XCom)."""

    group_id: str
    outcome: str
    reason: str
    total_lag: int
    max_lag_before: int | None = None
    max_lag_after: int | None = None
    imbalance_before: float | None = None
    imbalance_after: float | None = None
    moves: int | None = None
    best_strategy: str | None = None
    plan_id: int | None = None
    plan_status: str | None = None  # known right after planning; the stored row does not keep it
    run_id: int | None = None  # known once stored

    @classmethod
    def of(cls, advice: GroupAdvice, plan_id: int | None = None) -> OutcomeLine:
        return cls(
            group_id=advice.group_id,
            outcome=advice.outcome,
            reason=advice.reason,
            total_lag=advice.total_lag,
            max_lag_before=advice.max_lag_before,
            max_lag_after=advice.max_lag_after,
            imbalance_before=advice.imbalance_before,
            imbalance_after=advice.imbalance_after,
            moves=advice.moves,
            best_strategy=advice.best_strategy,
            plan_id=plan_id,
            plan_status=None if advice.plan is None else advice.plan.status,
        )

    def to_dict(self) -> dict[str, Any]:
        return _fields_of(self)  # its fields are plain values: asdict's deep copy would only cost

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> OutcomeLine:
        return cls(**{k: data.get(k) for k in cls.__dataclass_fields__ if k in data})
