"""``planner_staging``: the results executors stage for a planner run before the driver makes it visible.

Each executor writes its groups' results here in its own transaction (adapters/spark_planner.py); the
driver's one finalizing transaction moves them into the plan tables and deletes them, so a run lands
whole or not at all. ``group_id`` compares byte-wise (``COLLATE "C"`` on PostgreSQL; SQLite's default
already does) so that paging through a run's rows by group id follows Python's ``sorted()``.

Revision ID: 0014_planner_staging
Revises: 0013_plan_columns
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0014_planner_staging"
down_revision = "0013_plan_columns"
branch_labels = None
depends_on = None


def upgrade() -> None:
    byte_wise = "C" if op.get_bind().dialect.name == "postgresql" else None
    op.create_table(
        "planner_staging",
        sa.Column("run_key", sa.String(length=36), primary_key=True),
        sa.Column("group_id", sa.Text(collation=byte_wise), primary_key=True),
        sa.Column("scope", sa.Integer(), nullable=False),
        sa.Column("result", sa.Text(), nullable=False),
        sa.Column("situation", sa.JSON(), nullable=True),
        sa.Column("plan_numbers", sa.JSON(), nullable=True),
        sa.Column("staged_at", sa.DateTime(timezone=True), nullable=False),
    )
    op.create_index("ix_planner_staging_staged_at", "planner_staging", ["staged_at"])


def downgrade() -> None:
    op.drop_index("ix_planner_staging_staged_at", table_name="planner_staging")
    op.drop_table("planner_staging")
