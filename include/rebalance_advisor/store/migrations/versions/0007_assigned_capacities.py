"""Capacities of manual-assign (``assign()``) members, measured against their published plan (docs/architecture.md, "The load model").

The broker lists no members for such a group, so these capacities get their own table rather than
``group_members`` rows (``lag`` shows only what the broker lists).

Revision ID: 0007_assigned_capacities
Revises: 0006_share_lag
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0007_assigned_capacities"
down_revision = "0006_share_lag"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "assigned_capacities",
        sa.Column(
            "snapshot_id", sa.Integer(), sa.ForeignKey("snapshots.id", ondelete="CASCADE"), primary_key=True
        ),
        sa.Column("group_id", sa.Text(), primary_key=True),
        sa.Column("member_id", sa.Text(), primary_key=True),
        sa.Column("plan_id", sa.Integer(), nullable=False),
        sa.Column("capacity", sa.Float(), nullable=True),
        sa.Column("capacity_source", sa.String(length=16), nullable=False),
        sa.Column("capacity_measured_at", sa.DateTime(timezone=True), nullable=True),
    )


def downgrade() -> None:
    op.drop_table("assigned_capacities")
