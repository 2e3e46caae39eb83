"""Migration 0013_plan_columns on SQLite and PostgreSQL: a plan stored before it gets its load and
unowned-lag columns from its metrics JSON, and the views show them."""

from __future__ import annotations

import pytest
import sqlalchemy as sa
from rebalance_advisor.store import db

from tests._plans import record_plan

pytestmark = [pytest.mark.postgres]

NEW = ("unowned_lag_before", "unowned_lag_after", "overloaded_members_before", "group_max_time_lag_s")


def test_old_plans_are_filled_in_and_the_view_shows_the_columns(url: str) -> None:
    from alembic import command

    plan_id = record_plan(url, "orders", ["w0", "w1"], [100_000, 60_000, 50_000])  # nothing owned yet
    with db.connect(url) as conn:  # back to before the columns existed: the plan stays, its columns go
        command.downgrade(db._alembic_config(conn), "0012_plan_identity")
        assert not set(NEW) & {c["name"] for c in sa.inspect(conn).get_columns("plans")}
    db.upgrade(url)
    with db.connect(url) as conn:
        row = conn.execute(
            sa.text(f"SELECT id, {', '.join(NEW)} FROM latest_plan_per_group WHERE group_id = 'orders'")
        ).one()
    # all 210,000 of lag on partitions no member owned, none after; without capacities nobody is
    # overloaded; no snapshot holds the group's time lags
    assert tuple(row) == (plan_id, 210_000, 0, 0, None)


def test_a_run_stores_the_groups_max_time_lag_of_its_snapshot(url: str) -> None:
    from rebalance_advisor.store.snapshots import write_snapshot

    from tests._planner import make_snapshot

    topics = {"orders-in": [(100_000, 0), (60_000, 0), (50_000, 0)]}
    snapshot_id = write_snapshot(
        make_snapshot({"orders": {"topics": topics}, "other": {"topics": topics}}), url
    )
    with db.connect(url) as conn:  # time lags as a snapshot with record timestamps stores them
        for group, partition, seconds in (("orders", 0, 42.5), ("orders", 2, 7.0), ("other", 1, 900.0)):
            conn.execute(
                sa.text("UPDATE committed_offsets SET time_lag_s = :s WHERE snapshot_id = :id "
                        "AND group_id = :g AND \"partition\" = :p"),
                {"s": seconds, "id": snapshot_id, "g": group, "p": partition},
            )  # fmt: skip
    plan_id = record_plan(url, "orders", ["w0", "w1"], [100_000, 60_000, 50_000], "orders-in", snapshot_id)
    with db.connect(url) as conn:
        stored = conn.execute(
            sa.text(f"SELECT group_max_time_lag_s FROM plans WHERE id = {plan_id}")
        ).scalar()
    assert stored == 42.5  # the group's own furthest-behind partition, not another group's
