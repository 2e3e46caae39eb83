"""Fenced mode and the helper's faults, in one process against real brokers.

A zombie (an instance whose member id was restarted elsewhere) is fenced by the broker: its
commits and outputs never land, its fencing token is lower than its successor's. Transactions
refused or unavailable stop fenced mode at start with the ACL or broker setting to fix. The
assignment topic deleted, a record of a newer format version and an unknown member id are logged,
nothing crashes.
"""

from __future__ import annotations

import logging
import threading
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import Consumer, KafkaError, Producer, TopicPartition
from confluent_kafka.admin import (
    AclBinding,
    AclOperation,
    AclPermissionType,
    AdminClient,
    NewTopic,
    ResourcePatternType,
    ResourceType,
)
from rebalance_advisor.adapters.assignment_publisher import publish_assignments
from rebalance_advisor_client import AssignedConsumer, FencingToken, TransactionsUnavailable
from rebalance_advisor_client import consumer as consumer_module
from rebalance_advisor_client.assignment_records import encode_key
from rebalance_advisor_client.fencing import transactional_id_prefix
from rebalance_advisor_client.handover_rules import decode_mark

from tests.support.torture import OwnBroker

pytestmark = [pytest.mark.kafka, pytest.mark.slow]


def _names() -> tuple[str, str, str]:
    base = f"fence-{uuid.uuid4().hex[:10]}"
    return f"{base}-group", f"{base}-assignments", f"{base}-out"


@pytest.fixture
def data_topic(kafka_bootstrap: str) -> str:
    """Two partitions of 20 records each."""
    topic = f"fence-{uuid.uuid4().hex[:10]}"
    admin = AdminClient({"bootstrap.servers": kafka_bootstrap})
    admin.create_topics([NewTopic(topic, 2, 1)])[topic].result(10)
    producer = Producer({"bootstrap.servers": kafka_bootstrap})
    for i in range(40):
        producer.produce(topic, f"r{i}".encode(), partition=i % 2)
    assert producer.flush(10) == 0
    return topic


def _take(consumer: AssignedConsumer, count: int, timeout: float = 20.0) -> list:
    got, deadline = [], time.monotonic() + timeout
    while len(got) < count:
        assert time.monotonic() < deadline, f"got {len(got)} of {count} messages"
        message = consumer.poll(0.1)
        if message is not None:
            got.append(message)
    return got


def _committed_outputs(bootstrap: str, topic: str) -> list[bytes]:
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"reader-{uuid.uuid4().hex[:6]}",
            "isolation.level": "read_committed",
            "enable.partition.eof": True,
        }
    )
    consumer.assign([TopicPartition(topic, 0, -2)])
    values = []
    try:
        while True:
            message = consumer.poll(5)
            assert message is not None, "no end of the output topic within 5 s"
            if message.error():
                assert message.error().code() == KafkaError._PARTITION_EOF
                return values
            values.append(message.value())
    finally:
        consumer.close()


def test_restarted_member_fences_its_zombie(kafka_bootstrap: str, data_topic: str) -> None:
    config = {"bootstrap.servers": kafka_bootstrap, "auto.offset.reset": "earliest"}
    group, assignments, out = _names()
    admin = AdminClient(config)  # keep a reference: a collected client cancels its futures
    admin.create_topics([NewTopic(out, 1, 1)])[out].result(10)
    publish_assignments(config, group, "p1", {"m": [(data_topic, 0)]}, topic=assignments)
    zombie = AssignedConsumer(config, group, "m", topic=assignments, check_interval=0.05)
    successor = None
    try:
        for message in _take(zombie, 5):
            zombie.produce(message, out, b"zombie-" + message.value())
        assert zombie.commit() == {(data_topic, 0): 5}
        old_token = zombie.fencing_token((data_topic, 0))
        for message in _take(zombie, 3):  # processed, output sent, not committed yet
            zombie.produce(message, out, b"zombie-" + message.value())

        # The same member id starts again elsewhere (the zombie is, say, stuck in a GC pause).
        successor = AssignedConsumer(config, group, "m", topic=assignments, check_interval=0.05)
        messages = _take(successor, 15)
        assert [m.offset() for m in messages] == list(range(5, 20))  # from the zombie's last commit
        for message in messages:
            successor.produce(message, out, b"successor-" + message.value())
        new_token = successor.fencing_token(messages[0])
        assert successor.commit() == {(data_topic, 0): 20}

        assert new_token > old_token and new_token.producer_epoch is not None
        # The zombie wakes up: its commit is refused by the broker and it lets the partition go.
        assert zombie.commit() == {}
        assert zombie.owned == frozenset()
        with pytest.raises(Exception, match="not held"):
            zombie.fencing_token((data_topic, 0))
    finally:
        zombie.close()
        if successor is not None:
            successor.close()
    outputs = _committed_outputs(kafka_bootstrap, out)
    expected = [f"zombie-r{2 * i}".encode() for i in range(5)] + [
        f"successor-r{2 * i}".encode() for i in range(5, 20)
    ]
    assert outputs == expected  # exactly once: the zombie's uncommitted outputs never appear
    reader = Consumer({"bootstrap.servers": kafka_bootstrap, "group.id": group})
    try:
        committed = reader.committed([TopicPartition(data_topic, 0)], timeout=10)[0]
    finally:
        reader.close()
    mark = decode_mark(committed.metadata)
    assert committed.offset == 20 and mark.instance == successor.instance and mark.state == "released"


def test_a_stuck_claim_holds_up_no_other_partition(
    kafka_bootstrap: str, data_topic: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Fenced claims run on threads of their own: while partition 1's claim is stuck (its mark
    read is held until the test lets it go), partition 0 is claimed, consumed and committed. With
    claims on the caller's thread, poll() waited for both and no record of partition 0 came.
    (Unfenced claims stay on the caller's thread: docs/protocol/threads.md, "Unfenced claims".)"""
    config = {"bootstrap.servers": kafka_bootstrap, "auto.offset.reset": "earliest"}
    group, assignments, _ = _names()
    let_go, stuck = threading.Event(), threading.Event()
    real_read = consumer_module.AssignedConsumer._read_marks

    def read_marks(self, tps, *args, **kwargs):
        if (data_topic, 1) in tps and not let_go.is_set():  # a claim's read of partition 1
            stuck.set()
            assert let_go.wait(60), "the test never let the claim go"
        return real_read(self, tps, *args, **kwargs)

    monkeypatch.setattr(consumer_module.AssignedConsumer, "_read_marks", read_marks)
    publish_assignments(config, group, "p1", {"m": [(data_topic, 0), (data_topic, 1)]}, topic=assignments)
    consumer = AssignedConsumer(config, group, "m", topic=assignments, check_interval=0.05)
    try:
        messages = _take(consumer, 20)
        assert stuck.is_set() and not let_go.is_set()
        assert [(m.partition(), m.offset()) for m in messages] == [(0, i) for i in range(20)]
        assert consumer.commit() == {(data_topic, 0): 20}
        assert consumer.owned == frozenset({(data_topic, 0)})
        let_go.set()
        messages = _take(consumer, 20)
        assert [(m.partition(), m.offset()) for m in messages] == [(1, i) for i in range(20)]
        assert consumer.commit() == {(data_topic, 1): 20}
    finally:
        let_go.set()
        consumer.close()


def test_fencing_token_orders_sink_writes(kafka_bootstrap: str, data_topic: str) -> None:
    """The sink rule of docs/protocol/fenced.md ("Fencing token"): keeps the highest token per partition, refuses writes with a lower one."""

    class Sink:
        def __init__(self) -> None:
            self.highest: dict[tuple[str, int], FencingToken] = {}
            self.rows: list[tuple[int, str]] = []

        def write(self, partition: tuple[str, int], token: FencingToken, row: tuple[int, str]) -> bool:
            if partition in self.highest and token < self.highest[partition]:
                return False  # from a fenced member
            self.highest[partition] = token
            self.rows.append(row)
            return True

    config = {"bootstrap.servers": kafka_bootstrap, "auto.offset.reset": "earliest"}
    group, assignments, _ = _names()
    publish_assignments(config, group, "p1", {"m": [(data_topic, 1)]}, topic=assignments)
    sink = Sink()
    first = AssignedConsumer(config, group, "m", topic=assignments, check_interval=0.05)
    second = None
    try:
        message = _take(first, 1)[0]
        late_token = first.fencing_token(message)
        second = AssignedConsumer(config, group, "m", topic=assignments, check_interval=0.05)
        fresh = _take(second, 1)[0]
        assert sink.write((data_topic, 1), second.fencing_token(fresh), (fresh.offset(), "second"))
        assert not sink.write((data_topic, 1), late_token, (message.offset(), "first, fenced"))
        assert sink.rows == [(0, "second")]
    finally:
        first.close()
        if second is not None:
            second.close()


# -- transactions refused or unavailable ------------------------------------------------------------


@pytest.fixture(scope="module")
def restricted_broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[OwnBroker]:
    """ACLs enforced (everything allowed unless denied), and a transaction log it cannot create."""
    broker = OwnBroker(
        tmp_path_factory.mktemp("restricted-kafka"),
        {
            "authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
            "allow.everyone.if.no.acl.found": "true",
            "transaction.state.log.replication.factor": "3",
        },
    )
    try:
        yield broker
    finally:
        broker.stop()


def test_transactions_not_authorised_refuses_fenced_mode(restricted_broker: OwnBroker) -> None:
    group = f"denied-{uuid.uuid4().hex[:6]}"
    admin = AdminClient({"bootstrap.servers": restricted_broker.bootstrap})
    deny = AclBinding(
        ResourceType.TRANSACTIONAL_ID,
        transactional_id_prefix(group),
        ResourcePatternType.PREFIXED,
        "User:ANONYMOUS",
        "*",
        AclOperation.ALL,
        AclPermissionType.DENY,
    )
    admin.create_acls([deny])[deny].result(10)
    time.sleep(1)  # ACLs reach the authorizer through the metadata log
    with pytest.raises(TransactionsUnavailable) as info:
        AssignedConsumer({"bootstrap.servers": restricted_broker.bootstrap}, group, "m", request_timeout=10)
    message = str(info.value)
    assert "TransactionalId prefix 'rebalance-advisor-client." + group in message
    assert "fenced=False" in message and "\n" not in message


def test_transactions_unavailable_refuses_fenced_mode(restricted_broker: OwnBroker, tmp_path: Path) -> None:
    started = time.monotonic()
    with pytest.raises(TransactionsUnavailable) as info:
        AssignedConsumer(
            {"bootstrap.servers": restricted_broker.bootstrap}, "g", "m", request_timeout=5, ready_timeout=8
        )
    assert time.monotonic() - started < 30
    assert "transaction.state.log.replication.factor" in str(info.value) and "fenced=False" in str(info.value)


# -- the assignment topic and member ids -------------------------------------------------------------


def _wait(condition, consumer: AssignedConsumer, timeout: float = 20.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "timed out"
        consumer.poll(0.1)


def test_unknown_member_waits_then_follows(kafka_bootstrap: str, data_topic: str, caplog) -> None:
    caplog.set_level(logging.INFO)
    config = {"bootstrap.servers": kafka_bootstrap, "auto.offset.reset": "earliest"}
    group, assignments, _ = _names()
    publish_assignments(config, group, "p1", {"known": [(data_topic, 0)]}, topic=assignments)
    ghost = AssignedConsumer(config, group, "ghost", topic=assignments, check_interval=0.05)
    try:
        assert "no assignment for member ghost of group" in caplog.text
        assert ghost.poll(0.5) is None and ghost.owned == frozenset()
        publish_assignments(config, group, "p2", {"ghost": [(data_topic, 0)]}, topic=assignments)
        _wait(lambda: ghost.owned == {(data_topic, 0)}, ghost)
    finally:
        ghost.close()


def test_assignment_topic_deleted_keeps_the_assignment(kafka_bootstrap: str, data_topic: str, caplog) -> None:
    caplog.set_level(logging.INFO)
    config = {"bootstrap.servers": kafka_bootstrap, "auto.offset.reset": "earliest"}
    group, assignments, _ = _names()
    publish_assignments(config, group, "p1", {"m": [(data_topic, 0)]}, topic=assignments)
    consumer = AssignedConsumer(config, group, "m", topic=assignments, check_interval=0.05)
    try:
        _take(consumer, 5)
        admin = AdminClient(config)
        admin.delete_topics([assignments])[assignments].result(10)
        _wait(lambda: "deleted" in caplog.text or "does not exist" in caplog.text, consumer)
        producer = Producer(config)
        for _ in range(5):
            producer.produce(data_topic, b"more", partition=0)
        assert producer.flush(10) == 0
        assert [m.value() for m in _take(consumer, 5)][-1] == b"more"  # still consuming its partition
        assert consumer.owned == {(data_topic, 0)}
        # The topic comes back (the plan table knows the last epoch): the helper follows again.
        publish_assignments(config, group, "p2", {"m": [(data_topic, 1)]}, topic=assignments, after_epoch=1)
        _wait(lambda: consumer.owned == {(data_topic, 1)}, consumer, timeout=40)
        assert consumer.epoch == 2
    finally:
        consumer.close()


def test_newer_record_version_releases_everything(kafka_bootstrap: str, data_topic: str, caplog) -> None:
    config = {"bootstrap.servers": kafka_bootstrap, "auto.offset.reset": "earliest"}
    group, assignments, _ = _names()
    publish_assignments(config, group, "p1", {"m": [(data_topic, 0)]}, topic=assignments)
    consumer = AssignedConsumer(config, group, "m", topic=assignments, check_interval=0.05)
    try:
        _take(consumer, 3)
        newer = (
            b'{"version":3,"group":"%s","member":"m","epoch":2,"plan_id":"p2","partitions":[],'
            b'"ranges":[],"published_at":"x"}' % group.encode()
        )
        producer = Producer(config)
        producer.produce(assignments, newer, encode_key(group, "m"))
        assert producer.flush(10) == 0
        _wait(lambda: consumer.owned == frozenset(), consumer)
        assert consumer.epoch == 2 and "upgrade rebalance-advisor-client" in caplog.text
    finally:
        consumer.close()
