"""The ``imbalanced_groups`` view and the rule agree on which outcomes are flagged (one definition)."""

from __future__ import annotations

from datetime import UTC, datetime

import sqlalchemy as sa
from rebalance_advisor.domain.decisions import FLAGGED_OUTCOMES, OUTCOMES
from rebalance_advisor.store import db
from rebalance_advisor.store.plan_models import AdvisorRun, GroupOutcome


def test_the_view_lists_exactly_the_flagged_outcomes(url: str) -> None:
    """One group per outcome in the newest run of the newest snapshot; the view must list the
    groups whose outcome the rule calls flagged, and no other."""
    now = datetime(2026, 1, 1, tzinfo=UTC)
    with db.connect(url) as conn:
        run_id = conn.execute(
            sa.insert(AdvisorRun).values(snapshot_id=1, started_at=now, finished_at=now, status="success", params={})
            .returning(AdvisorRun.id)
        ).scalar_one()  # fmt: skip
        conn.execute(
            sa.insert(GroupOutcome.__table__),
            [
                {"run_id": run_id, "group_id": f"g-{o}", "outcome": o, "reason": "r", "total_lag": 0}
                for o in OUTCOMES
            ],
        )
    with db.connect(url) as conn:
        listed = {row.outcome for row in conn.execute(sa.text("SELECT outcome FROM imbalanced_groups"))}
    assert listed == set(FLAGGED_OUTCOMES)
    assert set(OUTCOMES) - listed >= {"balanced", "idle"}  # the test has unflagged outcomes to leave out
