"""Ids at and over the store's limit (docs/concepts/snapshots.md, "Id limit"): 1,200 bytes, since a PostgreSQL btree key holds
~2,700 and the snapshot's keys hold a group id, a member id and a topic name together. On both
databases, with the real broker: ids at the limit store (and `lag` matches Kafka's tool), a longer
group id is left out with an error naming the limit, and the rest of the snapshot lands."""

from __future__ import annotations

import random
import string
import uuid

import pytest
from rebalance_advisor import store
from rebalance_advisor.cli import main
from rebalance_advisor.devtools import local_kafka

from tests.support.kafka_offsets import commit as _commit
from tests.support.kafka_offsets import new_topic as _topic

LIMIT = 1200  # bytes; stated here on purpose, not imported from the code under test


def _random_id(prefix: str, size: int) -> str:
    """Letters and digits at random: nothing PostgreSQL could compress under its key limit."""
    rng = random.Random(size)
    return prefix + "".join(
        rng.choice(string.ascii_letters + string.digits) for _ in range(size - len(prefix))
    )


@pytest.mark.kafka
@pytest.mark.postgres
def test_ids_at_the_limit_store_and_longer_ones_are_refused_by_name(kafka_bootstrap, db_url, capsys) -> None:
    from confluent_kafka import Consumer

    tag = uuid.uuid4().hex[:6]
    topic = _topic(kafka_bootstrap, 2, records=10, name=_random_id(f"lim{tag}-", 249))
    at_limit = _random_id(f"at{tag}-", LIMIT)
    over = _random_id(f"over{tag}-", LIMIT + 1)
    ordinary = f"ordinary-{tag}"
    # a classic member id is client.id + "-" + a 36-character uuid: exactly LIMIT bytes
    consumer = Consumer(
        {"bootstrap.servers": kafka_bootstrap, "group.id": at_limit, "client.id": "c" * (LIMIT - 37),
         "enable.auto.commit": False, "auto.offset.reset": "earliest"}
    )  # fmt: skip
    try:
        consumer.subscribe([topic])
        while not consumer.assignment():
            consumer.poll(0.5)
        _commit(kafka_bootstrap, over, topic, {0: 3, 1: 4})
        _commit(kafka_bootstrap, ordinary, topic, {0: 5, 1: 6})
        from confluent_kafka import TopicPartition

        consumer.commit(
            offsets=[TopicPartition(topic, 0, 7), TopicPartition(topic, 1, 8)], asynchronous=False
        )

        code = main(
            ["snapshot", "--bootstrap-servers", kafka_bootstrap, "--db", db_url, "--timeout", "20",
             "--groups", f"(at|over|ordinary-){tag}.*"]
        )  # fmt: skip
        out, err = capsys.readouterr()
        assert code == 0, err
        assert "(partial)" in out
        assert f"not stored: its group id has {LIMIT + 1:,} bytes" in err
        assert f"ids up to {LIMIT:,} bytes" in err

        snapshot = store.load_snapshot(store.latest_snapshot_id(db_url), db_url)
        assert sorted(g.group_id for g in snapshot.groups) == sorted([at_limit, ordinary])
        [member] = snapshot.group(at_limit).members
        assert len(member.member_id.encode()) == LIMIT
        assert member.assignment == ((topic, 0), (topic, 1))

        reference = local_kafka.parse_describe_output(
            local_kafka.run_consumer_groups(kafka_bootstrap, "--describe", "--group", at_limit)
        )
        assert main(["lag", "--db", db_url, "--group", at_limit, "--format", "tool"]) == 0
        ours = local_kafka.parse_describe_output(capsys.readouterr().out)
        key = ("TOPIC", "PARTITION", "CURRENT-OFFSET", "LOG-END-OFFSET", "LAG", "CONSUMER-ID")
        assert sorted(tuple(r[k] for k in key) for r in ours) == sorted(
            tuple(r[k] for k in key) for r in reference
        )
        assert {r["CURRENT-OFFSET"] for r in ours} == {"7", "8"}
    finally:
        consumer.close()


@pytest.mark.postgres
def test_registered_member_ids_up_to_the_limit(db_url, capsys) -> None:
    """`members add` takes ids of exactly LIMIT bytes (the old cap was 255 characters) and refuses
    one byte more, with a message naming the limit; multi-byte characters count as bytes."""
    group, member = _random_id("g", LIMIT), _random_id("m", LIMIT)
    assert main(["members", "add", "--db", db_url, group, member, "orders"]) == 0, capsys.readouterr().err
    capsys.readouterr()
    assert main(["members", "list", "--db", db_url]) == 0
    assert member in capsys.readouterr().out

    for bad in (_random_id("g", LIMIT + 1), "é" * (LIMIT // 2 + 1)):
        try:
            code = main(["members", "add", "--db", db_url, bad, "m1", "orders"])
        except SystemExit as exit_:  # argparse refuses the argument (exit 2)
            code = exit_.code
        err = capsys.readouterr().err
        assert code != 0
        assert "Traceback" not in err
        assert str(LIMIT) in err.strip().splitlines()[-1].replace(",", "")  # argparse: usage, then the error
