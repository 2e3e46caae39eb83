"""Server-rendered HTML pages: the groups table and one group's picture with approve/reject.

Jinja2 templates (``webui/templates/``) with autoescape on, so every value is escaped unless it
is :class:`markupsafe.Markup` built escaped (the SVG charts of :mod:`.svg`). No JS framework:
a few lines of inline vanilla JS (table sorting, the confirmation dialog, the POST, Airflow's
light/dark choice and time zone). This module turns query results into what the templates show.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Annotated, Any
from urllib.parse import quote

from fastapi import APIRouter, Path, Request
from fastapi.concurrency import run_in_threadpool
from fastapi.responses import HTMLResponse
from fastapi.templating import Jinja2Templates
from jinja2 import Environment, PackageLoader, StrictUndefined

from rebalance_advisor.webui import queries, svg
from rebalance_advisor.webui.auth import PageUser, approval_dag_id, can_trigger

router = APIRouter(include_in_schema=False)


def format_number(value: float | None, digits: int = 0) -> str:
    """1234567 -> "1,234,567"; None -> "—"."""
    if value is None:
        return "—"
    return f"{value:,.{digits}f}"


def as_utc(value: datetime | str | None) -> datetime | None:
    """A stored timestamp in UTC, whole seconds. SQLite hands back naive datetimes: the store
    writes UTC, so naive means UTC."""
    if value is None:
        return None
    if isinstance(value, str):
        value = datetime.fromisoformat(value)
    if value.tzinfo is None:
        value = value.replace(tzinfo=UTC)
    return value.astimezone(UTC).replace(microsecond=0)


def format_timestamp(value: datetime | str | None) -> str:
    """"2025-01-02 03:04:05 UTC": with its time zone, without microseconds (the page's script
    shows it in the time zone chosen in Airflow's UI)."""
    moment = as_utc(value)
    return moment.strftime("%Y-%m-%d %H:%M:%S UTC") if moment else "—"


def iso_timestamp(value: datetime | str | None) -> str:
    moment = as_utc(value)
    return moment.isoformat() if moment else ""


def _environment() -> Environment:
    env = Environment(
        loader=PackageLoader("rebalance_advisor.webui", "templates"),
        autoescape=True,  # every template, whatever its name: an unescaped value is an XSS hole
        undefined=StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
    )
    env.filters.update(
        num=format_number,
        ts_text=format_timestamp,
        ts_iso=iso_timestamp,
        segment=lambda value: quote(str(value), safe=""),  # one URL path segment
    )
    return env


templates = Jinja2Templates(env=_environment())


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


@dataclass(frozen=True)
class GroupRow:
    """One line of the groups table."""

    group_id: str
    state: str
    type: str
    members: int
    total_lag: int | None
    imbalance: float | None
    hot: bool
    flagged: bool
    outcome: str | None
    reason: str | None
    plan_id: int | None
    plan_status: str | None

    @property
    def standing_plan(self) -> bool:
        """A plan recommended by an earlier run still awaits a decision (the newest outcome is
        whatever that run said, e.g. no better plan inside the cool-down)."""
        return self.plan_status == "recommended" and self.outcome != "recommended"


@router.get("/", response_class=HTMLResponse)
async def groups_page(request: Request, user: PageUser) -> HTMLResponse:
    data = await run_in_threadpool(queries.list_groups, request.app.state.db_url())
    threshold = data["threshold"]
    rows = [
        GroupRow(
            group_id=g["group_id"],
            state=g["state"],
            type=g["type"],
            members=g["members"],
            total_lag=g["total_lag"],
            imbalance=g["imbalance"],
            hot=g["imbalance"] is not None and g["imbalance"] >= threshold,
            flagged=g["flagged"],
            outcome=g["outcome"],
            reason=g["reason"],
            plan_id=g["latest_plan_id"],
            plan_status=g["latest_plan_status"],
        )
        for g in sorted(data["groups"], key=lambda r: (-(r["imbalance"] or 0), r["group_id"]))
    ]
    return render(
        request,
        "groups.html",
        title="Consumer groups",
        snapshot=data["snapshot"],
        threshold=threshold,
        groups=rows,
        user_name=user.get_name(),
    )


def chosen_plan(plans: list[dict[str, Any]]) -> dict[str, Any] | None:
    """The plan to picture: the newest recommended one, else the newest that is not skipped."""
    for wanted in (("recommended",), ("approved", "published", "rejected", "superseded")):
        for p in plans:
            if p["status"] in wanted:
                return p
    return None


def key_range(row: dict[str, Any]) -> tuple[int, int] | None:
    """The key-hash range a key-range plan gives this (member, partition) row, if any."""
    lo = row.get("hash_lo", row.get("key_hash_start"))
    hi = row.get("hash_hi", row.get("key_hash_end"))
    return None if lo is None or hi is None else (int(lo), int(hi))


@dataclass(frozen=True)
class MemberLoad:
    """One member's capacity and load (issue 13's rate-aware advice)."""

    label: str
    capacity: float | None  # messages/s it can consume
    inflow: float | None  # messages/s produced to its partitions
    overloaded: bool


@dataclass(frozen=True)
class GroupLoad:
    """Rate-aware numbers of one group: filled once snapshots carry rates and plans predictions."""

    produce_rate: float | None  # messages/s into the group's partitions
    time_lag_s: float | None  # how far behind the group is, in seconds
    catch_up_now_s: float | None  # predicted catch-up time, current assignment (None: never)
    catch_up_plan_s: float | None  # ... under the plan
    members: tuple[MemberLoad, ...]
    curves: tuple[svg.LagCurve, ...]  # predicted lag over time, current vs plan


@router.get("/groups/{group_id}", response_class=HTMLResponse)
async def group_page(
    request: Request, user: PageUser, group_id: Annotated[str, Path(max_length=255)]
) -> HTMLResponse:
    url = request.app.state.db_url()
    group = await run_in_threadpool(queries.group_detail, url, group_id, 30, 10)
    chosen = chosen_plan(group["plans"])
    detail = await run_in_threadpool(queries.plan_detail, url, chosen["id"]) if chosen else None
    threshold = group["threshold"]
    if detail:
        members = detail["members"]
        chart = svg.member_lag_bars(
            [m["label"] for m in members],
            [m["lag_before"] for m in members],
            [m["lag_after"] for m in members],
        )
    else:
        members = group["now"]["members"]
        chart = svg.member_lag_bars([m["label"] for m in members], [m["lag"] for m in members], None)
    history = svg.imbalance_line(
        [(str(p["snapshot_id"]), p["imbalance"]) for p in group["imbalance_history"]], threshold
    )
    outcome = group["outcome"] or {}
    imbalance = outcome.get("imbalance_before")
    plan = detail["plan"] if detail else None
    load: GroupLoad | None = None  # issue 13: from the snapshot's rates and the plan's prediction
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
        plan=plan,
        standing=plan is not None
        and plan["status"] == "recommended"
        and outcome.get("run_id") not in (None, plan["run_id"]),
        assignments=[(a, key_range(a)) for a in detail["assignments"]] if detail else [],
        has_ranges=bool(detail) and any(key_range(a) for a in detail["assignments"]),
        load=load,
        load_chart=svg.predicted_lag_lines(load.curves) if load and load.curves else None,
        allowed=can_trigger(user),
        approval_dag=approval_dag_id(),
    )
