"""Key-range sharing end to end on a real broker (docs/concepts/key-ranges.md, short).

One hot partition, keys with a per-key sequence number in the value. A whole-partition owner
processes the start; key_range.plan splits the partition into 4 ranges from a sample of its
records; 4 range members (threads) process at different speeds while more records are produced,
then stop at different offsets; a real snapshot is taken and folded (derived groups into the
parent: parent lag = max over ranges); a single owner merges and drains the rest. Every record
must be processed exactly once, each key in sequence order.
"""

from __future__ import annotations

import threading

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic
from rebalance_advisor.adapters import kafka_snapshot
from rebalance_advisor.domain.assignors.key_range import KeySample, KeySharingPolicy, plan
from rebalance_advisor.domain.group_spec import GroupSpec, Member, PartitionLag
from rebalance_advisor.domain.key_range_groups import fold_range_groups, range_lags
from rebalance_advisor_client.key_hash import positive_hashes
from rebalance_advisor_client.range_member import RangeMember

pytestmark = [pytest.mark.kafka, pytest.mark.slow]

TOPIC, GROUP, KEYS = "kr-hot", "kr-app", 200


def _produce(bootstrap: str, seq: list[int], count: int, start: int) -> None:
    producer = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True, "linger.ms": 5})
    for i in range(start, start + count):
        k = (i * 7919) % KEYS
        producer.produce(TOPIC, key=f"key-{k}".encode(), value=str(seq[k]).encode(), partition=0)
        seq[k] += 1
    assert producer.flush(60) == 0


def _end(bootstrap: str) -> int:
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "kr-probe"})
    try:
        return c.get_watermark_offsets(TopicPartition(TOPIC, 0), timeout=30)[1]
    finally:
        c.close()


def _run(member: RangeMember, until: int, log: list[tuple[int, int, int]]) -> None:
    def handle(batch) -> None:
        log.extend((int(m.key()[4:]), int(m.value()), m.offset()) for m in batch)

    member.run(handle, until_offset=until)
    member.commit()
    member.close()


def test_four_members_share_a_hot_partition_split_and_merge_exactly(kafka_bootstrap: str) -> None:
    admin = AdminClient({"bootstrap.servers": kafka_bootstrap})
    admin.create_topics([NewTopic(TOPIC, 1, 1)])[TOPIC].result(60)
    seq = [0] * KEYS
    _produce(kafka_bootstrap, seq, 4000, 0)
    phases: list[list[tuple[int, int, int]]] = []

    # 1. one whole-partition owner processes offsets [0, 1000)
    log: list[tuple[int, int, int]] = []
    _run(RangeMember(kafka_bootstrap, GROUP, TOPIC, 0, whole=True), 1000, log)
    phases.append(log)

    # 2. split into 4 ranges from a sample of the partition's keys
    sampler = Consumer({"bootstrap.servers": kafka_bootstrap, "group.id": "kr-sampler"})
    sampler.assign([TopicPartition(TOPIC, 0, 0)])
    keys: list[bytes | None] = []
    while len(keys) < 4000:
        keys += [m.key() for m in sampler.consume(1000, 2.0) if m.error() is None]
    sampler.close()
    members = [Member(f"m{i}", topics=(TOPIC,)) for i in range(4)]
    spec = GroupSpec.build(GROUP, members, [PartitionLag(TOPIC, 0, 3000)])
    policy = KeySharingPolicy(
        allowed=True, topics=frozenset({TOPIC}), members=frozenset(m.member_id for m in members)
    )
    ranges = plan(spec, sharing=policy, samples={(TOPIC, 0): KeySample.from_keys(keys)}).ranges
    assert len(ranges) == 4
    stops = [2000, 2600, 3300, 5000]  # uneven progress; more records arrive meanwhile
    logs: list[list[tuple[int, int, int]]] = [[] for _ in ranges]
    range_members = [RangeMember(kafka_bootstrap, GROUP, TOPIC, 0, r.hash_lo, r.hash_hi) for r in ranges]
    assert all(m.position == 1000 for m in range_members)  # each starts where the whole owner stopped
    threads = [
        threading.Thread(target=_run, args=(m, stop, lg))
        for m, stop, lg in zip(range_members, stops, logs, strict=True)
    ]
    for t in threads:
        t.start()
    _produce(kafka_bootstrap, seq, 2000, 4000)  # continuous production during the split
    for t in threads:
        t.join(120)
    assert not any(t.is_alive() for t in threads)
    for r, lg in zip(ranges, logs, strict=True):  # each range member handed over only its own keys
        hashes = positive_hashes([f"key-{k}".encode() for k, _, _ in lg])
        assert ((hashes >= r.hash_lo) & (hashes < r.hash_hi)).all()
        assert lg
    phases.append([x for lg in logs for x in lg])

    # 3. a real snapshot, folded: parent progress = least range commit, parent lag = max range lag
    end = _end(kafka_bootstrap)
    assert end == 6000
    snap = kafka_snapshot.collect(kafka_bootstrap)
    derived = [c for c in snap.committed if c.group_id.startswith(GROUP + ".keyrange.")]
    assert sorted(c.offset for c in derived) == stops
    folded = fold_range_groups(snap)
    parent = [c for c in folded.committed if c.group_id == GROUP and c.topic == TOPIC]
    assert [c.offset for c in parent] == [2000]  # by hand: min(2000, 2600, 3300, 5000)
    assert not any(c.group_id.startswith(GROUP + ".keyrange.") for c in folded.committed)
    assert not any(g.group_id.startswith(GROUP + ".keyrange.") for g in folded.groups)
    lags = {(r.hash_lo, r.hash_hi): r.lag for r in range_lags(snap) if r.parent == GROUP}
    assert sorted(lags.values()) == sorted(end - s for s in stops)
    assert max(lags.values()) == end - 2000

    # 4. merge: one owner drains the rest, skipping what each range already processed
    log = []
    merged = RangeMember(kafka_bootstrap, GROUP, TOPIC, 0, whole=True)
    assert merged.position == 2000
    _run(merged, end, log)
    assert merged.skipped > 0
    phases.append(log)

    # exactly once, per-key order kept across the phases
    per_key: dict[int, list[int]] = {}
    for phase in phases:
        for k, s, _ in sorted(phase, key=lambda x: x[2]):
            per_key.setdefault(k, []).append(s)
    assert sum(len(v) for v in per_key.values()) == 6000
    for k in range(KEYS):
        assert per_key.get(k, []) == list(range(seq[k])), k
