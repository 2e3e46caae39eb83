"""Topics and committed offsets for the snapshot tests, made on a real broker.

Commits are retried while the broker is still settling (a fresh group's coordinator loading, a
topic just created): on a busy 2-core machine that lasts seconds.
"""

from __future__ import annotations

import time
import uuid

#: Errors a fresh or busy broker answers for a while; anything else fails the helper at once.
_SETTLING = ("COORDINATOR", "UNKNOWN_TOPIC", "LEADER")


def new_topic(bootstrap: str, partitions: int, records: int = 0, name: str | None = None) -> str:
    """A topic with ``records`` records on each partition; its name (``snap-<random>`` by default)."""
    from confluent_kafka import Producer
    from confluent_kafka.admin import AdminClient, NewTopic

    topic = name or f"snap-{uuid.uuid4().hex[:10]}"
    admin = AdminClient(
        {"bootstrap.servers": bootstrap}
    )  # kept alive: a collected client cancels its futures
    admin.create_topics([NewTopic(topic, num_partitions=partitions, replication_factor=1)])[topic].result(60)
    if records:
        producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5})
        for partition in range(partitions):
            for _ in range(records):
                producer.produce(topic, b"x", partition=partition)
        assert producer.flush(30) == 0
    return topic


def commit(bootstrap: str, group: str, topic: str, offsets: dict[int, int], timeout: float = 60) -> None:
    """Commit ``offsets`` (partition -> offset) for ``group`` without joining it."""
    from confluent_kafka import Consumer, TopicPartition

    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "enable.auto.commit": False})
    try:
        deadline = time.monotonic() + timeout
        while True:
            try:
                consumer.commit(
                    offsets=[TopicPartition(topic, p, o) for p, o in offsets.items()], asynchronous=False
                )
                return
            except Exception as error:
                if time.monotonic() > deadline or not any(code in str(error) for code in _SETTLING):
                    raise
                time.sleep(0.2)
    finally:
        consumer.close()


def stored_snapshot(bootstrap: str, group: str, url: str, taken_at=None) -> int:
    """Snapshot one group into the store at ``url``; ``taken_at`` replaces the snapshot's time (a test
    that spread its commits over a known interval); the snapshot id."""
    from rebalance_advisor import store
    from rebalance_advisor.adapters import kafka_snapshot

    options = kafka_snapshot.SnapshotOptions(groups=kafka_snapshot.GroupFilter.parse(group), timeout_s=10)
    taken = kafka_snapshot.collect(bootstrap, options=options)
    if taken_at is not None:
        taken.taken_at = taken_at
    return store.write_snapshot(taken, url)


def admin(bootstrap: str):
    """An AdminClient; keep the reference while its futures are pending."""
    from confluent_kafka.admin import AdminClient

    return AdminClient({"bootstrap.servers": bootstrap})


def dead_address() -> str:
    """A local address nothing listens on (a port just freed)."""
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return f"127.0.0.1:{s.getsockname()[1]}"
