"""How each plan is applied: ``plans.apply_mode`` (static assignments / broker assignor / advice only).

Set by the planner when it stores a plan (``domain/apply_mode.apply_mode`` on the group as the plan's
snapshot saw it and the manual-assign registry), and again when a plan is approved or published
(the group as the newest snapshot sees it). Older plans are filled in by the same rule's registry
part: a group with registered static members is ``static assignments``, any other ``advice only``
(the broker assignor did not exist when they were made).

Revision ID: 0011_plan_apply_mode
Revises: 0010_capacity_note
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0011_plan_apply_mode"
down_revision = "0010_capacity_note"
branch_labels = None
depends_on = None


def upgrade() -> None:
    # a plain ADD COLUMN: a batch (copy-and-move) of ``plans`` on SQLite breaks the views that read it
    op.add_column(
        "plans", sa.Column("apply_mode", sa.String(length=24), nullable=False, server_default="advice only")
    )
    op.execute(
        "UPDATE plans SET apply_mode = 'static assignments' "
        "WHERE group_id IN (SELECT DISTINCT group_id FROM static_members)"
    )


def downgrade() -> None:
    op.drop_column("plans", "apply_mode")
