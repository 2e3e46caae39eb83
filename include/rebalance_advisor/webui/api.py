"""JSON API under ``<prefix>/api``: groups, one group, plans, one plan, approve/reject.

Every route depends on the Airflow user (:mod:`.auth`); errors are raised as the package's
exceptions and turned into 404/409/503 by the app's handlers (:mod:`.app`).
"""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Body, Depends, Path, Query, Request
from fastapi.concurrency import run_in_threadpool

from rebalance_advisor.domain.parameters import STORED_ID_BYTES, ApprovalParams, field_bounds
from rebalance_advisor.webui import plan_decisions, queries
from rebalance_advisor.webui.auth import TriggerUser, require_read
from rebalance_advisor.webui.schemas import (
    DecisionBody,
    ErrorBody,
    GroupDetail,
    GroupList,
    GroupRow,
    GroupSort,
    GroupType,
    Outcome,
    PlanDetail,
    PlanPage,
    PlanStatus,
    PlanSummary,
    SortOrder,
    Strategy,
)

ERRORS = {
    401: {"model": ErrorBody, "description": "no Airflow token (Authorization: Bearer, or the UI's cookie)"},
    403: {"model": ErrorBody, "description": "the user lacks the needed Airflow permission"},
    503: {"model": ErrorBody, "description": "the plan database is unreachable"},
}
NOT_FOUND = {404: {"model": ErrorBody, "description": "unknown group or plan"}}

router = APIRouter(
    prefix="/api", tags=["rebalance-advisor"], dependencies=[Depends(require_read)], responses=ERRORS
)


def db_url(request: Request) -> str:
    """The plan database URL, resolved per request by the app's provider (connection, env, default)."""
    return request.app.state.db_url()


DbUrl = Annotated[str, Depends(db_url)]
PlanId = Annotated[int, Path(**field_bounds(ApprovalParams, "plan_id"))]


def sort_groups(rows: list[GroupRow], sort: GroupSort, order: SortOrder) -> list[GroupRow]:
    """Sort with missing values last whatever the order (an unplanned group is never "most lagged")."""
    key = sort.value
    present = [r for r in rows if getattr(r, key) is not None]
    missing = [r for r in rows if getattr(r, key) is None]
    present.sort(key=lambda r: (getattr(r, key), r.group_id), reverse=order is SortOrder.desc)
    return present + sorted(missing, key=lambda r: r.group_id)


@router.get("/groups", response_model=GroupList, summary="Groups of the newest snapshot")
async def api_list_groups(
    url: DbUrl,
    sort: GroupSort = GroupSort.imbalance,
    order: SortOrder = SortOrder.desc,
    state: Annotated[str | None, Query(max_length=32, description="group state, e.g. Stable, Empty")] = None,
    type: Annotated[GroupType | None, Query(description="classic, consumer (KIP-848) or simple")] = None,
    outcome: Annotated[Outcome | None, Query(description="newest advisor outcome")] = None,
    flagged: Annotated[
        bool | None, Query(description="only flagged (true) or unflagged (false) groups")
    ] = None,
    q: Annotated[
        str | None, Query(max_length=STORED_ID_BYTES, description="substring of the group id")
    ] = None,
) -> GroupList:
    data = await run_in_threadpool(queries.group_overview, url)
    rows = data.groups
    if state:
        rows = [r for r in rows if r.state.lower() == state.lower()]
    if type:
        rows = [r for r in rows if r.type == type.value]
    if outcome:
        rows = [r for r in rows if r.outcome == outcome.value]
    if flagged is not None:
        rows = [r for r in rows if r.flagged is flagged]
    if q:
        rows = [r for r in rows if q.lower() in r.group_id.lower()]
    return data.model_copy(update={"groups": sort_groups(rows, sort, order)})


@router.get("/groups/{group_id:path}", response_model=GroupDetail, responses=NOT_FOUND, summary="One group")
async def api_get_group(
    url: DbUrl,
    group_id: Annotated[str, Path(max_length=STORED_ID_BYTES)],
    history: Annotated[int, Query(ge=1, le=500, description="imbalance points (snapshots) to return")] = 20,
    plans: Annotated[int, Query(ge=1, le=100, description="newest plans to return")] = 5,
) -> GroupDetail:
    return await run_in_threadpool(queries.group_detail, url, group_id, history, plans)


@router.get("/plans", response_model=PlanPage, summary="Plans, newest first, filtered and paged")
async def api_list_plans(
    url: DbUrl,
    group: Annotated[str | None, Query(max_length=STORED_ID_BYTES)] = None,
    status: PlanStatus | None = None,
    strategy: Annotated[Strategy | None, Query(description="assignor that produced the plan")] = None,
    page: Annotated[int, Query(ge=1, le=1_000_000)] = 1,  # bounded: OFFSET must fit a 64-bit integer
    page_size: Annotated[int, Query(ge=1, le=500)] = 50,
) -> PlanPage:
    return await run_in_threadpool(
        queries.plan_list_page,
        url,
        group=group,
        status=status.value if status else None,
        strategy=strategy.value if strategy else None,
        page=page,
        page_size=page_size,
    )


@router.get(
    "/plans/{plan_id}", response_model=PlanDetail, responses=NOT_FOUND, summary="One plan and its moves"
)
async def api_get_plan(url: DbUrl, plan_id: PlanId) -> PlanDetail:
    return (await run_in_threadpool(queries.plan_detail, url, plan_id)).detail


DECISION_ERRORS = {
    **NOT_FOUND,
    409: {"model": ErrorBody, "description": "the plan is not 'recommended' (the reason says why)"},
}


@router.post(
    "/plans/{plan_id}/approve",
    response_model=PlanSummary,
    responses=DECISION_ERRORS,
    summary="Approve a plan",
)
async def approve_plan(
    url: DbUrl,
    user: TriggerUser,
    plan_id: PlanId,
    body: Annotated[DecisionBody | None, Body()] = None,
) -> PlanSummary:
    note = body.note if body else None
    return await run_in_threadpool(
        plan_decisions.decide_from_ui, url, plan_id, "approve", user.get_name(), note
    )


@router.post(
    "/plans/{plan_id}/reject", response_model=PlanSummary, responses=DECISION_ERRORS, summary="Reject a plan"
)
async def reject_plan(
    url: DbUrl,
    user: TriggerUser,
    plan_id: PlanId,
    body: Annotated[DecisionBody | None, Body()] = None,
) -> PlanSummary:
    note = body.note if body else None
    return await run_in_threadpool(
        plan_decisions.decide_from_ui, url, plan_id, "reject", user.get_name(), note
    )
