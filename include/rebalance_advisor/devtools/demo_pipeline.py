"""The whole pipeline once, in-process: snapshot DAG -> advisor DAG via ``dag.test()`` (``make demo``).

Airflow reads its configuration at first import, so :func:`run_demo_pipeline` sets a throwaway
``AIRFLOW_HOME`` (SQLite metadata DB, this checkout's ``dags/``) and the three connections
(``kafka_default``, ``rebalance_advisor_db``, ``spark_default`` = ``local[2]``) through
``AIRFLOW_CONN_*`` variables *before* importing Airflow; call it from a process that has not
imported Airflow yet (the CLI).
"""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path

from rebalance_advisor.domain.parameters import ADVISOR_DAG_ID, APPROVAL_DAG_ID, SNAPSHOT_DAG_ID
from rebalance_advisor.errors import AdvisorError
from rebalance_advisor.settings import INCLUDE_DIR

DAGS_DIR = INCLUDE_DIR.parent / "dags"


def airflow_environment(work_dir: Path, bootstrap_servers: str, db_url: str) -> dict[str, str]:
    """Environment for an in-process Airflow with the advisor's connections."""
    return {
        "AIRFLOW_HOME": str(work_dir),
        "AIRFLOW__CORE__DAGS_FOLDER": str(DAGS_DIR),
        "AIRFLOW__CORE__LOAD_EXAMPLES": "False",
        "AIRFLOW__CORE__PARALLELISM": "4",
        "AIRFLOW__DATABASE__SQL_ALCHEMY_CONN": f"sqlite:///{work_dir / 'airflow.db'}",
        "AIRFLOW__LOGGING__LOGGING_LEVEL": "WARNING",
        "AIRFLOW_CONN_KAFKA_DEFAULT": json.dumps(
            {"conn_type": "kafka", "extra": {"bootstrap.servers": bootstrap_servers}}
        ),
        "AIRFLOW_CONN_REBALANCE_ADVISOR_DB": json.dumps(
            {"conn_type": "generic", "extra": {"sqlalchemy_url": db_url}}
        ),
        "AIRFLOW_CONN_SPARK_DEFAULT": json.dumps(
            {
                "conn_type": "spark",
                "host": "local[2]",
                "extra": {"spark.driver.host": "127.0.0.1", "spark.driver.bindAddress": "127.0.0.1"},
            }
        ),
        "PYSPARK_PYTHON": os.environ.get("PYSPARK_PYTHON") or sys.executable,
    }


#: Seconds between the starts of the demo's snapshot runs. The live consumers commit every second,
#: so a committed offset is up to about a second old: over 20 s that misstates a consume rate (and
#: a measured capacity) by at most about 7 %, against 14 % over 10 s. The live group's members keep
#: backlog for over 2 minutes after the demo starts, long enough for both snapshots.
DEMO_SNAPSHOT_INTERVAL_S = 20.0


def run_demo_pipeline(
    bootstrap_servers: str,
    db_url: str,
    work_dir: Path,
    snapshots: int = 2,
    interval_s: float = DEMO_SNAPSHOT_INTERVAL_S,
    apply_group: str | None = None,
) -> tuple[str, str | None]:
    """Snapshot the cluster ``snapshots`` times with the snapshot DAG, then plan the newest with the
    advisor DAG; the outcomes table, and (with ``apply_group``) what :func:`_apply_plan` saw.

    Rates are differences between snapshots, so the advisor sees produce rates, consume rates and
    member capacities only from the second snapshot on; each snapshot run starts at least
    ``interval_s`` after the previous snapshot's time (the store refuses rates over intervals
    shorter than 5 s).
    ``work_dir`` holds Airflow's home (use a temp dir); ``db_url`` is the advisor database (the
    demo uses a SQLite file in the same temp dir). Raises AdvisorError when a DAG run fails.
    """
    if "airflow" in sys.modules:
        raise AdvisorError("run_demo_pipeline must run before anything imports Airflow (it configures it)")
    if snapshots < 1:
        raise AdvisorError(f"snapshots must be at least 1, got {snapshots}")
    work_dir.mkdir(parents=True, exist_ok=True)
    os.environ.update(airflow_environment(work_dir, bootstrap_servers, db_url))

    from airflow.dag_processing.dagbag import DagBag
    from airflow.utils import db as airflow_db

    from rebalance_advisor.services.outcome_report import format_outcomes
    from rebalance_advisor.store.plans import run_outcomes

    airflow_db.initdb()
    bag = DagBag(dag_folder=str(DAGS_DIR))
    if bag.import_errors:
        raise AdvisorError(f"DAG import errors: {bag.import_errors}")
    for number in range(1, snapshots + 1):
        if number > 1 and (wait := _seconds_since_latest_snapshot(db_url, interval_s)) > 0:
            print(f"waiting {wait:.0f} s for traffic between snapshots ...", flush=True)
            time.sleep(wait)
        _run_dag(bag, SNAPSHOT_DAG_ID, f" ({number} of {snapshots})" if snapshots > 1 else "")
    _run_dag(bag, ADVISOR_DAG_ID)
    outcomes = format_outcomes(run_outcomes(None, db_url))
    return outcomes, (_apply_plan(bag, db_url, apply_group) if apply_group else None)


def _apply_plan(bag, db_url: str, group_id: str) -> str:
    """Approve the group's recommended plan with the approval DAG (which publishes it the group's way:
    for a group on the broker assignor, its plan record and a re-assignment), snapshot once more, and
    say whether that snapshot's owners are the plan's."""
    from rebalance_advisor import store
    from rebalance_advisor.store.plans import get_plan, plan_assignment_map, run_outcomes

    line = next((o for o in run_outcomes(None, db_url) if o.group_id == group_id), None)
    if line is None or line.outcome != "recommended" or not line.plan_id:
        return (
            f"{group_id}: no plan recommended ({line.outcome if line else 'not planned'}), nothing to apply"
        )
    _run_dag(
        bag,
        APPROVAL_DAG_ID,
        f" (approve plan {line.plan_id})",
        {"plan_id": line.plan_id, "decision": "approve"},
    )
    plan = get_plan(line.plan_id, db_url)
    _run_dag(bag, SNAPSHOT_DAG_ID, " (after the plan)")
    snapshot = store.load_snapshot(store.latest_snapshot_id(db_url), db_url, groups=[group_id])
    owners = {
        (m.group_instance_id or m.member_id): sorted(m.assignment) for m in snapshot.group(group_id).members
    }
    planned = {m: sorted(p) for m, p in plan_assignment_map(plan.id, db_url).items()}
    same = sum(owners.get(m) == parts for m, parts in planned.items())
    return (
        f"plan {plan.id} ({plan.strategy}) {plan.status} at epoch {plan.epoch}, applied by: {plan.apply_mode}; "
        f"snapshot {snapshot.snapshot_id} (after it): {same} of {len(planned)} members hold exactly their planned partitions"
    )


def _seconds_since_latest_snapshot(db_url: str, interval_s: float) -> float:
    """How long to wait so that the next snapshot is ``interval_s`` after the stored one's time.

    Measured from the stored ``taken_at``, not from the start of the DAG run: the first run spends
    most of its time starting Airflow's task runner before it collects, so two runs started 20 s
    apart took their snapshots 4.7 s apart, under the store's 5 s minimum, and no rate was derived.
    """
    from datetime import UTC, datetime

    from rebalance_advisor.domain.timestamps import assume_utc
    from rebalance_advisor.store import db
    from rebalance_advisor.store.snapshots import latest_snapshot_row

    with db.connect(db_url) as conn:
        row = latest_snapshot_row(conn)
    if row is None:
        return 0.0
    return interval_s - (datetime.now(UTC) - assume_utc(row.taken_at)).total_seconds()


def _run_dag(bag, dag_id: str, note: str = "", conf: dict | None = None) -> None:
    print(f"running {dag_id}{note} ...", flush=True)
    run = bag.dags[dag_id].test(run_conf=conf) if conf else bag.dags[dag_id].test()
    if run.state != "success":
        failed = [ti.task_id for ti in run.get_task_instances() if ti.state == "failed"]
        raise AdvisorError(f"{dag_id} run {run.run_id} ended {run.state} (failed tasks: {failed})")
