"""The assignment follower: one thread per member that reads the assignment topic and keeps the
member's latest valid record (docs/protocol/threads.md)."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Mapping
from typing import Any

from confluent_kafka import Consumer, KafkaError, KafkaException, TopicPartition

from rebalance_advisor_client.access import Grant, refusal
from rebalance_advisor_client.assignment_records import (
    AssignmentRecord,
    MalformedRecord,
    UnsupportedVersion,
    decode_key,
    decode_record,
    reader_settings,
)

log = logging.getLogger(__name__)


class AssignmentFollower(threading.Thread):
    """Follows the assignment topic in the background and keeps this member's latest valid record.

    A record of a newer format version counts as an empty assignment at its epoch (``refused``):
    this helper cannot honour it, so it releases everything rather than consume partitions whole.
    """

    def __init__(
        self,
        config: Mapping[str, Any],
        topic: str,
        group_id: str,
        member_id: str,
        make_consumer: Callable[[dict[str, Any]], Any] = Consumer,
    ) -> None:
        super().__init__(name=f"assignments-{member_id}", daemon=True)
        self._config, self._topic, self._make_consumer = dict(config), topic, make_consumer
        self._key = (group_id, member_id)
        self._lock = threading.Lock()
        self._latest: AssignmentRecord | None = None
        self.malformed = 0
        self.ready = threading.Event()  # set once the topic was read to its end
        #: the missing grant when the broker refuses to let this member read the topic (then ready)
        self.refused: str | None = None
        self._halt = threading.Event()
        #: next offset to read per partition of the topic (empty: not assigned, or topic missing)
        self._positions: dict[int, int] = {}
        self._read_to = threading.Condition(self._lock)
        #: the run's state: partitions not yet read to their end, partitions assigned (None: the
        #: topic is not assigned), whether its absence was logged, when to look for a deletion next
        self._reading: set[int] | None = None
        self._assigned: set[int] | None = None
        self._missing_logged = False
        self._next_check = 0.0

    def latest(self) -> AssignmentRecord | None:
        with self._lock:
            return self._latest

    def partitions(self) -> list[int]:
        """The topic's partitions this follower reads (empty while the topic is missing)."""
        with self._lock:
            return sorted(self._positions)

    def caught_up(self, ends: Mapping[int, int], timeout: float) -> bool:
        """Wait until every record below ``ends`` was read (and offered); False after ``timeout``.

        With ends queried after some moment, ``latest()`` then knows every epoch published before
        it: a member resumed from a pause has not read the epochs of its pause yet
        (docs/protocol/liveness.md, "Stale claims").
        """
        with self._read_to:
            return self._read_to.wait_for(
                lambda: all(self._positions.get(p, end) >= end for p, end in ends.items()), timeout
            )

    def _note_positions(self, consumer: Any, partitions: set[int] | None) -> None:
        if not partitions:
            with self._read_to:
                self._positions = {}
            return
        try:
            found = consumer.position([TopicPartition(self._topic, p) for p in sorted(partitions)])
        except KafkaException:
            return
        with self._read_to:
            self._positions = {tp.partition: tp.offset for tp in found}
            self._read_to.notify_all()

    def stop(self) -> None:
        self._halt.set()

    def _offer(self, key: bytes | None, value: bytes | None, where: str) -> None:
        try:
            if decode_key(key) != self._key:
                return
            record = decode_record(key, value)
        except UnsupportedVersion as error:
            if error.epoch is None:
                self.malformed += 1
                log.error("ignoring assignment record at %s: %s", where, error)
                return
            log.error("refusing assignment record at %s (releasing everything instead): %s", where, error)
            record = AssignmentRecord(error.group, error.member, error.epoch, "unsupported-version", (), "")
        except MalformedRecord as error:
            self.malformed += 1
            log.warning(
                "ignoring malformed assignment record at %s (keeping the current assignment): %s",
                where,
                error,
            )
            return
        with self._lock:
            current = self._latest
            if current is not None and record.epoch <= current.epoch:
                if record != current:
                    log.warning(
                        "ignoring assignment record at %s: epoch %d is not newer than %d",
                        where,
                        record.epoch,
                        current.epoch,
                    )
                return
            self._latest = record

    def _topic_exists(self, consumer: Any) -> bool:
        try:
            metadata = consumer.list_topics(self._topic, timeout=5).topics.get(self._topic)
        except KafkaException:
            return True  # broker unreachable: not evidence of a deletion
        return metadata is not None and metadata.error is None and bool(metadata.partitions)

    def _refused(self, error: KafkaError | None) -> bool:
        """Keep the missing grant (and stop) when the broker refuses this member the topic."""
        self.refused = refusal(error, Grant("READ", "Topic", self._topic))
        if self.refused:
            log.error("%s/%s: assignment topic: %s", *self._key, self.refused)
            self.ready.set()
        return self.refused is not None

    def run(self) -> None:
        consumer = self._make_consumer(reader_settings(self._config))
        self._next_check = time.monotonic() + 2.0
        try:
            while not self._halt.is_set() and self._step(consumer):
                pass
        except Exception:  # noqa: BLE001 - the consumer thread must log, not die silently
            log.exception("assignment follower for %s/%s stopped", *self._key)
        finally:
            consumer.close()

    def _step(self, consumer: Any) -> bool:
        """One pass: assign the topic when it (re)appears, read one record; False: stop (refused)."""
        self._note_positions(consumer, self._assigned)
        self._check_deleted(consumer)
        if self._reading is None:
            assigned = self._assign(consumer)
            if assigned is None:
                return False
            if not assigned:
                return True
        message = consumer.poll(0.2)
        if message is None:
            return True
        if message.error():
            return self._on_error(consumer, message)
        self._offer(message.key(), message.value(), f"{self._topic}-{message.partition()}@{message.offset()}")
        return True

    def _check_deleted(self, consumer: Any) -> None:
        """Every 2 s while reading: was the topic deleted? (Its partitions report nothing then.)"""
        if self._reading is None or time.monotonic() < self._next_check:
            return
        self._next_check = time.monotonic() + 2.0
        if not self._topic_exists(consumer):
            self._deleted(consumer)
            self._missing_logged = True

    def _deleted(self, consumer: Any) -> None:
        log.warning("assignment topic %s was deleted: keeping the current assignment", self._topic)
        consumer.unassign()
        self._reading = self._assigned = None

    def _assign(self, consumer: Any) -> bool | None:
        """Read the topic's partitions from their start: True once assigned, False while the topic is
        missing or its metadata unreadable (the current assignment stays), None when refused."""
        try:
            metadata = consumer.list_topics(self._topic, timeout=5).topics.get(self._topic)
        except KafkaException as error:
            log.warning("assignment topic %s: cannot read metadata: %s", self._topic, error)
            self._halt.wait(1.0)
            return False
        if metadata is not None and self._refused(metadata.error):
            return None
        if metadata is None or metadata.error is not None or not metadata.partitions:
            if not self._missing_logged:
                log.warning(
                    "assignment topic %s does not exist (not published yet, or deleted): "
                    "keeping the current assignment until it is back",
                    self._topic,
                )
                self._missing_logged = True
            self.ready.set()  # nothing published: the assignment is empty (or unchanged)
            self._halt.wait(1.0)
            return False
        self._missing_logged = False
        self._reading, self._assigned = set(metadata.partitions), set(metadata.partitions)
        consumer.assign([TopicPartition(self._topic, p, -2) for p in self._reading])
        return True

    def _on_error(self, consumer: Any, message: Any) -> bool:
        """An error the reader's poll returned; False: stop (the broker refused the topic)."""
        error = message.error()
        if error.code() == KafkaError._PARTITION_EOF:
            self._reading.discard(message.partition())
            if not self._reading:
                self.ready.set()
        elif error.code() == KafkaError.GROUP_AUTHORIZATION_FAILED:
            pass  # the reader's group is never joined nor committed to: it needs no grant
        elif self._refused(error):
            return False
        elif error.code() in (KafkaError.UNKNOWN_TOPIC_OR_PART, KafkaError._UNKNOWN_TOPIC):
            self._deleted(consumer)
        else:
            log.warning("assignment topic %s: %s", self._topic, error)
        return True
