"""The advisor DAG's planner on a real Spark standalone cluster equals its ``local[2]`` run.

Both runs go through the same path production uses: the ``kafka_rebalance_advisor`` DAG under
``dag.test()``, whose ``@task.pyspark`` (the Spark provider) builds the session from the
``spark_default`` connection, set here through ``AIRFLOW_CONN_SPARK_DEFAULT`` as docker-compose.yaml
sets it. Only the connection's master differs: ``local[2]``, then ``spark://127.0.0.1:PORT`` of the
session's cluster. The planner ships the package to the executors as a py-file zip. One real
snapshot of the demo workload is written to two fresh databases, one per run.

Each ``dag.test()`` runs in a fresh Python process, as an Airflow worker runs a task: the provider
starts from ``SparkConf()``, which inherits the ``spark.master`` of the first session a process's
JVM was launched with, and sets the connection's master only when none is set. In one process a
cluster run after a local one would silently stay local (seen here: no application reached the
master).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import zipfile
from pathlib import Path
from typing import Any

import pytest

from tests._planner import stored_run

ROOT = Path(__file__).resolve().parents[2]
pytestmark = [pytest.mark.spark, pytest.mark.airflow, pytest.mark.kafka, pytest.mark.slow]

#: per-run values that differ between two databases and say nothing about the plan itself
VOLATILE = {"id", "run_id", "plan_id", "snapshot_id", "created_at", "created_by", "epoch"}


#: run the advisor DAG once (dag.test) and print the run's state and task states as JSON
_DAG_TEST = """
import json
from tests.e2e.test_advisor_dag import _dag, _task_states

run = _dag().test()
value = lambda state: getattr(state, "value", state)
print(json.dumps({"state": value(run.state), "tasks": {k: value(v) for k, v in _task_states(run).items()}}))
"""


def _dag_test(db_file: Path, master: str, port: int | None) -> dict[str, Any]:
    """One advisor DAG run in a fresh process, its two connections on this database and master."""
    env = dict(os.environ)  # AIRFLOW_HOME & co from the airflow_home fixture
    env["AIRFLOW_CONN_REBALANCE_ADVISOR_DB"] = json.dumps({"conn_type": "sqlite", "host": str(db_file)})
    spark: dict[str, Any] = {
        "conn_type": "spark",
        "host": master,
        # Executors on this machine reach the driver on loopback (the hostname resolves elsewhere).
        "extra": {"spark.driver.host": "127.0.0.1", "spark.driver.bindAddress": "127.0.0.1"},
    }
    if port is not None:
        spark["port"] = port
    env["AIRFLOW_CONN_SPARK_DEFAULT"] = json.dumps(spark)
    done = subprocess.run(
        [sys.executable, "-c", _DAG_TEST], cwd=ROOT, env=env, capture_output=True, text=True, timeout=600
    )
    lines = done.stdout.strip().splitlines()
    assert done.returncode == 0 and lines, done.stderr[-4000:]
    result = json.loads(lines[-1])
    assert result["state"] == "success", (result, done.stderr[-4000:])
    return result


def _plans(url: str) -> dict[str, dict[str, Any]]:
    return stored_run(url, VOLATILE)


def _worker_apps(base: Path) -> set[Path]:
    """Application folders the session cluster's worker made (one per app that ran executors there)."""
    return {path.resolve() for path in base.glob("spark-cluster*/work/app-*")}  # "...current" links too


def test_cluster_run_through_the_provider_equals_local_run(
    airflow_home: Path,
    spark_cluster: str,
    kafka_bootstrap: str,
    demo_groups,
    tmp_path: Path,
    tmp_path_factory: pytest.TempPathFactory,
) -> None:
    from rebalance_advisor import store
    from rebalance_advisor.adapters.kafka_snapshot import collect

    snapshot = collect(kafka_bootstrap)  # one real snapshot, the same rows in both databases
    urls: dict[str, str] = {}
    for name in ("local", "cluster"):
        db_file = tmp_path / f"{name}.db"
        urls[name] = f"sqlite:///{db_file}"
        store.upgrade(urls[name])
        assert store.write_snapshot(snapshot, urls[name]) == 1

    apps_before = _worker_apps(tmp_path_factory.getbasetemp())
    local_run = _dag_test(tmp_path / "local.db", "local[2]", None)
    assert _worker_apps(tmp_path_factory.getbasetemp()) == apps_before, "the local run used the cluster"
    host, port = spark_cluster.rsplit(":", 1)
    cluster_run = _dag_test(tmp_path / "cluster.db", host, int(port))
    assert local_run["tasks"] == cluster_run["tasks"]
    assert cluster_run["tasks"]["plan"] == "success"

    # The plan task really ran on the cluster: the worker started executors for a new application,
    # and they fetched the package zip the planner shipped (addPyFile).
    new_apps = _worker_apps(tmp_path_factory.getbasetemp()) - apps_before
    assert len(new_apps) == 1, f"expected one application on {spark_cluster}, worker made {new_apps}"
    [app] = new_apps
    # (Its hash is not compared with a fresh package_zip(): the sources may change meanwhile.)
    fetched = list(app.glob("*/rebalance_advisor-*.zip"))
    assert len(fetched) == 1, sorted(app.rglob("*"))
    assert "rebalance_advisor/domain/group_planning.py" in zipfile.ZipFile(fetched[0]).namelist()

    local, cluster = _plans(urls["local"]), _plans(urls["cluster"])
    assert local, "the local run planned no group"
    assert local["kip-example"]["outcome"] == "recommended"
    assert local["kip-example"]["plan"]["strategy"] == "lag_aware"
    assert sorted(cluster) == sorted(local)
    for group in local:
        assert cluster[group] == local[group], group
