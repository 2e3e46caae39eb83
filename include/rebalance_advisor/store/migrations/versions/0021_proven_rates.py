"""Each group member's and registered manual-assign member's proven rate
(``rebalance_advisor.domain.snapshot_model.ProvenRate``): the most it consumed over an interval it
kept up through, and when, carried from one snapshot to the next as a floor under its capacity
estimate. NULL for every stored snapshot: the first snapshots after the
upgrade prove each member's rate again.

Revision ID: 0021_proven_rates
Revises: 0020_telemetry_references
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0021_proven_rates"
down_revision = "0020_telemetry_references"
branch_labels = None
depends_on = None


_TABLES = ("group_members", "assigned_capacities")


def upgrade() -> None:
    for table in _TABLES:
        with op.batch_alter_table(table) as batch:
            batch.add_column(sa.Column("proven_rate", sa.Float(), nullable=True))
            batch.add_column(sa.Column("proven_rate_at", sa.DateTime(timezone=True), nullable=True))


def downgrade() -> None:
    for table in _TABLES:
        with op.batch_alter_table(table) as batch:
            batch.drop_column("proven_rate_at")
            batch.drop_column("proven_rate")
