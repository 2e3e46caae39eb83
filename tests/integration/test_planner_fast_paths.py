"""The planner's speed-ups change no result.

- ``lag_aware_sticky``'s pruned search picks exactly the steps of the full scan it replaced: its
  owners on 600 seeded random groups (identical and differing subscriptions, move budgets, min
  gains, ties from tiny lags) hash to the digest the unpruned implementation produced.
- The planner's SQL reader builds the same documents as ``build_group_docs(load_snapshot(...))``.
- Groups travel to Spark in buckets, each still planned on its own (``bucket_count``).
"""

from __future__ import annotations

import random
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from rebalance_advisor import store
from rebalance_advisor.adapters.spark_planner import bucket_count, run_planner
from rebalance_advisor.domain.advice import OutcomeLine
from rebalance_advisor.domain.assignors import lag_aware_sticky
from rebalance_advisor.domain.decisions import Thresholds
from rebalance_advisor.domain.group_planning import plan_group
from rebalance_advisor.domain.lag import ResetPolicy
from rebalance_advisor.domain.spec_documents import StaticMember, build_docs_from_tables, build_group_docs
from rebalance_advisor.errors import AdvisorError
from rebalance_advisor.store.snapshot_reader import read_snapshot_tables

from tests._groups import owners_digest
from tests._planner import BALANCED, IDLE, KIP, MANUAL, make_snapshot, spark  # noqa: F401


def _lag_aware_sticky_options(rng: random.Random) -> list[dict[str, Any]]:
    """The option sets each group is planned with (draws from the group stream, so part of the pin)."""
    return [{}, {"move_budget": rng.randint(0, 10)}, {"min_gain": rng.choice([1, 50, 5000])}]


#: sha256 over every owners array of :func:`tests._groups.owners_digest`, computed with the
#: implementation before the search was pruned (commit 9cb437a's lag_aware_sticky.py).
PINNED_DIGEST = "b21f57722f4166facc206437cf79126f0fa774c2a56e1d7476bffd6e54cb98d6"


def test_lag_aware_sticky_results_pinned():
    assert owners_digest(lag_aware_sticky.owners, _lag_aware_sticky_options) == PINNED_DIGEST


def test_pinned_digest_sees_a_changed_step(monkeypatch):
    """The pin is sensitive: fewer partners per step (2 instead of 16) changes the digest."""
    monkeypatch.setattr(lag_aware_sticky, "PARTNERS", 2)
    assert owners_digest(lag_aware_sticky.owners, _lag_aware_sticky_options) != PINNED_DIGEST


MIXED = {
    "kip-example": KIP,
    "idle-group": IDLE,
    "balanced-group": BALANCED,
    "manual-assign": MANUAL,
    "static-ids": {
        "topics": {"s0": [(500, 100), (800, None), (90, 95)], "s1": [(40, 1)]},
        "members": [("z-1", "inst-b", [("s0", 1), ("s0", 0)], ["s0", "s1"]), ("a-1", "inst-a", [], None)],
    },
}


@pytest.mark.postgres
def test_reader_builds_the_documents_load_snapshot_does(db_url):
    store.upgrade(db_url)
    snapshot_id = store.write_snapshot(make_snapshot(MIXED), db_url)
    registry = [
        StaticMember("manual-assign", "worker-2", ("manual-topic",)),
        StaticMember("manual-assign", "worker-3", ("manual-topic",)),
        StaticMember("elsewhere", "w", ("t",)),
    ]
    # the published plan names a member no longer registered and partitions that no longer exist
    published = {
        "manual-assign": {
            "worker-2": [("manual-topic", 0), ("manual-topic", 9), ("other-topic", 0)],
            "gone": [("manual-topic", 1)],
        },
        "kip-example": {"C0": [("t0", 2)]},  # a dynamic group: the snapshot's members win
    }
    docs = []
    for options in (
        {},
        {"reset": ResetPolicy.parse("idle-.*=earliest,manual-.*=earliest")},
        {"group_pattern": "k.*"},
    ):
        expected = build_group_docs(
            store.load_snapshot(snapshot_id, db_url), registry, published=published, **options
        )
        got = build_docs_from_tables(
            read_snapshot_tables(snapshot_id, db_url), registry, published=published, **options
        )
        assert got == expected
        docs.append(got)
    assert [d["group_id"] for d in docs[-1]] == ["kip-example"]
    by_group = {d["group_id"]: d for d in docs[0]}
    assert [(m["member_id"], m["owned"]) for m in by_group["manual-assign"]["members"]] == [
        ("worker-2", [["manual-topic", 0]]),
        ("worker-3", []),
    ]
    assert [m["owned"] for m in by_group["kip-example"]["members"]] == [[["t0", 0], ["t0", 1]], [["t0", 2]]]
    with pytest.raises(AdvisorError, match="does not exist"):
        read_snapshot_tables(snapshot_id + 1, db_url)


def test_bucket_count():
    assert bucket_count(10_000, 2) == 8
    assert bucket_count(3, 2) == 3  # never an empty bucket
    assert bucket_count(1, 0) == 1
    assert bucket_count(10_000, 64) == 256


@pytest.mark.spark
def test_run_planner_plans_the_documents_of_build_group_docs(spark, sqlite_url):  # noqa: F811
    """With stored rates: the job (SQL reader, buckets) decides what plan_group decides on the old route."""
    t0 = datetime(2025, 1, 1, tzinfo=UTC)
    hot = {"topics": {"t": [(1_000, 0), (1_000, 0), (10, 0)]}, "members": [("m", None, [("t", 0), ("t", 1)], None), ("n", None, [("t", 2)], None)]}  # fmt: skip
    # 100 s later: partition 0 went 10/s, partition 1 1/s, partition 2 not at all
    later = {"topics": {"t": [(3_000, 1_000), (1_100, 100), (10, 0)]}, "members": hot["members"]}
    store.upgrade(sqlite_url)
    first = store.write_snapshot(make_snapshot({"g": hot, **MIXED}, t0), sqlite_url)
    second = store.write_snapshot(
        make_snapshot({"g": later, **MIXED}, t0 + timedelta(seconds=100)), sqlite_url
    )
    thresholds, now = Thresholds(cooldown_minutes=0), datetime(2025, 1, 2, tzinfo=UTC)
    assert first < second
    docs = build_group_docs(store.load_snapshot(second, sqlite_url))
    expected = [OutcomeLine.of(plan_group(doc, thresholds, now)) for doc in docs]
    run = run_planner(spark, sqlite_url, second, thresholds, dry_run=True, now=now)
    assert run.outcomes == expected
    # Log ends 1,000 -> 3,000, 1,000 -> 1,100 and 10 -> 10 over 100 s: the rates planned on.
    g = next(d for d in docs if d["group_id"] == "g")
    assert [p["produce_rate"] for p in g["partitions"]] == pytest.approx([20.0, 1.0, 0.0])
    # over 100 s: the interval that sets the auto capacity margin, on both routes (the outcomes above
    # agree), and none for the first snapshot, whose rates are unknown
    assert g["rate_interval_s"] == pytest.approx(100.0)
    assert all(d["rate_interval_s"] is None for d in build_group_docs(store.load_snapshot(first, sqlite_url)))
    assert g["weight"] == "lag"
