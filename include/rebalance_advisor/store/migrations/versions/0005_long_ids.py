"""Ids and names as long as Kafka takes them: group, member, instance and client ids,
hosts, racks, assignors and coordinator hosts become TEXT (they were VARCHAR(255); Kafka limits none
of them to 255, and on PostgreSQL a longer group id failed the whole snapshot). Topic names stay
VARCHAR(249), Kafka's own limit.

SQLite does not enforce VARCHAR lengths; its snapshot tables are still rebuilt so the schema says
what the models say. The plan tables there are left alone (views depend on them, and SQLite would
not enforce the new type anyway); on PostgreSQL they change too, their two views dropped and created
again around the change (PostgreSQL refuses to change a column a view reads), from 0002's SQL.

Revision ID: 0005_long_ids
Revises: 0004_snapshot_rates
"""

from __future__ import annotations

import importlib

import sqlalchemy as sa
from alembic import op

revision = "0005_long_ids"
down_revision = "0004_snapshot_rates"
branch_labels = None
depends_on = None

SNAPSHOT_COLUMNS = {
    "consumer_groups": ("group_id", "assignor", "coordinator_host"),
    "group_members": ("group_id", "member_id", "group_instance_id", "client_id", "host", "rack"),
    "member_assignments": ("group_id", "member_id"),
    "committed_offsets": ("group_id",),
    "snapshot_errors": ("group_id",),
    "static_members": ("group_id", "member_id"),
}
PLAN_COLUMNS = {
    "plans": ("group_id",),
    "plan_assignments": ("member_id",),
    "group_outcomes": ("group_id",),
}


def _alter(tables: dict[str, tuple[str, ...]], to: sa.types.TypeEngine, length: int | None) -> None:
    for table, columns in tables.items():
        with op.batch_alter_table(table) as batch:
            for column in columns:
                batch.alter_column(column, type_=to, existing_type=sa.String(length) if length else sa.Text())


def _plan_columns(to: sa.types.TypeEngine, length: int | None) -> None:
    views = importlib.import_module("rebalance_advisor.store.migrations.versions.0002_plans")
    op.execute("DROP VIEW latest_plan_per_group")
    op.execute("DROP VIEW imbalanced_groups")
    _alter(PLAN_COLUMNS, to, length)
    op.execute(views.LATEST_PLAN_PER_GROUP)
    op.execute(views.IMBALANCED_GROUPS)


def upgrade() -> None:
    _alter(SNAPSHOT_COLUMNS, sa.Text(), 255)
    if op.get_bind().dialect.name != "sqlite":
        _plan_columns(sa.Text(), 255)


def downgrade() -> None:
    if op.get_bind().dialect.name != "sqlite":
        _plan_columns(sa.String(255), None)
    _alter(SNAPSHOT_COLUMNS, sa.String(255), None)
