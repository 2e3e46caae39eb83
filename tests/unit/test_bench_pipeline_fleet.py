"""The planner benchmark's stored fleet carries the rates its docstring promises (bench/pipeline.py).

The store derives produce rates from the two snapshots' timestamps. The fleet's snapshots must be
stamped ``INTERVAL_S`` apart, whatever it costs to generate and store them: stamped when each was
built, the interval grew with the fleet (19 s at 10,000 groups, 368 s at 100,000), the rates shrank
by as much, and the 100,000-group fleet had every group flagged (docs/benchmarks/sizing.md).

The same stored fleet's documents, as an executor builds them (rates, capacities, the last
interval's evidence), plan to the same advice without the trip through JSON the driver path ships
them in (spark_pipeline.planned_view).
"""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta

import pytest
import sqlalchemy as sa
from rebalance_advisor import store
from rebalance_advisor.adapters import spark_pipeline
from rebalance_advisor.domain.decisions import Thresholds
from rebalance_advisor.domain.group_planning import plan_group
from rebalance_advisor.store import db
from rebalance_advisor.store.planner_inputs import read_planner_inputs

from tests.support.scripts import load_bench


@pytest.fixture(scope="module")
def fleet(tmp_path_factory):
    """A stored fleet of 60 groups: the bench module, the database URL, the newest snapshot's id."""
    bench = load_bench("pipeline")
    url = f"sqlite:///{tmp_path_factory.mktemp('fleet') / 'fleet.db'}"
    store.upgrade(url)
    return bench, url, bench.write_history(60, url)


def test_stored_fleet_rates_are_over_the_intended_interval(fleet):
    bench, url, snapshot_id = fleet
    with db.connect(url) as conn:
        interval = conn.execute(
            sa.text("SELECT rate_interval_s FROM snapshots WHERE id = :i"), {"i": snapshot_id}
        ).scalar_one()
        topics = conn.execute(
            sa.text(
                "SELECT topic, COUNT(*), SUM(produce_rate) FROM partition_offsets "
                "WHERE snapshot_id = :i GROUP BY topic"
            ),
            {"i": snapshot_id},
        ).all()
    assert abs(interval - bench.INTERVAL_S) < 1e-6, interval
    assert len(topics) == 30  # two groups per topic
    for topic, count, total in topics:
        # each partition's log end moved round(rate x interval): its rate is exact to 0.5 / interval
        assert abs(total - bench.TOPIC_RATE * count) <= count * 0.5 / bench.INTERVAL_S + 1e-9, topic


def test_documents_plan_alike_without_the_json_trip(fleet):
    _, url, snapshot_id = fleet
    thresholds = Thresholds()
    with db.connect(url) as conn:
        inputs = read_planner_inputs(conn, snapshot_id)
        taken_at = conn.execute(sa.text("SELECT MAX(taken_at) FROM snapshots")).scalar_one()
    now = datetime.fromisoformat(str(taken_at)).replace(tzinfo=UTC) + timedelta(seconds=30)
    docs = spark_pipeline.planner_documents(inputs, thresholds, None, None)
    assert len(docs) == 60 and sum("interval" in d for d in docs) == 60
    outcomes = set()
    for doc in docs:
        view = spark_pipeline.planned_view(doc)
        assert json.loads(json.dumps(view)) == view  # JSON's types only: no tuple, no NaN
        direct = plan_group(view, thresholds, now)
        shipped = plan_group(json.loads(spark_pipeline.shipped_document(doc)), thresholds, now)
        assert direct.to_json() == shipped.to_json(), doc["group_id"]
        outcomes.add(direct.outcome)
    assert {"recommended", "no_better_plan"} <= outcomes, outcomes


def test_planner_cpu_bench_smoke(fleet, tmp_path, capsys):
    """bench/planner_cpu.py on the stored fleet: every group planned, dumped and finalized, the steps' table."""
    _, url, _ = fleet
    bench = load_bench("planner_cpu")
    out, dump = tmp_path / "cpu.json", tmp_path / "dump.jsonl"
    fleet_file = url.removeprefix("sqlite:///")
    assert bench.main(["--fleet", fleet_file, "--dump", str(dump), "--out", str(out), "--finalize"]) == 0
    assert "groups planned" in capsys.readouterr().out
    result = json.loads(out.read_text())
    assert result["groups"] == 60 and sum(result["outcomes"].values()) == 60
    assert set(result["cpu_s"]) == {"read", "documents", "plan", "staged_rows", "stage", "finalize"}
    assert len(dump.read_text().splitlines()) == 60
