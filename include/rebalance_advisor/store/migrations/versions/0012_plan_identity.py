"""A standing plan keeps its id while runs confirm it; rejections stick (domain/plan_identity.py).

``plans`` gains ``last_confirmed_at`` and ``last_confirmed_run_id`` (the newest advisor run that
arrived at the same assignment; NULL until one does) and ``situation`` (what the plan was computed
against: members, subscriptions, owned partitions, partition counts; the rejection rule compares
it). ``imbalanced_groups`` lists the new flagged outcome ``held_by_rejection``;
``latest_plan_per_group`` is re-created so PostgreSQL, which expands ``p.*`` when a view is
created, shows the new columns.

Revision ID: 0012_plan_identity
Revises: 0011_plan_apply_mode
"""

from __future__ import annotations

import importlib

import sqlalchemy as sa
from alembic import op

revision = "0012_plan_identity"
down_revision = "0011_plan_apply_mode"
branch_labels = None
depends_on = None

FLAGGED = (
    "recommended",
    "no_better_plan",
    "held_by_hysteresis",
    "not_repaid",
    "held_by_cooldown",
    "held_by_rejection",
)
FLAGGED_BEFORE = FLAGGED[:-1]


def _versions(name: str):
    return importlib.import_module(f"rebalance_advisor.store.migrations.versions.{name}")


def _views(flagged: tuple[str, ...]) -> None:
    op.execute("DROP VIEW IF EXISTS imbalanced_groups")
    op.execute("DROP VIEW IF EXISTS latest_plan_per_group")
    op.execute(_versions("0002_plans").LATEST_PLAN_PER_GROUP)
    op.execute(_versions("0008_flagged_view")._view(flagged))


def upgrade() -> None:
    op.execute("DROP VIEW IF EXISTS imbalanced_groups")
    op.execute("DROP VIEW IF EXISTS latest_plan_per_group")
    op.add_column("plans", sa.Column("last_confirmed_at", sa.DateTime(timezone=True), nullable=True))
    op.add_column("plans", sa.Column("last_confirmed_run_id", sa.Integer(), nullable=True))
    op.add_column("plans", sa.Column("situation", sa.JSON(), nullable=True))
    _views(FLAGGED)


def downgrade() -> None:
    op.execute("DROP VIEW IF EXISTS imbalanced_groups")
    op.execute("DROP VIEW IF EXISTS latest_plan_per_group")
    with op.batch_alter_table("plans") as batch:
        batch.drop_column("situation")
        batch.drop_column("last_confirmed_run_id")
        batch.drop_column("last_confirmed_at")
    _views(FLAGGED_BEFORE)
