"""Plan tables: advisor runs, plans, plan assignments, group outcomes, plan transitions; views
``latest_plan_per_group`` and ``imbalanced_groups`` (models: ``store/plan_models.py``).

Revision ID: 0002_plans
Revises: 0001_snapshot
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0002_plans"
down_revision = "0001_snapshot"
branch_labels = None
depends_on = None

# Portable SQL (SQLite and PostgreSQL): plan ids only grow, so "newest" is the highest id.
LATEST_PLAN_PER_GROUP = """
CREATE VIEW latest_plan_per_group AS
SELECT p.*
FROM plans p
WHERE p.id = (SELECT MAX(q.id) FROM plans q WHERE q.group_id = p.group_id AND q.status <> 'skipped')
"""

IMBALANCED_GROUPS = """
CREATE VIEW imbalanced_groups AS
SELECT r.snapshot_id, o.group_id, o.outcome, o.reason, o.total_lag, o.max_lag_before, o.max_lag_after,
       o.imbalance_before, o.imbalance_after, o.moves, o.best_strategy, o.plan_id, o.run_id,
       r.finished_at AS planned_at
FROM group_outcomes o
JOIN advisor_runs r ON r.id = o.run_id
WHERE o.outcome IN ('recommended', 'no_better_plan')
  AND o.run_id = (SELECT MAX(o2.run_id) FROM group_outcomes o2 WHERE o2.group_id = o.group_id)
  AND r.snapshot_id = (SELECT MAX(r2.snapshot_id) FROM advisor_runs r2)
"""


def upgrade() -> None:
    _advisor_runs()
    _plans()
    _plan_assignments()
    _group_outcomes()
    _plan_transitions()
    op.execute(LATEST_PLAN_PER_GROUP)
    op.execute(IMBALANCED_GROUPS)


def _advisor_runs() -> None:
    """One row per planner run: its snapshot, Airflow run and parameters."""
    op.create_table(
        "advisor_runs",
        sa.Column("id", sa.Integer(), autoincrement=True, nullable=False),
        sa.Column("snapshot_id", sa.Integer(), nullable=False),
        sa.Column("airflow_run_id", sa.String(length=250), nullable=True),
        sa.Column("started_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("finished_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("status", sa.String(length=20), nullable=False),
        sa.Column("params", sa.JSON(), nullable=False),
        sa.PrimaryKeyConstraint("id", name="pk_advisor_runs"),
        sa.UniqueConstraint("airflow_run_id", name="uq_advisor_runs_airflow_run_id"),
    )
    op.create_index("ix_advisor_runs_snapshot_id", "advisor_runs", ["snapshot_id"])


def _plans() -> None:
    """Each plan a run made: group, strategy, status, epoch, metrics before and after."""
    op.create_table(
        "plans",
        sa.Column("id", sa.Integer(), autoincrement=True, nullable=False),
        sa.Column("run_id", sa.Integer(), nullable=False),
        sa.Column("snapshot_id", sa.Integer(), nullable=False),
        sa.Column("group_id", sa.String(length=255), nullable=False),
        sa.Column("strategy", sa.String(length=40), nullable=False),
        sa.Column("status", sa.String(length=20), nullable=False),
        sa.Column("epoch", sa.Integer(), nullable=True),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("created_by", sa.String(length=250), nullable=False),
        sa.Column("max_lag_before", sa.BigInteger(), nullable=False),
        sa.Column("max_lag_after", sa.BigInteger(), nullable=False),
        sa.Column("imbalance_before", sa.Float(), nullable=False),
        sa.Column("imbalance_after", sa.Float(), nullable=False),
        sa.Column("spread_before", sa.Integer(), nullable=False),
        sa.Column("spread_after", sa.Integer(), nullable=False),
        sa.Column("moves", sa.Integer(), nullable=False),
        sa.Column("lower_bound", sa.BigInteger(), nullable=False),
        sa.Column("gap", sa.Float(), nullable=False),
        sa.Column("reason", sa.Text(), nullable=False),
        sa.Column("metrics", sa.JSON(), nullable=False),
        sa.ForeignKeyConstraint(
            ["run_id"], ["advisor_runs.id"], name="fk_plans_run_id_advisor_runs", ondelete="CASCADE"
        ),
        sa.PrimaryKeyConstraint("id", name="pk_plans"),
    )
    op.create_index("ix_plans_run_id", "plans", ["run_id"])
    op.create_index("ix_plans_status", "plans", ["status"])
    op.create_index("ix_plans_group_created", "plans", ["group_id", "created_at"])


def _plan_assignments() -> None:
    """A plan's partitions (or key ranges) per member."""
    op.create_table(
        "plan_assignments",
        sa.Column("plan_id", sa.Integer(), nullable=False),
        sa.Column("member_id", sa.String(length=255), nullable=False),
        sa.Column("topic", sa.String(length=255), nullable=False),
        sa.Column("partition", sa.Integer(), nullable=False),
        sa.Column("lag", sa.BigInteger(), nullable=False),
        sa.Column("key_hash_start", sa.BigInteger(), nullable=True),
        sa.Column("key_hash_end", sa.BigInteger(), nullable=True),
        sa.ForeignKeyConstraint(
            ["plan_id"], ["plans.id"], name="fk_plan_assignments_plan_id_plans", ondelete="CASCADE"
        ),
        sa.PrimaryKeyConstraint("plan_id", "member_id", "topic", "partition", name="pk_plan_assignments"),
    )


def _group_outcomes() -> None:
    """One outcome per group per run, with the reason and its numbers."""
    op.create_table(
        "group_outcomes",
        sa.Column("run_id", sa.Integer(), nullable=False),
        sa.Column("group_id", sa.String(length=255), nullable=False),
        sa.Column("outcome", sa.String(length=20), nullable=False),
        sa.Column("reason", sa.Text(), nullable=False),
        sa.Column("total_lag", sa.BigInteger(), nullable=False),
        sa.Column("max_lag_before", sa.BigInteger(), nullable=True),
        sa.Column("max_lag_after", sa.BigInteger(), nullable=True),
        sa.Column("imbalance_before", sa.Float(), nullable=True),
        sa.Column("imbalance_after", sa.Float(), nullable=True),
        sa.Column("moves", sa.Integer(), nullable=True),
        sa.Column("best_strategy", sa.String(length=40), nullable=True),
        sa.Column("plan_id", sa.Integer(), nullable=True),
        sa.ForeignKeyConstraint(
            ["run_id"], ["advisor_runs.id"], name="fk_group_outcomes_run_id_advisor_runs", ondelete="CASCADE"
        ),
        sa.ForeignKeyConstraint(
            ["plan_id"], ["plans.id"], name="fk_group_outcomes_plan_id_plans", ondelete="SET NULL"
        ),
        sa.PrimaryKeyConstraint("run_id", "group_id", name="pk_group_outcomes"),
    )
    op.create_index("ix_group_outcomes_group_id", "group_outcomes", ["group_id"])


def _plan_transitions() -> None:
    """Every status change of a plan: who, when, from which Airflow run."""
    op.create_table(
        "plan_transitions",
        sa.Column("id", sa.Integer(), autoincrement=True, nullable=False),
        sa.Column("plan_id", sa.Integer(), nullable=False),
        sa.Column("from_status", sa.String(length=20), nullable=True),
        sa.Column("to_status", sa.String(length=20), nullable=False),
        sa.Column("actor", sa.String(length=250), nullable=False),
        sa.Column("airflow_run_id", sa.String(length=250), nullable=True),
        sa.Column("at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("note", sa.Text(), nullable=True),
        sa.ForeignKeyConstraint(
            ["plan_id"], ["plans.id"], name="fk_plan_transitions_plan_id_plans", ondelete="CASCADE"
        ),
        sa.PrimaryKeyConstraint("id", name="pk_plan_transitions"),
    )
    op.create_index("ix_plan_transitions_plan_id", "plan_transitions", ["plan_id"])


def downgrade() -> None:
    op.execute("DROP VIEW IF EXISTS imbalanced_groups")
    op.execute("DROP VIEW IF EXISTS latest_plan_per_group")
    for table in ("plan_transitions", "group_outcomes", "plan_assignments", "plans", "advisor_runs"):
        op.drop_table(table)
