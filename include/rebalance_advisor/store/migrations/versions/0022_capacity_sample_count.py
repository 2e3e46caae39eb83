"""Each group member's and registered manual-assign member's capacity sample count
(``rebalance_advisor.domain.estimates.CarriedCapacity.sample_count``): how many samples its measured
capacity is the plain mean of while they are few, carried from one snapshot to the next so that a
member's first readings are averaged with equal weight. NULL for every stored snapshot: a capacity
carried across the upgrade counts as settled, as it was smoothed before.

Revision ID: 0022_capacity_sample_count
Revises: 0021_proven_rates
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0022_capacity_sample_count"
down_revision = "0021_proven_rates"
branch_labels = None
depends_on = None


_TABLES = ("group_members", "assigned_capacities")


def upgrade() -> None:
    for table in _TABLES:
        with op.batch_alter_table(table) as batch:
            batch.add_column(sa.Column("capacity_sample_count", sa.Integer(), nullable=True))


def downgrade() -> None:
    for table in _TABLES:
        with op.batch_alter_table(table) as batch:
            batch.drop_column("capacity_sample_count")
