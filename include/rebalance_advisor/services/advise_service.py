"""Use case "advise": plan every group of a stored snapshot and record plans and outcomes.

Called by the advisor DAG's Spark task and by ``rebalance-advisor advise`` alike; both hand in
their Spark session and the validated :class:`~rebalance_advisor.domain.parameters.AdvisorParams`.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from rebalance_advisor.domain.parameters import AdvisorParams

if TYPE_CHECKING:  # pragma: no cover
    from rebalance_advisor.adapters.spark_planner import PlannerRun


def advise(
    spark: Any,
    url: str | None,
    snapshot: str | int,
    params: AdvisorParams,
    *,
    airflow_run_id: str | None = None,
    kafka_config: Mapping[str, Any] | None = None,
) -> PlannerRun:
    """Run the planner on ``snapshot`` with ``params``; a dry run writes nothing (and records no run id).

    ``kafka_config``: client settings, needed only when the run lets key_range share keys.
    """
    from rebalance_advisor.adapters.spark_planner import run_planner

    return run_planner(
        spark,
        url,
        snapshot,
        params.thresholds(),
        group_pattern=params.group_regex,
        reset=params.reset_policy,
        airflow_run_id=None if params.dry_run else airflow_run_id,
        created_by=airflow_run_id or "cli",
        dry_run=params.dry_run,
        publish_mode=params.publish_mode,
        kafka_config=kafka_config,
    )


def filter_warning(params: AdvisorParams, run: PlannerRun) -> str | None:
    """The warning for a group filter that matched no group of the snapshot (a run that planned
    nothing must say so, not report a silent success); None otherwise."""
    if not params.group_regex or run.group_count:
        return None
    return (
        f"the group filter {params.group_regex!r} matches no group of snapshot {run.snapshot_id}: nothing "
        "was planned; the regex must fully match a group id (RE2 syntax)"
    )
