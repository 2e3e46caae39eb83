"""Client helper for manual-assign (``consumer.assign()``) consumers: follow published assignments safely.

    consumer = AssignedConsumer({"bootstrap.servers": ...}, "orders-group", "worker-1")
    while running:
        message = consumer.poll(1.0)
        if message is not None:
            handle(message)
        consumer.commit()          # e.g. every N messages or seconds
    consumer.close()               # commits and releases what it holds

A background thread follows this member's record on the assignment topic. New epochs are applied
inside ``poll()``/``commit()``, on the caller's thread: lost partitions are released (processed
position committed with a ``released`` mark, then unassigned) and gained ones are claimed only
when their previous owner released them, or after ``takeover_timeout`` (a dead owner). Every
commit first reads the partition's mark and is refused when another member took the partition at
our epoch or a newer one. See README, "Static assignments: the handover protocol".
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Mapping
from typing import Any

from rebalance_advisor.adapters import assignment_topic
from rebalance_advisor.adapters.assignment_topic import AssignmentRecord, MalformedRecord, TopicPartitionKey
from rebalance_advisor.errors import AdvisorError
from rebalance_advisor.publish.handover import (
    OWNED,
    RELEASED,
    Claim,
    OwnerMark,
    claim_decision,
    commit_offset,
    decode_mark,
    may_commit,
    plan_handover,
)

log = logging.getLogger(__name__)

_EARLIEST = {"earliest", "smallest", "beginning"}


class AssignmentFollower(threading.Thread):
    """Follows the assignment topic in the background and keeps this member's latest valid record."""

    def __init__(self, config: Mapping[str, Any], topic: str, group_id: str, member_id: str) -> None:
        super().__init__(name=f"assignments-{member_id}", daemon=True)
        self._config, self._topic = dict(config), topic
        self._key = (group_id, member_id)
        self._lock = threading.Lock()
        self._latest: AssignmentRecord | None = None
        self.malformed = 0
        self.ready = threading.Event()  # set once the topic was read to its end
        self._halt = threading.Event()

    def latest(self) -> AssignmentRecord | None:
        with self._lock:
            return self._latest

    def stop(self) -> None:
        self._halt.set()

    def _offer(self, key: bytes | None, value: bytes | None, where: str) -> None:
        try:
            if assignment_topic.decode_key(key) != self._key:
                return
            record = assignment_topic.decode_record(key, value)
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

    def run(self) -> None:
        from confluent_kafka import KafkaError, TopicPartition

        consumer = assignment_topic.reader_consumer(self._config)
        try:
            pending: set[int] | None = None
            while not self._halt.is_set():
                if pending is None:
                    metadata = consumer.list_topics(self._topic, timeout=5).topics.get(self._topic)
                    if metadata is None or metadata.error is not None or not metadata.partitions:
                        self.ready.set()  # no topic yet: nothing published, the assignment is empty
                        self._halt.wait(1.0)
                        continue
                    pending = set(metadata.partitions)
                    consumer.assign([TopicPartition(self._topic, p, -2) for p in pending])
                message = consumer.poll(0.2)
                if message is None:
                    continue
                if message.error():
                    if message.error().code() == KafkaError._PARTITION_EOF:
                        pending.discard(message.partition())
                        if not pending:
                            self.ready.set()
                    else:
                        log.warning("assignment topic %s: %s", self._topic, message.error())
                    continue
                self._offer(
                    message.key(), message.value(), f"{self._topic}-{message.partition()}@{message.offset()}"
                )
        except Exception:  # noqa: BLE001 - the consumer thread must log, not die silently
            log.exception("assignment follower for %s/%s stopped", *self._key)
        finally:
            consumer.close()


class AssignedConsumer:
    """A confluent-kafka consumer whose partitions come from the advisor's published assignments.

    ``poll()`` returns only messages of partitions this member owns; positions of returned messages
    count as processed at the next ``poll()``/``commit()``/``close()`` (at-least-once, like
    auto-commit). ``takeover_timeout`` must exceed the longest pause between two ``poll()`` calls.
    """

    def __init__(
        self,
        config: Mapping[str, Any],
        group_id: str,
        member_id: str,
        *,
        topic: str = assignment_topic.DEFAULT_TOPIC,
        takeover_timeout: float = 60.0,
        check_interval: float = 0.25,
        request_timeout: float = 10.0,
        ready_timeout: float = 30.0,
    ) -> None:
        from confluent_kafka import Consumer

        if config.get("group.id", group_id) != group_id:
            raise AdvisorError(f"config has group.id={config['group.id']!r} but the group is {group_id!r}")
        self.group_id, self.member_id = group_id, member_id
        self.takeover_timeout, self.check_interval = takeover_timeout, check_interval
        self.request_timeout = request_timeout
        self._reset_earliest = str(config.get("auto.offset.reset", "latest")) in _EARLIEST
        self._consumer = Consumer(
            {**config, "group.id": group_id, "enable.auto.commit": False, "enable.auto.offset.store": False}
        )
        self.epoch = 0
        self.assigned: frozenset[TopicPartitionKey] = frozenset()  # what the latest known epoch gives us
        self._owned: dict[TopicPartitionKey, int] = {}  # claimed and assigned -> processed position
        self._committed: dict[TopicPartitionKey, int] = {}  # what we last wrote
        self._pending: dict[TopicPartitionKey, float] = {}  # gained, not yet claimed -> waiting since
        self._next_check = 0.0
        self._follower = AssignmentFollower(config, topic, group_id, member_id)
        self._follower.start()
        if not self._follower.ready.wait(ready_timeout):
            self.close(release=False)
            raise AdvisorError(f"could not read assignment topic {topic} within {ready_timeout:.0f} s")
        self._maintain()

    # -- the public API --------------------------------------------------------------------------

    @property
    def owned(self) -> frozenset[TopicPartitionKey]:
        """Partitions this member consumes now (claimed); ``assigned`` minus those still waiting."""
        return frozenset(self._owned)

    @property
    def malformed_records(self) -> int:
        return self._follower.malformed

    def poll(self, timeout: float = 1.0):
        """The next message of an owned partition, or None; applies new epochs and claims first."""
        deadline = time.monotonic() + timeout
        while True:
            self._maintain()
            remaining = deadline - time.monotonic()
            message = self._consumer.poll(max(min(remaining, self.check_interval), 0))
            if message is not None:
                if message.error():
                    log.warning("consumer error: %s", message.error())
                else:
                    tp = (message.topic(), message.partition())
                    if tp in self._owned:
                        self._owned[tp] = message.offset() + 1
                        return message
            if time.monotonic() >= deadline:
                return None

    def commit(self) -> dict[TopicPartitionKey, int]:
        """Commit processed positions of owned partitions (with our mark); returns what was written.

        Partitions another member took over are not committed: they are dropped instead.
        """
        self._maintain()
        changed = {tp: pos for tp, pos in self._owned.items() if self._committed.get(tp) != pos}
        written, refused = self._checked_commit(changed, OWNED)
        if refused:
            self._drop(refused)
        return written

    def close(self, release: bool = True) -> None:
        """Commit and release what this member holds (so a successor need not wait), then stop."""
        try:
            if release and self._owned:
                self._release(list(self._owned))
        finally:
            self._follower.stop()
            self._follower.join(5)
            self._consumer.close()

    # -- epochs, claims, releases -----------------------------------------------------------------

    def _maintain(self) -> None:
        record = self._follower.latest()
        if record is not None and record.epoch > self.epoch:
            self._apply(record)
        if self._pending and time.monotonic() >= self._next_check:
            self._next_check = time.monotonic() + self.check_interval
            self._try_claims()

    def _apply(self, record: AssignmentRecord) -> None:
        new = frozenset(record.partitions)
        change = plan_handover(self.assigned, new)
        log.info(
            "%s: epoch %d -> %d (plan %s): keep %d, gain %d, lose %d",
            self.member_id, self.epoch, record.epoch, record.plan_id, len(change.kept), len(change.gained), len(change.lost),
        )  # fmt: skip
        self.epoch, self.assigned = record.epoch, new
        for tp in change.lost:
            self._pending.pop(tp, None)
        lost_owned = [tp for tp in change.lost if tp in self._owned]
        if lost_owned:
            self._release(lost_owned)
        now = time.monotonic()
        for tp in change.gained:
            self._pending.setdefault(tp, now)
        self._next_check = 0.0

    def _read_marks(
        self, tps: list[TopicPartitionKey]
    ) -> dict[TopicPartitionKey, tuple[int | None, OwnerMark | None]]:
        from confluent_kafka import KafkaException, TopicPartition

        try:
            result = self._consumer.committed(
                [TopicPartition(t, p) for t, p in tps], timeout=self.request_timeout
            )
        except KafkaException as error:
            raise AdvisorError(f"reading committed offsets of group {self.group_id}: {error}") from error
        marks = {}
        for item in result:
            if item.error:
                raise AdvisorError(f"reading committed offset of {item.topic}-{item.partition}: {item.error}")
            offset = item.offset if item.offset >= 0 else None
            marks[(item.topic, item.partition)] = (offset, decode_mark(item.metadata))
        return marks

    def _write(self, offsets: dict[TopicPartitionKey, int], state: str) -> None:
        from confluent_kafka import KafkaException, TopicPartition

        metadata = OwnerMark(self.member_id, self.epoch, state).encode()
        batch = [TopicPartition(t, p, off, metadata=metadata) for (t, p), off in offsets.items()]
        try:
            result = self._consumer.commit(offsets=batch, asynchronous=False) or []
        except KafkaException as error:
            raise AdvisorError(f"commit for group {self.group_id} failed: {error}") from error
        for item in result:
            if item.error:
                raise AdvisorError(f"commit of {item.topic}-{item.partition} failed: {item.error}")
        self._committed.update(offsets)

    def _checked_commit(
        self, positions: dict[TopicPartitionKey, int], state: str
    ) -> tuple[dict[TopicPartitionKey, int], list[TopicPartitionKey]]:
        """Commit positions unless another member took the partition over: (written, refused)."""
        if not positions:
            return {}, []
        marks = self._read_marks(list(positions))
        allowed, refused = {}, []
        for tp, position in positions.items():
            committed, mark = marks[tp]
            if may_commit(self.member_id, self.epoch, mark):
                allowed[tp] = commit_offset(position, committed)
            else:
                refused.append(tp)
                log.warning(
                    "%s: not committing %s-%d: %s took it at epoch %d (ours: %d)",
                    self.member_id, tp[0], tp[1], mark.member, mark.epoch, self.epoch,
                )  # fmt: skip
        if allowed:
            self._write(allowed, state)
        return allowed, refused

    def _drop(self, tps: list[TopicPartitionKey]) -> None:
        """Stop consuming partitions someone else now holds; still-assigned ones wait again (as stale)."""
        from confluent_kafka import TopicPartition

        self._consumer.incremental_unassign([TopicPartition(t, p) for t, p in tps])
        for tp in tps:
            del self._owned[tp]
            if tp in self.assigned:
                self._pending[tp] = time.monotonic()

    def _release(self, tps: list[TopicPartitionKey]) -> None:
        """Stop fetching first, then commit the processed position with a ``released`` mark."""
        from confluent_kafka import TopicPartition

        positions = {tp: self._owned.pop(tp) for tp in tps}
        self._consumer.incremental_unassign([TopicPartition(t, p) for t, p in tps])
        try:
            written, _ = self._checked_commit(positions, RELEASED)
            log.info("%s: released %s at epoch %d", self.member_id, _names(written), self.epoch)
        except AdvisorError as error:  # the successor takes over after its timeout instead
            log.error("%s: release of %s failed: %s", self.member_id, _names(tps), error)

    def _try_claims(self) -> None:
        from confluent_kafka import TopicPartition

        tps = sorted(self._pending)
        try:
            marks = self._read_marks(tps)
        except AdvisorError as error:
            log.warning("%s: cannot check partitions to claim yet: %s", self.member_id, error)
            return
        claims: dict[TopicPartitionKey, int] = {}
        now = time.monotonic()
        for tp in tps:
            committed, mark = marks[tp]
            decision = claim_decision(
                self.member_id, self.epoch, mark, now - self._pending[tp], self.takeover_timeout
            )
            if decision in (Claim.TAKE, Claim.TAKE_OVER):
                start = committed if committed is not None else self._start_offset(tp)
                if start is None:
                    continue
                claims[tp] = start
                if decision is Claim.TAKE_OVER:
                    log.warning(
                        "%s: taking over %s-%d from %s (epoch %d): no release within %.1f s",
                        self.member_id, tp[0], tp[1], mark.member, mark.epoch, self.takeover_timeout,
                    )  # fmt: skip
        if not claims:
            return
        try:
            self._write(claims, OWNED)
        except AdvisorError as error:
            log.warning("%s: claim failed, will retry: %s", self.member_id, error)
            return
        self._consumer.incremental_assign([TopicPartition(t, p, off) for (t, p), off in claims.items()])
        for tp, offset in claims.items():
            self._owned[tp] = offset
            del self._pending[tp]
        log.info("%s: claimed %s at epoch %d", self.member_id, _names(claims), self.epoch)

    def _start_offset(self, tp: TopicPartitionKey) -> int | None:
        """Where to start a never-committed partition, by ``auto.offset.reset`` (default latest)."""
        from confluent_kafka import KafkaException, TopicPartition

        try:
            low, high = self._consumer.get_watermark_offsets(
                TopicPartition(*tp), timeout=self.request_timeout
            )
        except KafkaException as error:
            log.warning("%s: no offsets for %s-%d yet: %s", self.member_id, tp[0], tp[1], error)
            return None
        return low if self._reset_earliest else high


def _names(tps) -> str:
    return ", ".join(f"{t}-{p}" for t, p in sorted(tps)) or "nothing"
