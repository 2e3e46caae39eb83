"""The publisher and the client helper against a real broker: topic, epochs, idempotence, faults."""

from __future__ import annotations

import socket
import time
import uuid

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, ConfigResource, NewTopic, ResourceType
from rebalance_advisor.adapters import assignment_topic
from rebalance_advisor.adapters.assignment_publisher import publish_assignments, transactional_id
from rebalance_advisor.errors import AdvisorError
from rebalance_advisor_client import AssignedConsumer
from rebalance_advisor_client import assignment_records as records
from rebalance_advisor_client.handover_rules import OWNED, OwnerMark, decode_mark

pytestmark = pytest.mark.kafka


def _names() -> tuple[str, str]:
    base = f"pub-{uuid.uuid4().hex[:10]}"
    return f"{base}-group", f"{base}-assignments"


def _end_offset(bootstrap: str, topic: str) -> int:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "watermarks"})
    try:
        return consumer.get_watermark_offsets(TopicPartition(topic, 0), timeout=10)[1]
    finally:
        consumer.close()


def _produce_raw(bootstrap: str, topic: str, key: bytes, value: bytes | None) -> None:
    producer = Producer({"bootstrap.servers": bootstrap})
    producer.produce(topic, value, key)
    assert producer.flush(10) == 0


def _closed_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def test_publish_creates_compacted_topic_and_epochs_increase(kafka_bootstrap: str) -> None:
    config = {"bootstrap.servers": kafka_bootstrap}
    group, topic = _names()
    first = publish_assignments(
        config, group, "p1", {"a": [("t", 0), ("t", 1)], "b": [("t", 2)]}, topic=topic
    )
    assert (first.epoch, first.changed, first.dropped) == (1, True, ())

    admin = AdminClient(config)
    resource = ConfigResource(ResourceType.TOPIC, topic)
    assert admin.describe_configs([resource])[resource].result(10)["cleanup.policy"].value == "compact"
    assert len(admin.list_topics(topic, timeout=10).topics[topic].partitions) == 1

    second = publish_assignments(
        config, group, "p2", {"a": [("t", 0)], "c": [("t", 1), ("t", 2)]}, topic=topic
    )
    assert (second.epoch, second.dropped) == (2, ("b",))
    on_topic = assignment_topic.read_topic(config, topic).group(group)
    assert {m: (r.epoch, r.plan_id, r.partitions) for m, r in on_topic.items()} == {
        "a": (2, "p2", (("t", 0),)),
        "b": (2, "p2", ()),
        "c": (2, "p2", (("t", 1), ("t", 2))),
    }
    assert set(on_topic.values()) == set(second.records)
    # Another group on the same topic has epochs of its own.
    assert publish_assignments(config, group + "-x", "q1", {"a": [("t", 0)]}, topic=topic).epoch == 1


def test_republishing_a_plan_changes_nothing(kafka_bootstrap: str) -> None:
    config = {"bootstrap.servers": kafka_bootstrap}
    group, topic = _names()
    plan = {"a": [("t", 0)], "b": [("t", 1)]}
    first = publish_assignments(config, group, "p1", plan, topic=topic)
    end = _end_offset(kafka_bootstrap, topic)
    again = publish_assignments(config, group, "p1", plan, ["a", "b"], topic=topic)
    assert again.changed is False and again.epoch == first.epoch
    assert set(again.records) == set(first.records)
    assert _end_offset(kafka_bootstrap, topic) == end


def test_malformed_record_is_reported_and_skipped(kafka_bootstrap: str) -> None:
    config = {"bootstrap.servers": kafka_bootstrap}
    group, topic = _names()
    publish_assignments(config, group, "p1", {"a": [("t", 0)]}, topic=topic)
    _produce_raw(kafka_bootstrap, topic, records.encode_key(group, "a"), b'{"group": "broken')
    result = publish_assignments(config, group, "p2", {"a": [("t", 1)]}, topic=topic)
    assert result.epoch == 2
    assert len(result.malformed) == 1 and "not JSON" in result.malformed[0]


def test_existing_topic_without_compaction_is_refused(kafka_bootstrap: str) -> None:
    group, topic = _names()
    admin = AdminClient({"bootstrap.servers": kafka_bootstrap})
    admin.create_topics([NewTopic(topic, 1, 1)])[topic].result(10)
    with pytest.raises(AdvisorError, match="cleanup.policy=delete"):
        publish_assignments({"bootstrap.servers": kafka_bootstrap}, group, "p1", {"a": []}, topic=topic)


def test_broker_down_fails_clearly_and_a_retry_completes(kafka_bootstrap: str) -> None:
    group, topic = _names()
    plan = {"a": [("t", 0)]}
    down = f"127.0.0.1:{_closed_port()}"
    started = time.monotonic()
    with pytest.raises(
        assignment_topic.KafkaUnavailable, match=f"on {down} failed: .*Nothing was published; retry"
    ) as info:
        publish_assignments({"bootstrap.servers": down}, group, "p1", plan, topic=topic, timeout=3)
    assert time.monotonic() - started < 10
    assert "\n" not in str(info.value)
    retried = publish_assignments({"bootstrap.servers": kafka_bootstrap}, group, "p1", plan, topic=topic)
    assert (retried.epoch, retried.changed) == (1, True)


def test_half_finished_publish_is_invisible_and_fenced(kafka_bootstrap: str) -> None:
    """A publisher that died mid-transaction: its records never count, the next publish completes."""
    config = {"bootstrap.servers": kafka_bootstrap}
    group, topic = _names()
    publish_assignments(config, group, "p1", {"a": [("t", 0)]}, topic=topic)
    crashed = Producer(
        {**config, "transactional.id": transactional_id(group), "transaction.timeout.ms": 60000}
    )
    crashed.init_transactions(10)
    crashed.begin_transaction()
    half = records.AssignmentRecord(group, "a", 2, "p2", (("t", 9),), "now")
    crashed.produce(topic, half.encode_value(), half.key)
    assert crashed.flush(10) == 0  # on the log, never committed
    assert assignment_topic.read_topic(config, topic).group(group)["a"].epoch == 1

    result = publish_assignments(config, group, "p2", {"a": [("t", 1)]}, topic=topic)
    assert (result.epoch, result.records[0].partitions) == (2, (("t", 1),))
    assert assignment_topic.read_topic(config, topic).group(group)["a"].partitions == (("t", 1),)
    with pytest.raises(Exception, match="(?i)fenc"):
        crashed.commit_transaction(10)


def _wait(condition, timeout: float = 15.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "timed out"


def _consume(consumer: AssignedConsumer, count: int) -> None:
    got = 0
    deadline = time.monotonic() + 15
    while got < count:
        assert time.monotonic() < deadline, "timed out"
        got += consumer.poll(0.1) is not None


@pytest.fixture
def data_topic(kafka_bootstrap: str) -> str:
    topic = f"pub-{uuid.uuid4().hex[:10]}"
    admin = AdminClient({"bootstrap.servers": kafka_bootstrap})
    admin.create_topics([NewTopic(topic, 3, 1)])[topic].result(10)
    producer = Producer({"bootstrap.servers": kafka_bootstrap})
    for i in range(30):
        producer.produce(topic, b"x", partition=i % 3)
    assert producer.flush(10) == 0
    return topic


def test_client_ignores_malformed_record_and_follows_next_epoch(
    kafka_bootstrap: str, data_topic: str
) -> None:
    config = {"bootstrap.servers": kafka_bootstrap, "auto.offset.reset": "earliest"}
    group, topic = _names()
    publish_assignments(config, group, "p1", {"m": [(data_topic, 0), (data_topic, 1)]}, topic=topic)
    consumer = AssignedConsumer(config, group, "m", topic=topic, check_interval=0.05)
    try:
        _wait(lambda: consumer.poll(0.1) is None and consumer.owned == {(data_topic, 0), (data_topic, 1)})
        _produce_raw(kafka_bootstrap, topic, records.encode_key(group, "m"), b"not json")
        _wait(lambda: consumer.poll(0.1) is None and consumer.malformed_records == 1)
        assert consumer.epoch == 1 and consumer.owned == {(data_topic, 0), (data_topic, 1)}

        publish_assignments(config, group, "p2", {"m": [(data_topic, 2)]}, topic=topic)
        _wait(lambda: consumer.poll(0.1) is None and consumer.owned == {(data_topic, 2)})
        assert consumer.epoch == 2
    finally:
        consumer.close()


def test_client_refuses_to_commit_a_partition_taken_at_a_newer_epoch(
    kafka_bootstrap: str, data_topic: str
) -> None:
    """The deterministic form of the late member: its epoch still gives it the partition, a mark says no."""
    config = {"bootstrap.servers": kafka_bootstrap, "auto.offset.reset": "earliest"}
    group, topic = _names()
    publish_assignments(config, group, "p1", {"late": [(data_topic, 0)]}, topic=topic)
    consumer = AssignedConsumer(config, group, "late", topic=topic, check_interval=0.05, fenced=False)
    other = Consumer({"bootstrap.servers": kafka_bootstrap, "group.id": group})
    try:
        _consume(consumer, 5)
        position = consumer.commit()[(data_topic, 0)]
        assert position >= 5
        # Another member took partition 0 at epoch 2, from there (this one has not heard of epoch 2).
        taken = TopicPartition(data_topic, 0, position, metadata=OwnerMark("newer", 2, OWNED).encode())
        other.commit(offsets=[taken], asynchronous=False)
        _consume(consumer, 2)  # processes a little more, then tries to commit it
        assert consumer.commit() == {}
        committed = other.committed([TopicPartition(data_topic, 0)], timeout=10)[0]
        assert (committed.offset, decode_mark(committed.metadata).member) == (position, "newer")
        assert (data_topic, 0) not in consumer.owned
    finally:
        other.close()
        consumer.close()


def test_client_that_learns_the_epoch_late_releases_nothing_it_lost(
    kafka_bootstrap: str, data_topic: str
) -> None:
    """Late member, other order: it hears of the new epoch before committing; its release is refused."""
    config = {"bootstrap.servers": kafka_bootstrap, "auto.offset.reset": "earliest"}
    group, topic = _names()
    publish_assignments(config, group, "p1", {"late": [(data_topic, 0), (data_topic, 1)]}, topic=topic)
    consumer = AssignedConsumer(config, group, "late", topic=topic, check_interval=0.05, fenced=False)
    other = Consumer({"bootstrap.servers": kafka_bootstrap, "group.id": group})
    try:
        _consume(consumer, 5)
        position = consumer.commit()[(data_topic, 0)]
        taken = TopicPartition(data_topic, 0, position, metadata=OwnerMark("newer", 2, OWNED).encode())
        other.commit(offsets=[taken], asynchronous=False)
        _consume(consumer, 2)
        publish_assignments(
            config, group, "p2", {"late": [(data_topic, 1)], "newer": [(data_topic, 0)]}, topic=topic
        )
        _wait(lambda: consumer.poll(0.1) is None and consumer.epoch == 2)
        assert consumer.owned == {(data_topic, 1)}
        committed = other.committed([TopicPartition(data_topic, 0)], timeout=10)[0]
        assert (committed.offset, decode_mark(committed.metadata)) == (position, OwnerMark("newer", 2, OWNED))
        assert consumer.commit() is not None  # still usable
    finally:
        other.close()
        consumer.close()
