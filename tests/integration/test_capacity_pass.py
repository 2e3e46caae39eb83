"""The capacity pass on a real SQLite store (services/capacity_pass.py): the plans' own stored
numbers decide whether an early snapshot is due after publishing them, and when."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta

import sqlalchemy as sa
from rebalance_advisor import store
from rebalance_advisor.services.capacity_pass import NOTE_LIMIT, CapacityPass, capacity_pass
from rebalance_advisor.store.plans import plans_moves_and_unknown_capacities

from tests._plans import record_plan

NOW = datetime(2026, 3, 1, 12, 0, 30, tzinfo=UTC)
LATER = NOW + timedelta(minutes=10)  # a scheduled snapshot well after the pass


def test_a_plan_on_unknown_capacities_asks_for_a_pass_at_its_time(sqlite_url):
    store.upgrade(sqlite_url)
    unknown = record_plan(sqlite_url, "unknown-caps", ["a", "b"], [900, 10, 10, 10])
    known = record_plan(sqlite_url, "known-caps", ["a", "b"], [900, 10, 10, 10], capacity=500.0)
    found = plans_moves_and_unknown_capacities([known, unknown, unknown], sqlite_url)
    assert [(g, unknown_count) for _, g, _, unknown_count in found] == [
        ("unknown-caps", 2),
        ("known-caps", 0),
    ]
    assert all(moves > 0 for _, _, moves, _ in found)

    due = capacity_pass([unknown, known], sqlite_url, pass_s=120, now=NOW, next_scheduled=LATER)
    assert due is not None and due.groups == ("unknown-caps",)
    # once the handovers are over (40 s), and 120 s after that
    assert (due.settle_after, due.run_after) == (NOW + timedelta(seconds=40), NOW + timedelta(seconds=160))
    assert "unknown-caps" in due.note()
    # no schedule known (not a cron): the pass is taken
    assert capacity_pass([unknown], sqlite_url, pass_s=120, now=NOW, next_scheduled=None) is not None


def test_no_pass_when_off_when_the_schedule_comes_first_or_when_capacities_were_known(sqlite_url):
    store.upgrade(sqlite_url)
    unknown = record_plan(sqlite_url, "unknown-caps", ["a", "b"], [900, 10, 10, 10])
    known = record_plan(sqlite_url, "known-caps", ["a", "b"], [900, 10, 10, 10], capacity=500.0)
    assert capacity_pass([unknown], sqlite_url, pass_s=0, now=NOW, next_scheduled=LATER) is None
    assert capacity_pass([], sqlite_url, pass_s=120, now=NOW, next_scheduled=LATER) is None
    assert capacity_pass([known], sqlite_url, pass_s=120, now=NOW, next_scheduled=LATER) is None
    # a scheduled snapshot at 12:01:10 or sooner comes no later than either would: none; one before
    # 12:03:10 leaves the settling snapshot alone (it makes the scheduled one the measuring one)
    settle, measure = NOW + timedelta(seconds=40), NOW + timedelta(seconds=160)
    assert capacity_pass([unknown], sqlite_url, pass_s=120, now=NOW, next_scheduled=settle) is None
    alone = capacity_pass([unknown], sqlite_url, pass_s=120, now=NOW, next_scheduled=measure)
    assert alone is not None and (alone.settle_after, alone.run_after) == (settle, None)
    both = capacity_pass(
        [unknown], sqlite_url, pass_s=120, now=NOW, next_scheduled=measure + timedelta(seconds=1)
    )
    assert both is not None and both.run_after == measure


def test_the_note_fits_airflow_whatever_the_group_ids():
    many = CapacityPass(NOW, NOW, tuple(f"{'g' * 400}{n}" for n in range(7)))  # Kafka sets no length limit
    note = many.note()
    assert len(note) <= NOTE_LIMIT and note.endswith("... and 4 more") and note.startswith("capacity pass: ")
    assert (
        CapacityPass(None, NOW, ("a", "b")).note()
        == "capacity pass: plans published on unknown capacities for a, b"
    )


def test_a_plan_stored_before_the_count_existed_asks_for_none(sqlite_url):
    store.upgrade(sqlite_url)
    plan_id = record_plan(sqlite_url, "old-plan", ["a", "b"], [900, 10, 10, 10])
    engine = sa.create_engine(sqlite_url)
    try:
        with engine.begin() as conn:
            metrics = conn.execute(
                sa.text("select metrics from plans where id = :i"), {"i": plan_id}
            ).scalar_one()
            old = {k: v for k, v in json.loads(metrics).items() if k != "unknown_capacities"}
            conn.execute(
                sa.text("update plans set metrics = :m where id = :i"), {"m": json.dumps(old), "i": plan_id}
            )
    finally:
        engine.dispose()
    assert plans_moves_and_unknown_capacities([plan_id], sqlite_url)[0][3] == 0
    assert capacity_pass([plan_id], sqlite_url, pass_s=120, now=NOW, next_scheduled=LATER) is None
