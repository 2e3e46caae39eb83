"""The time lag's source: the timestamp of the record at each lagging committed offset, read by one
``assign()``-only consumer in a thread while the snapshot pass finishes (adapters/kafka_snapshot.py).
"""

from __future__ import annotations

import collections
import threading
import time
from typing import Any

from rebalance_advisor.adapters import LIBRDKAFKA_LOG
from rebalance_advisor.domain.snapshot_model import CommittedOffset, PartitionOffsets
from rebalance_advisor.errors import AdvisorError

#: ``max.partition.fetch.bytes`` of the time-lag reader: the broker still returns the whole first
#: record batch at the offset (it does not split batches), so a fetch costs one batch per partition.
RECORD_FETCH_BYTES = 1024
#: ``fetch.queue.backoff.ms`` of the time-lag reader. It keeps at most one record queued per
#: partition (``queued.min.messages=1``), and librdkafka's default 1,000 ms back-off after a
#: "queue full" partition made each partition wait a second for its turn: the demo's 117 lagging
#: offsets took the whole 30 s budget. 0 ms: 0.6 s wall, 0.26 s CPU (10 ms: 0.95 s, 0.18 s CPU).
RECORD_QUEUE_BACKOFF_MS = 0


def _lagging_offsets(
    committed: list[CommittedOffset], partitions: list[PartitionOffsets], isolation: str
) -> dict[tuple[str, int], set[int]]:
    """(topic, partition) -> its committed offsets with lag (log-start <= c < end)."""
    isolated = isolation == "read_committed"
    ends = {
        (p.topic, p.partition): (p.log_start_offset, p.last_stable_offset if isolated and
                                 p.last_stable_offset is not None else p.log_end_offset)
        for p in partitions
    }  # fmt: skip
    lagging: dict[tuple[str, int], set[int]] = {}
    for c in committed:
        start, end = ends.get((c.topic, c.partition), (None, None))
        if end is not None and c.offset < end and (start is None or c.offset >= start):
            lagging.setdefault((c.topic, c.partition), set()).add(c.offset)
    return lagging


class _TimestampReader:
    """Reads the timestamp of the first record at or after each lagging committed offset, in a thread.

    One consumer, ``assign()`` only (it joins no group and commits nothing). :meth:`start` assigns
    every partition with lag at its lowest lagging committed offset (log-start <= c < end; offsets
    of several groups on one partition deduplicated, taken in offset order). A record at offset o
    answers every open offset <= o; a partition with open offsets left is then moved to the next
    one (all such partitions in one call per poll), or paused when none is left. A lagging offset
    costs at most one fetch of one batch. What is not answered within the budget (or has no record:
    compacted away, only aborted transactions) is left out; the time lag then falls back to lag /
    produce rate. The consumer is closed in the reading thread once the answer is handed over.

    Measured at 500 groups / 19,000 partitions (19,103 lagging offsets), load 20-23: reading every
    committed offset while the log offsets were listed (most are at or past the log end) made the
    pass 3.8x one without time lag, against 1.8x for reading the lagging ones afterwards; moving
    partitions one seek at a time to offsets past the log end cost 100 s.
    """

    def __init__(self, conf: dict[str, Any], isolation: str) -> None:
        from confluent_kafka import Consumer

        self.found: dict[tuple[str, int, int], int] = {}
        self.thread: threading.Thread | None = None
        self.lagging: dict[tuple[str, int], set[int]] = {}
        self.read = threading.Event()  # the answer is complete (the consumer may still be closing)
        self.error: BaseException | None = None
        self.consumer = Consumer(
            {
                **conf,
                "group.id": "rebalance-advisor-time-lag",  # never joined or committed: assign() only
                "enable.auto.commit": False,
                "enable.auto.offset.store": False,
                "auto.offset.reset": "error",  # never read from elsewhere than the offset asked for
                "enable.partition.eof": True,
                "isolation.level": isolation,
                "max.partition.fetch.bytes": RECORD_FETCH_BYTES,
                "fetch.wait.max.ms": 10,
                "queued.min.messages": 1,
                "fetch.queue.backoff.ms": RECORD_QUEUE_BACKOFF_MS,
            },
            logger=LIBRDKAFKA_LOG,
        )

    def start(
        self,
        committed: list[CommittedOffset],
        partitions: list[PartitionOffsets],
        isolation: str,
        budget_s: float,
    ) -> None:
        wanted = self.lagging = _lagging_offsets(committed, partitions, isolation)
        pending = {tp: collections.deque(sorted(offsets)) for tp, offsets in wanted.items()}
        self.thread = threading.Thread(
            target=self._run,
            args=(pending, time.monotonic() + budget_s),
            name="snapshot-time-lag",  # not a daemon: the interpreter waits for the close at exit
        )
        self.thread.start()

    def _run(self, pending: dict[tuple[str, int], collections.deque[int]], deadline: float) -> None:
        try:
            self._read(pending, deadline)
        except BaseException as error:  # re-raised in the caller's thread
            self.error = error
        finally:
            self.read.set()
            # Unassigning 19,000 partitions takes the consumer a second or two: the pass does not wait.
            self.consumer.close()

    def _read(self, pending: dict[tuple[str, int], collections.deque[int]], deadline: float) -> None:
        from confluent_kafka import KafkaError, TopicPartition

        consumer, found = self.consumer, self.found
        eof = KafkaError._PARTITION_EOF
        if pending:
            consumer.assign([TopicPartition(t, p, offsets[0]) for (t, p), offsets in pending.items()])
        move: set[tuple[str, int]] = set()  # partitions whose open offsets moved on
        while pending and (left := deadline - time.monotonic()) > 0:
            done: list[tuple[str, int]] = []
            for message in consumer.consume(num_messages=10_000, timeout=min(0.1, left)):
                key = (message.topic(), message.partition())
                offsets = pending.get(key)
                if not offsets:
                    continue  # answered already (a record fetched before the pause took effect)
                error = message.error()
                if error is None:
                    offset = message.offset()
                    if offset < offsets[0]:
                        continue  # before the open offset (a batch is fetched from its start)
                    stamp = message.timestamp()[1]
                    while offsets and offsets[0] <= offset:
                        found[(key[0], key[1], offsets.popleft())] = stamp
                elif error.code() == eof:
                    offsets.clear()  # no record at or after the open offsets (yet)
                elif not error.retriable():
                    offsets.popleft()  # e.g. out of range: the log start passed it meanwhile
                else:
                    continue
                if offsets:
                    move.add(key)
                else:
                    del pending[key]
                    move.discard(key)
                    done.append(key)
            if done:
                consumer.pause([TopicPartition(t, p) for t, p in done])
            if move:
                moved = [key for key in move if key in pending]
                consumer.incremental_unassign([TopicPartition(t, p) for t, p in moved])
                consumer.incremental_assign([TopicPartition(t, p, pending[(t, p)][0]) for t, p in moved])
                move.clear()

    def result(self, committed: list[CommittedOffset]) -> dict[tuple[str, str, int], int]:
        """(group, topic, partition) -> timestamp (ms) of the first record at or after the committed
        offset, for every committed offset with lag (log-start <= c < end); waits for the reads."""
        lagging = self.lagging
        if self.thread is not None:
            self.read.wait()
        if self.error is not None:
            raise self.error
        return {
            (c.group_id, c.topic, c.partition): stamp
            for c in committed
            if c.offset in lagging.get((c.topic, c.partition), ())
            and (stamp := self.found.get((c.topic, c.partition, c.offset))) is not None
        }


def read_record_timestamps(
    conf: dict[str, Any],
    committed: list[CommittedOffset],
    partitions: list[PartitionOffsets],
    isolation: str,
    budget_s: float,
) -> dict[tuple[str, str, int], int]:
    """(group, topic, partition) -> timestamp (ms) of the first record at or after the committed
    offset, for every committed offset with lag, as far as ``budget_s`` allows (:class:`_TimestampReader`)."""
    try:
        reader = _TimestampReader(conf, isolation)
    except Exception as error:  # a property the admin client took but a consumer refuses
        raise AdvisorError(f"invalid Kafka client config for the time-lag reader: {error}") from error
    reader.start(committed, partitions, isolation, budget_s)
    return reader.result(committed)
