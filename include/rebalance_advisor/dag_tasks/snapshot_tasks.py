"""Task body of the ``kafka_offsets_snapshot`` DAG."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from rebalance_advisor.dag_tasks.error_policy import under_error_policy


@under_error_policy
def take_snapshot(params: Mapping[str, Any], run_id: str | None) -> dict[str, Any]:
    """Collect, store (replacing this run's earlier attempt; a second pass when the first gives no
    rates), prune; a JSON summary for XCom."""
    from rebalance_advisor.adapters.airflow_connections import (
        database_url_from_connection,
        kafka_client_config,
    )
    from rebalance_advisor.domain.parameters import SnapshotParams
    from rebalance_advisor.services.snapshot_service import take_and_store_snapshot

    p = SnapshotParams.parse(params)
    config = kafka_client_config(p.kafka_conn_id)  # a missing connection fails here, at once
    return take_and_store_snapshot(
        p, config, database_url_from_connection(p.db_conn_id), airflow_run_id=run_id, scheduled=True
    ).to_dict()
