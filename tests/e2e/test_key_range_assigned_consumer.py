"""AssignedConsumer follows published key ranges: split 1 -> 2 and merge 2 -> 1 under production.

Real broker, real assignment topic, two AssignedConsumers (unfenced mode) polled in turn from one
thread: the merge's whole claim must wait for the other member's range release (owner marks on
range commits, range_set.py). Values carry a per-key sequence number; every record
must be processed exactly once and each key's records in sequence order.
"""

from __future__ import annotations

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic
from rebalance_advisor.adapters.assignment_publisher import publish_assignments
from rebalance_advisor_client.consumer import AssignedConsumer
from rebalance_advisor_client.key_hash import HASH_SPACE

pytestmark = [pytest.mark.kafka, pytest.mark.slow]

TOPIC, ASSIGN, GROUP, KEYS = "krac-hot", "krac-assign", "krac-app", 200
HALF = HASH_SPACE // 2


def _produce(bootstrap: str, seq: list[int], count: int) -> None:
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5})
    for i in range(count):
        k = (i * 7919) % KEYS
        producer.produce(TOPIC, key=f"key-{k}".encode(), value=str(seq[k]).encode(), partition=0)
        seq[k] += 1
    assert producer.flush(60) == 0


def _drain(consumers, log, until, rounds=400) -> None:
    """Poll the consumers in turn until ``until()`` holds, committing after each round."""
    for _ in range(rounds):
        for c in consumers:
            for _ in range(200):
                m = c.poll(0.05)
                if m is None:
                    break
                log.append((int(m.key()[4:]), int(m.value()), c.member_id))
            c.commit()
        if until():
            return
    raise AssertionError(f"not drained: {len(log)} records processed")


def test_assigned_consumers_split_and_merge_a_partition_by_key_range(kafka_bootstrap: str) -> None:
    admin = AdminClient({"bootstrap.servers": kafka_bootstrap})
    admin.create_topics([NewTopic(TOPIC, 1, 1)])[TOPIC].result(60)
    config = {"bootstrap.servers": kafka_bootstrap}
    seq = [0] * KEYS
    log: list[tuple[int, int, str]] = []
    _produce(kafka_bootstrap, seq, 2000)

    def make(member: str) -> AssignedConsumer:
        return AssignedConsumer(
            {**config, "auto.offset.reset": "earliest"}, GROUP, member, topic=ASSIGN, fenced=False,
            takeover_timeout=20.0, check_interval=0.1,
        )  # fmt: skip

    publish_assignments(config, GROUP, "p1", {"a": [(TOPIC, 0)]}, topic=ASSIGN)
    a = make("a")
    _drain([a], log, lambda: len(log) >= 1000)

    # split: a keeps [0, HALF), b takes [HALF, 2^31); production goes on
    publish_assignments(
        config, GROUP, "p2", {"a": [(TOPIC, 0, 0, HALF)], "b": [(TOPIC, 0, HALF, HASH_SPACE)]}, topic=ASSIGN
    )
    b = make("b")
    _produce(kafka_bootstrap, seq, 2000)
    _drain([a, b], log, lambda: len(log) >= 4000)
    assert a.owned == frozenset() and {m for *_, m in log[-1000:]} == {"a", "b"}

    # merge: a takes the whole partition again and waits for b to release its range (b's owner mark);
    # b is dropped and keeps processing its range until it sees the new epoch
    publish_assignments(config, GROUP, "p3", {"a": [(TOPIC, 0)]}, topic=ASSIGN)
    _produce(kafka_bootstrap, seq, 1000)
    _drain([a, b], log, lambda: len(log) >= 5000)
    for c in (a, b):
        c.close()

    assert len(log) == 5000  # by hand: 2,000 + 2,000 + 1,000 produced
    per_key: dict[int, list[int]] = {}
    for k, s, _ in log:
        per_key.setdefault(k, []).append(s)
    assert all(v == list(range(seq[k])) for k, v in per_key.items())  # once each, in order
    assert sum(len(v) for v in per_key.values()) == sum(seq)
