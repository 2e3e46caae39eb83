"""Committed-offset reads for claims: a pool of consumers, each lent to one read at a time.

Why a pool and not one shared consumer: librdkafka answers a consumer's ``committed()`` calls one
after the other, and a ``read_committed`` consumer asks for stable offsets, retrying
``UNSTABLE_OFFSET_COMMIT`` until its timeout while any transaction holds offsets of the partition.
Measured on the local broker (docs/protocol/liveness.md): a read of a partition with an open
transaction timed out after its 4 s, and a read of another partition on the same consumer waited
3.8 s behind it; on a second consumer 4 ms. A ``read_uncommitted`` consumer asks without
``require_stable`` and is answered at once with the last committed offset (1 ms), three threads
on it at once in 2-23 ms.

Not the AdminClient's ``list_consumer_group_offsets``: librdkafka's OffsetFetch handler asks the
client's consumer group to find the coordinator again after NOT_COORDINATOR, and an AdminClient
has none (a crash seen with confluent-kafka 2.16.1, range_member.committed_with_metadata).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Mapping
from typing import Any

from confluent_kafka import Consumer, KafkaError, KafkaException, TopicPartition

log = logging.getLogger(__name__)
#: timeouts in a row after which a reader is dropped even though no other reader was answered
_WEDGED_AFTER = 3


class OffsetReaders:
    """Consumers of one group that read committed offsets (they never poll).

    ``stable``: ``read_committed`` (an answer waits until no transaction holds the partition's
    offsets; the read after a fence) or ``read_uncommitted`` (the last committed offset at once;
    the read that decides whether to fence, where the mark is only a hint). Each read borrows an
    idle consumer or makes one, so a slow read holds up no other. A consumer whose read timed out
    while another consumer's read was answered, or that timed out ``_WEDGED_AFTER`` times in a
    row, is dropped (its coordinator connection is wedged); otherwise it is kept: when no reader
    is answered (a coordinator loading after a broker restart), new ones would have to find the
    coordinator again, which on a loaded machine timed out as well, for minutes.
    """

    def __init__(
        self,
        config: Mapping[str, Any],
        stable: bool,
        name: str,
        keep: int = 4,
        make_consumer: Callable[[dict[str, Any]], Any] = Consumer,
    ) -> None:
        self._config = {
            **config,
            "enable.auto.commit": False,
            "enable.auto.offset.store": False,
            "isolation.level": "read_committed" if stable else "read_uncommitted",
        }
        self._name, self._keep, self._make_consumer = name, keep, make_consumer
        self._idle: list[Consumer] = []
        self._lock = threading.Lock()
        self._closed = False
        self._answered_at = 0.0  # when a read of this pool was last answered (monotonic)
        self._timeouts: dict[int, int] = {}  # id(consumer) -> its timeouts in a row

    def committed(self, partitions: list[TopicPartition], timeout: float) -> list[TopicPartition]:
        """``Consumer.committed`` on a consumer of its own; raises what it raises."""
        return self._with(lambda consumer: consumer.committed(partitions, timeout=timeout), offsets=True)

    def ends(self, topic: str, partitions: list[int], timeout: float) -> dict[int, int]:
        """End offsets of ``topic``'s partitions; a stable reader's end is the last stable offset."""
        return self._with(
            lambda consumer: {
                p: consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=timeout, cached=False)[1]
                for p in partitions
            }
        )

    def _with(self, call: Any, offsets: bool = False) -> Any:
        """Run ``call`` on a borrowed consumer. Only an answered offset read (``offsets``) counts as
        the coordinator answering: a wedged coordinator connection was seen to leave watermark
        queries (to the partition leader) answered."""
        consumer = self._borrow()
        started = time.monotonic()
        try:
            result = call(consumer)
        except KafkaException as error:
            kafka_error = error.args[0] if error.args else None
            if isinstance(kafka_error, KafkaError) and kafka_error.code() == KafkaError._TIMED_OUT:
                self._timed_out(consumer, started)
            else:
                self._give_back(consumer)
            raise
        except BaseException:
            self._drop(consumer)
            raise
        if offsets:
            with self._lock:
                self._answered_at = time.monotonic()
                self._timeouts.pop(id(consumer), None)
        self._give_back(consumer)
        return result

    def _timed_out(self, consumer: Consumer, started: float) -> None:
        with self._lock:
            count = self._timeouts.get(id(consumer), 0) + 1
            self._timeouts[id(consumer)] = count
            wedged = self._answered_at > started or count >= _WEDGED_AFTER
        if wedged:
            log.warning("%s: an offset read timed out: replacing that reader", self._name)
            self._drop(consumer)
        else:
            self._give_back(consumer)

    def _drop(self, consumer: Consumer) -> None:
        with self._lock:
            self._timeouts.pop(id(consumer), None)
        _close_later(consumer)

    def _borrow(self) -> Consumer:
        with self._lock:
            if self._closed:
                raise RuntimeError(f"{self._name}: offset readers closed")
            if self._idle:
                return self._idle.pop()
        return self._make_consumer(self._config)

    def _give_back(self, consumer: Consumer) -> None:
        with self._lock:
            if not self._closed and len(self._idle) < self._keep:
                self._idle.append(consumer)
                return
        self._drop(consumer)

    def close(self) -> None:
        """Close the idle readers; those lent out close when their read ends."""
        with self._lock:
            self._closed = True
            idle, self._idle = self._idle, []
        for consumer in idle:
            self._drop(consumer)


def _close_later(consumer: Consumer) -> None:
    """Close off the caller's thread: closing a consumer whose connection is wedged blocks."""
    threading.Thread(target=consumer.close, name="offset-reader-close", daemon=True).start()
