"""The Spark planner end to end on hand-made snapshots: real Spark (local[2]), SQLite and PostgreSQL."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime, timedelta

import pytest
import sqlalchemy as sa
from rebalance_advisor import store
from rebalance_advisor.adapters.spark_planner import PlannerFailed, run_planner
from rebalance_advisor.domain.assignors import get_assignor
from rebalance_advisor.domain.decisions import Thresholds
from rebalance_advisor.domain.group_planning import plan_group
from rebalance_advisor.domain.group_spec import parse_group_spec
from rebalance_advisor.domain.spec_documents import build_group_docs
from rebalance_advisor.errors import AdvisorError
from rebalance_advisor.services import plan_lifecycle, static_members
from rebalance_advisor.store import db
from rebalance_advisor.store import plans as store_plans

from tests._planner import BALANCED, IDLE, KIP, MANUAL, make_snapshot, spark  # noqa: F401

pytestmark = [pytest.mark.spark, pytest.mark.slow]

BROKEN = {
    "topics": {"gone": []},
    "members": [("x-0", None, [], ["gone"])],
}  # subscribes to a topic with no partitions


def _store(url: str, groups: dict, **kw) -> int:
    store.upgrade(url)
    return store.write_snapshot(make_snapshot(groups, **kw), url)


def _count(url: str, table: str, where: str = "") -> int:
    with db.connect(url) as conn:
        return conn.execute(sa.text(f"SELECT COUNT(*) FROM {table} {where}")).scalar_one()


@pytest.mark.postgres
def test_outcomes_plans_views_and_cooldown(spark, db_url):  # noqa: F811
    groups = {"kip-example": KIP, "idle-group": IDLE, "balanced-group": BALANCED, "manual-assign": MANUAL,
              "broken": BROKEN}  # fmt: skip
    _store(db_url, groups)
    run = run_planner(spark, db_url, "latest", created_by="test")
    outcomes = {o.group_id: o for o in store_plans.run_outcomes(run.run_id, db_url)}
    assert {g: o.outcome for g, o in outcomes.items()} == {
        "kip-example": "recommended",
        "idle-group": "idle",
        "balanced-group": "balanced",
        "manual-assign": "no_members",
        "broken": "error",
    }
    assert "gone" in outcomes["broken"].reason
    assert outcomes["manual-assign"].total_lag == 35_500
    kip = outcomes["kip-example"]
    assert (kip.max_lag_before, kip.max_lag_after, kip.moves) == (160_000, 110_000, 1)
    plans = store_plans.list_plans(db_url)
    assert [(p.group_id, p.strategy, p.status) for p in plans] == [
        ("kip-example", "lag_aware", "recommended")
    ]
    plan_id = plans[0].id
    assert kip.plan_id == plan_id and run.recommended_plan_ids == [plan_id]
    assert store_plans.plan_assignment_map(plan_id, db_url) == {
        "C0": [("t0", 0)],
        "C1": [("t0", 1), ("t0", 2)],
    }
    detail = store_plans.get_plan(plan_id, db_url)
    assert detail.metrics["before"]["member_lag"] == {"C0": 160_000, "C1": 50_000}
    assert [(t.from_status, t.to_status) for t in detail.transitions] == [(None, "recommended")]
    with db.connect(db_url) as conn:
        assert conn.execute(sa.text("SELECT group_id, strategy FROM latest_plan_per_group")).all() == [
            ("kip-example", "lag_aware")
        ]
        assert conn.execute(sa.text("SELECT group_id, outcome FROM imbalanced_groups")).all() == [
            ("kip-example", "recommended")
        ]

    # Register the manual-assign consumers, take a new snapshot, plan again inside a cool-down the run
    # asks for (off by default: hysteresis instead of a fixed silence, docs/concepts/decision-rules.md).
    static_members.add("manual-assign", "worker-a", ["manual-topic"], db_url)
    static_members.add("manual-assign", "worker-b", ["manual-topic"], db_url)
    _store(db_url, groups)
    thirty = Thresholds(cooldown_minutes=30)
    second = run_planner(spark, db_url, "latest", thirty, created_by="test")
    outcomes = {o.group_id: o for o in store_plans.run_outcomes(second.run_id, db_url)}
    assert outcomes["kip-example"].outcome == "held_by_cooldown"
    assert outcomes["kip-example"].reason.startswith(f"cool-down: plan {plan_id} (recommended)")
    assert outcomes["manual-assign"].outcome == "recommended"
    manual = store_plans.plan_assignment_map(outcomes["manual-assign"].plan_id, db_url)
    # rate_aware (no count constraint), heaviest first to the least loaded: 30,000 alone on worker-a,
    # 2,000 + 2,000 + 1,500 = 5,500 on worker-b: max 30,000 beats the best count-balanced 31,500.
    assert manual == {"worker-a": [("manual-topic", 0)],
                      "worker-b": [("manual-topic", 1), ("manual-topic", 2), ("manual-topic", 3)]}  # fmt: skip
    statuses = [(p.id, p.status) for p in store_plans.list_plans(db_url, group="kip-example")]
    assert statuses == [(plan_id, "recommended")]  # the held-back candidate keeps only its outcome row
    assert outcomes["kip-example"].plan_id is None
    # The first recommendation still stands.
    with db.connect(db_url) as conn:
        assert conn.execute(
            sa.text("SELECT id FROM latest_plan_per_group WHERE group_id='kip-example'")
        ).all() == [(plan_id,)]

    # After the cool-down the same assignment is recommended again: the standing plan is confirmed
    # (same id, still recommended), not superseded by a copy (domain/plan_identity.py).
    third = run_planner(spark, db_url, "latest", thirty, now=datetime.now(UTC) + timedelta(minutes=31))
    again = next(o for o in third.outcomes if o.group_id == "kip-example")
    assert (again.outcome, again.plan_id) == ("recommended", plan_id)
    confirmed = store_plans.get_plan(plan_id, db_url)
    assert confirmed.status == "recommended" and confirmed.last_confirmed_at is not None


@pytest.mark.postgres
@pytest.mark.kafka
def test_manual_assign_group_is_measured_against_its_published_plan(spark, db_url, kafka_bootstrap):  # noqa: F811
    """The snapshot cannot see assign() consumers: their latest published plan is what they own.

    Without that, every run after the cool-down saw all lag as unowned and recommended again.
    """
    _store(db_url, {"manual-assign": MANUAL})
    for member in ("worker-a", "worker-b"):
        static_members.add("manual-assign", member, ["manual-topic"], db_url)
    (first,) = run_planner(spark, db_url, "latest").outcomes
    assert first.outcome == "recommended" and "no member owns" in first.reason
    plan_id = first.plan_id
    plan_lifecycle.approve(plan_id, "test", db_url)
    topic = f"asg-{uuid.uuid4().hex[:10]}"
    plan_lifecycle.publish(plan_id, {"bootstrap.servers": kafka_bootstrap}, "test", db_url, topic=topic)
    published = store_plans.get_plan(plan_id, db_url)
    assert published.status == "published"

    # A newer snapshot with the same lags, planned later: the plan consumers run is already the best
    # (30,000 alone on one member, 5,500 on the other), so no new recommendation.
    _store(db_url, {"manual-assign": MANUAL})
    later = datetime.now(UTC) + timedelta(minutes=31)
    (second,) = run_planner(spark, db_url, "latest", now=later).outcomes
    assert second.outcome == "no_better_plan", second.reason
    assert second.max_lag_before == published.max_lag_after == 30_000
    assert (second.max_lag_after, second.moves, second.plan_id) == (30_000, 0, None)
    assert [(p.id, p.status) for p in store_plans.list_plans(db_url, group="manual-assign")] == [
        (plan_id, "published")
    ]

    # A member unregistered: it drops out, its partitions are unowned, a new plan gives them out.
    static_members.remove("manual-assign", "worker-b", db_url)
    (third,) = run_planner(spark, db_url, "latest", now=later).outcomes
    assert third.outcome == "recommended"
    before = store_plans.get_plan(third.plan_id, db_url).metrics["before"]
    assert (before["member_lag"], before["unowned_lag"]) == ({"worker-a": 30_000}, 5_500)  # 2,000+2,000+1,500
    assert store_plans.plan_assignment_map(third.plan_id, db_url) == {
        "worker-a": [("manual-topic", p) for p in range(4)]
    }


def test_planner_equals_direct_assignor_calls(spark, sqlite_url):  # noqa: F811
    # Members that hold nothing yet: every strategy's plan is recommended, so all can be compared.
    groups = {
        "multi": {
            "topics": {
                "x": [(9_000, 0), (7_000, 0), (5_000, 0), (10, 0)],
                "y": [(30_000, 0), (2, 0), (3, 0)],
            },
            "members": [("a", None, [], ["x", "y"]), ("b", None, [], ["x"]), ("c", "inst-c", [], ["y"])],
        },
        "single": {
            "topics": {"z": [(v, 0) for v in (50, 4_000, 900, 12_000, 7, 3_000, 3_000)]},
            "members": [(f"z{i}", None, [], ["z"]) for i in range(3)],
        },
    }
    snapshot_id = _store(sqlite_url, groups)
    docs = build_group_docs(store.load_snapshot(snapshot_id, sqlite_url))
    for name in ("range", "roundrobin", "sticky", "lag_aware", "lag_aware_sticky"):
        run = run_planner(spark, sqlite_url, snapshot_id, Thresholds(strategies=(name,), cooldown_minutes=0))
        for doc in docs:
            outcome = next(o for o in run.outcomes if o.group_id == doc["group_id"])
            spec_doc = {k: doc[k] for k in ("group_id", "members", "partitions")}  # as plan_group does
            expected = get_assignor(name).assign(parse_group_spec(spec_doc))
            got = store_plans.plan_assignment_map(outcome.plan_id, sqlite_url)
            assert got == {m: parts for m, parts in expected.items() if parts}, (name, doc["group_id"])


def test_unknown_empty_dry_run_and_rerun(spark, sqlite_url):  # noqa: F811
    store.upgrade(sqlite_url)
    with pytest.raises(AdvisorError, match="no snapshot stored yet"):
        run_planner(spark, sqlite_url)
    empty = _store(sqlite_url, {})
    with pytest.raises(AdvisorError, match="snapshot 99 does not exist"):
        run_planner(spark, sqlite_url, 99)
    run = run_planner(spark, sqlite_url, empty)
    assert run.outcomes == [] and run.run_id is not None
    _store(sqlite_url, {"kip-example": KIP})
    dry = run_planner(spark, sqlite_url, dry_run=True)
    assert dry.run_id is None and dry.flagged == ["kip-example"]
    assert _count(sqlite_url, "plans") == 0
    first = run_planner(spark, sqlite_url, airflow_run_id="manual__1")
    again = run_planner(spark, sqlite_url, airflow_run_id="manual__1")  # same Airflow run: replaces
    assert again.outcomes[0].outcome == "recommended"  # not held back by its own first attempt
    assert _count(sqlite_url, "advisor_runs", "WHERE airflow_run_id = 'manual__1'") == 1
    assert _count(sqlite_url, "plans") == 1 and first.outcomes == again.outcomes


def test_spark_failure_mid_job_writes_nothing(spark, sqlite_url):  # noqa: F811
    _store(sqlite_url, {"kip-example": KIP, "balanced-group": BALANCED, "idle-group": IDLE})

    def fail_on_idle(doc, thresholds, now):
        if doc["group_id"] == "idle-group":
            raise RuntimeError("executor lost its mind on idle-group")
        return plan_group(doc, thresholds, now)

    with pytest.raises(PlannerFailed, match="executor lost its mind on idle-group"):
        run_planner(spark, sqlite_url, plan_fn=fail_on_idle)
    # nor the rows the other executors staged (adapters/spark_pipeline.py)
    for table in (
        "advisor_runs",
        "plans",
        "plan_assignments",
        "group_outcomes",
        "plan_transitions",
        "planner_staging",
    ):
        assert _count(sqlite_url, table) == 0, table


def test_unreachable_database_is_a_clear_error_without_the_password(sqlite_url):
    """Nothing reaches Spark (the session is not needed): the first read fails with db's message."""
    from rebalance_advisor.store.snapshot_reader import read_snapshot_tables

    dead = "postgresql+psycopg://u:secret@127.0.0.1:1/x?connect_timeout=2"
    with pytest.raises(
        db.DatabaseUnavailable, match=r"database postgresql\+psycopg://u:\*\*\*@127.0.0.1:1/x"
    ) as err:
        run_planner(None, dead, "latest")
    assert "secret" not in str(err.value)
    # The raw-cursor reader: a driver error mid-read is the same clear, retryable error.
    snapshot_id = _store(sqlite_url, {"kip-example": KIP})
    with db.connect(sqlite_url) as conn:
        conn.execute(sa.text("DROP TABLE committed_offsets"))
    with pytest.raises(
        db.DatabaseUnavailable, match=r"database sqlite:///.*failed: no such table: committed_offsets"
    ):
        read_snapshot_tables(snapshot_id, sqlite_url)
