"""The last interval's own evidence on production's path: three snapshots stored (SQLite and
PostgreSQL), the planner's reader, the group's document, plan_group.

The step change of tests/unit/test_interval_evidence.py, stored: group g, m0 holds t-0..t-3 at
274/s each, m1 t-4 and t-5 at 300/s, capacity configured 1,368/s for the group, every partition 1,000
behind. Snapshots 60 s apart; over the second interval t-0 produces 554/s. The stored (smoothed)
rate of t-0 is 274 + (1 - e^-0.5) x 280 = 384.2/s, m0 at 1,206/s: balanced on it; the reader adds
t-0's interval rate, 554/s, and m0 is overloaded at 1,376/s.
"""

from __future__ import annotations

import math
from datetime import timedelta

import pytest
from rebalance_advisor import store
from rebalance_advisor.domain.decisions import Thresholds
from rebalance_advisor.domain.estimates import CapacityPolicy
from rebalance_advisor.domain.group_planning import plan_group
from rebalance_advisor.domain.snapshot_model import Snapshot
from rebalance_advisor.domain.spec_documents import build_docs_from_tables
from rebalance_advisor.store import db
from rebalance_advisor.store.planner_inputs import read_planner_inputs

from tests.support.hand_made import T0, hand_made_snapshot

OWNERS = {0: "m0", 1: "m0", 2: "m0", 3: "m0", 4: "m1", 5: "m1"}
RATES = (
    {p: 274 if p < 4 else 300 for p in OWNERS},
    {p: (554 if p == 0 else 274) if p < 4 else 300 for p in OWNERS},
)
RULE = Thresholds(strategies=("rate_aware", "rate_aware_sticky"))


def _snapshot(k: int) -> Snapshot:
    ends = {p: 100_000 + sum(RATES[min(i, 1)][p] * 60 for i in range(k)) for p in OWNERS}
    return hand_made_snapshot(
        T0 + timedelta(seconds=60 * k),
        {("t", p): e for p, e in ends.items()},
        {("g", "t", p): e - 1000 for p, e in ends.items()},
        [("g", m, None, [("t", p) for p, o in OWNERS.items() if o == m]) for m in ("m0", "m1")],
    )


def test_the_reader_gives_the_interval_and_the_step_is_seen_at_once(db_url) -> None:
    store.upgrade(db_url)
    ids = [
        store.write_snapshot(_snapshot(k), db_url, capacities=CapacityPolicy.parse("g=1368"))
        for k in range(3)
    ]
    with db.connect(db_url) as conn:
        inputs = read_planner_inputs(conn, ids[-1])
    doc = next(d for d in build_docs_from_tables(inputs.tables) if d["group_id"] == "g")
    store.db.dispose(db_url)
    smoothed = {p["partition"]: p["produce_rate"] for p in doc["partitions"]}
    assert smoothed[0] == pytest.approx(274 + (1 - math.exp(-0.5)) * 280)
    interval = doc["interval"]
    assert interval["seconds"] == 60.0
    assert {p: r for _, p, r in interval["rates"]} == {p: float(r) for p, r in RATES[1].items()}
    assert {p: lag for _, p, lag in interval["lags_before"]} == dict.fromkeys(OWNERS, 1000)
    assert interval["held_throughout"] == ["m0", "m1"]
    now = T0 + timedelta(seconds=120)
    assert plan_group({k: v for k, v in doc.items() if k != "interval"}, RULE, now).outcome == "balanced"
    advice = plan_group(doc, RULE, now)
    assert advice.outcome == "recommended", advice.reason
    assert advice.moves == 1 and max(advice.plan.members.inflow) < 0.98 * 1368
