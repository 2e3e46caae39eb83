"""Server-rendered HTML pages: the groups table and one group's picture with approve/reject.

Jinja2 templates (``webui/templates/``) with autoescape on, so every value is escaped unless it
is :class:`markupsafe.Markup` built escaped (the SVG charts of :mod:`.svg`). No JS framework:
a few lines of inline vanilla JS (table sorting, the confirmation dialog, the POST, Airflow's
light/dark choice and time zone). This module turns query results into what the templates show.
"""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Path, Request
from fastapi.concurrency import run_in_threadpool
from fastapi.responses import HTMLResponse

from rebalance_advisor.domain.parameters import STORED_ID_BYTES, Thresholds
from rebalance_advisor.webui import queries, svg
from rebalance_advisor.webui.api_docs import api_docs
from rebalance_advisor.webui.auth import PageUser, approval_dag_id, can_trigger
from rebalance_advisor.webui.rendering import GroupTableLine, chosen_plan, group_load, key_range, templates

router = APIRouter(include_in_schema=False)


def base_path(request: Request) -> str:
    """Where this app is mounted (``/rebalance-advisor`` inside Airflow), for links and fetches."""
    return request.scope.get("root_path", "").rstrip("/")


def airflow_ui_path(request: Request) -> str:
    """Airflow's UI root: the plugin app is mounted one path segment below it."""
    return base_path(request).rsplit("/", 1)[0]


def render(request: Request, template: str, status_code: int = 200, **context: Any) -> HTMLResponse:
    return templates.TemplateResponse(
        request,
        template,
        {"base": base_path(request), "airflow": airflow_ui_path(request), **context},
        status_code=status_code,
    )


def error_page(request: Request, title: str, message: str, status_code: int) -> HTMLResponse:
    return render(request, "error.html", status_code, title=title, message=message)


@router.get("/", response_class=HTMLResponse)
async def groups_page(request: Request, user: PageUser) -> HTMLResponse:
    data = await run_in_threadpool(queries.group_overview, request.app.state.db_url())
    threshold = data.threshold
    rows = [
        GroupTableLine(g, threshold)
        for g in sorted(data.groups, key=lambda r: (-(r.imbalance or 0), r.group_id))
    ]
    return render(
        request,
        "groups.html",
        title="Consumer groups",
        snapshot=data.snapshot,
        threshold=threshold,
        groups=rows,
        user_name=user.get_name(),
    )


@router.get("/docs", response_class=HTMLResponse)
async def api_docs_page(request: Request) -> HTMLResponse:
    """The API's documentation, readable without a script or a CDN (public, as ``/openapi.json`` is)."""
    docs = api_docs(request.app.openapi())
    return render(request, "docs.html", title="API", docs=docs)


@router.get("/groups/{group_id:path}", response_class=HTMLResponse)
async def group_page(
    request: Request, user: PageUser, group_id: Annotated[str, Path(max_length=STORED_ID_BYTES)]
) -> HTMLResponse:
    url = request.app.state.db_url()
    group = await run_in_threadpool(queries.group_detail, url, group_id, 30, 10)
    chosen = chosen_plan(group)
    picture = await run_in_threadpool(queries.plan_detail, url, chosen) if chosen is not None else None
    detail = picture.detail if picture else None
    threshold = group.threshold
    if detail:
        compared = detail.members
        chart = svg.member_lag_bars(
            [m.label for m in compared], [m.lag_before for m in compared], [m.lag_after for m in compared]
        )
    else:
        members = group.now.members
        chart = svg.member_lag_bars([m.label for m in members], [m.lag for m in members], None)
    history = svg.imbalance_line(
        [(str(p.snapshot_id), p.imbalance) for p in group.imbalance_history], threshold
    )
    outcome = group.outcome
    imbalance = outcome.imbalance_before if outcome else None
    plan = detail.plan if detail else None
    load = (
        group_load(plan.strategy, picture.max_time_lag_s, picture.metrics, Thresholds().horizon_s)
        if picture and plan
        else None
    )
    return render(
        request,
        "group.html",
        title=f"Group {group_id}",
        group_id=group_id,
        group=group,
        threshold=threshold,
        outcome=outcome,
        imbalance=imbalance,
        hot=imbalance is not None and imbalance >= threshold,
        chart=chart,
        history=history,
        detail=detail,
        run_threshold=picture.run_threshold if picture else None,
        plan=plan,
        standing=plan is not None and plan.id == group.standing_plan_id,
        assignments=[(a, key_range(a)) for a in detail.assignments] if detail else [],
        has_ranges=bool(detail) and any(key_range(a) for a in detail.assignments),
        load=load,
        load_chart=svg.predicted_lag_lines(load.curves) if load and load.curves else None,
        allowed=can_trigger(user),
        approval_dag=approval_dag_id(),
    )
