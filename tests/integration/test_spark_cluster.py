"""A real Spark standalone cluster: executors import the package from the shipped zip."""

from __future__ import annotations

import zipfile
from pathlib import Path

import pandas as pd
import pytest
from rebalance_advisor.adapters import spark_session
from rebalance_advisor.errors import AdvisorError

pytestmark = [pytest.mark.spark, pytest.mark.slow]


def test_package_zip_is_importable_and_cached(tmp_path: Path) -> None:
    first = spark_session.package_zip(tmp_path)
    assert first == spark_session.package_zip(tmp_path), "same sources must reuse the cached zip"
    names = zipfile.ZipFile(first).namelist()
    assert "rebalance_advisor/__init__.py" in names
    assert "rebalance_advisor/adapters/spark_session.py" in names
    assert not any("__pycache__" in name or name.endswith(".pyc") for name in names)


def test_session_conf_binds_loopback_only_for_local_masters() -> None:
    local = spark_session.session_conf("spark://127.0.0.1:7077")
    remote = spark_session.session_conf("spark://spark-master:7077", {"spark.executor.memory": "2g"})
    assert local["spark.driver.host"] == "127.0.0.1"
    assert "spark.driver.host" not in remote
    assert remote["spark.executor.memory"] == "2g"
    assert remote["spark.sql.execution.arrow.pyspark.enabled"] == "true"


def test_connection_fields_map_to_master_and_conf() -> None:
    assert spark_session.master_from_connection("spark://spark-master", 7077) == "spark://spark-master:7077"
    assert (
        spark_session.master_from_connection("spark://spark-master:7077", None) == "spark://spark-master:7077"
    )
    assert spark_session.master_from_connection("yarn", None) == "yarn"
    assert spark_session.master_from_connection(None, None) == "local[*]"
    assert spark_session.conf_from_extra(
        {"spark.executor.cores": 2, "queue": "etl", "deploy-mode": "client", "namespace": "spark"}
    ) == {"spark.executor.cores": "2", "spark.yarn.queue": "etl", "spark.kubernetes.namespace": "spark"}


def test_executor_imports_package_from_shipped_zip(spark_cluster: str) -> None:
    # Nested, so cloudpickle ships it by value: the executor cannot import this test module.
    def _where_imported(pdf: pd.DataFrame) -> pd.DataFrame:
        """Runs on an executor: report where ``rebalance_advisor`` came from there."""
        import os

        import rebalance_advisor
        from rebalance_advisor.domain import group_spec

        return pd.DataFrame(
            {
                "key": [int(pdf["key"].iloc[0])],
                "rows": [len(pdf)],
                "package_file": [rebalance_advisor.__file__],
                "spec_file": [group_spec.__file__],
                "pid": [os.getpid()],
            }
        )

    spark_session.stop_active_session()  # e.g. the planner tests' shared local session
    # One worker core: few partitions keep the job to a handful of tasks.
    spark = spark_session.spark_session(
        spark_cluster,
        "rebalance-advisor-smoke",
        {"spark.sql.shuffle.partitions": "2", "spark.default.parallelism": "1"},
    )
    try:
        assert spark.sparkContext.master == spark_cluster
        # The zip this session shipped (its name carries the sources' hash).
        [shipped] = [
            name for name in spark.sparkContext._python_includes if name.startswith("rebalance_advisor-")
        ]
        frame = spark.createDataFrame(pd.DataFrame({"key": [0, 0, 1, 1, 1, 2], "value": range(6)}))
        rows = (
            frame.groupBy("key")
            .applyInPandas(
                _where_imported, "key long, rows long, package_file string, spec_file string, pid long"
            )
            .toPandas()
            .sort_values("key")
        )
    finally:
        spark.stop()
    assert rows["rows"].tolist() == [2, 3, 1]
    local_package = str(spark_session.package_dir())
    for column in ("package_file", "spec_file"):
        for path in rows[column]:
            assert ".zip/rebalance_advisor/" in path, f"executor imported {path}, not the shipped zip"
            assert not path.startswith(local_package), f"executor used the shared disk: {path}"
            assert f"{shipped}/rebalance_advisor/" in path, f"executor imported {path}, not {shipped}"


@pytest.mark.airflow
def test_connection_settings_read_the_airflow_connection(
    airflow_home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A real Airflow connection (from an AIRFLOW_CONN_* variable, as in docker-compose.yaml)."""
    monkeypatch.setenv(
        "AIRFLOW_CONN_SPARK_SCALE_TEST",
        '{"conn_type": "spark", "host": "spark://spark-master", "port": 7077,'
        ' "extra": {"spark.executor.memory": "2g", "deploy-mode": "client"}}',
    )
    master, conf = spark_session.connection_settings("spark_scale_test")
    assert master == "spark://spark-master:7077"
    assert conf == {"spark.executor.memory": "2g"}


def test_a_session_on_another_master_is_refused(spark_cluster: str) -> None:
    """One process, one SparkContext: asking for the cluster while local[1] runs is an error."""
    spark_session.stop_active_session()
    spark = spark_session.spark_session("local[1]", "rebalance-advisor-local", ship_package=False)
    try:
        with pytest.raises(AdvisorError, match="already running"):
            spark_session.spark_session(spark_cluster, "rebalance-advisor-cluster")
        assert spark_session.stop_active_session() == "local[1]"
        assert spark_session.stop_active_session() is None
    finally:
        spark.stop()
