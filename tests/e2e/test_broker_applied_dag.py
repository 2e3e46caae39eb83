"""From a snapshot to a plan applied by the broker, through the advisor DAG (``dag.test()``): plain
``subscribe()`` consumers on the consumer protocol with ``group.remote.assignor=advised``, the advisor
in publish mode ``static`` (auto-approve), and the next snapshot showing the plan's owners."""

from __future__ import annotations

import time
import uuid
from pathlib import Path

import pytest

from tests.support.kip848 import create_topic, kip848_members

DAGS = Path(__file__).resolve().parents[2] / "dags"
pytestmark = [
    pytest.mark.airflow,
    pytest.mark.slow,
    pytest.mark.kafka,
    pytest.mark.spark,
    pytest.mark.connections(kafka=True, spark=True, upgrade=True),
]
#: uniform gives each of 3 members two neighbouring partitions: one holds both hot ones
SEEDED = [3000, 3000, 100, 100, 100, 100]


def _seed(bootstrap: str, topic: str, group: str) -> None:
    """``SEEDED[p]`` records on partition p, the group's offsets at 0 (before any member joins)."""
    from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition

    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 20})
    for partition, count in enumerate(SEEDED):
        for i in range(count):
            producer.produce(topic, f"seed{i}".encode(), partition=partition)
    assert producer.flush(30) == 0
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group})
    try:
        for attempt in range(30):  # a fresh broker answers NOT_COORDINATOR while it loads the group
            try:
                consumer.commit(
                    offsets=[TopicPartition(topic, p, 0) for p in range(len(SEEDED))], asynchronous=False
                )
                break
            except KafkaException:
                if attempt == 29:
                    raise
                time.sleep(1.0)
    finally:
        consumer.close()


def _snapshot(bootstrap: str, url: str, group: str):
    from rebalance_advisor import store
    from rebalance_advisor.adapters import kafka_snapshot

    options = kafka_snapshot.SnapshotOptions(groups=kafka_snapshot.GroupFilter.parse(group))
    snapshot = kafka_snapshot.collect(bootstrap, {}, options)
    store.write_snapshot(snapshot, url)
    return snapshot.group(group)


def test_advisor_dag_plan_is_applied_by_the_broker(
    airflow_home, connections: str, kafka_bootstrap: str
) -> None:
    from airflow.dag_processing.dagbag import DagBag
    from rebalance_advisor.adapters.broker_plans import read_plans
    from rebalance_advisor.store.plans import get_plan, plan_assignment_map, run_outcomes

    url = connections
    group = topic = f"advised-dag-{uuid.uuid4().hex[:8]}"
    create_topic(kafka_bootstrap, topic, len(SEEDED))
    _seed(kafka_bootstrap, topic, group)
    with kip848_members(kafka_bootstrap, group, [topic], 3, commit=False):
        before = _snapshot(kafka_bootstrap, url, group)
        assert (before.group_type, before.assignor, len(before.members)) == ("consumer", "advised", 3)
        dag = DagBag(dag_folder=str(DAGS / "kafka_rebalance_advisor.py")).dags["kafka_rebalance_advisor"]
        run = dag.test(run_conf={"publish_mode": "static", "group_regex": group, "cooldown_minutes": 0})
        assert run.state == "success", {ti.task_id: ti.state for ti in run.get_task_instances()}
        (outcome,) = run_outcomes(None, url)
        assert outcome.outcome == "recommended", outcome
        plan = get_plan(outcome.plan_id, url)
        assert (plan.status, plan.apply_mode, plan.epoch) == ("published", "broker assignor", 1)
        assert [(t.to_status, t.actor) for t in plan.transitions[1:]] == [
            ("approved", "airflow"),
            ("published", "airflow"),
        ]
        assert read_plans({"bootstrap.servers": kafka_bootstrap}).plans[group].plan_id == str(plan.id)
        planned = {m: sorted(p) for m, p in plan_assignment_map(plan.id, url).items()}
        owned_before = {m.member_id: sorted(m.assignment) for m in before.members}
        assert planned != owned_before  # the plan moves partitions

        after = _snapshot(kafka_bootstrap, url, group)
        assert {m.member_id: sorted(m.assignment) for m in after.members} == planned
