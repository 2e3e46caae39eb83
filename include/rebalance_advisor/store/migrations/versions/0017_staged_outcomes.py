"""``planner_staging`` carries each group's outcome row as columns; the advice JSON only for plans.

The finalizing transaction then inserts the outcome rows of every group without a recommended plan
with one ``INSERT ... SELECT`` from the staging table (docs/architecture.md, "One planner run"),
and parses only the staged advice of groups with a recommended plan (the rules it re-checks under
the plan-write lock apply to those alone). ``result`` becomes nullable: a group without a
recommended plan stages none.

Revision ID: 0017_staged_outcomes
Revises: 0016_share_unstarted
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0017_staged_outcomes"
down_revision = "0016_share_unstarted"
branch_labels = None
depends_on = None

#: the outcome columns, as ``group_outcomes`` has them (plus the plan's status after planning)
OUTCOME_COLUMNS = (
    ("outcome", sa.String(length=20)),
    ("reason", sa.Text()),
    ("total_lag", sa.BigInteger()),
    ("max_lag_before", sa.BigInteger()),
    ("max_lag_after", sa.BigInteger()),
    ("imbalance_before", sa.Float()),
    ("imbalance_after", sa.Float()),
    ("moves", sa.Integer()),
    ("best_strategy", sa.String(length=40)),
    ("plan_status", sa.String(length=20)),
)


def upgrade() -> None:
    with op.batch_alter_table("planner_staging") as batch:
        batch.alter_column("result", existing_type=sa.Text(), nullable=True)
        for name, kind in OUTCOME_COLUMNS:
            batch.add_column(sa.Column(name, kind, nullable=True))


def downgrade() -> None:
    op.execute("DELETE FROM planner_staging WHERE result IS NULL")
    with op.batch_alter_table("planner_staging") as batch:
        for name, _ in reversed(OUTCOME_COLUMNS):
            batch.drop_column(name)
        batch.alter_column("result", existing_type=sa.Text(), nullable=False)
