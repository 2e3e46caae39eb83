"""The planner pipeline (executors read, plan and stage; the driver finalizes) against the driver path.

A small fleet on SQLite and PostgreSQL, cut into many scopes so that a key-range family straddles a
scope boundary: the pipeline stores the same outcomes, plans and assignments as the driver path.
And a run whose Python worker dies mid-job, after other scopes staged their results, leaves nothing
visible and no staged rows.
"""

from __future__ import annotations

import dataclasses
import os
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
import sqlalchemy as sa
from rebalance_advisor import store
from rebalance_advisor.adapters.spark_planner import PlannerFailed, run_planner
from rebalance_advisor.domain.group_planning import plan_group
from rebalance_advisor.services import static_members
from rebalance_advisor.store import db, planner_scope
from rebalance_advisor_client.key_hash import HASH_SPACE
from rebalance_advisor_client.key_ranges import RANGE_GROUP_MARKER

from tests._planner import BALANCED, IDLE, KIP, MANUAL, make_snapshot, spark, stored_run  # noqa: F401

pytestmark = [pytest.mark.spark, pytest.mark.slow]

#: values that differ between two runs of the same plan and say nothing about the plan itself
VOLATILE = {"id", "run_id", "plan_id", "created_at", "created_by", "epoch", "last_confirmed_at"}
HALF = HASH_SPACE // 2


def _fleet(shift: int) -> dict[str, dict]:
    """Hand-made groups, a key-range family ("orders" and its two derived range groups, with
    "orders-b" between them in byte order) and three small generated groups; ``shift`` moves log
    ends and commits on (a later snapshot)."""
    orders = [(50_000 + shift, 10_000), (8_000 + shift, 7_000)]
    groups: dict[str, dict] = {
        "kip-example": KIP,
        "idle-group": IDLE,
        "balanced-group": BALANCED,
        "manual-assign": MANUAL,
        "orders": {"topics": {"orders-topic": orders}, "members": []},
        f"orders{RANGE_GROUP_MARKER}0-{HALF}": {"topics": {"orders-topic": [(e, c + 500) for e, c in orders]}},
        f"orders{RANGE_GROUP_MARKER}{HALF}-{HASH_SPACE}": {"topics": {"orders-topic": orders}},
        "orders-b": {"topics": {"b-topic": [(9_000 + shift, 0)] * 3}, "members": [("ob", None, [], ["b-topic"])]},
    }  # fmt: skip
    for g in range(3):
        topic = f"small-{g}"
        rows = [(1_000 * (p + 1) * (g + 1) + shift, shift // 2) for p in range(g % 3 + 2)]
        owned = [(topic, p) for p in range(len(rows))]
        groups[f"small-{g:02d}"] = {"topics": {topic: rows}, "members": [("s0", None, owned, None), ("s1", None, [], [topic])]}  # fmt: skip
    return groups


def _stored_run(url: str) -> dict[str, dict[str, Any]]:
    return stored_run(url, VOLATILE)


def _publish_by_hand(url: str, plan_id: int, at: datetime) -> None:
    """Mark a plan published as the publisher would (status and transition), without a broker."""
    with db.connect(url) as conn:
        conn.execute(
            sa.text("UPDATE plans SET status = 'published', epoch = 1 WHERE id = :i"), {"i": plan_id}
        )
        conn.execute(
            sa.text(
                "INSERT INTO plan_transitions (plan_id, from_status, to_status, actor, at, note) "
                "VALUES (:i, 'recommended', 'published', 'test', :at, 'by hand')"
            ),
            {"i": plan_id, "at": at},
        )


@pytest.mark.postgres
def test_pipeline_stores_what_the_driver_path_stores(spark, db_url, monkeypatch):  # noqa: F811
    store.upgrade(db_url)
    start = datetime.now(UTC).replace(microsecond=0) - timedelta(minutes=5)
    store.write_snapshot(make_snapshot(_fleet(0), taken_at=start), db_url)
    for member in ("worker-a", "worker-b"):
        static_members.add("manual-assign", member, ["manual-topic"], db_url)
    first = run_planner(spark, db_url, "latest", now=start + timedelta(seconds=1), pipeline=False)
    manual = next(o for o in first.outcomes if o.group_id == "manual-assign")
    _publish_by_hand(db_url, manual.plan_id, start + timedelta(seconds=2))
    store.write_snapshot(make_snapshot(_fleet(3_000), taken_at=start + timedelta(seconds=60)), db_url)

    monkeypatch.setattr(planner_scope, "ROWS_PER_SCOPE", 1)  # about one group per scope
    with db.connect(db_url) as conn:
        scopes = planner_scope.planner_scopes(conn, 2, 2)
    assert len(scopes) >= 8 and any(s.include or s.exclude for s in scopes), scopes  # the family was split

    now = start + timedelta(minutes=4)
    stored = {}
    for pipeline in (False, True):  # the same Airflow run: the second replaces the first
        run = run_planner(spark, db_url, "latest", now=now, airflow_run_id="compare", pipeline=pipeline)
        stored[pipeline] = (run.outcomes, _stored_run(db_url))
    (driver_outcomes, driver), (pipeline_outcomes, piped) = stored[False], stored[True]
    assert sorted(piped) == sorted(driver) and "orders" in driver and "manual-assign" in driver
    assert f"orders{RANGE_GROUP_MARKER}0-{HALF}" not in driver  # folded into its parent
    assert driver["manual-assign"]["max_lag_before"] > 0
    for group in driver:
        assert piped[group] == driver[group], group
    assert [dataclasses.replace(o, plan_id=None) for o in pipeline_outcomes] == [
        dataclasses.replace(o, plan_id=None) for o in driver_outcomes
    ]
    with db.connect(db_url) as conn:
        assert conn.execute(sa.text("SELECT COUNT(*) FROM planner_staging")).scalar_one() == 0


def test_worker_killed_mid_run_leaves_nothing_visible(spark, sqlite_url, monkeypatch):  # noqa: F811
    """One Python worker dies (os._exit) once another scope has staged its results: the job fails,
    no plan, run or outcome appears, and the staged rows are gone."""
    store.upgrade(sqlite_url)
    store.write_snapshot(make_snapshot(_fleet(0)), sqlite_url)
    monkeypatch.setattr(planner_scope, "ROWS_PER_SCOPE", 1)
    path = sqlite_url.removeprefix("sqlite:///")
    seen = path + ".staged-seen"

    def die_after_others_staged(doc, thresholds, now):
        if doc["group_id"] == "small-02":
            import sqlite3
            import time

            deadline = time.monotonic() + 20
            while time.monotonic() < deadline:  # wait (bounded) until some other scope staged
                with sqlite3.connect(path, timeout=30) as conn:
                    if conn.execute("SELECT COUNT(*) FROM planner_staging").fetchone()[0]:
                        open(seen, "w").close()  # noqa: SIM115 - a marker for the test's process
                        break
                time.sleep(0.05)
            os._exit(17)  # as a killed Python worker: no exception, the process is gone
        return plan_group(doc, thresholds, now)

    with pytest.raises(PlannerFailed, match="nothing written"):
        run_planner(spark, sqlite_url, plan_fn=die_after_others_staged)
    assert os.path.exists(seen), "the worker died before any other scope had staged its results"
    with db.connect(sqlite_url) as conn:
        for table in ("advisor_runs", "plans", "plan_assignments", "group_outcomes", "plan_transitions"):
            assert conn.execute(sa.text(f"SELECT COUNT(*) FROM {table}")).scalar_one() == 0, table
        assert conn.execute(sa.text("SELECT COUNT(*) FROM planner_staging")).scalar_one() == 0
