"""Each group's averaged evidence that its client telemetry reads as records at a steady spacing
(``rebalance_advisor.domain.telemetry.arrivals_evidence``), carried from one snapshot to the next as
its rates are. NULL for every stored snapshot and for groups with no member measured at saturation
that pushes telemetry: their telemetry is read as records arriving at random, as before.

Revision ID: 0019_arrivals_evidence
Revises: 0018_staged_plans
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0019_arrivals_evidence"
down_revision = "0018_staged_plans"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("consumer_groups") as batch:
        batch.add_column(sa.Column("arrivals_evidence", sa.Float(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("consumer_groups") as batch:
        batch.drop_column("arrivals_evidence")
