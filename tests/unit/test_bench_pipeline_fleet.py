"""The planner benchmark's stored fleet carries the rates its docstring promises (bench/pipeline.py).

The store derives produce rates from the two snapshots' timestamps. The fleet's snapshots must be
stamped ``INTERVAL_S`` apart, whatever it costs to generate and store them: stamped when each was
built, the interval grew with the fleet (19 s at 10,000 groups, 368 s at 100,000), the rates shrank
by as much, and the 100,000-group fleet had every group flagged (docs/benchmarks/sizing.md).
"""

from __future__ import annotations

import importlib.util
from pathlib import Path

import sqlalchemy as sa
from rebalance_advisor import store
from rebalance_advisor.store import db

BENCH = Path(__file__).resolve().parents[2] / "bench" / "pipeline.py"


def load_bench():
    spec = importlib.util.spec_from_file_location("bench_pipeline", BENCH)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_stored_fleet_rates_are_over_the_intended_interval(tmp_path):
    bench = load_bench()
    url = f"sqlite:///{tmp_path / 'fleet.db'}"
    store.upgrade(url)
    snapshot_id = bench.write_history(60, url)
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
