"""Test helpers for the broker-side ``advised`` assignor: plan records written with a plain producer
(the format of docs/reference/broker-plan-record.md), KIP-848 consumers, and waiting for the broker's
assignment to settle."""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterable

from confluent_kafka import Consumer, KafkaException, Producer, TopicCollection
from confluent_kafka.admin import AdminClient, NewTopic

PLANS_TOPIC = "_rebalance_advisor_broker_plans"


def ensure_plans_topic(bootstrap: str, config: dict[str, str] | None = None) -> None:
    """The compacted plans topic (one partition), created when missing."""
    admin = AdminClient({**(config or {}), "bootstrap.servers": bootstrap})
    futures = admin.create_topics([NewTopic(PLANS_TOPIC, 1, 1, config={"cleanup.policy": "compact"})])
    for future in futures.values():
        try:
            future.result(30)
        except Exception as error:  # noqa: BLE001 - already there is fine
            if "TOPIC_ALREADY_EXISTS" not in str(error):
                raise


def create_topic(bootstrap: str, topic: str, partitions: int, config: dict[str, str] | None = None) -> str:
    """A topic of ``partitions`` partitions; its topic id as Kafka prints it (base64, no padding)."""
    admin = AdminClient({**(config or {}), "bootstrap.servers": bootstrap})
    for future in admin.create_topics([NewTopic(topic, partitions, 1)]).values():
        future.result(30)
    return topic_id(bootstrap, topic, config)


def topic_id(bootstrap: str, topic: str, config: dict[str, str] | None = None, timeout: float = 30.0) -> str:
    """The topic's id, once the new topic's metadata has reached the broker's cache."""
    admin = AdminClient({**(config or {}), "bootstrap.servers": bootstrap})
    deadline = time.monotonic() + timeout
    while True:
        try:
            return str(admin.describe_topics(TopicCollection([topic]))[topic].result(30).topic_id)
        except KafkaException:
            if time.monotonic() >= deadline:
                raise
            time.sleep(0.2)


def plan_record(
    group: str,
    topic: str,
    topic_uuid: str,
    members: dict[str, Iterable[int]],
    by_instance: bool = False,
    published_at_ms: int | None = None,
    plan_id: str = "p-test",
) -> bytes:
    """A version-1 plan record; ``members`` maps member ids (``by_instance``: instance ids) to partitions."""
    entries = [
        {
            "member_id": None if by_instance else key,
            "instance_id": key if by_instance else None,
            "partitions": [{"topic": topic, "topic_id": topic_uuid, "partition": p} for p in sorted(parts)],
        }
        for key, parts in members.items()
    ]
    published = published_at_ms if published_at_ms is not None else int(time.time() * 1000)
    record = {"version": 1, "group": group, "plan_id": plan_id, "epoch": 1, "published_at_ms": published}
    return json.dumps({**record, "members": entries}).encode()


def publish(bootstrap: str, group: str, value: bytes | None, config: dict[str, str] | None = None) -> None:
    """Write ``value`` (None: a tombstone) as the group's plan record."""
    producer = Producer({**(config or {}), "bootstrap.servers": bootstrap})
    producer.produce(PLANS_TOPIC, key=group.encode(), value=value)
    assert producer.flush(30) == 0, "the plan record was not delivered"


def consumer(
    bootstrap: str,
    group: str,
    topic: str,
    assignor: str = "advised",
    instance: str | None = None,
    config: dict[str, str] | None = None,
) -> Consumer:
    """A plain KIP-848 ``subscribe()`` consumer asking the broker for ``assignor``."""
    settings = {
        **(config or {}),
        "bootstrap.servers": bootstrap,
        "group.id": group,
        "group.protocol": "consumer",
        "group.remote.assignor": assignor,
        "enable.auto.commit": False,
    }
    if instance:
        settings["group.instance.id"] = instance
    member = Consumer(settings)
    member.subscribe([topic])
    return member


def owned(member: Consumer) -> set[int]:
    return {tp.partition for tp in member.assignment()}


def settle(
    members: Callable[[], list[Consumer]],
    done: Callable[[], bool],
    timeout: float = 45.0,
    bounce: Callable[[], None] | None = None,
) -> bool:
    """Poll every member (``members()``: the current ones) until ``done()``; ``bounce`` (every 5 s)
    makes the group re-assign again, in case the plan reached the broker's reader after the previous
    re-assignment."""
    deadline = time.monotonic() + timeout
    next_bounce = time.monotonic() + 5.0
    while time.monotonic() < deadline:
        for member in members():
            member.poll(0.05)
        if done():
            return True
        if bounce and time.monotonic() >= next_bounce:
            bounce()
            next_bounce = time.monotonic() + 5.0
    return False


def close_all(members: Iterable[Consumer]) -> None:
    for member in members:
        member.close()
