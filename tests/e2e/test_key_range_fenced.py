"""Fenced key ranges (docs/concepts/key-ranges.md, docs/protocol/fenced.md): a range owner paused across a split or a merge cannot commit.

Real broker, worker processes (``tests.support.assigned_worker``, fenced mode, outputs through the
helper's transactions), keyed records produced all along. Two pauses (SIGSTOP):

1. the whole-partition owner ``a`` is paused when the partition is split into ``a: [0, HALF)`` and
   ``b: [HALF, 2^31)``: ``b`` takes its range over after the takeover timeout, fencing ``a``'s
   whole-partition transactional id first; ``a``, continued, must not commit anything more of
   the whole partition;
2. the range owner ``b`` is paused when the ranges are merged back to ``a``: ``a`` fences ``b``'s
   range id before its whole claim; ``b``, continued, must not commit.

The output topic read ``read_committed`` is the truth: every input record exactly once, and each
key's records in input order. Expected values come from the produced records, not from the helper.
"""

from __future__ import annotations

import signal
import threading
import time
import uuid
from collections import Counter, defaultdict

import pytest
from confluent_kafka import Consumer, KafkaError, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic
from rebalance_advisor.adapters.assignment_publisher import publish_assignments
from rebalance_advisor_client.key_hash import HASH_SPACE

from tests.support import handover as h

pytestmark = [pytest.mark.kafka, pytest.mark.slow]

HALF = HASH_SPACE // 2
KEYS = 300
TIMEOUT = 3.0  # takeover timeout of the workers (s)


class KeyedProducer(threading.Thread):
    """Keyed records to partition 0 at a steady rate; remembers each offset's key."""

    def __init__(self, bootstrap: str, topic: str, rate: float = 400.0) -> None:
        super().__init__(daemon=True)
        self.topic, self.rate = topic, rate
        self.producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5, "acks": "all"})
        self.keys: dict[int, bytes] = {}
        self.halt = threading.Event()
        self.sent = 0

    def _delivered(self, error, message) -> None:
        assert error is None, error
        self.keys[message.offset()] = message.key()

    def run(self) -> None:
        while not self.halt.is_set():
            key = f"key-{(self.sent * 7919) % KEYS}".encode()
            self.producer.produce(self.topic, b"v", key, partition=0, on_delivery=self._delivered)
            self.sent += 1
            self.producer.poll(0)
            time.sleep(1.0 / self.rate)
        assert self.producer.flush(120) == 0

    def finish(self) -> None:
        self.halt.set()
        self.join(130)


def _outputs(bootstrap: str, topic: str, end: int) -> list[int]:
    """Input offsets in the output topic's order, read_committed, until ``end`` distinct ones or 60 s."""
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"check-{uuid.uuid4().hex[:6]}",
            "isolation.level": "read_committed",
            "enable.partition.eof": True,
        }
    )
    consumer.assign([TopicPartition(topic, 0, 0)])
    out: list[int] = []
    deadline = time.monotonic() + 60
    try:
        while time.monotonic() < deadline:
            message = consumer.poll(0.5)
            if message is None:
                continue
            if message.error():
                if message.error().code() == KafkaError._PARTITION_EOF and len(set(out)) >= end:
                    break
                continue
            out.append(int(message.value().split(b":")[1]))
    finally:
        consumer.close()
    return out


def _committed(bootstrap: str, group: str, topic: str) -> int:
    """The group's committed offset of partition 0 (settled: read_committed), -1 when none."""
    consumer = Consumer(
        {"bootstrap.servers": bootstrap, "group.id": group, "isolation.level": "read_committed"}
    )
    try:
        (tp,) = consumer.committed([TopicPartition(topic, 0)], timeout=30)
        return tp.offset
    finally:
        consumer.close()


_HANDOVER_WORDS = ("epoch", "claim", "fence", "key range", "released", "stuck", "failed", "dropping", "since")


def _explain(outputs: list[int], end: int, *workers: h.Worker) -> str:
    """What went wrong with the outputs, for a failure message a CI log can be read from: the
    duplicated or missing offsets, who processed them at which epoch, and the handover log lines."""
    counts = Counter(outputs)
    duplicated = sorted(o for o, c in counts.items() if c > 1)
    missing = sorted(set(range(end)) - set(counts))
    processed: dict[int, list[str]] = defaultdict(list)
    for worker in workers:
        for line in worker.lines():
            processed[line.offset].append(f"{line.member}@{line.epoch}")
    parts = [f"{len(outputs)} outputs, {len(counts)} distinct, {end} produced"]
    if duplicated:
        parts.append(f"{len(duplicated)} duplicated, {duplicated[0]}..{duplicated[-1]}")
        parts.append("first: " + ", ".join(f"{o} by {processed[o]}" for o in duplicated[:5]))
    if missing:
        parts.append(f"{len(missing)} missing, first {missing[:5]}")
    for worker in workers:
        lines = [x for x in worker.log().splitlines() if any(w in x for w in _HANDOVER_WORDS)]
        parts.append(f"{worker.member}'s log:\n" + "\n".join(x[:240] for x in lines[-40:]))
    return "\n".join(parts)


def _progress(worker: h.Worker, epoch: int) -> int:
    return sum(1 for x in worker.lines() if x.epoch >= epoch)


def test_a_paused_owner_cannot_commit_across_a_split_and_a_merge(kafka_bootstrap: str, tmp_path) -> None:
    tag = uuid.uuid4().hex[:6]
    topic, out_topic, assign, group = f"kf-in-{tag}", f"kf-out-{tag}", f"kf-assign-{tag}", f"kf-app-{tag}"
    admin = AdminClient({"bootstrap.servers": kafka_bootstrap})
    for name in (topic, out_topic):
        admin.create_topics([NewTopic(name, 1, 1)])[name].result(60)
    config = {"bootstrap.servers": kafka_bootstrap}
    producer = KeyedProducer(kafka_bootstrap, topic)
    producer.start()
    extra = ("--output-topic", out_topic)
    publish_assignments(config, group, "p1", {"a": [(topic, 0)], "b": []}, topic=assign)
    a = h.start_worker(kafka_bootstrap, group, "a", assign, tmp_path / "a.out", TIMEOUT, *extra)
    b = h.start_worker(kafka_bootstrap, group, "b", assign, tmp_path / "b.out", TIMEOUT, *extra)
    try:
        h.wait_for(lambda: _progress(a, 1) > 300, 90, "a consuming the whole partition")
        h.wait_for(lambda: _committed(kafka_bootstrap, group, topic) > 0, 60, "a committing")

        # 1. the whole owner is paused across the split
        a.signal(signal.SIGSTOP)
        time.sleep(1.0)  # a holds records it processed but has not committed
        publish_assignments(
            config,
            group,
            "p2",
            {"a": [(topic, 0, 0, HALF)], "b": [(topic, 0, HALF, HASH_SPACE)]},
            topic=assign,
        )
        h.wait_for(lambda: _progress(b, 2) > 200, 60, "b taking its range over")
        a.signal(signal.SIGCONT)
        h.wait_for(lambda: any(x.epoch == 2 for x in a.lines()), 60, "a consuming its range")
        h.wait_for(lambda: _progress(b, 2) > 500 and _progress(a, 2) > 100, 60, "both ranges moving")
        whole_done = _committed(kafka_bootstrap, group, topic)  # a's last whole-partition commit

        # 2. a range owner is paused across the merge
        b.signal(signal.SIGSTOP)
        time.sleep(1.0)
        publish_assignments(config, group, "p3", {"a": [(topic, 0)], "b": []}, topic=assign)
        h.wait_for(lambda: _progress(a, 3) > 300, 60, "a taking the merged partition over")
        b.signal(signal.SIGCONT)
        time.sleep(2.0)  # b commits what it held (refused) and sees the new epoch
        producer.finish()
        end = producer.sent
        h.wait_for(lambda: max((x.offset for x in a.lines()), default=0) >= end - 1, 90, "a reaching the end")
    finally:
        producer.halt.set()
        for worker in (a, b):
            worker.stop()

    outputs = _outputs(kafka_bootstrap, out_topic, end)
    # every input record exactly once in the committed output
    assert sorted(outputs) == list(range(end)), _explain(outputs, end, a, b)
    # each key's records in input order
    last: dict[bytes, int] = {}
    for offset in outputs:
        key = producer.keys[offset]
        assert offset > last.get(key, -1), (key, last[key], offset)
        last[key] = offset
    # b's range started where a's last whole-partition commit was (not at 0, not later); and a,
    # back at its old epoch, did not claim the whole partition again
    starts = [int(line.rsplit(" ", 1)[1]) for line in b.log().splitlines() if "started at offset" in line]
    assert whole_done > 0 and starts[:1] == [whole_done], (whole_done, starts)
    assert a.log().count(f"claimed {topic}-0 at epoch 1 ") == 1, a.log()[-3000:]
    # the paused owners were refused by the broker (and both pauses really hit a handover)
    assert "fenced" in a.log(), a.log()[-3000:]
    # b's commit after the pause was refused, whichever b did first once it woke:
    # - its periodic commit: refused by the broker (fenced) or, when the pause outlasted the call's
    #   own deadline, given up (stuck); either way the range was dropped uncommitted;
    # - the new epoch's release of the range (its final commit): refused by the broker (fenced).
    dropped = "on key range" in b.log() and "dropping it, nothing committed" in b.log()
    release_refused = any(
        "release of key range" in line and "FENCED" in line for line in b.log().splitlines()
    )
    assert dropped or release_refused, b.log()[-3000:]
