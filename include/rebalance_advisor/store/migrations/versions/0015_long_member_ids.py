"""Member ids over the store's key limit kept whole: ``group_members.member_id_full``.

A classic member's id is its ``client.id``, ``-`` and a UUID, so a ``client.id`` of 1,164 bytes or
more made the id longer than the keys hold (store/id_limits.py), and the whole group was left out
of the snapshot. Such a member is now keyed by a prefix and a SHA-256 of its id
(``member_id``, in ``group_members`` and ``member_assignments``) and its whole id is kept in this
column, outside every index (NULL for the ids that are their own key).

Revision ID: 0015_long_member_ids
Revises: 0014_planner_staging
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0015_long_member_ids"
down_revision = "0014_planner_staging"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.add_column("group_members", sa.Column("member_id_full", sa.Text(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("group_members") as batch:
        batch.drop_column("member_id_full")
