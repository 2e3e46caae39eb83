"""Plain ``subscribe()`` consumers on the consumer protocol (KIP-848), no helper of ours: what a
broker-applied group runs. Each member polls on its own thread until the context ends."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager

from confluent_kafka import Consumer, KafkaException
from confluent_kafka.admin import AdminClient, NewTopic


def create_topic(bootstrap: str, topic: str, partitions: int) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})  # kept alive until the topic exists
    admin.create_topics([NewTopic(topic, partitions, 1)])[topic].result(30)


@contextmanager
def kip848_members(
    bootstrap: str, group: str, topics: list[str], count: int, assignor: str = "advised", commit: bool = True
) -> Iterator[list[str]]:
    """``count`` members of ``group`` (client ids ``{group}-m{i}``) asking for ``assignor``; yields
    the client ids once the broker lists them all with an assignment. ``commit=False``: they consume
    and never commit, so the group's lag stays what it was."""
    stop = threading.Event()

    def run(index: int) -> None:
        consumer = Consumer(
            {
                "bootstrap.servers": bootstrap,
                "group.id": group,
                "group.protocol": "consumer",
                "group.remote.assignor": assignor,
                "client.id": f"{group}-m{index}",
                "auto.offset.reset": "earliest",
                "enable.auto.commit": commit,
            }
        )
        consumer.subscribe(topics)
        while not stop.is_set():
            consumer.poll(0.2)
        consumer.close()

    threads = [threading.Thread(target=run, args=(i,), daemon=True) for i in range(count)]
    for thread in threads:
        thread.start()
    try:
        admin = AdminClient({"bootstrap.servers": bootstrap})
        deadline = time.monotonic() + 60
        members: list = []
        while True:
            try:  # a fresh broker's coordinator may still be loading: ask again
                members = (
                    admin.describe_consumer_groups([group], request_timeout=10)[group].result(15).members
                )
            except (KafkaException, TimeoutError):
                members = []
            held = [m for m in members if m.assignment and m.assignment.topic_partitions]
            if len(members) == count and len(held) == count:
                break
            assert time.monotonic() < deadline, f"group {group} did not settle: {members}"
            time.sleep(0.5)
        yield [f"{group}-m{i}" for i in range(count)]
    finally:
        stop.set()
        for thread in threads:
            thread.join(30)
