"""Each group member's telemetry reference (``rebalance_advisor.domain.telemetry.TelemetryReference``):
its telemetry read under both arrival models at a consume rate, carried from one snapshot to the next
so that readings at another rate can be compared with it. NULL for every stored snapshot: the first
snapshot after the upgrade starts each member's reference.

Revision ID: 0020_telemetry_references
Revises: 0019_arrivals_evidence
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0020_telemetry_references"
down_revision = "0019_arrivals_evidence"
branch_labels = None
depends_on = None

_COLUMNS = ("telemetry_reference_consumed", "telemetry_reference_random", "telemetry_reference_steady")


def upgrade() -> None:
    with op.batch_alter_table("group_members") as batch:
        for name in _COLUMNS:
            batch.add_column(sa.Column(name, sa.Float(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("group_members") as batch:
        for name in _COLUMNS:
            batch.drop_column(name)
