"""``upgrade_schema``: the first task of every DAG, and the only place a DAG migrates the database.

Reads never migrate (docs/architecture.md, "Schema"): a DAG's later tasks find the schema current.
It parses the run's params with the DAG's parameter model first, so what the trigger form's schema
cannot refuse (a regex RE2 will not run for other reasons, an id too long in bytes, a member
capacity rule) fails the run in its first seconds with the CLI's one-line message, before anything
waits for a slot or a database.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

from rebalance_advisor.dag_tasks.error_policy import under_error_policy
from rebalance_advisor.domain.parameters import ParamModel

log = logging.getLogger(__name__)


@under_error_policy
def upgrade_schema(params: Mapping[str, Any], model: type[ParamModel] | None = None) -> str:
    """Check the params against ``model`` (the DAG's), then migrate the advisor database of the
    run's ``db_conn_id`` to the newest revision."""
    from rebalance_advisor.adapters.airflow_connections import database_url_from_connection
    from rebalance_advisor.store import db

    if model is not None:
        model.parse(params)  # ParameterError: the run fails now, the CLI's words (module docstring)

    revision = db.upgrade(database_url_from_connection(params["db_conn_id"]))
    log.info("advisor database at revision %s", revision)
    return revision


def upgrade_schema_task(model: type[ParamModel]) -> Any:
    """Add the ``upgrade_schema`` task (checking the params with ``model``) to the DAG being
    defined; returns it for the wiring."""
    from airflow.sdk import task

    @task(task_id="upgrade_schema")
    def run(params=None) -> str:
        return upgrade_schema(params, model)

    return run()
