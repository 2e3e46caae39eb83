"""When the advisor DAG's capacity pass may run: the snapshot DAG's next cron time, the pass's rule."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
from rebalance_advisor import settings
from rebalance_advisor.dag_tasks.advisor_tasks import next_cron_time
from rebalance_advisor.domain.estimates import RateParameters, wants_capacity_pass


@pytest.mark.parametrize(
    ("schedule", "now", "expected"),
    [
        ("*/5 * * * *", datetime(2026, 3, 1, 12, 3, 10, tzinfo=UTC), datetime(2026, 3, 1, 12, 5, tzinfo=UTC)),
        ("*/5 * * * *", datetime(2026, 3, 1, 12, 5, tzinfo=UTC), datetime(2026, 3, 1, 12, 10, tzinfo=UTC)),
        ("@hourly", datetime(2026, 3, 1, 12, 59, 30, tzinfo=UTC), datetime(2026, 3, 1, 13, 0, tzinfo=UTC)),
        ("not a schedule", datetime(2026, 3, 1, 12, 3, tzinfo=UTC), None),
        ("", datetime(2026, 3, 1, 12, 3, tzinfo=UTC), None),
    ],
)
def test_next_cron_time(schedule, now, expected):
    assert next_cron_time(schedule, now) == expected


def test_the_snapshot_schedule_comes_from_the_environment(monkeypatch):
    monkeypatch.delenv("REBALANCE_ADVISOR_SNAPSHOT_SCHEDULE", raising=False)
    assert settings.snapshot_schedule() == "*/5 * * * *"
    monkeypatch.setenv("REBALANCE_ADVISOR_SNAPSHOT_SCHEDULE", "*/1 * * * *")
    assert settings.snapshot_schedule() == "*/1 * * * *"


def test_only_a_plan_that_moved_partitions_on_unknown_capacities_asks_for_a_pass():
    assert wants_capacity_pass(unknown_capacities=1, moves=3)
    assert not wants_capacity_pass(unknown_capacities=0, moves=3)
    assert not wants_capacity_pass(unknown_capacities=2, moves=0)
    assert RateParameters().capacity_pass_s == 120.0
