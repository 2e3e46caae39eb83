"""Partitions a share group has not started on: ``share_unstarted_partitions``.

``kafka-share-groups --describe`` prints a row with ``-`` offsets for each partition of the group's
topics that has no share-partition state yet; the snapshot left them out, so ``lag`` showed fewer
rows than the tool. One row per such partition and snapshot.

Revision ID: 0016_share_unstarted
Revises: 0015_long_member_ids
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0016_share_unstarted"
down_revision = "0015_long_member_ids"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "share_unstarted_partitions",
        sa.Column("snapshot_id", sa.Integer(), nullable=False),
        sa.Column("group_id", sa.Text(), nullable=False),
        sa.Column("topic", sa.String(length=249), nullable=False),
        sa.Column("partition", sa.Integer(), nullable=False),
        sa.ForeignKeyConstraint(
            ["snapshot_id"],
            ["snapshots.id"],
            name=op.f("fk_share_unstarted_partitions_snapshot_id_snapshots"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint(
            "snapshot_id", "group_id", "topic", "partition", name=op.f("pk_share_unstarted_partitions")
        ),
    )


def downgrade() -> None:
    op.drop_table("share_unstarted_partitions")
