"""Read side of the UI: the few questions the pages and the JSON API ask of the plan database.

Plain dicts out (the API's pydantic models validate them), one short transaction per question.
Snapshots are read through :func:`rebalance_advisor.store.snapshots.load_snapshot`; plan rows
through the planner's ORM models. Lag "now" follows the lag rule (docs/architecture.md, "Lag") (see :func:`partition_lag`).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from rebalance_advisor.domain.decisions import FLAGGED_OUTCOMES, Thresholds
from rebalance_advisor.domain.lag_rules import ResetPolicy, partition_lags
from rebalance_advisor.domain.snapshot_model import Snapshot
from rebalance_advisor.errors import AdvisorError
from rebalance_advisor.store import db
from rebalance_advisor.store.models import ConsumerGroupRow, SnapshotRow
from rebalance_advisor.store.plan_models import AdvisorRun, GroupOutcome, Plan
from rebalance_advisor.store.plans import get_plan, published_assignments
from rebalance_advisor.store.snapshots import load_snapshot


class NotFound(AdvisorError):
    """An unknown group, plan or snapshot: the API answers 404 with this message."""


def _row(mapping: Any) -> dict[str, Any]:
    return dict(mapping) if mapping is not None else {}


def latest_snapshot(conn: Connection) -> dict[str, Any] | None:
    row = conn.execute(sa.select(SnapshotRow.__table__).order_by(SnapshotRow.id.desc()).limit(1))
    found = row.mappings().first()
    return _row(found) if found else None


def imbalance_threshold(conn: Connection, run_id: int | None = None) -> float:
    """The imbalance threshold of advisor run ``run_id`` (default: the newest run, what flagged the
    groups), else the default."""
    query = sa.select(AdvisorRun.params).order_by(AdvisorRun.id.desc()).limit(1)
    if run_id is not None:
        query = query.where(AdvisorRun.id == run_id)
    params = conn.execute(query).scalar()
    try:
        return float((params or {}).get("imbalance_threshold") or Thresholds().imbalance_threshold)
    except (TypeError, ValueError):
        return Thresholds().imbalance_threshold


def _latest_outcomes(conn: Connection, group_ids: Iterable[str] | None = None) -> dict[str, dict[str, Any]]:
    """The newest advisor outcome of every group (highest run id), with the run's snapshot id."""
    newest = (
        sa.select(GroupOutcome.group_id, sa.func.max(GroupOutcome.run_id).label("run_id"))
        .group_by(GroupOutcome.group_id)
        .subquery()
    )
    query = (
        sa.select(GroupOutcome.__table__, AdvisorRun.snapshot_id, AdvisorRun.finished_at.label("planned_at"))
        .join(
            newest,
            sa.and_(newest.c.group_id == GroupOutcome.group_id, newest.c.run_id == GroupOutcome.run_id),
        )
        .join(AdvisorRun, AdvisorRun.id == GroupOutcome.run_id)
    )
    if group_ids is not None:
        query = query.where(GroupOutcome.group_id.in_(list(group_ids)))
    return {r["group_id"]: _row(r) for r in conn.execute(query).mappings()}


def _latest_plans(conn: Connection) -> dict[str, dict[str, Any]]:
    """The newest non-skipped plan per group (the ``latest_plan_per_group`` view's rule)."""
    newest = (
        sa.select(Plan.group_id, sa.func.max(Plan.id).label("id"))
        .where(Plan.status != "skipped")
        .group_by(Plan.group_id)
        .subquery()
    )
    query = sa.select(Plan.id, Plan.group_id, Plan.status, Plan.strategy).join(newest, newest.c.id == Plan.id)
    return {r["group_id"]: _row(r) for r in conn.execute(query).mappings()}


def list_groups(url: str) -> dict[str, Any]:
    """Every group of the newest snapshot with its newest advisor outcome and plan."""
    with db.connect(url) as conn:
        snapshot = latest_snapshot(conn)
        threshold = imbalance_threshold(conn)
        if snapshot is None:
            return {"snapshot": None, "threshold": threshold, "groups": []}
        groups = conn.execute(
            sa.select(ConsumerGroupRow.__table__).where(ConsumerGroupRow.snapshot_id == snapshot["id"])
        ).mappings()
        groups = [_row(g) for g in groups]
        outcomes = _latest_outcomes(conn, [g["group_id"] for g in groups])
        plans = _latest_plans(conn)
    rows = []
    for g in groups:
        outcome = outcomes.get(g["group_id"], {})
        plan = plans.get(g["group_id"], {})
        imbalance = outcome.get("imbalance_before")
        rows.append(
            {
                "group_id": g["group_id"],
                "state": g["state"],
                "type": g["group_type"],
                "assignor": g["assignor"],
                "members": g["member_count"],
                "total_lag": outcome.get("total_lag"),
                "max_member_lag": outcome.get("max_lag_before"),
                "imbalance": imbalance,
                "flagged": outcome.get("outcome") in FLAGGED_OUTCOMES,
                "outcome": outcome.get("outcome"),
                "reason": outcome.get("reason"),
                "outcome_snapshot_id": outcome.get("snapshot_id"),
                "best_strategy": outcome.get("best_strategy"),
                "latest_plan_id": plan.get("id"),
                "latest_plan_status": plan.get("status"),
            }
        )
    return {"snapshot": _snapshot_summary(snapshot), "threshold": threshold, "groups": rows}


def _snapshot_summary(row: dict[str, Any]) -> dict[str, Any]:
    return {"id": row["id"], "taken_at": row["taken_at"], "status": row["status"]}


def reset_policy(conn: Connection) -> ResetPolicy:
    """The reset policy of the newest advisor run, so lag "now" is counted as the advisor counts it."""
    params = conn.execute(sa.select(AdvisorRun.params).order_by(AdvisorRun.id.desc()).limit(1)).scalar()
    try:
        return ResetPolicy.parse((params or {}).get("reset"))
    except AdvisorError:
        return ResetPolicy()


def member_key(member_id: str, group_instance_id: str | None) -> str:
    """How plans name a member: its static ``group.instance.id`` when set (it survives restarts)."""
    return group_instance_id or member_id


def current_assignment(snapshot: Snapshot, group_id: str, policy: ResetPolicy) -> dict[str, Any]:
    """Per-partition lag and owner (named as plans name members), per-member totals, in one snapshot."""
    group = snapshot.group(group_id)
    key_of = {
        m.member_id: member_key(m.member_id, m.group_instance_id) for m in (group.members if group else ())
    }
    partitions = [
        {
            "topic": x.topic,
            "partition": x.partition,
            "log_start_offset": x.log_start,
            "log_end_offset": x.log_end,
            "committed_offset": x.committed,
            "lag": x.lag,
            "owner": key_of.get(x.member_id, x.member_id) if x.member_id else None,
        }
        for x in partition_lags(snapshot, policy)
        if x.group_id == group_id
    ]
    members = []
    for m in group.members if group else ():
        label = key_of[m.member_id]
        mine = [p for p in partitions if p["owner"] == label]
        members.append(
            {
                "member_id": m.member_id,
                "label": label,
                "group_instance_id": m.group_instance_id,
                "client_id": m.client_id,
                "host": m.host,
                "lag": sum(p["lag"] for p in mine),
                "partitions": len(mine),
            }
        )
    return {"members": members, "partitions": partitions}


def group_detail(url: str, group_id: str, history: int = 20, plans: int = 5) -> dict[str, Any]:
    """One group: now (newest snapshot holding it), its outcome, latest plans, imbalance history."""
    with db.connect(url) as conn:
        snapshot_id = conn.execute(
            sa.select(sa.func.max(ConsumerGroupRow.snapshot_id)).where(ConsumerGroupRow.group_id == group_id)
        ).scalar()
        plan_rows = [
            _row(r)
            for r in conn.execute(
                sa.select(Plan.__table__)
                .where(Plan.group_id == group_id)
                .order_by(Plan.id.desc())
                .limit(plans)
            ).mappings()
        ]
        if snapshot_id is None and not plan_rows:
            raise NotFound(f"consumer group {group_id!r} is in no stored snapshot and has no plans")
        threshold = imbalance_threshold(conn)
        outcome = _latest_outcomes(conn, [group_id]).get(group_id)
        policy = reset_policy(conn)
        trend = conn.execute(
            sa.select(AdvisorRun.snapshot_id, GroupOutcome.imbalance_before, GroupOutcome.run_id)
            .join(AdvisorRun, AdvisorRun.id == GroupOutcome.run_id)
            .where(GroupOutcome.group_id == group_id)
            .order_by(AdvisorRun.snapshot_id.desc(), GroupOutcome.run_id.desc())
        ).all()
    per_snapshot: dict[int, float | None] = {}
    for snap, imbalance, _run in trend:  # newest run of each snapshot wins
        per_snapshot.setdefault(snap, imbalance)
    points = sorted(per_snapshot.items())[-history:]
    now: dict[str, Any] = {"members": [], "partitions": []}
    group_row: dict[str, Any] = {}
    if snapshot_id is not None:
        snapshot = load_snapshot(snapshot_id, url, groups=[group_id])
        now = current_assignment(snapshot, group_id, policy)
        g = snapshot.group(group_id)
        group_row = {
            "state": g.state,
            "type": g.group_type,
            "assignor": g.assignor,
            "members": g.member_count,
        }
    return {
        "group_id": group_id,
        "snapshot_id": snapshot_id,
        **group_row,
        "threshold": threshold,
        "outcome": outcome,
        "now": now,
        "plans": [plan_summary(p) for p in plan_rows],
        "imbalance_history": [{"snapshot_id": s, "imbalance": v} for s, v in points],
    }


def plan_summary(p: dict[str, Any]) -> dict[str, Any]:
    """A plan row without its bulky per-member metrics (those are in :func:`plan_detail`)."""
    return {k: v for k, v in p.items() if k != "metrics"}


def list_plans(url: str, *, group: str | None, status: str | None, strategy: str | None,
               page: int, page_size: int) -> dict[str, Any]:  # fmt: skip
    """Plans newest first, filtered, one page; ``total`` counts every match."""
    query = sa.select(Plan.__table__)
    if group:
        query = query.where(Plan.group_id == group)
    if status:
        query = query.where(Plan.status == status)
    if strategy:
        query = query.where(Plan.strategy == strategy)
    with db.connect(url) as conn:
        total = conn.execute(sa.select(sa.func.count()).select_from(query.subquery())).scalar_one()
        rows = conn.execute(
            query.order_by(Plan.id.desc()).offset((page - 1) * page_size).limit(page_size)
        ).mappings()
        items = [plan_summary(_row(r)) for r in rows]
    return {"total": total, "page": page, "page_size": page_size, "items": items}


def plan_row(conn: Connection, plan_id: int) -> dict[str, Any]:
    found = conn.execute(sa.select(Plan.__table__).where(Plan.id == plan_id)).mappings().first()
    if found is None:
        raise NotFound(f"plan {plan_id} does not exist")
    return _row(found)


def plan_detail(url: str, plan_id: int) -> dict[str, Any]:
    """A plan, its assignment and transitions, per-member lag before/after, and the moves against the
    baseline its ``moves`` count uses: the owners in the snapshot it was planned from, or for a
    manual-assign group its published plan (:func:`baseline_owners`)."""
    plan = get_plan(plan_id, url)
    if plan is None:
        raise NotFound(f"plan {plan_id} does not exist")
    assignments = plan.pop("assignments")
    transitions = plan.pop("transitions")
    with db.connect(url) as conn:
        policy = reset_policy(conn)
        published = published_assignments(conn).get(plan["group_id"])
        run_threshold = imbalance_threshold(conn, plan["run_id"])  # the threshold its reason cites
    try:
        snapshot = load_snapshot(plan["snapshot_id"], url, groups=[plan["group_id"]])
        before = current_assignment(snapshot, plan["group_id"], policy)
    except AdvisorError:  # the snapshot was pruned: the plan still stands, without a diff
        before = {"members": [], "partitions": []}
    owner_before = baseline_owners(plan, before, published)
    moves = []
    for a in sorted(assignments, key=lambda a: (a["topic"], a["partition"], a["key_hash_start"] or 0)):
        previous = owner_before.get((a["topic"], a["partition"]))
        a["member_label"] = a["member_id"]  # plans already name static members by instance id
        if previous != a["member_id"]:
            moves.append(
                {
                    "topic": a["topic"],
                    "partition": a["partition"],
                    "lag": a["lag"],
                    "from_member": previous,
                    "from_label": previous,
                    "to_member": a["member_id"],
                    "to_label": a["member_label"],
                }
            )
    return {
        "plan": plan_summary(plan),
        "members": member_comparison(plan, before["members"], assignments),
        "assignments": assignments,
        "moves": moves,
        "transitions": transitions,
        "run_threshold": run_threshold,
        "metrics": plan.get("metrics"),  # the load model the page pictures (not in the API's model)
    }


def baseline_owners(
    plan: dict[str, Any], now: dict[str, Any], published: dict[str, list[tuple[str, int]]] | None
) -> dict[tuple[str, int], str | None]:
    """Who held each partition in the baseline the planner measured ``plan`` against.

    A dynamic group: the owners in the plan's snapshot. A manual-assign group (no live members in
    the snapshot, registered static members): the snapshot cannot see ``assign()`` consumers, so
    the planner measured against the group's latest published plan (``published``, from
    :func:`~rebalance_advisor.store.plans.published_assignments`); without one, every
    partition was unowned. A plan that is itself published (or superseded) has that baseline
    replaced by itself or a newer plan, so it keeps the snapshot's owners.
    """
    owners = {(p["topic"], p["partition"]): p["owner"] for p in now["partitions"]}
    if now["members"] or not published or plan["status"] in ("published", "superseded"):
        return owners
    return owners | {
        (topic, partition): member for member, held in published.items() for topic, partition in held
    }


def member_comparison(
    plan: dict[str, Any], now: list[dict[str, Any]], assignments: list[dict[str, Any]]
) -> list[dict[str, Any]]:
    """Per member (plan naming): lag and partition count in the plan's snapshot and under the plan.

    The planner's own per-member numbers (``metrics.before/after``: ``member_lag``,
    ``member_partitions``) win where present: for a manual-assign group they are its published
    plan's, which the snapshot cannot show. The snapshot and the plan's assignment rows fill in the rest.
    """
    metrics = plan.get("metrics") or {}
    measured = metrics.get("before") or {}
    before = measured.get("member_lag") or {}
    after = (metrics.get("after") or {}).get("member_lag") or {}
    lag_now = {m["label"]: m["lag"] for m in now} | {k: int(v) for k, v in before.items()}
    count_now = {m["label"]: m["partitions"] for m in now} | {
        k: int(v) for k, v in (measured.get("member_partitions") or {}).items()
    }
    lag_plan: dict[str, int] = {}
    count_plan: dict[str, int] = {}
    for a in assignments:
        lag_plan[a["member_id"]] = lag_plan.get(a["member_id"], 0) + int(a["lag"])
        count_plan[a["member_id"]] = count_plan.get(a["member_id"], 0) + 1
    lag_plan |= {k: int(v) for k, v in after.items()}
    return [
        {
            "member_id": m,
            "label": m,
            "lag_before": lag_now.get(m, 0),
            "lag_after": lag_plan.get(m, 0),
            "partitions_before": count_now.get(m, 0),
            "partitions_after": count_plan.get(m, 0),
        }
        for m in sorted(set(lag_now) | set(lag_plan))
    ]
