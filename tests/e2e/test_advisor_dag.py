"""The kafka_rebalance_advisor DAG under real Airflow (``dag.test()``), real Spark and the demo workload."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.support.dag_imports import heavy_modules_after_parsing

DAG_FILE = Path(__file__).resolve().parents[2] / "dags" / "kafka_rebalance_advisor.py"

pytestmark = [pytest.mark.airflow, pytest.mark.spark, pytest.mark.slow, pytest.mark.connections(spark=True)]


def _dag(name: str = "kafka_rebalance_advisor"):
    from airflow.dag_processing.dagbag import DagBag

    bag = DagBag(dag_folder=str(DAG_FILE))
    assert not bag.import_errors, bag.import_errors
    return bag.dags[name]


def _task_states(run) -> dict[str, str]:
    return {ti.task_id: ti.state for ti in run.get_task_instances()}


def _returned(run, task_id: str):
    """What a task of a finished run returned (its XCom)."""
    from airflow.models.xcom import XComModel
    from airflow.utils.session import create_session

    with create_session() as session:
        row = session.scalars(
            XComModel.get_many(run_id=run.run_id, task_ids=task_id, key="return_value")
        ).one()
        return XComModel.deserialize_value(row)


def test_dag_file_imports_nothing_heavy() -> None:
    heavy = ("confluent_kafka", "alembic", "pyspark", "pandas", "numpy")
    assert heavy_modules_after_parsing(DAG_FILE, heavy) == set()


def test_params_reject_bad_values_before_the_run(airflow_home) -> None:
    from airflow.sdk.definitions.param import ParamValidationError
    from rebalance_advisor.domain.assignors import ASSIGNORS, OPT_IN_STRATEGIES

    dag = _dag()
    # the default list is the registry, without the strategies that run only when named (key_range)
    assert dag.params["strategies"] == [s for s in ASSIGNORS if s not in OPT_IN_STRATEGIES]
    for bad in (
        {"imbalance_threshold": 0.5},
        {"min_improvement": 1.5},
        {"lag_floor": -1},
        {"strategies": ["range", "fastest"]},
        {"strategies": []},
        {"publish_mode": "yolo"},
        {"snapshot": "yesterday"},
        {"group_regex": "kip-("},
        {"move_budget": -3},
        {"kafka_conn_id": ""},
    ):
        with pytest.raises(ParamValidationError):
            dag.test(run_conf=bad)
    assert dag.params["kafka_conn_id"] == "kafka_default"


def test_static_publishing_uses_the_kafka_conn_id_param(monkeypatch: pytest.MonkeyPatch) -> None:
    """hand_to_publishing passes the form's Kafka connection to publishing (default kafka_default)."""
    from rebalance_advisor.adapters import airflow_connections
    from rebalance_advisor.dag_tasks import advisor_tasks
    from rebalance_advisor.services import plan_lifecycle

    calls: list[dict] = []
    monkeypatch.setattr(
        plan_lifecycle,
        "auto_approve_and_publish",
        lambda **kw: calls.append(kw) or plan_lifecycle.AutoPublished(),
    )
    monkeypatch.setattr(
        airflow_connections, "database_url_from_connection", lambda conn_id: f"sqlite:///{conn_id}.db"
    )
    result = {"recommended_plan_ids": [7], "flagged": ["g"], "dry_run": False}
    params = {"publish_mode": "static", "db_conn_id": "advisor"}
    done = advisor_tasks.hand_to_publishing(result, {**params, "kafka_conn_id": "kafka_eu"}, "run-1")
    advisor_tasks.hand_to_publishing(result, params, "run-2")
    assert done["published"] and [c.pop("kafka_conn_id") for c in calls] == ["kafka_eu", "kafka_default"]
    assert calls[0] == {"plan_ids": [7], "url": "sqlite:///advisor.db", "airflow_run_id": "run-1"}


def test_unknown_snapshot_fails_at_once_without_retries(airflow_home, connections) -> None:
    """A user error (AdvisorError, not the database being down) fails pick_snapshot on its first try."""
    from rebalance_advisor import store

    store.upgrade(connections)
    run = _dag().test(run_conf={"snapshot": "999999"})
    assert run.state == "failed"
    ti = next(ti for ti in run.get_task_instances() if ti.task_id == "pick_snapshot")
    assert (ti.state, ti.try_number) == ("failed", 1)
    assert _task_states(run)["plan"] == "upstream_failed"


@pytest.mark.kafka
def test_dag_end_to_end_on_the_demo_workload(airflow_home, connections, demo_groups, kafka_bootstrap) -> None:
    from rebalance_advisor import store
    from rebalance_advisor.adapters import kafka_snapshot
    from rebalance_advisor.adapters.airflow_connections import SNAPSHOT_ASSET_URI
    from rebalance_advisor.services import static_members
    from rebalance_advisor.services.outcome_report import format_outcomes
    from rebalance_advisor.store import plans as store_plans

    url = connections
    store.upgrade(url)
    store.write_snapshot(kafka_snapshot.collect(kafka_bootstrap), url)
    dag = _dag()
    assert SNAPSHOT_ASSET_URI in repr(dag.timetable.asset_condition)  # scheduled on the snapshot Asset

    first = dag.test()
    assert first.state == "success", _task_states(first)
    states = _task_states(first)
    assert states["hand_to_publishing"] == "success" and states["no_group_flagged"] == "skipped"
    # recommend mode publishes nothing: no early snapshot
    assert states["capacity_pass"] == states["capacity_pass_settle"] == "skipped"
    outcomes = {o.group_id: o for o in store_plans.run_outcomes(None, url)}
    assert outcomes["kip-example"].outcome == "recommended"
    assert outcomes["idle-group"].outcome == "idle"
    assert outcomes["balanced-group"].outcome == "balanced"
    assert outcomes["manual-assign"].outcome == "no_members"
    assert not [g for g, o in outcomes.items() if o.outcome == "error"]
    kip_plan = outcomes["kip-example"].plan_id
    plan = store_plans.get_plan(kip_plan, url)
    assert (plan.strategy, plan.status, plan.created_by) == (
        "lag_aware",
        "recommended",
        first.run_id,
    )
    assert (plan.max_lag_before, plan.max_lag_after, plan.moves) == (160_000, 110_000, 1)
    assert store_plans.plan_assignment_map(kip_plan, url) == {"C0": [("t0", 0)], "C1": [("t0", 1), ("t0", 2)]}
    # The summary task's outcomes table (format_outcomes of this run) holds kip-example's numbers.
    head, table = _returned(first, "summary").split("\n", 1)
    assert head.endswith(f"advisor run {outcomes['kip-example'].run_id}") and "flagged" in head
    assert sorted(table.splitlines()) == sorted(
        format_outcomes(store_plans.run_outcomes(None, url)).splitlines()
    )
    kip_row = next(line for line in table.splitlines() if line.startswith("kip-example "))
    assert kip_row.split()[:6] == ["kip-example", "recommended", "160,000", "->", "110,000", "1"]

    # Register the manual-assign consumers; a second run inside the cool-down adds no new
    # recommendation for kip-example but plans manual-assign from the registry.
    static_members.add("manual-assign", "worker-0", ["manual-topic"], url)
    static_members.add("manual-assign", "worker-1", ["manual-topic"], url)
    recommended_before = {
        p.id for p in store_plans.list_plans(url, group="kip-example", status="recommended")
    }
    second = dag.test(run_conf={"cooldown_minutes": 30})  # off by default
    assert second.state == "success", _task_states(second)
    outcomes = {o.group_id: o for o in store_plans.run_outcomes(None, url)}
    assert outcomes["kip-example"].outcome == "held_by_cooldown"
    assert outcomes["kip-example"].reason.startswith(f"cool-down: plan {kip_plan} ")
    assert {
        p.id for p in store_plans.list_plans(url, group="kip-example", status="recommended")
    } == recommended_before
    assert outcomes["manual-assign"].outcome == "recommended"
    manual = store_plans.plan_assignment_map(outcomes["manual-assign"].plan_id, url)
    assert sorted(manual) == ["worker-0", "worker-1"] and sum(map(len, manual.values())) == 6

    # Nothing flagged (only the idle group): the branch finishes without plans.
    quiet = dag.test(run_conf={"group_regex": "idle-group"})
    states = _task_states(quiet)
    assert quiet.state == "success"
    assert states["no_group_flagged"] == "success" and states["hand_to_publishing"] == "skipped"
    assert states["summary"] == "success"
