"""Rates, time lag and member capacity stored with each snapshot (docs/architecture.md, "The load model"): produce rate per
partition, consume rate and time lag per committed offset, capacity per member, each unknown value
with its reason or provenance.

Revision ID: 0004_snapshot_rates
Revises: 0003_share_keys
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0004_snapshot_rates"
down_revision = "0003_share_keys"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("snapshots") as batch:
        batch.add_column(sa.Column("rates_note", sa.Text(), nullable=True))
    with op.batch_alter_table("partition_offsets") as batch:
        batch.add_column(sa.Column("produce_rate", sa.Float(), nullable=True))
        batch.add_column(sa.Column("produce_rate_unknown", sa.Text(), nullable=True))
    with op.batch_alter_table("committed_offsets") as batch:
        batch.add_column(sa.Column("consume_rate", sa.Float(), nullable=True))
        batch.add_column(sa.Column("consume_rate_unknown", sa.Text(), nullable=True))
        batch.add_column(sa.Column("record_timestamp_ms", sa.BigInteger(), nullable=True))
        batch.add_column(sa.Column("time_lag_s", sa.Float(), nullable=True))
        batch.add_column(sa.Column("time_lag_method", sa.String(length=32), nullable=True))
    with op.batch_alter_table("group_members") as batch:
        batch.add_column(sa.Column("capacity", sa.Float(), nullable=True))
        batch.add_column(sa.Column("capacity_source", sa.String(length=16), nullable=True))
        batch.add_column(sa.Column("capacity_measured_at", sa.DateTime(timezone=True), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("group_members") as batch:
        for column in ("capacity_measured_at", "capacity_source", "capacity"):
            batch.drop_column(column)
    with op.batch_alter_table("committed_offsets") as batch:
        for column in ("time_lag_method", "time_lag_s", "record_timestamp_ms", "consume_rate_unknown",
                       "consume_rate"):  # fmt: skip
            batch.drop_column(column)
    with op.batch_alter_table("partition_offsets") as batch:
        for column in ("produce_rate_unknown", "produce_rate"):
            batch.drop_column(column)
    with op.batch_alter_table("snapshots") as batch:
        batch.drop_column("rates_note")
