"""Ids at and over the store's limit (docs/concepts/snapshots.md, "Id limit"): 1,200 bytes, since a PostgreSQL btree key holds
~2,700 and the snapshot's keys hold a group id, a member id and a topic name together. On both
databases, with the real broker: ids at the limit store (and `lag` matches Kafka's tool), a longer
group id is left out with an error naming the limit, and the rest of the snapshot lands."""

from __future__ import annotations

import random
import string
import time
import uuid

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from rebalance_advisor import store
from rebalance_advisor.cli import main
from rebalance_advisor.devtools import local_kafka

from tests._planner import make_snapshot
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


@pytest.mark.kafka
def test_member_ids_over_the_limit_keep_their_group(kafka_bootstrap, sqlite_url, capsys) -> None:
    """A classic member id is client.id + "-" + a 36-character uuid, so a client.id of LIMIT - 36
    bytes gives a member id one byte over the limit, which used to cost the whole group. Members of
    LIMIT + 1 and of 8,037 bytes are stored with their whole ids, `lag` matches Kafka's tool, and a
    second snapshot reads the first one's members back. (PostgreSQL, where the key limit bites: the
    fuzz test below stores member ids up to 32,767 bytes there.)"""
    from confluent_kafka import Consumer, TopicPartition

    tag = uuid.uuid4().hex[:6]
    topic = _topic(kafka_bootstrap, 2, records=10)
    group = f"longmember-{tag}"
    consumers = [
        Consumer({"bootstrap.servers": kafka_bootstrap, "group.id": group, "client.id": client_id,
                  "enable.auto.commit": False, "auto.offset.reset": "earliest"})
        for client_id in (_random_id(f"c{tag}-", LIMIT - 36), _random_id(f"d{tag}-", 8000))
    ]  # fmt: skip
    try:
        for consumer in consumers:
            consumer.subscribe([topic])
        deadline = time.monotonic() + 90
        while not all(len(c.assignment()) == 1 for c in consumers) and time.monotonic() < deadline:
            for consumer in consumers:
                consumer.poll(0.2)
        assert all(len(c.assignment()) == 1 for c in consumers), "the two members never settled"
        consumers[0].commit(offsets=[TopicPartition(topic, p, 3 + p) for p in (0, 1)], asynchronous=False)
        for _ in range(2):  # the second snapshot reads the first one's members back (carried state)
            code = main(["snapshot", "--bootstrap-servers", kafka_bootstrap, "--db", sqlite_url, "--timeout", "20",
                         "--groups", group, "--no-share-groups"])  # fmt: skip
            out, err = capsys.readouterr()
            assert code == 0 and "(complete)" in out, err
        reference = local_kafka.parse_describe_output(
            local_kafka.run_consumer_groups(kafka_bootstrap, "--describe", "--group", group)
        )
    finally:
        for consumer in consumers:
            consumer.close()

    snapshot = store.load_snapshot(store.latest_snapshot_id(sqlite_url), sqlite_url)
    members = snapshot.group(group).members
    sizes = sorted(len(m.member_id.encode()) for m in members)
    assert sizes == [LIMIT + 1, 8037], sizes
    assert sorted(m.assignment for m in members) == [((topic, 0),), ((topic, 1),)]
    assert main(["lag", "--db", sqlite_url, "--group", group, "--format", "tool"]) == 0
    ours = local_kafka.parse_describe_output(capsys.readouterr().out)
    key = ("TOPIC", "PARTITION", "CURRENT-OFFSET", "LOG-END-OFFSET", "LAG", "CONSUMER-ID", "CLIENT-ID")
    assert sorted(tuple(r[k] for k in key) for r in ours) == sorted(
        tuple(r[k] for k in key) for r in reference
    )
    assert {r["CURRENT-OFFSET"] for r in ours} == {"3", "4"}


@st.composite
def _sized_id(draw, nul: bool) -> str:
    """An id of a byte size at, around or far past the limit (or anywhere up to 3,000), of 1-, 2- and
    4-byte characters, sometimes with a NUL inside."""
    size = draw(st.sampled_from([1, LIMIT - 1, LIMIT, LIMIT + 1, LIMIT + 37, 32767]) | st.integers(1, 3000))
    alphabet = draw(st.sampled_from(["ab", "a\u00e9", "a\U0001f600", "\u00e9\U0001f600"]))
    rng = random.Random(draw(st.integers(0, 2**32)))
    chars: list[str] = []
    used = 0
    while used < size - 4:
        chars.append(rng.choice(alphabet))
        used += len(chars[-1].encode())
    chars.append("a" * (size - used))
    if nul and draw(st.integers(0, 5)) == 0:
        chars.insert(draw(st.integers(0, len(chars))), "\x00")
    return "".join(chars)


def _storable(value: str | None) -> bool:
    return value is None or (len(value.encode()) <= LIMIT and "\x00" not in value)


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(group=_sized_id(nul=True), members=st.lists(st.tuples(_sized_id(nul=True), st.none() | _sized_id(nul=False)),
                                                   min_size=1, max_size=3, unique_by=lambda m: m[0]))  # fmt: skip
@pytest.mark.postgres
def test_ids_near_every_limit_store_whole_or_are_refused(url, group, members) -> None:
    """Any group and member ids near the limits: the group is stored with every id whole (a member
    id of any length included) or refused by name (a group or instance id over the limit, a NUL in
    any id); nothing else happens on either database."""
    snapshot = make_snapshot(
        {group: {"topics": {"fuzz": [(10, 4)] * len(members)},
                 "members": [(m, instance, [("fuzz", p)], None) for p, (m, instance) in enumerate(members)]}}
    )  # fmt: skip
    snapshot_id = store.write_snapshot(snapshot, url)
    taken = store.load_snapshot(snapshot_id, url)
    # member ids of any length store; group and instance ids only up to the limit; no id holds a NUL
    storable = _storable(group) and all("\x00" not in m and _storable(i) for m, i in members)
    if storable:
        [stored] = taken.groups
        assert stored.group_id == group
        assert [(m.member_id, m.group_instance_id, m.assignment) for m in stored.members] == [
            (m, i, (("fuzz", p),)) for p, (m, i) in enumerate(members)
        ]
        assert [c.offset for c in taken.committed] == [4] * len(members)
    else:
        assert taken.groups == [] and taken.committed == []
        [error] = taken.errors
        assert "not stored: its " in error.reason and ("bytes" in error.reason or "NUL" in error.reason)
