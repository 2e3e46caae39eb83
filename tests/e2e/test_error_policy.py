"""The one error policy of the DAGs: user errors fail a task at once, infrastructure errors retry."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

DAGS = Path(__file__).resolve().parents[2] / "dags"
#: a PostgreSQL URL nothing listens on (port 9 is "discard", closed on this machine)
DOWN_DB = "postgresql+psycopg://advisor@127.0.0.1:9/advisor?connect_timeout=2"


def test_user_errors_are_permanent_infrastructure_errors_are_not() -> None:
    from rebalance_advisor.adapters.assignment_topic import KafkaUnavailable
    from rebalance_advisor.adapters.kafka_snapshot import SnapshotAborted
    from rebalance_advisor.adapters.spark_planner import PlannerFailed
    from rebalance_advisor.dag_tasks.error_policy import is_permanent
    from rebalance_advisor.domain.parameters import ParameterError
    from rebalance_advisor.errors import AdvisorError
    from rebalance_advisor.store.db import DatabaseUnavailable

    assert is_permanent(AdvisorError("snapshot 7 does not exist"))
    assert is_permanent(ParameterError("bad regex"))
    for transient in (DatabaseUnavailable, PlannerFailed, KafkaUnavailable, SnapshotAborted):
        assert not is_permanent(transient("down")), transient
    assert not is_permanent(RuntimeError("unexpected"))


def test_every_task_body_runs_under_the_policy() -> None:
    """Each public task body of dag_tasks is wrapped (the policy reaches every DAG)."""
    from rebalance_advisor.dag_tasks import advisor_tasks, publishing_tasks, schema_tasks, snapshot_tasks

    bodies = [
        advisor_tasks.pick_snapshot,
        advisor_tasks.plan_snapshot,
        advisor_tasks.hand_to_publishing,
        advisor_tasks.summarize_run,
        publishing_tasks.members_action,
        publishing_tasks.apply_decision,
        schema_tasks.upgrade_schema,
        snapshot_tasks.take_snapshot,
    ]
    assert all(hasattr(body, "__wrapped__") for body in bodies)


@pytest.mark.airflow
def test_database_outage_is_retried_and_unknown_plan_fails_at_once(
    airflow_home, monkeypatch, tmp_path
) -> None:
    """The approval DAG's bug: its own except turned DatabaseUnavailable into a permanent failure."""
    from airflow.sdk.exceptions import AirflowFailException
    from rebalance_advisor.dag_tasks.publishing_tasks import apply_decision
    from rebalance_advisor.store import db
    from rebalance_advisor.store.db import DatabaseUnavailable

    params = {"plan_id": 5, "decision": "approve", "db_conn_id": "advisor_down"}
    monkeypatch.setenv(
        "AIRFLOW_CONN_ADVISOR_DOWN",
        json.dumps({"conn_type": "generic", "extra": {"sqlalchemy_url": DOWN_DB}}),
    )
    with pytest.raises(DatabaseUnavailable):
        apply_decision(params, "run-1", "dana")

    url = f"sqlite:///{tmp_path / 'advisor.db'}"
    db.upgrade(url)
    monkeypatch.setenv(
        "AIRFLOW_CONN_ADVISOR_UP", json.dumps({"conn_type": "generic", "extra": {"sqlalchemy_url": url}})
    )
    with pytest.raises(AirflowFailException, match="plan 5"):
        apply_decision({**params, "db_conn_id": "advisor_up"}, "run-1", "dana")


@pytest.mark.airflow
def test_snapshot_dag_without_kafka_connection_fails_at_once(airflow_home, monkeypatch, tmp_path) -> None:
    """A missing Kafka connection used to retry 3 times over 200 s while holding the only run slot."""
    from airflow.dag_processing.dagbag import DagBag

    monkeypatch.delenv("AIRFLOW_CONN_KAFKA_DEFAULT", raising=False)
    monkeypatch.setenv(
        "AIRFLOW_CONN_REBALANCE_ADVISOR_DB",
        json.dumps({"conn_type": "sqlite", "host": str(tmp_path / "a.db")}),
    )
    bag = DagBag(dag_folder=str(DAGS / "kafka_offsets_snapshot.py"))
    assert not bag.import_errors, bag.import_errors
    dag = bag.dags["kafka_offsets_snapshot"]
    assert dag.default_args["retries"] >= 1  # retries exist, and are not spent on a user error
    run = dag.test(run_conf={"kafka_conn_id": "no_such_kafka"})
    assert run.state == "failed"
    states = {ti.task_id: (ti.state, ti.try_number) for ti in run.get_task_instances()}
    assert states == {"upgrade_schema": ("success", 1), "take_snapshot": ("failed", 1)}


@pytest.mark.airflow
def test_snapshot_task_refuses_a_bad_regex_at_once(airflow_home) -> None:
    from airflow.sdk.exceptions import AirflowFailException
    from rebalance_advisor.dag_tasks.snapshot_tasks import take_snapshot

    with pytest.raises(AirflowFailException, match="invalid group regex"):
        take_snapshot({"groups": "kip-("}, "run-1")
