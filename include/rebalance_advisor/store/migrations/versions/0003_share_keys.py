"""Static-member registry: the per-member key-sharing opt-in (``members add --share-keys``).

A member takes key ranges of a split partition only when this flag is set (and the run and the
topic allow sharing too). Existing members default to not sharing.

Revision ID: 0003_share_keys
Revises: 0002_plans
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0003_share_keys"
down_revision = "0002_plans"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("static_members") as batch:
        batch.add_column(sa.Column("share_keys", sa.Boolean(), nullable=False, server_default=sa.false()))


def downgrade() -> None:
    with op.batch_alter_table("static_members") as batch:
        batch.drop_column("share_keys")
