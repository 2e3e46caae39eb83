"""Executors stage each recommended plan in its final form: the plan row's columns and its assignment rows.

The finalizing transaction then inserts the plans, their assignments, first transitions and outcome
rows of every group no rule re-checks (no standing, rejected or concurrent plan; the same apply mode)
with a few ``INSERT ... SELECT`` statements (docs/architecture.md, "One planner run"); only the
other groups' advice is parsed and written row by row. ``plans`` gains an index on (run, group): the
finalize's joins find a run's plan of a group by it. ``planner_staging.plan_numbers`` is no longer
written (the plan columns live here).

Revision ID: 0018_staged_plans
Revises: 0017_staged_outcomes
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0018_staged_plans"
down_revision = "0017_staged_outcomes"
branch_labels = None
depends_on = None

#: the plan row's own columns, as ``plans`` has them (what a run computes per plan)
PLAN_COLUMNS = (
    ("strategy", sa.String(length=40)),
    ("status", sa.String(length=20)),
    ("apply_mode", sa.String(length=24)),
    ("situation", sa.JSON()),
    ("max_lag_before", sa.BigInteger()),
    ("max_lag_after", sa.BigInteger()),
    ("imbalance_before", sa.Float()),
    ("imbalance_after", sa.Float()),
    ("spread_before", sa.Integer()),
    ("spread_after", sa.Integer()),
    ("moves", sa.Integer()),
    ("lower_bound", sa.BigInteger()),
    ("gap", sa.Float()),
    ("reason", sa.Text()),
    ("metrics", sa.JSON()),
    ("predicted_catch_up_before_s", sa.Float()),
    ("predicted_catch_up_after_s", sa.Float()),
    ("overloaded_members_before", sa.Integer()),
    ("overloaded_members_after", sa.Integer()),
    ("unowned_lag_before", sa.BigInteger()),
    ("unowned_lag_after", sa.BigInteger()),
)


def upgrade() -> None:
    # the finalize finds a run's plans by group: without it SQLite walks all of the run's plans per row
    op.create_index("ix_plans_run_group", "plans", ["run_id", "group_id"])
    byte_wise = "C" if op.get_bind().dialect.name == "postgresql" else None
    op.create_table(
        "planner_staged_plans",
        sa.Column("run_key", sa.String(length=36), primary_key=True),
        sa.Column("group_id", sa.Text(collation=byte_wise), primary_key=True),
        sa.Column("scope", sa.Integer(), nullable=False),
        sa.Column("staged_at", sa.DateTime(timezone=True), nullable=False),
        *(sa.Column(name, kind, nullable=True) for name, kind in PLAN_COLUMNS),
    )
    op.create_index("ix_planner_staged_plans_staged_at", "planner_staged_plans", ["staged_at"])
    op.create_index("ix_planner_staged_plans_scope", "planner_staged_plans", ["run_key", "scope"])
    op.create_table(
        "planner_staged_assignments",
        sa.Column("run_key", sa.String(length=36), primary_key=True),
        sa.Column("group_id", sa.Text(collation=byte_wise), primary_key=True),
        sa.Column("member_id", sa.Text(), primary_key=True),
        sa.Column("topic", sa.String(length=255), primary_key=True),
        sa.Column("partition", sa.Integer(), primary_key=True),
        sa.Column("lag", sa.BigInteger(), nullable=False),
        sa.Column("key_hash_start", sa.BigInteger(), nullable=True),
        sa.Column("key_hash_end", sa.BigInteger(), nullable=True),
        sa.Column("scope", sa.Integer(), nullable=False),
        sa.Column("staged_at", sa.DateTime(timezone=True), nullable=False),
    )
    op.create_index("ix_planner_staged_assignments_staged_at", "planner_staged_assignments", ["staged_at"])
    op.create_index("ix_planner_staged_assignments_scope", "planner_staged_assignments", ["run_key", "scope"])


def downgrade() -> None:
    op.drop_index("ix_planner_staged_assignments_scope", table_name="planner_staged_assignments")
    op.drop_index("ix_planner_staged_assignments_staged_at", table_name="planner_staged_assignments")
    op.drop_table("planner_staged_assignments")
    op.drop_index("ix_planner_staged_plans_scope", table_name="planner_staged_plans")
    op.drop_index("ix_planner_staged_plans_staged_at", table_name="planner_staged_plans")
    op.drop_table("planner_staged_plans")
    op.drop_index("ix_plans_run_group", table_name="plans")
