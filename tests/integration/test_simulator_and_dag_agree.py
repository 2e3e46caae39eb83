"""The simulator's path and the DAG's path give the same decision on the same history.

The simulator runs a small group under the rate-aware rule for 40 minutes (rates that step and
drift, plans applied as they come, recent moves carried by its ``Carried``). Every snapshot it took
is then stored as a real snapshot (SQLite and PostgreSQL): the same offsets, owners and times. At a
snapshot with moves in the hysteresis window, after an interval with no plan, the planner's reader
builds the group's document (rates, capacities, interval evidence and recent moves from the store)
and ``plan_group`` decides: outcome and plan equal the simulator's at that snapshot.
"""

from __future__ import annotations

import pytest
from rebalance_advisor import store
from rebalance_advisor.domain import group_planning, simulation
from rebalance_advisor.domain.estimates import Observed
from rebalance_advisor.domain.snapshot_model import (
    CommittedOffset,
    Group,
    GroupMemberSnapshot,
    PartitionOffsets,
    Snapshot,
)
from rebalance_advisor.domain.spec_documents import build_docs_from_tables
from rebalance_advisor.store import db
from rebalance_advisor.store.planner_inputs import read_planner_inputs

SCENARIO = {
    "topics": [{"name": f"t{j}", "partitions": 6, "total_rate": 900.0, "zipf": 1.1} for j in range(2)],
    "members": [{"id": f"m{i}", "capacity": 560.0} for i in range(4)],
    "events": [
        {"at_s": 600, "kind": "rate_jump", "factor": 3.0, "topic": "t0", "partition": 1},
        {"at_s": 1200, "kind": "rate_jump", "factor": 3.0, "topic": "t1", "partition": 4},
    ],
    "drift_sigma": 0.2,
    "replan_interval_s": 60,
    "handover_s": 5,
    "hours": 40 / 60,
    "strategy": "rate_aware",
    "seed": 3,
}


def _simulated(monkeypatch) -> tuple[list[Observed], list]:
    """Every snapshot the simulator took and the advice it acted on at each."""
    seen: list[Observed] = []
    advice: list = []
    observed = simulation._Run._observed
    advise = simulation.advise_group

    def record_observed(run, *args):
        seen.append(observed(run, *args))
        return seen[-1]

    def record_advice(*args):
        advice.append(advise(*args))
        return advice[-1]

    monkeypatch.setattr(simulation._Run, "_observed", record_observed)
    monkeypatch.setattr(simulation, "advise_group", record_advice)
    simulation.simulate(simulation.parse_scenario(SCENARIO), keep_time_lag=False)
    return seen[1:], advice  # the first observation places the initial owners: not a snapshot


def _stored(o: Observed) -> Snapshot:
    topics = tuple(sorted({t for t, _ in o.log_ends}))
    members = tuple(
        GroupMemberSnapshot(m.key, "sim", "/127.0.0.1", None, None, topics, tuple(sorted(m.partitions)), i)
        for i, m in enumerate(o.members)
    )
    return Snapshot(
        taken_at=o.taken_at,
        bootstrap_servers="simulated:9092",
        cluster_id="sim-cluster",
        duration_s=0.0,
        groups=[Group("sim", "Stable", "classic", "range", 1, "h:1", members)],
        committed=[CommittedOffset(g, t, p, int(c)) for (g, t, p), c in sorted(o.committed.items())],
        partitions=[PartitionOffsets(t, p, 0, int(e), 1) for (t, p), e in sorted(o.log_ends.items())],
    )


def test_the_dag_path_decides_as_the_simulator_did(db_url, monkeypatch) -> None:
    snapshots, advice = _simulated(monkeypatch)
    # the first snapshot (0 s) gives no rates: the rule runs from the second pass (30 s) on, so
    # advice[k] was given on snapshots[k + 1]. 40 scheduled snapshots, the rate pass, and the
    # capacity pass's settling snapshots 40 s after the plans at 660 s and 1,260 s (no capacity known;
    # the one after the plan at 30 s would come after the scheduled one at 60 s)
    assert len(snapshots) == len(advice) + 1 == 43
    t0 = snapshots[0].taken_at
    off_schedule = [
        (o.taken_at - t0).total_seconds() for o in snapshots if (o.taken_at - t0).total_seconds() % 60
    ]
    assert off_schedule == [30.0, 700.0, 1300.0]
    acted = [a.outcome == "recommended" for a in advice]
    # a snapshot after a quiet interval, with a plan applied within the last 30 minutes before it
    pick = next(
        (k for k in range(len(advice) - 1, 1, -1) if not acted[k - 1] and any(acted[max(0, k - 30) : k - 1])),
        None,
    )
    assert pick is not None and sum(acted) >= 2, [a.outcome for a in advice]
    store.upgrade(db_url)
    ids = [store.write_snapshot(_stored(o), db_url) for o in snapshots[: pick + 2]]
    with db.connect(db_url) as conn:
        inputs = read_planner_inputs(conn, ids[-1])
    doc = next(d for d in build_docs_from_tables(inputs.tables) if d["group_id"] == "sim")
    store.db.dispose(db_url)
    assert doc.get("recent_moves"), doc.keys()
    rule = simulation.make_planner("rate_aware", simulation.parse_scenario(SCENARIO)).thresholds
    now = snapshots[pick + 1].taken_at
    dag = group_planning.plan_group(doc, rule, now)
    sim = advice[pick]
    assert (dag.outcome, dag.best_strategy) == (sim.outcome, sim.best_strategy), (dag.reason, sim.reason)
    assert dag.current_load.overloaded == sim.current_load.overloaded
    assert dag.current_load.worst_utilisation == pytest.approx(sim.current_load.worst_utilisation)
    if sim.plan is not None:
        assert sorted(dag.plan.assignments) == sorted(sim.plan.assignments)
