"""Task bodies of the ``kafka_rebalance_advisor`` DAG (the DAG file only wires them).

Each takes the run's params (validated by :class:`~rebalance_advisor.domain.parameters.AdvisorParams`)
as an argument and runs under the one error policy (:mod:`.error_policy`). Airflow itself is
imported only where a task needs it; everything returned is JSON for XCom.
"""

from __future__ import annotations

import logging
import os
import sys
from collections.abc import Iterable, Mapping
from typing import Any

from rebalance_advisor.dag_tasks.error_policy import under_error_policy

log = logging.getLogger(__name__)

#: outcomes of a run are passed through XCom only up to this many groups; the summary reads the
#: rest from the database (a dry run, which writes nothing, always passes them all).
XCOM_OUTCOME_LIMIT = 500


def _params(params: Mapping[str, Any]):
    from rebalance_advisor.domain.parameters import AdvisorParams

    return AdvisorParams.parse(params)


def prepare_spark_env(context: Any = None) -> None:
    """Executors start ``PYSPARK_PYTHON``; default it to this interpreter before the session exists."""
    from rebalance_advisor.adapters.spark_session import route_jvm_stderr

    route_jvm_stderr()  # the JVM's start-up chatter as INFO, not as red stderr lines
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    bin_dir = os.path.dirname(sys.executable)
    if bin_dir not in os.environ.get("PATH", "").split(os.pathsep):
        os.environ["PATH"] = bin_dir + os.pathsep + os.environ.get("PATH", "")


def spark_task_args() -> dict[str, Any]:
    """The ``plan`` task's ``@task.pyspark`` arguments: the Spark connection, our session conf, and
    the executors' Python set before the session starts."""
    from rebalance_advisor.adapters.spark_session import DEFAULT_CONF

    return {
        "conn_id": "spark_default",
        "config_kwargs": dict(DEFAULT_CONF),
        "on_execute_callback": prepare_spark_env,
    }


def triggering_snapshot_ids(triggering_asset_events: Mapping[Any, Iterable[Any]] | None) -> list[int]:
    """Snapshot ids carried by the Asset events that triggered the run (none when triggered by hand)."""
    extras = [dict(e.extra or {}) for events in (triggering_asset_events or {}).values() for e in events]
    return [int(x["snapshot_id"]) for x in extras if x.get("snapshot_id") is not None]


@under_error_policy
def pick_snapshot(
    params: Mapping[str, Any], triggering_asset_events: Mapping[Any, Iterable[Any]] | None
) -> int:
    """The snapshot to plan: an explicit ``snapshot`` param, else the triggering Asset event's, else latest."""
    from rebalance_advisor.adapters.airflow_connections import database_url_from_connection
    from rebalance_advisor.store.snapshots import resolve_snapshot_id

    p = _params(params)
    asset_snapshot_ids = triggering_snapshot_ids(triggering_asset_events)
    ref: str | int = p.snapshot
    if ref == "latest" and asset_snapshot_ids:
        ref = max(asset_snapshot_ids)
    snapshot_id = resolve_snapshot_id(ref, database_url_from_connection(p.db_conn_id))
    log.info("planning snapshot %s", snapshot_id)
    return snapshot_id


@under_error_policy
def plan_snapshot(
    spark: Any, snapshot_id: int, params: Mapping[str, Any], airflow_run_id: str
) -> dict[str, Any]:
    """The Spark task: run the planner on the provider's session; a compact result for XCom."""
    from rebalance_advisor.adapters.airflow_connections import database_url_from_connection
    from rebalance_advisor.services.advise_service import advise, filter_warning

    p = _params(params)
    kafka_config = None
    if p.key_sharing and "key_range" in p.strategies:  # key_range samples record keys in the driver
        from rebalance_advisor.adapters.airflow_connections import kafka_client_config

        kafka_config = kafka_client_config(p.kafka_conn_id)
    run = advise(
        spark,
        database_url_from_connection(p.db_conn_id),
        snapshot_id,
        p,
        airflow_run_id=airflow_run_id,
        kafka_config=kafka_config,
    )
    result = run.to_dict()
    if not run.dry_run and run.group_count > XCOM_OUTCOME_LIMIT:
        result["outcomes"] = None
    result["warning"] = filter_warning(p, run)
    if result["warning"]:
        log.warning("%s", result["warning"])
    log.info("timings: %s", {k: round(v, 3) for k, v in run.timings.items()})
    return result


def choose_branch(result: Mapping[str, Any]) -> str:
    """``hand_to_publishing`` when any group was flagged, else ``no_group_flagged``."""
    return "hand_to_publishing" if result["flagged"] else "no_group_flagged"


@under_error_policy
def hand_to_publishing(
    result: Mapping[str, Any], params: Mapping[str, Any], airflow_run_id: str
) -> dict[str, Any]:
    """Plans are already recorded as ``recommended``; ``static`` mode also approves and publishes them."""
    from rebalance_advisor.adapters.airflow_connections import database_url_from_connection
    from rebalance_advisor.services import plan_lifecycle

    p = _params(params)
    plan_ids = result["recommended_plan_ids"]
    if result.get("dry_run"):
        log.info("dry run: %d flagged group(s), nothing recorded or published", len(result["flagged"]))
        return {"mode": p.publish_mode, "plan_ids": [], "published": False}
    if p.publish_mode != "static" or not plan_ids:
        log.info("recorded %d recommended plan(s): %s", len(plan_ids), plan_ids)
        return {"mode": p.publish_mode, "plan_ids": plan_ids, "published": False}
    outcome = plan_lifecycle.auto_approve_and_publish(
        plan_ids=plan_ids,
        url=database_url_from_connection(p.db_conn_id),
        airflow_run_id=airflow_run_id,
        kafka_conn_id=p.kafka_conn_id,
    )
    return {"mode": p.publish_mode, "plan_ids": plan_ids, "published": True, "result": outcome.to_dict()}


def newly_published(handed: Mapping[str, Any] | None) -> list[int]:
    """The plans a publishing task published itself (not published already): the advisor's
    ``hand_to_publishing`` result (``{"result": {"published": [...]}}``) or the approval DAG's
    ``apply_decision`` result (one published plan)."""
    handed = handed or {}
    if "result" in handed:
        published = (handed["result"] or {}).get("published") or []
    else:
        published = [handed] if handed.get("status") == "published" else []
    return [int(p["plan_id"]) for p in published if p.get("changed")]


@under_error_policy
def capacity_pass_due(
    handed: Mapping[str, Any] | None, params: Mapping[str, Any], params_model: Any = None
) -> dict[str, str] | None:
    """The extra snapshots after a publishing task published plans made on unknown capacities
    (services/capacity_pass.py): ``{"settle_after": ISO time or None, "run_after": ISO time or None,
    "note": why}``, or None when none is due (nothing newly published, the pass off, or the scheduled
    snapshot comes first). ``params_model``: the DAG's parameter model (default: the advisor's)."""
    from datetime import UTC, datetime

    from rebalance_advisor import settings
    from rebalance_advisor.adapters.airflow_connections import database_url_from_connection
    from rebalance_advisor.domain.parameters import AdvisorParams, capacity_pass_seconds
    from rebalance_advisor.services.capacity_pass import capacity_pass

    plan_ids = newly_published(handed)
    if not plan_ids:
        return None
    p = (params_model or AdvisorParams).parse(params)
    now = datetime.now(UTC)
    found = capacity_pass(
        plan_ids,
        database_url_from_connection(p.db_conn_id),
        pass_s=capacity_pass_seconds(p.capacity_pass_s),
        now=now,
        next_scheduled=next_cron_time(settings.snapshot_schedule(), now),
    )
    if found is None:
        return None
    note = found.note()
    times = {"settle_after": found.settle_after, "run_after": found.run_after}
    due = {key: t.isoformat() if t is not None else None for key, t in times.items()}
    log.info("%s: snapshot DAG to run after %s", note, " and ".join(t for t in due.values() if t))
    return {**due, "note": note}


def next_cron_time(schedule: str, now: Any) -> Any:
    """The next time after ``now`` a cron ``schedule`` fires (None when it is not a cron expression)."""
    from croniter import croniter

    try:
        return croniter(schedule, now).get_next(type(now))
    except (ValueError, KeyError, TypeError):
        return None


@under_error_policy
def summarize_run(result: Mapping[str, Any], params: Mapping[str, Any]) -> str:
    """Log the outcomes table (group, outcome, max lag before -> after, moves) and return it."""
    from rebalance_advisor.adapters.airflow_connections import database_url_from_connection
    from rebalance_advisor.domain.advice import OutcomeLine
    from rebalance_advisor.services.outcome_report import format_outcomes
    from rebalance_advisor.store.plans import run_outcomes

    if result.get("outcomes") is None:  # too many groups for XCom: read them back
        outcomes = run_outcomes(result["run_id"], database_url_from_connection(_params(params).db_conn_id))
    else:
        outcomes = [OutcomeLine.from_dict(o) for o in result["outcomes"]]
    head = (
        f"snapshot {result['snapshot_id']}: {result['group_count']} group(s), {len(result['flagged'])} flagged, "
        + ("dry run (nothing written)" if result.get("dry_run") else f"advisor run {result['run_id']}")
    )
    if result.get("warning"):
        head += f"\nWARNING: {result['warning']}"
    table = head + "\n" + format_outcomes(outcomes)
    log.info("%s", table)
    print(table)
    return table


@under_error_policy
def refresh_broker_plans(params: Mapping[str, Any]) -> list[str]:
    """Keep the published broker-applied plans' records younger than the assignor's age bound
    (services/broker_plan_refresh.py); a dry run writes nothing."""
    from rebalance_advisor.adapters.airflow_connections import database_url_from_connection
    from rebalance_advisor.services.broker_plan_refresh import refresh_published_broker_plans

    p = _params(params)
    if p.dry_run:
        return []
    url = database_url_from_connection(p.db_conn_id)
    refreshed = refresh_published_broker_plans(url, kafka_conn_id=p.kafka_conn_id)
    log.info("broker plan records refreshed: %s", refreshed or "none due")
    return refreshed
