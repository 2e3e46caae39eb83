"""The pipeline's finalize stores what the driver path's ``write_run`` stores, on SQLite and PostgreSQL.

The finalize copies the staged outcome rows of groups without a recommended plan with one
``INSERT ... SELECT`` and parses only the recommended plans (store/plans.write_staged_run). Without
Spark: the executors' scope work (``plan_scope``) runs in this process, and the driver path's
planning too, so both write the very same advice. A second snapshot makes the runs confirm,
supersede, and meet a rejected plan; more groups than a run hands back lines for
(``KEPT_OUTCOME_LINES``), so the run reports its tally and the store holds the lines.
"""

from __future__ import annotations

import json
import random
import uuid
from datetime import UTC, datetime, timedelta

import pytest
import sqlalchemy as sa
from rebalance_advisor import store
from rebalance_advisor.adapters import spark_pipeline
from rebalance_advisor.adapters.spark_pipeline import (
    ScopeJob,
    plan_scope,
    planner_documents,
    shipped_document,
)
from rebalance_advisor.domain.advice import OutcomeLine
from rebalance_advisor.domain.decisions import Thresholds
from rebalance_advisor.domain.group_planning import plan_group
from rebalance_advisor.domain.plan_identity import GroupSituation
from rebalance_advisor.services import static_members
from rebalance_advisor.store import db
from rebalance_advisor.store import plans as plan_store
from rebalance_advisor.store.planner_inputs import read_planner_inputs
from rebalance_advisor.store.planner_scope import planner_scopes

from tests._planner import BALANCED, IDLE, KIP, make_snapshot, stored_run

THRESHOLDS = Thresholds()
PARAMS = {
    **THRESHOLDS.to_dict(),
    "group_pattern": None,
    "reset": None,
    "publish_mode": "recommend",
    "dry_run": False,
}
VOLATILE = {"id", "run_id", "plan_id", "created_at", "created_by", "epoch", "last_confirmed_at"}


def _fleet(shift: int) -> dict[str, dict]:
    """Three hand-made groups and 24 small seeded ones (1-6 partitions, 1-3 members, owners as Kafka's
    range assignor left them); ``shift`` moves the log ends on (a later snapshot)."""
    rng = random.Random(31)
    groups = {"kip-example": KIP, "idle-group": IDLE, "balanced-group": BALANCED}
    for g in range(24):
        topic, count = f"topic-{g:02d}", rng.randint(1, 6)
        rows = [
            (10_000 + rng.randint(0, 40_000) + shift * (p + 1), rng.randint(0, 10_000)) for p in range(count)
        ]
        members = max(1, min(3, 1 + count // 3))
        owned = [[(topic, p) for p in range(count) if p % members == m] for m in range(members)]
        groups[f"small-{g:02d}"] = {
            "topics": {topic: rows},
            "members": [(f"m{m}", None, owned[m], [topic]) for m in range(members)],
        }
    return groups


def _pipeline(
    url: str, now: datetime, airflow_run_id: str | None, meanwhile=None, params: dict = PARAMS
) -> spark_pipeline.OutcomeTally:
    """The pipeline's steps, the executors' in this process: scopes, plan_scope each, ``meanwhile()``
    (what happens between the executors and the finalize), finalize."""
    run_key = uuid.uuid4().hex
    with db.connect(url) as conn:
        snapshot_id = store.snapshots.snapshot_id_in(conn, "latest")
        scopes = planner_scopes(conn, snapshot_id, 2)
    job = ScopeJob(url, snapshot_id, run_key, params, now.isoformat(), None, None, airflow_run_id)
    staged = sum(plan_scope(job, i, scope, plan_group) for i, scope in enumerate(scopes))
    if meanwhile is not None:
        meanwhile()
    _, tally = spark_pipeline._finalize(
        url, run_key, staged, snapshot_id, params, now, airflow_run_id, "t", False
    )
    return tally


def _driver(url: str, now: datetime, airflow_run_id: str | None) -> list[OutcomeLine]:
    """The driver path's steps without Spark: read, build and plan every group, one ``write_run``."""
    with db.connect(url) as conn:
        inputs = read_planner_inputs(conn, "latest", airflow_run_id)
    docs = planner_documents(inputs, THRESHOLDS, None, None)
    results = [plan_group(json.loads(shipped_document(d)), THRESHOLDS, now) for d in docs]
    with db.connect(url) as conn:
        _, plan_ids, stored = plan_store.write_run(
            conn, snapshot_id=inputs.snapshot_id, results=results, params=PARAMS, started_at=now,
            airflow_run_id=airflow_run_id, created_by="t",
            situations={d["group_id"]: GroupSituation.of_document(d) for d in docs},
        )  # fmt: skip
    return [OutcomeLine.of(r, plan_ids.get(r.group_id)) for r in stored]


def _reject_one(url: str) -> None:
    """Mark one recommended plan rejected, as ``plan-status reject`` would (status and transition)."""
    with db.connect(url) as conn:
        plan_id = conn.execute(sa.text("SELECT MIN(id) FROM plans WHERE status = 'recommended'")).scalar_one()
        conn.execute(sa.text("UPDATE plans SET status = 'rejected' WHERE id = :i"), {"i": plan_id})
        conn.execute(
            sa.text("INSERT INTO plan_transitions (plan_id, from_status, to_status, actor, at, note) "
                    "VALUES (:i, 'recommended', 'rejected', 'test', :at, 'not now')"),
            {"i": plan_id, "at": datetime.now(UTC)},
        )  # fmt: skip


def _confirmed(url: str) -> int:
    with db.connect(url) as conn:
        return conn.execute(
            sa.text("SELECT COUNT(*) FROM plans WHERE last_confirmed_run_id IS NOT NULL")
        ).scalar_one()


@pytest.mark.postgres
def test_staged_finalize_stores_what_write_run_stores(db_url, monkeypatch):
    monkeypatch.setattr(spark_pipeline, "KEPT_OUTCOME_LINES", 5)
    store.upgrade(db_url)
    start = datetime.now(UTC).replace(microsecond=0) - timedelta(minutes=10)
    store.write_snapshot(make_snapshot(_fleet(0), taken_at=start), db_url)
    _driver(db_url, start + timedelta(seconds=1), None)
    _reject_one(db_url)
    store.write_snapshot(make_snapshot(_fleet(700), taken_at=start + timedelta(seconds=60)), db_url)

    now = start + timedelta(minutes=2)
    lines = _driver(db_url, now, "compare")
    driver = stored_run(db_url, VOLATILE)
    confirmed = _confirmed(db_url)
    tally = _pipeline(db_url, now, "compare")  # the same Airflow run: replaces the driver path's rows
    piped = stored_run(db_url, VOLATILE)

    outcomes = {o["outcome"] for o in driver.values()}
    assert {"recommended", "idle", "held_by_rejection"} <= outcomes, outcomes
    assert confirmed > 0 and _confirmed(db_url) == confirmed  # the identity rule kept standing plans
    assert sorted(piped) == sorted(driver) and len(driver) == 27
    for group in driver:
        assert piped[group] == driver[group], group
    assert tally.lines is None and tally.group_count == len(lines) == 27
    assert tally.flagged == [o.group_id for o in lines if o.outcome not in ("idle", "balanced")]
    with db.connect(db_url) as conn:
        assert conn.execute(sa.text("SELECT COUNT(*) FROM planner_staging")).scalar_one() == 0


@pytest.mark.postgres
def test_staged_plans_land_as_write_run_stores_them_and_rules_still_apply(db_url):
    """Recommended plans staged in final form land by ``INSERT ... SELECT`` as ``write_run`` stores
    them (a first run: no rule applies); then a run whose groups meet, between the executors and the
    finalize, a registration (apply mode) or a concurrent run's published plan under a cool-down
    still has them re-checked (store/staged_plans.py)."""
    store.upgrade(db_url)
    start = datetime.now(UTC).replace(microsecond=0) - timedelta(minutes=10)
    store.write_snapshot(make_snapshot(_fleet(0), taken_at=start), db_url)
    _driver(db_url, start + timedelta(seconds=1), "first")
    driver = stored_run(db_url, VOLATILE)
    _pipeline(db_url, start + timedelta(seconds=1), "first")  # replaces the driver path's run
    assert stored_run(db_url, VOLATILE) == driver
    recommended = sorted(g for g, o in driver.items() if o["outcome"] == "recommended")
    assert len(recommended) >= 3, driver
    registered, published = recommended[0], recommended[1:3]

    def meanwhile() -> None:
        static_members.add(registered, "late-member", ["topic-x"], db_url)
        _driver(db_url, start + timedelta(minutes=2), "concurrent")  # commits its plans meanwhile
        with db.connect(db_url) as conn:  # two of them published since, the others superseded
            conn.execute(
                sa.text("UPDATE plans SET status = CASE WHEN group_id IN :g THEN 'published' "
                        "ELSE 'superseded' END")
                .bindparams(sa.bindparam("g", expanding=True)),
                {"g": published},
            )  # fmt: skip

    params = {**PARAMS, **Thresholds(cooldown_minutes=60).to_dict()}
    with db.connect(db_url) as conn:  # the next run's executors find no plan standing
        plan_store._delete_run(conn, "first")
    _pipeline(db_url, start + timedelta(minutes=2), "second", meanwhile, params)
    second = stored_run(db_url, VOLATILE)
    for group in published:
        assert second[group]["outcome"] == "held_by_cooldown" and "plan" not in second[group], group
    assert second[registered]["plan"]["apply_mode"] == "static assignments"
    others = [g for g in recommended if g not in published and g != registered]
    assert {second[g]["plan"]["apply_mode"] for g in others} == {"advice only"}
    with db.connect(db_url) as conn:
        for table in ("planner_staging", "planner_staged_plans", "planner_staged_assignments"):
            assert conn.execute(sa.text(f"SELECT COUNT(*) FROM {table}")).scalar_one() == 0, table
