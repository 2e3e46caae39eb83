"""``imbalanced_groups`` lists every flagged outcome, not only ``recommended`` and ``no_better_plan``.

The view was written before the rule grew ``held_by_hysteresis``, ``not_repaid`` and
``held_by_cooldown``; it now lists the outcomes of ``domain/decisions.FLAGGED_OUTCOMES`` (the one
definition of "flagged"; ``tests/integration/test_flagged_view.py`` checks the two agree).

Revision ID: 0008_flagged_view
Revises: 0007_assigned_capacities
"""

from __future__ import annotations

import importlib

from alembic import op

revision = "0008_flagged_view"
down_revision = "0007_assigned_capacities"
branch_labels = None
depends_on = None

FLAGGED = ("recommended", "no_better_plan", "held_by_hysteresis", "not_repaid", "held_by_cooldown")


def _view(outcomes: tuple[str, ...]) -> str:
    original = importlib.import_module(
        "rebalance_advisor.store.migrations.versions.0002_plans"
    ).IMBALANCED_GROUPS
    listed = ", ".join(f"'{o}'" for o in outcomes)
    assert "o.outcome IN ('recommended', 'no_better_plan')" in original
    return original.replace("o.outcome IN ('recommended', 'no_better_plan')", f"o.outcome IN ({listed})")


def upgrade() -> None:
    op.execute("DROP VIEW imbalanced_groups")
    op.execute(_view(FLAGGED))


def downgrade() -> None:
    op.execute("DROP VIEW imbalanced_groups")
    op.execute(_view(("recommended", "no_better_plan")))
