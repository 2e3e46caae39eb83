"""Use case "capacity pass": one more snapshot soon after a plan published on unknown capacities.

A plan made while some member's capacity was unknown (source ``equal``) gives every member an even
share; the members it loaded are measured only by the next snapshot. On a 5-minute schedule that
left bench/drain.py cap2x-z1.5's slow members overloaded for minutes; a snapshot 120 s after the
plan halves it (docs/benchmarks/drain.md, "The capacity pass"). The advisor DAG triggers the
snapshot DAG at :attr:`CapacityPass.run_after`; the simulator takes the same pass
(``simulation.Scenario.capacity_pass_s``), both on ``estimates.wants_capacity_pass``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta

from rebalance_advisor.domain.estimates import wants_capacity_pass


@dataclass(frozen=True)
class CapacityPass:
    """The extra snapshot: when, and the groups whose plans asked for it."""

    run_after: datetime
    groups: tuple[str, ...]

    def note(self) -> str:
        """The triggered run's note in Airflow: why it exists (at most :data:`NOTE_LIMIT` characters)."""
        more = f" and {len(self.groups) - 3} more" if len(self.groups) > 3 else ""
        text = f"capacity pass: plans published on unknown capacities for {', '.join(self.groups[:3])}"
        if len(text) + len(more) > NOTE_LIMIT:
            text = text[: NOTE_LIMIT - len(more) - 3] + "..."
        return text + more


#: Airflow keeps a run's note in a 1,000-character column; Kafka sets no limit on a group id's length
NOTE_LIMIT = 1000


def capacity_pass(
    plan_ids: Sequence[int],
    url: str | None,
    *,
    pass_s: float,
    now: datetime,
    next_scheduled: datetime | None,
) -> CapacityPass | None:
    """The extra snapshot after publishing ``plan_ids`` (None: none is due). None when ``pass_s`` is
    0, when no plan moved partitions on unknown capacities, or when the scheduled snapshot
    (``next_scheduled``; None: unknown) comes no later than the pass would."""
    from rebalance_advisor.store.plans import plans_moves_and_unknown_capacities

    if pass_s <= 0 or not plan_ids:
        return None
    run_after = now + timedelta(seconds=pass_s)
    if next_scheduled is not None and next_scheduled <= run_after:
        return None
    found = plans_moves_and_unknown_capacities(plan_ids, url)
    groups = tuple(g for _, g, moves, unknown in found if wants_capacity_pass(unknown, moves))
    return CapacityPass(run_after, groups) if groups else None
