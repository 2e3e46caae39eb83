"""A standing plan keeps its id while runs arrive at it again; a rejection sticks until the situation
changes (domain/plan_identity.py). Real Spark planner runs, real SQLite and PostgreSQL."""

from __future__ import annotations

import copy

import pytest
import sqlalchemy as sa
from rebalance_advisor import store
from rebalance_advisor.adapters.spark_planner import run_planner
from rebalance_advisor.services import plan_lifecycle, static_members
from rebalance_advisor.store import db
from rebalance_advisor.store import plans as store_plans

from tests._planner import KIP, MANUAL, make_snapshot, spark  # noqa: F401

pytestmark = [pytest.mark.spark, pytest.mark.slow, pytest.mark.postgres]

RUNS = 6


def _snapshot_and_run(spark, url: str, groups: dict, run: int):  # noqa: F811
    store.write_snapshot(make_snapshot(groups), url)
    return run_planner(spark, url, "latest", created_by=f"run-{run}", airflow_run_id=f"scheduled__{run}")


def _outcomes(planned) -> dict:
    return {o.group_id: o for o in planned.outcomes}


def _rows(url: str, sql: str) -> list[tuple]:
    with db.connect(url) as conn:
        return [tuple(r) for r in conn.execute(sa.text(sql))]


def test_unchanged_runs_keep_one_standing_plan_per_group(spark, db_url):  # noqa: F811
    """Six runs over unchanged snapshots: one plan id per group, its approval kept, no plan
    superseded; ``last_confirmed_at`` follows the newest run; changed lags with the same
    assignment refresh the numbers; a different assignment gets a new id."""
    store.upgrade(db_url)
    static_members.add("manual-assign", "worker-a", ["manual-topic"], db_url)
    static_members.add("manual-assign", "worker-b", ["manual-topic"], db_url)
    groups = {"kip-example": KIP, "manual-assign": MANUAL}
    seen: dict[str, set[int]] = {"kip-example": set(), "manual-assign": set()}
    for run in range(RUNS):
        planned = _snapshot_and_run(spark, db_url, groups, run)
        for group, outcome in _outcomes(planned).items():
            assert outcome.outcome == "recommended", (run, group, outcome.reason)
            seen[group].add(outcome.plan_id)
        if run == 1:  # the operator approves the manual-assign group's plan between two runs
            plan_lifecycle.approve(planned_id(planned, "manual-assign"), "operator", db_url)
    assert all(len(ids) == 1 for ids in seen.values()), seen
    kip_id, manual_id = next(iter(seen["kip-example"])), next(iter(seen["manual-assign"]))
    assert _rows(db_url, "SELECT id, status FROM plans ORDER BY id") == [
        (kip_id, "recommended"),
        (manual_id, "approved"),
    ]
    assert _rows(db_url, "SELECT COUNT(*) FROM plan_transitions WHERE to_status = 'superseded'") == [(0,)]
    newest_run = _rows(db_url, "SELECT MAX(id) FROM advisor_runs")[0][0]
    kip = store_plans.get_plan(kip_id, db_url)
    assert kip.last_confirmed_at is not None and kip.created_by == "run-0"
    assert _rows(db_url, f"SELECT last_confirmed_run_id FROM plans WHERE id = {kip_id}") == [(newest_run,)]
    # the approved plan is the group's standing plan: the one publishing takes
    assert store_plans.list_plans(db_url, group="manual-assign", status="approved")[0].id == manual_id

    # more lag on the hottest partition, same best assignment: same plan, numbers refreshed
    hotter = copy.deepcopy(KIP)
    hotter["topics"]["t0"][0] = (100_500, 0)
    planned = _snapshot_and_run(spark, db_url, {"kip-example": hotter}, RUNS)
    assert planned_id(planned, "kip-example") == kip_id
    refreshed = store_plans.get_plan(kip_id, db_url)
    assert (refreshed.max_lag_before, refreshed.max_lag_after) == (160_500, 110_000)
    assert (
        refreshed.snapshot_id == planned.snapshot_id and refreshed.last_confirmed_at > kip.last_confirmed_at
    )
    assert {a.partition: a.lag for a in refreshed.assignments} == {0: 100_500, 1: 60_000, 2: 50_000}

    # a different best assignment (partition 1 is now the hottest: C0 keeps it alone, partition 0
    # moves to C1, 110,000 there): a new plan, the old one superseded
    moved = copy.deepcopy(KIP)
    moved["topics"]["t0"] = [(60_000, 0), (100_000, 0), (50_000, 0)]
    planned = _snapshot_and_run(spark, db_url, {"kip-example": moved}, RUNS + 1)
    new_id = planned_id(planned, "kip-example")
    assert new_id != kip_id
    assert store_plans.get_plan(kip_id, db_url).status == "superseded"
    assert store_plans.get_plan(new_id, db_url).status == "recommended"
    assert store_plans.plan_assignment_map(new_id, db_url) == {
        "C0": [("t0", 1)],
        "C1": [("t0", 0), ("t0", 2)],
    }


def planned_id(planned, group: str) -> int:
    plan_id = _outcomes(planned)[group].plan_id
    assert plan_id is not None, _outcomes(planned)[group]
    return plan_id


def test_a_rejection_sticks_until_a_member_joins(spark, db_url):  # noqa: F811
    """Rejected with a reason: six unchanged runs hold the group back (outcome and reason say
    why, no new plan); after a member joins the group may be recommended again."""
    store.upgrade(db_url)
    groups = {"kip-example": KIP}
    first = _snapshot_and_run(spark, db_url, groups, 0)
    rejected_id = planned_id(first, "kip-example")
    plan_lifecycle.reject(rejected_id, "operator", db_url, note="C1 is being drained for maintenance")
    for run in range(1, RUNS + 1):
        outcome = _outcomes(_snapshot_and_run(spark, db_url, groups, run))["kip-example"]
        assert (outcome.outcome, outcome.plan_id) == ("held_by_rejection", None), outcome
        assert f"plan {rejected_id} for this group was rejected" in outcome.reason
        assert "C1 is being drained for maintenance" in outcome.reason
    assert _rows(db_url, "SELECT id, status FROM plans") == [(rejected_id, "rejected")]
    with db.connect(db_url) as conn:  # the view reports the held-back group as flagged
        flagged = conn.execute(sa.text("SELECT group_id, outcome FROM imbalanced_groups")).all()
    assert flagged == [("kip-example", "held_by_rejection")]

    joined = copy.deepcopy(KIP)
    joined["members"].append(("m-2", "C2", [], ["t0"]))
    outcome = _outcomes(_snapshot_and_run(spark, db_url, {"kip-example": joined}, RUNS + 1))["kip-example"]
    assert outcome.outcome == "recommended" and outcome.plan_id not in (None, rejected_id), outcome
    assert "members changed; joined: C2" in outcome.reason, outcome.reason
