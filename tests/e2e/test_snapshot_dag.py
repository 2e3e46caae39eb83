"""The kafka_offsets_snapshot DAG under real Airflow (``dag.test()``): one snapshot lands, the Asset is emitted."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import sqlalchemy as sa

from tests.support.dag_imports import heavy_modules_after_parsing

DAG_FILE = Path(__file__).resolve().parents[2] / "dags" / "kafka_offsets_snapshot.py"

pytestmark = [pytest.mark.airflow, pytest.mark.kafka, pytest.mark.slow, pytest.mark.connections(kafka=True)]


def test_dag_file_imports_nothing_heavy() -> None:
    heavy = heavy_modules_after_parsing(
        DAG_FILE, ("confluent_kafka", "sqlalchemy", "alembic", "pyspark", "pandas")
    )
    # Airflow itself pulls in sqlalchemy; our DAG must add none of the others.
    assert heavy <= {"sqlalchemy"}, heavy


def test_dag_test_lands_one_snapshot_and_emits_the_asset(airflow_home, connections, demo_groups) -> None:
    from airflow.dag_processing.dagbag import DagBag
    from airflow.models.asset import AssetEvent, AssetModel
    from airflow.utils.session import create_session
    from rebalance_advisor.adapters.airflow_connections import (
        SNAPSHOT_ASSET_URI,
        database_url_from_connection,
    )
    from rebalance_advisor.dag_tasks.snapshot_tasks import take_snapshot

    bag = DagBag(dag_folder=str(DAG_FILE))
    assert not bag.import_errors
    dag = bag.dags["kafka_offsets_snapshot"]
    assert dag.max_active_runs == 1 and not dag.catchup
    assert dag.default_args["retries"] >= 1 and dag.default_args["retry_exponential_backoff"]

    # an empty store: the first pass gives no rates, so the run takes a second one (rate_pass_s,
    # 30 s unless set: 5 s here) and that is the run's snapshot, the one the Asset names
    run = dag.test(run_conf={"groups": "kip-example|manual-assign|kip848-group", "rate_pass_s": 5})
    assert run.state == "success"
    engine = sa.create_engine(connections)
    with engine.connect() as conn:
        rows = conn.execute(
            sa.text("select id, airflow_run_id, group_count, status from snapshots order by id")
        ).all()
        assert [(r.airflow_run_id, r.group_count, r.status) for r in rows] == [
            (None, 3, "complete"),
            (run.run_id, 3, "complete"),
        ]
        types = dict(
            conn.execute(
                sa.text("select group_id, group_type from consumer_groups where snapshot_id = :s"),
                {"s": rows[1].id},
            ).all()
        )
    assert types == {"kip-example": "classic", "manual-assign": "simple", "kip848-group": "consumer"}

    with create_session() as session:
        asset = session.scalars(sa.select(AssetModel).where(AssetModel.uri == SNAPSHOT_ASSET_URI)).one()
        events = session.scalars(sa.select(AssetEvent).where(AssetEvent.asset_id == asset.id)).all()
    assert [e.extra.get("snapshot_id") for e in events] == [rows[1].id]
    assert [e.source_run_id for e in events] == [run.run_id]

    # A retry of the same run (same run id) replaces its snapshot instead of adding one.
    assert database_url_from_connection() == connections
    again = take_snapshot({"groups": "kip-example"}, run.run_id)
    with engine.connect() as conn:
        rows = conn.execute(
            sa.text("select id, group_count from snapshots where airflow_run_id = :r"), {"r": run.run_id}
        ).all()
    assert [(r.id, r.group_count) for r in rows] == [(again["snapshot_id"], 1)]
    engine.dispose()


def test_connection_helpers(airflow_home, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    from rebalance_advisor.adapters.airflow_connections import (
        database_url_from_connection,
        kafka_client_config,
    )
    from rebalance_advisor.errors import AdvisorError

    monkeypatch.delenv("AIRFLOW_CONN_REBALANCE_ADVISOR_DB", raising=False)
    monkeypatch.setenv("REBALANCE_ADVISOR_DB_URL", f"sqlite:///{tmp_path / 'fallback.db'}")
    assert database_url_from_connection() == f"sqlite:///{tmp_path / 'fallback.db'}"
    monkeypatch.setenv(
        "AIRFLOW_CONN_REBALANCE_ADVISOR_DB",
        json.dumps(
            {
                "conn_type": "postgres",
                "host": "db",
                "port": 5432,
                "login": "u",
                "password": "p",
                "schema": "adv",
            }
        ),
    )
    assert database_url_from_connection() == "postgresql+psycopg://u:p@db:5432/adv"
    monkeypatch.setenv("AIRFLOW_CONN_KAFKA_NOSERVERS", json.dumps({"conn_type": "kafka", "extra": {}}))
    with pytest.raises(AdvisorError, match="bootstrap.servers"):
        kafka_client_config("kafka_noservers")
    with pytest.raises(AdvisorError, match="does not exist"):
        kafka_client_config("no_such_connection")
