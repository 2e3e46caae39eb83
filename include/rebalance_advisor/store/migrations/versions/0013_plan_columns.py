"""The load prediction and the lag no member owns as ``plans`` columns (docs/reference/plan-table.md).

Until now they were only inside the ``metrics`` JSON (``load_before``, the chosen candidate's
``load``, ``before.unowned_lag``) or computed per query (the group's time lag). New columns, all
NULL when unknown:

- ``predicted_catch_up_before_s`` / ``predicted_catch_up_after_s``: the load model's predicted time
  for the slowest member to clear its backlog, current assignment / under the plan (NULL: never,
  when that side has overloaded members; or unknown, without capacities);
- ``overloaded_members_before`` / ``overloaded_members_after``: members whose inflow reaches their
  capacity;
- ``unowned_lag_before`` / ``unowned_lag_after``: lag on partitions no member owns (not counted in
  the member lags, so ``max_lag_before`` alone hid it);
- ``group_max_time_lag_s``: the group's furthest-behind partition, in seconds, in the plan's snapshot.

Existing rows are filled from their ``metrics`` JSON and their snapshot's committed offsets.
``latest_plan_per_group`` is re-created so PostgreSQL, which expands ``p.*`` when a view is
created, shows the new columns.

Revision ID: 0013_plan_columns
Revises: 0012_plan_identity
"""

from __future__ import annotations

import importlib
from typing import Any

import sqlalchemy as sa
from alembic import op

revision = "0013_plan_columns"
down_revision = "0012_plan_identity"
branch_labels = None
depends_on = None

COLUMNS = (
    ("predicted_catch_up_before_s", sa.Float()),
    ("predicted_catch_up_after_s", sa.Float()),
    ("overloaded_members_before", sa.Integer()),
    ("overloaded_members_after", sa.Integer()),
    ("unowned_lag_before", sa.BigInteger()),
    ("unowned_lag_after", sa.BigInteger()),
    ("group_max_time_lag_s", sa.Float()),
)


def _flagged_view_revision():
    return importlib.import_module("rebalance_advisor.store.migrations.versions.0012_plan_identity")


def _filled(metrics: dict[str, Any] | None, strategy: str) -> dict[str, Any]:
    """The new columns of one old row, from its ``metrics`` JSON (the store's rule at write time)."""
    from rebalance_advisor.store.plans import plan_columns_from_metrics

    return plan_columns_from_metrics(metrics, strategy)


def upgrade() -> None:
    views = _flagged_view_revision()
    op.execute("DROP VIEW IF EXISTS imbalanced_groups")
    op.execute("DROP VIEW IF EXISTS latest_plan_per_group")
    for name, kind in COLUMNS:  # plain ADD COLUMNs: a batch copy of ``plans`` on SQLite breaks views
        op.add_column("plans", sa.Column(name, kind, nullable=True))
    conn = op.get_bind()
    plans = sa.table("plans", sa.column("id"), sa.column("metrics", sa.JSON()), sa.column("strategy"),
                     *(sa.column(name) for name, _ in COLUMNS[:-1]))  # fmt: skip
    for plan_id, metrics, strategy in conn.execute(
        sa.select(plans.c.id, plans.c.metrics, plans.c.strategy)
    ).all():
        conn.execute(sa.update(plans).where(plans.c.id == plan_id).values(**_filled(metrics, strategy)))
    op.execute(
        "UPDATE plans SET group_max_time_lag_s = (SELECT MAX(c.time_lag_s) FROM committed_offsets c "
        "WHERE c.snapshot_id = plans.snapshot_id AND c.group_id = plans.group_id)"
    )
    views._views(views.FLAGGED)


def downgrade() -> None:
    views = _flagged_view_revision()
    op.execute("DROP VIEW IF EXISTS imbalanced_groups")
    op.execute("DROP VIEW IF EXISTS latest_plan_per_group")
    with op.batch_alter_table("plans") as batch:
        for name, _ in reversed(COLUMNS):
            batch.drop_column(name)
    views._views(views.FLAGGED)
