"""One group as the advisor saw it in its newest run, in text: what ``make demo`` prints for its live group.

Three tables, all read from what the snapshot and advisor runs stored (nothing recomputed):
partitions (owner now, produce and consume rate, lag, time lag, owner under the plan), members
(inflow Λ, capacity μ, backlog B and predicted catch-up T = B / (μ − Λ) now and under the plan;
``never`` when Λ ≥ μ) and every candidate strategy's prediction, so the chosen plan stands next to
what ``lag_aware`` would have done.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from rebalance_advisor import store
from rebalance_advisor.domain.snapshot_model import Snapshot
from rebalance_advisor.errors import AdvisorError
from rebalance_advisor.services import lag_report
from rebalance_advisor.services.outcome_report import _table, catch_up_text
from rebalance_advisor.store.plans import get_plan, run_outcomes


@dataclass(frozen=True)
class MemberPrediction:
    """One member under one assignment: ``catch_up_s`` inf when overloaded, None when unknown."""

    member: str
    inflow: float
    capacity: float | None
    backlog: int
    catch_up_s: float | None


def member_predictions(members: Mapping[str, Any] | None, names: Mapping[str, str]) -> list[MemberPrediction]:
    """The stored ``members_before`` / ``members_after`` JSON (load_model.MemberLoad, ∞ stored as null)."""
    if not members:
        return []
    out = []
    capacities = members.get("capacity")
    catch_ups = members.get("catch_up_s")
    for i, member_id in enumerate(members["member_ids"]):
        inflow, capacity = float(members["inflow"][i]), None if capacities is None else capacities[i]
        catch_up = None if catch_ups is None else catch_ups[i]
        if catch_up is None and capacity is not None and inflow >= capacity:
            catch_up = math.inf  # the database JSON has no Infinity: null with Λ ≥ μ means never
        out.append(MemberPrediction(names.get(member_id, member_id), inflow, capacity, int(members["backlog"][i]),
                                    catch_up))  # fmt: skip
    return out


def _member_names(snapshot: Snapshot, group_id: str) -> dict[str, str]:
    """Spec member id (group instance id, else member id) -> client id, for shorter tables."""
    group = next((g for g in snapshot.groups if g.group_id == group_id), None)
    if group is None:
        return {}
    return {(m.group_instance_id or m.member_id): m.client_id for m in group.members}


def _partition_table(snapshot: Snapshot, group_id: str, planned: Mapping[tuple[str, int], str]) -> str:
    rows = lag_report.rows(snapshot, group=group_id).get(group_id, [])
    cells = [
        [
            f"{r.topic}-{r.partition}",
            r.client_id or "-",
            "-" if r.produce_rate is None else f"{r.produce_rate:.1f}",
            "-" if r.consume_rate is None else f"{r.consume_rate:.1f}",
            "-" if r.lag is None else f"{r.lag:,}",
            "-" if r.time_lag_s is None else f"{r.time_lag_s:.1f}",
            planned.get((r.topic, r.partition), "-"),
        ]
        for r in sorted(rows, key=lambda r: (r.topic or "", r.partition or 0))
    ]
    header = ["partition", "owner now", "produce/s", "consume/s", "lag", "time lag s", "owner in plan"]
    return _table(header, cells, {2, 3, 4, 5})


def _member_table(before: Sequence[MemberPrediction], after: Sequence[MemberPrediction]) -> str:
    planned = {m.member: m for m in after}

    def half(m: MemberPrediction | None) -> list[str]:
        if m is None:
            return ["-", "-", "-"]
        overloaded = m.capacity is not None and m.inflow >= m.capacity
        return [f"{m.inflow:.1f}", f"{m.backlog:,}", catch_up_text(m.catch_up_s, overloaded)]

    cells = [
        [
            m.member,
            "-" if m.capacity is None else f"{m.capacity:.1f}",
            *half(m),
            "OVERLOADED" if m.capacity is not None and m.inflow >= m.capacity else "",
            *half(planned.get(m.member)),
        ]
        for m in before
    ]
    header = ["member", "capacity/s", "inflow/s", "backlog", "catch-up", "now", "plan inflow/s",
              "plan backlog", "plan catch-up"]  # fmt: skip
    return _table(header, cells, {1, 2, 3, 4, 6, 7, 8})


def _candidate_table(candidates: Sequence[Mapping[str, Any]], chosen: str | None) -> str:
    cells = []
    for c in sorted(candidates, key=lambda c: c["strategy"]):
        load = c.get("load") or {}
        overloaded = int(load.get("overloaded") or 0)
        cells.append(
            [
                c["strategy"],
                str(overloaded),
                catch_up_text(load.get("max_catch_up_s"), overloaded > 0),
                f"{c['max_lag']:,}",
                str(c["moves"]),
                "<- recommended" if c["strategy"] == chosen else "",
            ]
        )
    header = ["strategy", "overloaded members", "predicted catch-up", "max member lag", "moves", ""]
    return _table(header, cells, {1, 2, 3, 4})


def group_load_report(group_id: str, db_url: str | None = None) -> str:
    """The three tables of the module docstring for ``group_id`` in the newest advisor run."""
    outcome = next((o for o in run_outcomes(None, db_url) if o.group_id == group_id), None)
    if outcome is None:
        raise AdvisorError(f"group {group_id} is not in the newest advisor run: run the advisor first")
    plan = get_plan(outcome.plan_id, db_url) if outcome.plan_id else None
    # the snapshot the run planned ("now" as the advisor saw it), not a newer one taken after its plan
    snapshot = store.load_snapshot(plan.snapshot_id if plan else store.latest_snapshot_id(db_url), db_url)
    names = _member_names(snapshot, group_id)
    lines = [f"{group_id}: {outcome.outcome}: {outcome.reason}", ""]
    planned = {}
    if plan is not None:
        planned = {(a.topic, a.partition): names.get(a.member_id, a.member_id) for a in plan.assignments}
    lines += [_partition_table(snapshot, group_id, planned), ""]
    if plan is None:
        return "\n".join(lines)
    metrics = plan.metrics or {}
    before = member_predictions(metrics.get("members_before"), names)
    after = member_predictions(metrics.get("members_after"), names)
    lines += [
        f"Per member, now and under the {plan.status} plan {plan.id} ({plan.strategy}); "
        "catch-up = backlog / (capacity - inflow):",
        _member_table(before, after),
        "",
        "Every candidate strategy's plan, as the advisor predicted it:",
        _candidate_table(metrics.get("candidates") or [], plan.strategy),  # the run's recommendation
    ]  # fmt: skip
    return "\n".join(lines)
