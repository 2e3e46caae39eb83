"""What a planner run hands back without a line per group (adapters/spark_pipeline.OutcomeTally).

A run of many groups reports how many it planned, the flagged groups and the recommended plans, and
drops its outcome lines once there are more than it keeps (the store has them): the driver's memory
must not grow with the fleet (bench/pipeline.py). A dry run keeps every line.
"""

from __future__ import annotations

from rebalance_advisor.adapters.spark_pipeline import OutcomeTally
from rebalance_advisor.adapters.spark_planner import PlannerRun
from rebalance_advisor.domain.advice import OutcomeLine

#: (group, outcome, plan id): the flagged ones by hand are g0, g2, g4; recommended with a plan: g0 (7)
LINES = [
    OutcomeLine("g0", "recommended", "r", 10, plan_id=7, plan_status="recommended"),
    OutcomeLine("g1", "idle", "r", 0),
    OutcomeLine("g2", "no_better_plan", "r", 5),
    OutcomeLine("g3", "balanced", "r", 3),
    OutcomeLine("g4", "held_by_hysteresis", "r", 9),
]


def test_counts_flagged_and_plans_whatever_it_keeps():
    for keep in (None, 0, 2, 5):
        tally = OutcomeTally.of(LINES, keep=keep)
        assert tally.group_count == 5
        assert tally.flagged == ["g0", "g2", "g4"]
        assert tally.recommended_plan_ids == [7]


def test_lines_kept_up_to_the_limit_then_none():
    assert OutcomeTally.of(LINES, keep=5).lines == LINES
    assert OutcomeTally.of(LINES, keep=None).lines == LINES
    assert OutcomeTally.of(LINES, keep=4).lines is None
    assert OutcomeTally.of([], keep=0).lines == []


def test_planner_run_reports_the_tally():
    run = PlannerRun.of(3, 11, OutcomeTally.of(LINES, keep=2), {"total_s": 1.0}, dry_run=False)
    data = run.to_dict()
    assert (data["outcomes"], data["group_count"], data["flagged"], data["recommended_plan_ids"]) == (
        None, 5, ["g0", "g2", "g4"], [7],
    )  # fmt: skip
