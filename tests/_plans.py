"""Lifecycle test helper: plans written through the planner's real code path, without Spark.

``plan_group`` (the per-group planner the Spark job runs) decides a hand-made group document and
``store_plans.write_run`` stores it exactly as a planner run does (plan, assignments, first
transition). A memberless group with registered-style members owns nothing, so it is always flagged.
"""

from __future__ import annotations

from datetime import UTC, datetime

from rebalance_advisor.domain.decisions import Thresholds
from rebalance_advisor.domain.group_planning import plan_group
from rebalance_advisor.services import plan_lifecycle
from rebalance_advisor.store import db
from rebalance_advisor.store.plans import write_run


def record_plan(
    url: str,
    group: str,
    members: list[str],
    lags: list[int],
    topic: str = "data",
    snapshot_id: int = 1,
    capacity: float | None = None,
) -> int:
    """Plan ``group`` (members consuming ``topic`` whose partitions have ``lags``, each member with
    ``capacity`` records/s, None: unknown); the plan id."""
    doc = {
        "group_id": group,
        "members": [
            {"member_id": m, "group_instance_id": None, "topics": [topic], "capacity": capacity}
            for m in members
        ],
        "partitions": [{"topic": topic, "partition": p, "lag": lag} for p, lag in enumerate(lags)],
        "weight": "lag",
        "note": None,
    }
    now = datetime.now(UTC)
    result = plan_group(doc, Thresholds(cooldown_minutes=0, lag_floor=1), now)
    assert result.plan is not None and result.plan.status == "recommended", result.reason
    with db.connect(url) as conn:
        _, plan_ids, _ = write_run(
            conn, snapshot_id=snapshot_id, results=[result], params={}, started_at=now,
            airflow_run_id=None, created_by="tests",
        )  # fmt: skip
    return plan_ids[group]


def mark_published(url: str, plan_id: int, epoch: int) -> None:
    """Approve ``plan_id`` and record it as published at ``epoch`` (in the store only: nothing is
    written to the assignment topic)."""
    plan_lifecycle.approve(plan_id, "tests", url)
    with db.connect(url) as conn:
        plan_lifecycle.transition(
            conn, plan_id, "published", "tests", expect=("approved",), values={"epoch": epoch}
        )
