"""Text forms of planner results: the outcomes table (CLI, DAG summary, demo) and plan listings."""

from __future__ import annotations

import csv
import dataclasses
import io
import json
import math
from collections.abc import Sequence
from datetime import datetime
from typing import Any

from rebalance_advisor.domain.advice import OutcomeLine
from rebalance_advisor.store.plan_records import PlanListing


def _num(value: Any) -> str:
    return "-" if value is None else f"{value:,}"


def _table(header: Sequence[str], rows: Sequence[Sequence[str]], right: set[int]) -> str:
    widths = [max(len(h), *(len(r[i]) for r in rows)) if rows else len(h) for i, h in enumerate(header)]

    def line(cells: Sequence[str]) -> str:
        return "  ".join(
            c.rjust(w) if i in right else c.ljust(w)
            for i, (c, w) in enumerate(zip(cells, widths, strict=True))
        ).rstrip()

    return "\n".join([line(header), line(["-" * w for w in widths]), *(line(r) for r in rows)])


def format_outcomes(outcomes: Sequence[OutcomeLine]) -> str:
    """group, outcome, max member lag before -> after, moves, strategy, plan: one line per group."""
    if not outcomes:
        return "(no groups)"
    rows = [
        [
            o.group_id,
            o.outcome,
            f"{_num(o.max_lag_before)} -> {_num(o.max_lag_after)}"
            if o.max_lag_after is not None
            else _num(o.max_lag_before),
            _num(o.moves),
            o.best_strategy or "-",
            str(o.plan_id) if o.plan_id else "-",
        ]
        for o in outcomes
    ]
    return _table(
        ["group", "outcome", "max member lag before -> after", "moves", "strategy", "plan"], rows, {2, 3}
    )


def outcome_reasons(outcomes: Sequence[OutcomeLine]) -> str:
    """One ``group: reason`` line per group (what the table has no room for)."""
    return "\n".join(f"{o.group_id}: {o.reason}" for o in outcomes)


def _plain(value: Any) -> Any:
    return value.isoformat(timespec="seconds") if isinstance(value, datetime) else value


def catch_up_text(seconds: float | None, overloaded: bool = False) -> str:
    """A predicted catch-up: ``never`` for an overloaded member or group (or ∞; the database JSON
    stores ∞ as null), ``-`` when unknown (no capacities), else whole seconds."""
    if overloaded or (seconds is not None and math.isinf(seconds)):
        return "never"
    return "-" if seconds is None else f"{seconds:,.0f} s"


def format_plans(plans: Sequence[PlanListing], fmt: str = "table") -> str:
    """Plans as ``table`` (the key columns), ``json`` (every column) or ``csv`` (every column)."""
    plain = [{k: _plain(v) for k, v in dataclasses.asdict(p).items()} for p in plans]
    if fmt == "json":
        return json.dumps(plain, indent=None) + "\n"
    if fmt == "csv":
        out = io.StringIO()
        if plain:
            writer = csv.DictWriter(out, fieldnames=list(plain[0]), lineterminator="\n")
            writer.writeheader()
            writer.writerows(plain)
        return out.getvalue()
    return _plan_table(plain) if plain else "(no plans)\n"


#: the columns of ``plans --format table``
PLAN_TABLE_HEADER = (
    "plan",
    "group",
    "strategy",
    "status",
    "applied by",
    "max member lag before -> after",
    "moves",
    "overloaded",
    "catch-up",
    "time lag s",
    "created",
    "by",
)


def _plan_table(plain: Sequence[dict[str, Any]]) -> str:
    """The key columns of each plan (:data:`PLAN_TABLE_HEADER`), numbers aligned right."""
    rows = [
        [
            str(p["id"]),
            p["group_id"],
            p["strategy"],
            p["status"],
            p["apply_mode"],
            f"{_num(p['max_lag_before'])} -> {_num(p['max_lag_after'])}",
            _num(p["moves"]),
            f"{_num(p['overloaded_members_before'])} -> {_num(p['overloaded_members_after'])}",
            f"{catch_up_text(p['predicted_catch_up_before_s'], bool(p['overloaded_members_before']))} -> "
            f"{catch_up_text(p['predicted_catch_up_after_s'], bool(p['overloaded_members_after']))}",
            "-" if p["group_max_time_lag_s"] is None else f"{p['group_max_time_lag_s']:,.1f}",
            str(p["created_at"]),
            p["created_by"],
        ]
        for p in plain
    ]
    return _table(PLAN_TABLE_HEADER, rows, {0, 5, 6, 7, 8, 9}) + "\n"
