"""Task bodies of the ``kafka_rebalance_advisor`` DAG (the DAG file only wires them).

Airflow itself is imported only where a task needs it; everything returned is JSON for XCom.
"""

from __future__ import annotations

import importlib
import logging
import os
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

log = logging.getLogger(__name__)

#: outcomes of a run are passed through XCom only up to this many groups; the summary reads the
#: rest from the database (a dry run, which writes nothing, always passes them all).
XCOM_OUTCOME_LIMIT = 500
PUBLISH_HOOK = ("rebalance_advisor.services.plan_lifecycle", "auto_approve_and_publish")


def is_permanent(error: BaseException) -> bool:
    """A user error a retry cannot fix (unknown snapshot, bad params, bad URL): an AdvisorError that is
    not the database or Kafka being unreachable nor Spark failing mid-job (those keep the retries)."""
    from rebalance_advisor.adapters.assignment_topic import KafkaUnavailable
    from rebalance_advisor.adapters.spark_planner import PlannerFailed
    from rebalance_advisor.errors import AdvisorError
    from rebalance_advisor.store.db import DatabaseUnavailable

    transient = (DatabaseUnavailable, PlannerFailed, KafkaUnavailable)
    return isinstance(error, AdvisorError) and not isinstance(error, transient)


@contextmanager
def fail_permanent_errors() -> Iterator[None]:
    """Turn permanent user errors into ``AirflowFailException`` (the task fails at once, no retries),
    as the approval DAG does; transient ones are re-raised for Airflow to retry."""
    try:
        yield
    except Exception as error:
        if not is_permanent(error):
            raise
        from airflow.sdk.exceptions import AirflowFailException

        raise AirflowFailException(str(error)) from error


def prepare_spark_env(context: Any = None) -> None:
    """Executors start ``PYSPARK_PYTHON``; default it to this interpreter before the session exists."""
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    bin_dir = os.path.dirname(sys.executable)
    if bin_dir not in os.environ.get("PATH", "").split(os.pathsep):
        os.environ["PATH"] = bin_dir + os.pathsep + os.environ.get("PATH", "")


def pick_snapshot(params: dict[str, Any], asset_events: list[dict[str, Any]]) -> int:
    """The snapshot to plan: an explicit ``snapshot`` param, else the triggering Asset event's, else latest."""
    from rebalance_advisor.adapters.airflow_connections import database_url
    from rebalance_advisor.store import db
    from rebalance_advisor.store.snapshots import resolve_snapshot_id

    url = database_url(params["db_conn_id"])
    db.upgrade(url)  # the plan tables may be newer than the snapshot DAG's last upgrade
    ref: Any = params.get("snapshot") or "latest"
    if ref == "latest":
        ids = [e.get("snapshot_id") for e in asset_events if e.get("snapshot_id") is not None]
        if ids:
            ref = max(int(i) for i in ids)
    snapshot_id = resolve_snapshot_id(ref, url)
    log.info("planning snapshot %s", snapshot_id)
    return snapshot_id


def thresholds_from_params(params: dict[str, Any]):
    """The decision rules' knobs from the DAG's params (validated by the one parameter model)."""
    from rebalance_advisor.domain.parameters import AdvisorParams

    return AdvisorParams.parse(params).thresholds()


def plan_snapshot(
    spark: Any, snapshot_id: int, params: dict[str, Any], airflow_run_id: str
) -> dict[str, Any]:
    """The Spark task: run the planner on the provider's session; a compact result for XCom."""
    from rebalance_advisor.adapters.airflow_connections import database_url
    from rebalance_advisor.adapters.spark_planner import run_planner

    run = run_planner(
        spark,
        database_url(params["db_conn_id"]),
        snapshot_id,
        thresholds_from_params(params),
        group_pattern=params.get("group_regex") or None,
        reset=params.get("reset_policy") or None,
        weight=params.get("weight") or "lag",
        airflow_run_id=None if params.get("dry_run") else airflow_run_id,
        created_by=airflow_run_id,
        dry_run=bool(params.get("dry_run")),
        publish_mode=params.get("publish_mode") or "recommend",
    )
    result = run.to_dict()
    if not run.dry_run and len(run.outcomes) > XCOM_OUTCOME_LIMIT:
        result["outcomes"] = None
    result["group_count"] = len(run.outcomes)
    log.info("timings: %s", {k: round(v, 3) for k, v in run.timings.items()})
    return result


def choose_branch(result: dict[str, Any]) -> str:
    """``hand_to_publishing`` when any group was flagged, else ``no_group_flagged``."""
    return "hand_to_publishing" if result["flagged"] else "no_group_flagged"


def publish_hook():
    """Publishing's entry point when that package provides it, else None."""
    module_name, name = PUBLISH_HOOK
    try:
        module = importlib.import_module(module_name)
    except ImportError:
        return None
    return getattr(module, name, None)


def hand_to_publishing(result: dict[str, Any], params: dict[str, Any], airflow_run_id: str) -> dict[str, Any]:
    """Plans are already recorded as ``recommended``; ``static`` mode also approves and publishes them."""
    plan_ids = result["recommended_plan_ids"]
    mode = params.get("publish_mode") or "recommend"
    if result.get("dry_run"):
        log.info("dry run: %d flagged group(s), nothing recorded or published", len(result["flagged"]))
        return {"mode": mode, "plan_ids": [], "published": False}
    if mode != "static" or not plan_ids:
        log.info("recorded %d recommended plan(s): %s", len(plan_ids), plan_ids)
        return {"mode": mode, "plan_ids": plan_ids, "published": False}
    hook = publish_hook()
    if hook is None:
        log.warning("publish mode static, but %s.%s is not available: plans stay recommended", *PUBLISH_HOOK)
        return {"mode": mode, "plan_ids": plan_ids, "published": False}
    from rebalance_advisor.adapters.airflow_connections import DEFAULT_KAFKA_CONN_ID, database_url

    outcome = hook(
        plan_ids=plan_ids,
        url=database_url(params["db_conn_id"]),
        airflow_run_id=airflow_run_id,
        kafka_conn_id=params.get("kafka_conn_id") or DEFAULT_KAFKA_CONN_ID,
    )
    return {"mode": mode, "plan_ids": plan_ids, "published": True, "result": outcome}


def summarize(result: dict[str, Any], params: dict[str, Any]) -> str:
    """Log the outcomes table (group, outcome, max lag before -> after, moves) and return it."""
    from rebalance_advisor.adapters.airflow_connections import database_url
    from rebalance_advisor.services.outcome_report import format_outcomes
    from rebalance_advisor.store.plans import run_outcomes

    outcomes = result.get("outcomes")
    if outcomes is None:
        outcomes = run_outcomes(result["run_id"], database_url(params["db_conn_id"]))
    head = (
        f"snapshot {result['snapshot_id']}: {result['group_count']} group(s), {len(result['flagged'])} flagged, "
        + ("dry run (nothing written)" if result.get("dry_run") else f"advisor run {result['run_id']}")
    )
    table = head + "\n" + format_outcomes(outcomes)
    log.info("%s", table)
    print(table)
    return table
