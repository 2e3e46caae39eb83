"""What the pages show, apart from the routes: the Jinja2 environment (autoescape on), its
filters (numbers, timestamps with their zone, URL path segments) and the small typed views the
templates read. Imports no Airflow, so it is testable on its own.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any
from urllib.parse import quote

import numpy as np
from fastapi.templating import Jinja2Templates
from jinja2 import Environment, PackageLoader, StrictUndefined

from rebalance_advisor.domain.load_model import lag_curves
from rebalance_advisor.domain.timestamps import timestamp_text, utc_whole_seconds
from rebalance_advisor.webui import svg
from rebalance_advisor.webui.schemas import GroupDetail, GroupRow, PlanAssignmentRow


def format_number(value: float | None, digits: int = 0) -> str:
    """1234567 -> "1,234,567"; None -> "—"."""
    if value is None:
        return "—"
    return f"{value:,.{digits}f}"


def iso_timestamp(value: datetime | str | None) -> str:
    """The same moment for ``<time datetime=...>`` (the page's script shows it in Airflow's zone)."""
    moment = utc_whole_seconds(value)
    return moment.isoformat() if moment else ""


def environment() -> Environment:
    env = Environment(
        loader=PackageLoader("rebalance_advisor.webui", "templates"),
        autoescape=True,  # every template, whatever its name: an unescaped value is an XSS hole
        undefined=StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
    )
    env.filters.update(
        num=format_number,
        ts_text=timestamp_text,
        ts_iso=iso_timestamp,
        segment=lambda value: quote(str(value), safe=""),  # one URL path segment
    )
    return env


templates = Jinja2Templates(env=environment())


@dataclass(frozen=True)
class GroupTableLine:
    """One line of the groups table: the API's group row, and what the page marks on it."""

    row: GroupRow
    threshold: float  # the newest run's imbalance threshold

    @property
    def hot(self) -> bool:
        """The imbalance reaches the threshold (shown red)."""
        return self.row.imbalance is not None and self.row.imbalance >= self.threshold

    @property
    def standing_plan(self) -> bool:
        """A plan recommended by an earlier run still awaits a decision (the newest outcome is
        whatever that run said, e.g. no better plan inside the cool-down)."""
        return self.row.latest_plan_status == "recommended" and self.row.outcome != "recommended"


def chosen_plan(group: GroupDetail) -> int | None:
    """The plan to picture: the standing recommendation when it differs from what is in force, else
    the plan in force, else the newest plan that is not skipped (rejected, superseded)."""
    if group.standing_plan_id is not None:
        return group.standing_plan_id
    if group.in_force is not None:
        return group.in_force.plan_id
    shown = [p for p in group.plans if p.status != "skipped" and p.id not in group.duplicate_plan_ids]
    return shown[0].id if shown else None


def key_range(row: PlanAssignmentRow) -> tuple[int, int] | None:
    """The key-hash range a key-range plan gives this (member, partition) row, if any."""
    lo, hi = row.key_hash_start, row.key_hash_end
    return None if lo is None or hi is None else (int(lo), int(hi))


@dataclass(frozen=True)
class MemberLoadRow:
    """One member's inflow and capacity under the current assignment (the load model: docs/architecture.md, "The load model")."""

    label: str
    inflow: float  # messages/s produced to its partitions
    capacity: float | None  # messages/s it can consume (None: unknown)
    overloaded: bool  # inflow >= capacity: it never catches up


@dataclass(frozen=True)
class GroupLoadView:
    """Rate-aware numbers of one group, from the pictured plan's stored load model."""

    produce_rate: float  # messages/s into the group's assigned partitions
    time_lag_s: float | None  # the group's furthest-behind partition, in seconds, as stored with its snapshot
    capacities_known: bool
    catch_up_now_s: float | None  # predicted catch-up, current assignment (None: never, if capacities known)
    catch_up_plan_s: float | None  # ... under the plan
    members: tuple[MemberLoadRow, ...]
    curves: tuple[svg.LagCurve, ...]  # predicted total lag over time, current vs plan


def _total_lag_curve(members: dict[str, Any], times: np.ndarray) -> tuple[tuple[float, float], ...]:
    lag = lag_curves(
        np.array(members["backlog"]), np.array(members["inflow"]), np.array(members["capacity"]), times
    )
    return tuple(zip(times.tolist(), lag.sum(axis=0).tolist(), strict=True))


def _lag_curves(
    before: dict[str, Any],
    after: dict[str, Any],
    catch_up_s: tuple[float | None, float | None],
    horizon_s: float,
) -> tuple[svg.LagCurve, ...]:
    """The group's predicted lag under the current assignment and under the plan, until both have
    caught up (a quarter more), or over ``horizon_s`` when one never does."""
    ends = [s for s in catch_up_s if s is not None]
    span = max(ends) * 1.25 if len(ends) == 2 and max(ends) > 0 else horizon_s
    times = np.linspace(0.0, span, 61)
    return (
        svg.LagCurve("current", "current assignment", _total_lag_curve(before, times)),
        svg.LagCurve("plan", "under the plan", _total_lag_curve(after, times)),
    )


def group_load(
    strategy: str, time_lag_s: float | None, metrics: dict[str, Any] | None, horizon_s: float
) -> GroupLoadView | None:
    """The view of a plan's ``metrics`` JSON (``members_before/after``, ``load_before``, the chosen
    candidate's ``load``: the plan's ``strategy``); None for plans stored before the load model or
    without measured rates. ``time_lag_s``: the group's time lag in the plan's snapshot.

    The curves are the load model's fluid lag B(t) = max(B + (Λ − μ) t, 0) summed over members
    (:func:`rebalance_advisor.domain.load_model.lag_curves`), drawn until both have caught up
    (a quarter more) or over ``horizon_s`` when one never does.
    """
    metrics = metrics or {}
    before, after = metrics.get("members_before"), metrics.get("members_after")
    if not before or not any(before["inflow"]):
        return None
    known = before.get("capacity") is not None
    chosen = next((c for c in metrics.get("candidates") or () if c["strategy"] == strategy), {})
    now_s = (metrics.get("load_before") or {}).get("max_catch_up_s")
    plan_s = (chosen.get("load") or {}).get("max_catch_up_s")
    rows = tuple(
        MemberLoadRow(
            label=member,
            inflow=float(before["inflow"][i]),
            capacity=float(before["capacity"][i]) if known else None,
            overloaded=known and before["catch_up_s"][i] is None,  # stored inf (never) as null
        )
        for i, member in enumerate(before["member_ids"])
    )
    curves: tuple[svg.LagCurve, ...] = ()
    if known and after and after.get("capacity") is not None:
        curves = _lag_curves(before, after, (now_s, plan_s), horizon_s)
    return GroupLoadView(
        produce_rate=float(sum(before["inflow"])),
        time_lag_s=time_lag_s,
        capacities_known=known,
        catch_up_now_s=now_s if known else None,
        catch_up_plan_s=plan_s if known else None,
        members=rows,
        curves=curves,
    )
