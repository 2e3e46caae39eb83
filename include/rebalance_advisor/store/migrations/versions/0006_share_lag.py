"""Share groups (KIP-932): the broker's lag per share-group partition.

A share group's committed offset row holds its share-partition start offset; ``share_lag`` holds
the lag the broker reports for it (what ``kafka-share-groups --describe`` prints), which is not
log end minus start offset: records past the start may already be acknowledged. NULL for every
other group type.

Revision ID: 0006_share_lag
Revises: 0005_long_ids
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0006_share_lag"
down_revision = "0005_long_ids"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("committed_offsets") as batch:
        batch.add_column(sa.Column("share_lag", sa.BigInteger(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("committed_offsets") as batch:
        batch.drop_column("share_lag")
