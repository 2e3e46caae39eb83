"""A note with each member's capacity: why a capacity source the member has was not used (its
client telemetry distrusted: docs/operations/telemetry.md). NULL for every stored snapshot.

Revision ID: 0010_capacity_note
Revises: 0009_snapshot_rate_interval
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0010_capacity_note"
down_revision = "0009_snapshot_rate_interval"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("group_members") as batch:
        batch.add_column(sa.Column("capacity_note", sa.Text(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("group_members") as batch:
        batch.drop_column("capacity_note")
