"""What the pages show, apart from the routes: the Jinja2 environment (autoescape on), its
filters (numbers, timestamps with their zone, URL path segments) and the small typed views the
templates read. Imports no Airflow, so it is testable on its own.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any
from urllib.parse import quote

from fastapi.templating import Jinja2Templates
from jinja2 import Environment, PackageLoader, StrictUndefined

from rebalance_advisor.webui import svg


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
    """ "2025-01-02 03:04:05 UTC": with its time zone, without microseconds (the page's script
    shows it in the time zone chosen in Airflow's UI)."""
    moment = as_utc(value)
    return moment.strftime("%Y-%m-%d %H:%M:%S UTC") if moment else "—"


def iso_timestamp(value: datetime | str | None) -> str:
    moment = as_utc(value)
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
        ts_text=format_timestamp,
        ts_iso=iso_timestamp,
        segment=lambda value: quote(str(value), safe=""),  # one URL path segment
    )
    return env


templates = Jinja2Templates(env=environment())


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
