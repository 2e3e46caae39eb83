"""Use case "take a snapshot": collect every group's offsets, store them in one transaction, prune.

Called by the snapshot DAG's task and by ``rebalance-advisor snapshot`` alike.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from rebalance_advisor.domain.estimates import CapacityPolicy
from rebalance_advisor.domain.parameters import SnapshotParams
from rebalance_advisor.domain.snapshot_model import Snapshot


@dataclass(frozen=True)
class SnapshotTaken:
    """What one snapshot pass did."""

    snapshot_id: int
    snapshot: Snapshot
    pruned: int

    def to_dict(self) -> dict[str, Any]:
        """The JSON summary the DAG task returns (XCom)."""
        taken = self.snapshot
        return {
            "snapshot_id": self.snapshot_id,
            "status": taken.status,
            "groups": len(taken.groups),
            "members": taken.member_count,
            "partitions": len(taken.partitions),
            "committed_offsets": len(taken.committed),
            "errors": len(taken.errors),
            "duration_s": round(taken.duration_s, 3),
            "pruned": self.pruned,
            "summary": taken.summary(),
        }


def take_and_store_snapshot(
    params: SnapshotParams,
    client_config: dict[str, Any],
    url: str | None,
    *,
    airflow_run_id: str | None = None,
    prune: bool = True,
    scheduled: bool = False,
) -> SnapshotTaken:
    """Collect and store one snapshot (a retry of the same Airflow run replaces its earlier one);
    with ``prune``, drop snapshots older than ``params.retention_hours`` and advisor history older
    than ``params.plan_retention_hours`` (0: keep all).

    A snapshot that gives no rates (``estimates.wants_rate_pass``: the store has no earlier one of
    the cluster within the rate window) is followed by a second pass ``params.rate_pass(scheduled)``
    seconds later, which the run returns: an advisor run on it has rates, not a blind first plan
    five minutes before the next snapshot (docs/architecture.md, "What the advisor knows between
    snapshots"). The first pass stays stored, without the run id, as the second one's predecessor."""
    from rebalance_advisor.domain.estimates import wants_rate_pass
    from rebalance_advisor.store import snapshots

    taken, snapshot_id = _one_pass(params, client_config, url, airflow_run_id)
    wait_s = params.rate_pass(scheduled)
    if wait_s > 0 and taken.rates is not None and wants_rate_pass(taken.rates):
        if airflow_run_id is not None:  # the run's snapshot is the second one
            snapshots.detach_run_id(snapshot_id, url)
        time.sleep(wait_s)
        taken, snapshot_id = _one_pass(params, client_config, url, airflow_run_id)
    pruned = 0
    if prune and params.retention_hours:
        pruned = snapshots.prune(timedelta(hours=params.retention_hours), url)
    if prune and params.plan_retention_hours:  # plan history: its own, longer retention
        from rebalance_advisor.store.plans import prune_plans

        prune_plans(timedelta(hours=params.plan_retention_hours), url)
    return SnapshotTaken(snapshot_id, taken, pruned)


def _one_pass(
    params: SnapshotParams, client_config: dict[str, Any], url: str | None, airflow_run_id: str | None
) -> tuple[Snapshot, int]:
    """Collect one snapshot and store it with its rates (``store.snapshots.write_snapshot``)."""
    from rebalance_advisor.adapters import kafka_snapshot
    from rebalance_advisor.store import snapshots

    options = kafka_snapshot.SnapshotOptions(
        groups=kafka_snapshot.GroupFilter.parse(params.groups, params.exclude_groups),
        include_internal_topics=params.include_internal_topics,
        read_committed=params.read_committed,
        timeout_s=params.timeout_s,
        time_lag=not params.skip_time_lag,
        share_groups=not params.skip_share_groups,
    )
    taken = kafka_snapshot.collect(client_config["bootstrap.servers"], client_config, options)
    capacities = CapacityPolicy.parse(params.member_capacity)
    snapshot_id = snapshots.write_snapshot(taken, url, airflow_run_id=airflow_run_id, capacities=capacities)
    return taken, snapshot_id
