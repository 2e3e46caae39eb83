"""Response models: they document the JSON API in FastAPI's OpenAPI schema and validate what we send."""

from __future__ import annotations

import dataclasses
import typing
from copy import copy
from datetime import datetime
from enum import StrEnum
from typing import Any

from pydantic import BaseModel, Field, create_model

from rebalance_advisor.domain.decisions import OUTCOMES
from rebalance_advisor.domain.parameters import STRATEGY_NAMES, ApprovalParams, ParamModel
from rebalance_advisor.store.plan_models import PLAN_STATUSES
from rebalance_advisor.store.plan_records import (
    OutcomeRecord,
    PlanAssignmentRecord,
    PlanColumns,
    PlanTransitionRecord,
)


def record_model(record: type, name: str, **extra: Any) -> type[BaseModel]:
    """A response model with the fields (names, types) of a store record, plus ``extra`` fields: the
    API's JSON and the store's typed rows cannot drift apart."""
    hints = typing.get_type_hints(record)
    fields: dict[str, Any] = {f.name: (hints[f.name], ...) for f in dataclasses.fields(record)}
    return create_model(name, __doc__=record.__doc__, **fields, **extra)


PlanStatus = StrEnum("PlanStatus", {s: s for s in PLAN_STATUSES})
Outcome = StrEnum("Outcome", {s: s for s in OUTCOMES})
Strategy = StrEnum("Strategy", {s: s for s in STRATEGY_NAMES})  # the assignor registry's names


class GroupType(StrEnum):
    classic = "classic"
    consumer = "consumer"
    simple = "simple"
    share = "share"  # KIP-932: the broker assigns it; outcome broker_assigned


class GroupSort(StrEnum):
    group_id = "group_id"
    state = "state"
    type = "type"
    members = "members"
    total_lag = "total_lag"
    imbalance = "imbalance"
    outcome = "outcome"


class SortOrder(StrEnum):
    asc = "asc"
    desc = "desc"


class SnapshotRef(BaseModel):
    id: int
    taken_at: datetime
    status: str


class GroupRow(BaseModel):
    group_id: str
    state: str
    type: str
    assignor: str | None
    members: int
    total_lag: int | None = Field(description="total lag (messages) at the newest advisor outcome")
    max_member_lag: int | None
    imbalance: float | None = Field(description="max / mean member lag at the newest advisor outcome")
    flagged: bool = Field(description="imbalance >= threshold and lag above the floor")
    outcome: str | None = Field(description="newest advisor outcome: " + ", ".join(OUTCOMES))
    reason: str | None
    outcome_snapshot_id: int | None = Field(description="snapshot the newest outcome was computed from")
    best_strategy: str | None
    latest_plan_id: int | None
    latest_plan_status: str | None


class GroupList(BaseModel):
    snapshot: SnapshotRef | None = Field(description="the newest snapshot; null when none is stored")
    threshold: float = Field(description="imbalance threshold of the newest advisor run")
    groups: list[GroupRow]


class MemberNow(BaseModel):
    member_id: str
    label: str = Field(description="group instance id when static, else member id")
    group_instance_id: str | None
    client_id: str
    host: str
    lag: int
    partitions: int


class PartitionNow(BaseModel):
    topic: str
    partition: int
    log_start_offset: int | None
    log_end_offset: int | None
    committed_offset: int | None
    lag: int
    owner: str | None


class NowView(BaseModel):
    members: list[MemberNow]
    partitions: list[PartitionNow]
    owners_from: str = Field(
        default="snapshot",
        description="where the partitions' owners come from: the snapshot (the group's members as Kafka "
        "lists them), or, for manual-assign consumers Kafka cannot list, the plan in force",
    )


class OwnerNow(BaseModel):
    member: str
    partitions: int
    lag: int


class InForcePlan(BaseModel):
    """The group's published plan: what its consumers were told to run."""

    plan_id: int
    epoch: int | None
    apply_mode: str = Field(description="how it was applied: static assignments or broker assignor")
    strategy: str
    published_at: datetime | None
    moves: int = Field(description="partitions it moved against the assignment it replaced")


#: a plan without its metrics JSON: the store's plan columns, name for name
PlanSummary = record_model(PlanColumns, "PlanSummary")


class ImbalancePoint(BaseModel):
    snapshot_id: int
    imbalance: float | None


#: a group's newest ``group_outcomes`` row, with its run's snapshot and when the run finished
OutcomeRow = record_model(OutcomeRecord, "OutcomeRow")


class GroupDetail(BaseModel):
    group_id: str
    snapshot_id: int | None = Field(description="newest snapshot holding the group")
    state: str | None = None
    type: str | None = None
    assignor: str | None = None
    members: int | None = None
    threshold: float
    manual_assign: bool = Field(
        description="registered static members: its plans can be approved and published as static assignments"
    )
    apply_mode: str = Field(
        description="how the group's plans are applied now: static assignments (manual-assign), "
        "broker assignor (KIP-848 group on the broker plugin's assignor) or advice only"
    )
    outcome: OutcomeRow | None = Field(description="the group's newest group_outcomes row")
    now: NowView
    owners_now: list[OwnerNow] = Field(default=[], description="per owner, its partitions and lag now")
    in_force: InForcePlan | None = Field(
        default=None, description="the published plan in force; null when none is (Kafka's own assignor)"
    )
    standing_plan_id: int | None = Field(
        default=None,
        description="the recommended or approved plan awaiting a decision, when it differs from what is in force",
    )
    duplicate_plan_ids: list[int] = Field(
        default=[], description="standing plans whose assignment is the one in force: nothing to decide"
    )
    plans: list[PlanSummary] = Field(description="newest plans first")
    imbalance_history: list[ImbalancePoint] = Field(description="oldest first, one point per snapshot")


class PlanPage(BaseModel):
    total: int
    page: int
    page_size: int
    items: list[PlanSummary]


#: one assignment row of a plan, with the member's label (plans already name static members by
#: instance id, so the label is the member id)
PlanAssignmentRow = record_model(PlanAssignmentRecord, "PlanAssignmentRow", member_label=(str, ...))


class MemberComparison(BaseModel):
    member_id: str
    label: str
    lag_before: int
    lag_after: int
    partitions_before: int
    partitions_after: int


class Move(BaseModel):
    topic: str
    partition: int
    lag: int
    from_member: str | None = Field(description="owner in the plan's snapshot; null when unowned")
    from_label: str | None
    to_member: str
    to_label: str


#: one status change of a plan
TransitionItem = record_model(PlanTransitionRecord, "TransitionItem")


class PlanDetail(BaseModel):
    plan: PlanSummary
    members: list[MemberComparison]
    assignments: list[PlanAssignmentRow]
    moves: list[Move] = Field(description="partitions whose owner changes under the plan")
    transitions: list[TransitionItem] = Field(description="status changes, oldest first")


def request_model(name: str, model: type[ParamModel], fields: tuple[str, ...]) -> type[BaseModel]:
    """A request body of some of a parameter model's fields: same types, defaults, bounds, descriptions."""
    chosen = {}
    for field_name in fields:
        info = copy(model.model_fields[field_name])
        info.json_schema_extra = None  # the model's surface marks are not part of the API
        chosen[field_name] = (model.model_fields[field_name].annotation, info)
    return create_model(name, **chosen)


#: body of approve/reject: the approval model's note
DecisionBody = request_model("DecisionBody", ApprovalParams, ("note",))


class ErrorBody(BaseModel):
    detail: str
