"""Use case "capacity pass": two more snapshots soon after a plan published on unknown capacities.

A plan made while some member's capacity was unknown (source ``equal``) gives every member an even
share. A member that gained partitions is not measured over the interval it gained them in, so the
members the plan loaded are measured only by the second snapshot after it: on a 5-minute schedule,
10 minutes of bench/drain.py cap2x-z1.5's slow members overloaded. The pass takes one snapshot when
the plan's handovers are over (:attr:`CapacityPass.settle_after`) and one that measures them
(:attr:`CapacityPass.run_after`; docs/benchmarks/drain.md, "The capacity pass"). The advisor DAG
triggers the snapshot DAG at each; the simulator takes the same pass
(``simulation.Scenario.capacity_pass_s``), both on ``estimates.wants_capacity_pass``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta

from rebalance_advisor.domain.estimates import RateParameters, wants_capacity_pass


@dataclass(frozen=True)
class CapacityPass:
    """The extra snapshots (each None when the scheduled one comes first), and the groups whose plans
    asked for them."""

    #: the snapshot that starts an interval over which the members the plan loaded hold their partitions
    settle_after: datetime | None
    #: the snapshot that measures them
    run_after: datetime | None
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
    settle_s: float = RateParameters.capacity_pass_settle_s,
) -> CapacityPass | None:
    """The extra snapshots after publishing ``plan_ids``: ``settle_s`` later and ``pass_s`` after
    that (None: none is due). None when ``pass_s`` is 0, when no plan moved partitions on unknown
    capacities, or when the scheduled snapshot (``next_scheduled``; None: unknown) comes no later
    than either would; each one it comes no later than is left out."""
    from rebalance_advisor.store.plans import plans_moves_and_unknown_capacities

    if pass_s <= 0 or not plan_ids:
        return None
    settle_after, run_after = (
        t if next_scheduled is None or t < next_scheduled else None
        for t in (now + timedelta(seconds=settle_s), now + timedelta(seconds=settle_s + pass_s))
    )
    if settle_after is None and run_after is None:
        return None
    found = plans_moves_and_unknown_capacities(plan_ids, url)
    groups = tuple(g for _, g, moves, unknown in found if wants_capacity_pass(unknown, moves))
    return CapacityPass(settle_after, run_after, groups) if groups else None
