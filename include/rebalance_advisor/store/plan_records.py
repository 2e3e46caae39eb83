"""The typed rows the plan store hands out: what the CLI, the services and the web UI read.

Frozen dataclasses, one per question, named after their table; a ``metrics`` or ``params`` field
is the stored JSON document itself (the planner's load model, a run's parameters). Built by
:func:`record` from a SQL row mapping, so a column the class names but the query lacks fails loudly.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, TypeVar

R = TypeVar("R")


def record(cls: type[R], row: Mapping[str, Any], **extra: Any) -> R:
    """``cls`` from the row's columns of the same names (plus ``extra``); other columns are ignored."""
    values = {**row, **extra}
    return cls(**{f.name: values[f.name] for f in dataclasses.fields(cls) if f.name in values})  # type: ignore[call-arg]


@dataclass(frozen=True)
class PlanAssignmentRecord:
    """One (member, partition) row of a plan; a key range of a split partition when the hashes are set."""

    member_id: str
    topic: str
    partition: int
    lag: int
    key_hash_start: int | None
    key_hash_end: int | None


@dataclass(frozen=True)
class PlanTransitionRecord:
    """One status change of a plan."""

    from_status: str | None
    to_status: str
    actor: str
    airflow_run_id: str | None
    at: datetime
    note: str | None


@dataclass(frozen=True)
class PlanColumns:
    """A ``plans`` row without its ``metrics`` JSON: what lists and summaries show."""

    id: int
    run_id: int
    snapshot_id: int
    group_id: str
    strategy: str
    status: str
    epoch: int | None
    created_at: datetime
    created_by: str
    max_lag_before: int
    max_lag_after: int
    imbalance_before: float
    imbalance_after: float
    spread_before: int
    spread_after: int
    moves: int
    lower_bound: int
    gap: float
    reason: str
    #: static assignments / broker assignor / advice only (domain/apply_mode.py)
    apply_mode: str
    #: the newest advisor run that arrived at this plan's assignment again (None: only its first)
    last_confirmed_at: datetime | None = field(default=None, kw_only=True)
    #: the load model's predicted catch-up of the slowest member, current assignment / the plan (None:
    #: never when that side has overloaded members, else unknown: no capacities)
    predicted_catch_up_before_s: float | None = field(default=None, kw_only=True)
    predicted_catch_up_after_s: float | None = field(default=None, kw_only=True)
    #: members whose inflow reaches their capacity, current assignment / the plan
    overloaded_members_before: int | None = field(default=None, kw_only=True)
    overloaded_members_after: int | None = field(default=None, kw_only=True)
    #: lag on partitions no member owns (not in the member lags), current assignment / the plan
    unowned_lag_before: int | None = field(default=None, kw_only=True)
    unowned_lag_after: int | None = field(default=None, kw_only=True)
    #: the group's furthest-behind partition, in seconds, in the plan's snapshot
    group_max_time_lag_s: float | None = field(default=None, kw_only=True)


@dataclass(frozen=True)
class PlanRecord(PlanColumns):
    """One ``plans`` row, with its ``metrics`` JSON (the planner's numbers and load model)."""

    metrics: dict[str, Any] | None


@dataclass(frozen=True)
class StoredPlan(PlanRecord):
    """A plan with its assignment rows and its status history (oldest first)."""

    assignments: tuple[PlanAssignmentRecord, ...] = ()
    transitions: tuple[PlanTransitionRecord, ...] = ()


@dataclass(frozen=True)
class PlanListing(PlanColumns):
    """A line of ``plans``: the plan's columns without the metrics JSON."""


@dataclass(frozen=True)
class PlanRef:
    """The newest non-skipped plan of a group: enough to link to it."""

    id: int
    group_id: str
    status: str
    strategy: str


@dataclass(frozen=True)
class OutcomeRecord:
    """A group's ``group_outcomes`` row, with its run's snapshot and when the run finished."""

    run_id: int
    group_id: str
    outcome: str
    reason: str
    total_lag: int
    max_lag_before: int | None
    max_lag_after: int | None
    imbalance_before: float | None
    imbalance_after: float | None
    moves: int | None
    best_strategy: str | None
    plan_id: int | None
    snapshot_id: int
    planned_at: datetime | None


@dataclass(frozen=True)
class AdvisorRunRecord:
    """One ``advisor_runs`` row; ``params`` is the run's parameter document as stored."""

    id: int
    snapshot_id: int
    airflow_run_id: str | None
    started_at: datetime
    finished_at: datetime | None
    status: str
    params: dict[str, Any]
