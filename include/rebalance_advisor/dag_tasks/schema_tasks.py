"""``upgrade_schema``: the first task of every DAG, and the only place a DAG migrates the database.

Reads never migrate (docs/architecture.md, "Schema"): a DAG's later tasks find the schema current.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

from rebalance_advisor.dag_tasks.error_policy import under_error_policy

log = logging.getLogger(__name__)


@under_error_policy
def upgrade_schema(params: Mapping[str, Any]) -> str:
    """Migrate the advisor database of the run's ``db_conn_id`` to the newest revision."""
    from rebalance_advisor.adapters.airflow_connections import database_url_from_connection
    from rebalance_advisor.store import db

    revision = db.upgrade(database_url_from_connection(params["db_conn_id"]))
    log.info("advisor database at revision %s", revision)
    return revision


def upgrade_schema_task() -> Any:
    """Add the ``upgrade_schema`` task to the DAG being defined; returns it for the wiring."""
    from airflow.sdk import task

    @task(task_id="upgrade_schema")
    def run(params=None) -> str:
        return upgrade_schema(params)

    return run()
