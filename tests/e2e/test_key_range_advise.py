"""An advisor run splits a hot partition into key ranges, end to end on a real broker (docs/concepts/key-ranges.md).

A hot single-partition topic with keyed records and a committed offset of the group at 0; four
members registered with ``--share-keys`` and one without; ``snapshot`` then ``advise --strategies
lag_aware key_range --key-sharing --key-sharing-topics ...`` (real Spark, local[1]). The driver
samples the partition's keys from the broker; the stored plan must give the flagged members
contiguous ranges tiling [0, 2^31), each with an estimated lag that matches, by hand, the share of
the produced keys falling into it; the unflagged member gets nothing of the split partition.
The plan is then approved and published (assignment records format 2 with the ranges), and one
range member per published range drains half the partition; a second snapshot and advisor run
must see the published ranges as the current (owned) state and recommend nothing new; then the
range members drain the rest: every record exactly once.
"""

from __future__ import annotations

import json

import pytest
from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic
from rebalance_advisor import store
from rebalance_advisor.adapters import assignment_topic
from rebalance_advisor.cli import main
from rebalance_advisor.polling import poll_until
from rebalance_advisor.services import plan_lifecycle, static_members
from rebalance_advisor.store.plans import get_plan
from rebalance_advisor_client.key_hash import HASH_SPACE, positive_hashes
from rebalance_advisor_client.range_member import range_members

from tests._planner import stop_spark

pytestmark = [pytest.mark.kafka, pytest.mark.spark, pytest.mark.slow]

TOPIC, GROUP, RECORDS, ASSIGNMENTS = "kra-hot", "kra-app", 8000, "kra-assignments"


def test_advise_splits_a_hot_partition_for_flagged_members(kafka_bootstrap, sqlite_url, capsys):
    admin = AdminClient({"bootstrap.servers": kafka_bootstrap})
    admin.create_topics([NewTopic(TOPIC, 1, 1)])[TOPIC].result(60)
    keys = [f"user-{(i * 7919) % 1000}".encode() for i in range(RECORDS)]
    producer = Producer({"bootstrap.servers": kafka_bootstrap, "linger.ms": 5})
    for k in keys:
        producer.produce(TOPIC, key=k, value=b"v", partition=0)
    assert producer.flush(60) == 0
    committer = Consumer({"bootstrap.servers": kafka_bootstrap, "group.id": GROUP})

    def commit_zero() -> bool:  # a fresh broker's coordinator may still be loading
        try:
            committer.commit(offsets=[TopicPartition(TOPIC, 0, 0)], asynchronous=False)
        except KafkaException as error:
            if not error.args[0].retriable():
                raise
            return False
        return True

    assert poll_until(commit_zero, 60, 0.5)
    committer.close()

    store.upgrade(sqlite_url)
    for i in range(4):
        static_members.add(GROUP, f"w{i}", [TOPIC], sqlite_url, share_keys=True)
    static_members.add(GROUP, "plain", [TOPIC], sqlite_url)
    assert (
        main(["snapshot", "--bootstrap-servers", kafka_bootstrap, "--db", sqlite_url, "--groups", GROUP]) == 0
    )
    capsys.readouterr()

    stop_spark()
    base = ["advise", "--db", sqlite_url, "--master", "local[1]", "--groups", GROUP, "--format", "json"]
    sharing = ["--strategies", "lag_aware,key_range", "--key-sharing", "--key-sharing-topics", "kra-.*"]
    assert main([*base, *sharing, "--bootstrap-servers", kafka_bootstrap]) == 0
    (outcome,) = json.loads(capsys.readouterr().out)["outcomes"]
    assert outcome["outcome"] == "recommended", outcome["reason"]
    assert outcome["best_strategy"] == "key_range"
    assert "key_range: split 1 partition(s) into 4 key ranges" in outcome["reason"]

    plan = get_plan(outcome["plan_id"], sqlite_url)
    rows = sorted(
        (a for a in plan.assignments if a.key_hash_start is not None), key=lambda a: a.key_hash_start
    )
    assert [a.topic for a in plan.assignments] == [TOPIC] * 4  # nothing whole: the one partition is split
    assert sorted(a.member_id for a in rows) == ["w0", "w1", "w2", "w3"]
    assert rows[0].key_hash_start == 0 and rows[-1].key_hash_end == HASH_SPACE
    assert all(a.key_hash_end == b.key_hash_start for a, b in zip(rows, rows[1:], strict=False))
    hashes = positive_hashes(keys)
    for a in rows:  # by hand: lag of a range = its share of the produced keys x the partition's lag
        inside = int(((hashes >= a.key_hash_start) & (hashes < a.key_hash_end)).sum())
        assert abs(a.lag - inside) <= 1, (a, inside)

    # publish the ranged plan (format 2 records) and let the four range members drain the partition
    plan_lifecycle.approve(plan.id, "tests", sqlite_url)
    config = {"bootstrap.servers": kafka_bootstrap}
    plan_lifecycle.publish(plan.id, config, "tests", sqlite_url, topic=ASSIGNMENTS)
    on_topic = assignment_topic.read_topic(config, ASSIGNMENTS).group(GROUP)
    assert {m: r.ranges for m, r in on_topic.items() if r.ranges} == {
        a.member_id: ((TOPIC, 0, a.key_hash_start, a.key_hash_end),) for a in rows
    }
    assert all(r.partitions == () for r in on_topic.values())
    assert on_topic["plain"].holdings == ()  # the registered member without the flag: nothing
    seen: list[tuple[bytes, int]] = []
    half = RECORDS // 2
    for record in (r for r in on_topic.values() if r.ranges):  # each range owner gets half way
        (member,) = range_members(record, kafka_bootstrap)
        member.run(lambda batch: seen.extend((m.key(), m.offset()) for m in batch), until_offset=half)
        member.close()

    # the next run sees the published ranges as the current state: owned, not re-split, no new plan
    assert (
        main(["snapshot", "--bootstrap-servers", kafka_bootstrap, "--db", sqlite_url, "--groups", GROUP]) == 0
    )
    capsys.readouterr()
    assert main([*base, *sharing, "--bootstrap-servers", kafka_bootstrap]) == 0
    (second,) = json.loads(capsys.readouterr().out)["outcomes"]
    assert second["outcome"] != "recommended", second["reason"]
    assert second.get("plan_id") is None
    assert "no member owns" not in second["reason"]
    assert second["total_lag"] == RECORDS - half  # parent lag = max over the ranges (all at half)
    # by hand: a range's lag = its keys among the records not yet read (the second half); the
    # current state's max member lag is the largest of these (w0..w3 hold one range each)
    rest = positive_hashes(keys[half:])
    by_range = [int(((rest >= a.key_hash_start) & (rest < a.key_hash_end)).sum()) for a in rows]
    assert abs(second["max_lag_before"] - max(by_range)) <= 1, (second, by_range)

    for record in (r for r in on_topic.values() if r.ranges):  # and then to the end
        (member,) = range_members(record, kafka_bootstrap)
        member.run(lambda batch: seen.extend((m.key(), m.offset()) for m in batch), until_offset=RECORDS)
        member.close()
    # every record exactly once over the four ranges, each key's records in offset order per member
    assert sorted(o for _, o in seen) == list(range(RECORDS))
    by_key: dict[bytes, list[int]] = {}
    for key, offset in seen:
        by_key.setdefault(key, []).append(offset)
    assert all(offsets == sorted(offsets) for offsets in by_key.values())


def test_advise_refuses_key_sharing_without_a_broker(sqlite_url, capsys, monkeypatch, tmp_path):
    """Key sharing needs the cluster (key samples): no broker known -> one line, exit 1, no Spark."""
    monkeypatch.delenv("KAFKA_BOOTSTRAP_SERVERS", raising=False)
    monkeypatch.setenv("REBALANCE_ADVISOR_HOME", str(tmp_path))  # no local broker recorded there
    store.upgrade(sqlite_url)
    rc = main(
        [
            "advise",
            "--db",
            sqlite_url,
            "--strategies",
            "key_range",
            "--key-sharing",
            "--key-sharing-topics",
            "x",
        ]
    )
    err = capsys.readouterr().err
    assert rc != 0
    assert "no broker" in err and "Traceback" not in err
