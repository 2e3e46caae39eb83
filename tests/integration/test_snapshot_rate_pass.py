"""The snapshot service's second pass (services/snapshot_service.py): a scheduled snapshot that gives
no rates (an empty store) is followed by a second one, which the run returns, on a real broker and a
real SQLite store."""

from __future__ import annotations

import uuid

import pytest
import sqlalchemy as sa
from rebalance_advisor import store
from rebalance_advisor.domain.parameters import SnapshotParams
from rebalance_advisor.services.snapshot_service import take_and_store_snapshot

from tests.support.kafka_offsets import commit, new_topic

pytestmark = pytest.mark.kafka


def _runs(url: str) -> list[tuple[int, str | None]]:
    engine = sa.create_engine(url)
    try:
        with engine.connect() as conn:
            return [
                tuple(r)
                for r in conn.execute(sa.text("select id, airflow_run_id from snapshots order by id"))
            ]
    finally:
        engine.dispose()


def test_a_scheduled_snapshot_without_rates_takes_a_second_pass(kafka_bootstrap, sqlite_url, tmp_path):
    store.upgrade(sqlite_url)
    topic = new_topic(kafka_bootstrap, 2, records=50)
    group = f"rate-pass-{uuid.uuid4().hex[:8]}"
    commit(kafka_bootstrap, group, topic, {0: 20, 1: 50})
    config = {"bootstrap.servers": kafka_bootstrap}
    params = SnapshotParams(groups=group, rate_pass_s=5, skip_share_groups=True)
    taken = take_and_store_snapshot(params, config, sqlite_url, airflow_run_id="run-1", scheduled=True)
    # the first pass gave no rates (empty store): it stays, without the run id; the run's snapshot is
    # the second, with rates over the 5 s (and the pass's own time) between them: nothing produced
    first, second = _runs(sqlite_url)
    assert first[1] is None and second == (taken.snapshot_id, "run-1")
    rates = taken.snapshot.rates
    assert rates is not None and 5.0 <= rates.interval_s < 60.0
    assert rates.produce[(topic, 0)].rate == 0.0 and rates.consume[(group, topic, 0)].rate == 0.0
    # a retry of the run replaces its snapshot; the first pass is its predecessor: rates, no pass
    again = take_and_store_snapshot(params, config, sqlite_url, airflow_run_id="run-1", scheduled=True)
    assert _runs(sqlite_url) == [first, (again.snapshot_id, "run-1")] and again.snapshot_id != second[0]
    assert again.snapshot.rates.interval_s is not None

    # one snapshot command (not scheduled, no --rate-pass) on an empty store takes one pass
    single = f"sqlite:///{tmp_path / 'single.db'}"
    store.upgrade(single)
    take_and_store_snapshot(SnapshotParams(groups=group, skip_share_groups=True), config, single)
    assert len(_runs(single)) == 1
