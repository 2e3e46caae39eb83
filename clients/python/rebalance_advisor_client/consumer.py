"""Client helper for manual-assign (``consumer.assign()``) consumers: follow published assignments safely.

    consumer = AssignedConsumer({"bootstrap.servers": ...}, "orders-group", "worker-1")
    while running:
        message = consumer.poll(1.0)
        if message is not None:
            consumer.produce(message, "orders-out", transform(message.value()))  # optional
        consumer.commit()          # e.g. every N messages or seconds
    consumer.close()               # commits and releases what it holds

A background thread follows this member's record on the assignment topic. New epochs are applied
inside ``poll()``/``commit()``, on the caller's thread: lost partitions are released (processed
position committed with a ``released`` mark, then unassigned) and gained ones are claimed when
their previous owner released them, or after ``takeover_timeout`` (a dead owner). Each claim runs
on a thread of its own (:class:`_ClaimRunner`): the caller's thread only starts claims and applies
finished ones (assign at the claimed offset), so one partition's slow claim delays nothing else.

Fenced mode (default): each claimed partition has its own transactional producer; claiming it
fences every earlier holder at the broker, offsets and outputs commit in one transaction per
partition. Unfenced mode (``fenced=False``): commit metadata marks are read before every write.
docs/protocol/ (the protocol; the threads: docs/protocol/threads.md).
"""

from __future__ import annotations

import logging
import threading
import time
import uuid
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from confluent_kafka import Consumer, KafkaError, KafkaException, TopicPartition
from confluent_kafka.admin import AdminClient, OffsetSpec

from rebalance_advisor_client.access import Grant, error_code, refusal
from rebalance_advisor_client.assignment_records import (
    DEFAULT_TOPIC,
    AssignmentRecord,
    MalformedRecord,
    TopicPartitionKey,
    UnsupportedVersion,
    connection_settings,
    decode_key,
    decode_record,
    reader_settings,
)
from rebalance_advisor_client.capacity_report import UtilisationMeter
from rebalance_advisor_client.errors import AccessRefused, ClientError
from rebalance_advisor_client.fencing import (
    FencingToken,
    PartitionTransaction,
    classify,
    probe_transactions,
    transactional_id,
)
from rebalance_advisor_client.handover_rules import (
    OWNED,
    RELEASED,
    Claim,
    Claimant,
    OwnerMark,
    claim_decision,
    claim_start,
    commit_offset,
    decode_mark,
    may_commit,
    plan_handover,
)
from rebalance_advisor_client.offset_reads import OffsetReaders
from rebalance_advisor_client.range_set import RangeSet

log = logging.getLogger(__name__)

_EARLIEST = {"earliest", "smallest", "beginning"}
Marks = dict[TopicPartitionKey, tuple[int | None, OwnerMark | None]]
_NOT_TRIED = object()  # _transaction_failed: no abort was tried yet
#: poll()'s wait slice while claims run: how soon a finished claim is applied (at most)
_CLAIM_APPLY_S = 0.02
#: a fenced claim whose mark read is older than this when it is about to fence reads it again (the
#: process was paused in between); wider than mark_read_bound, which guards unfenced writes, because
#: a fenced claim's later reads are exact and a loaded machine often takes 0.5 s between two steps
_FENCE_READ_BOUND_S = 2.0


class AssignmentFollower(threading.Thread):
    """Follows the assignment topic in the background and keeps this member's latest valid record.

    A record of a newer format version counts as an empty assignment at its epoch (``refused``):
    this helper cannot honour it, so it releases everything rather than consume partitions whole.
    """

    def __init__(self, config: Mapping[str, Any], topic: str, group_id: str, member_id: str) -> None:
        super().__init__(name=f"assignments-{member_id}", daemon=True)
        self._config, self._topic = dict(config), topic
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

    def _note_positions(self, consumer: Consumer, partitions: set[int] | None) -> None:
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

    def _topic_exists(self, consumer: Consumer) -> bool:
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
        consumer = Consumer(reader_settings(self._config))
        missing_logged = False
        next_check = time.monotonic() + 2.0
        try:
            pending: set[int] | None = None
            assigned: set[int] | None = None
            while not self._halt.is_set():
                self._note_positions(consumer, assigned)
                if pending is not None and time.monotonic() >= next_check:
                    next_check = time.monotonic() + 2.0
                    if not self._topic_exists(consumer):
                        log.warning(
                            "assignment topic %s was deleted: keeping the current assignment", self._topic
                        )
                        consumer.unassign()
                        pending = assigned = None
                        missing_logged = True
                if pending is None:
                    try:
                        metadata = consumer.list_topics(self._topic, timeout=5).topics.get(self._topic)
                    except KafkaException as error:
                        log.warning("assignment topic %s: cannot read metadata: %s", self._topic, error)
                        self._halt.wait(1.0)
                        continue
                    if metadata is not None and self._refused(metadata.error):
                        return
                    if metadata is None or metadata.error is not None or not metadata.partitions:
                        if not missing_logged:
                            log.warning(
                                "assignment topic %s does not exist (not published yet, or deleted): "
                                "keeping the current assignment until it is back",
                                self._topic,
                            )
                            missing_logged = True
                        self.ready.set()  # nothing published: the assignment is empty (or unchanged)
                        self._halt.wait(1.0)
                        continue
                    missing_logged = False
                    pending, assigned = set(metadata.partitions), set(metadata.partitions)
                    consumer.assign([TopicPartition(self._topic, p, -2) for p in pending])
                message = consumer.poll(0.2)
                if message is None:
                    continue
                error = message.error()
                if error:
                    if error.code() == KafkaError._PARTITION_EOF:
                        pending.discard(message.partition())
                        if not pending:
                            self.ready.set()
                    elif error.code() == KafkaError.GROUP_AUTHORIZATION_FAILED:
                        pass  # the reader's group is never joined nor committed to: it needs no grant
                    elif self._refused(error):
                        return
                    elif error.code() in (KafkaError.UNKNOWN_TOPIC_OR_PART, KafkaError._UNKNOWN_TOPIC):
                        log.warning(
                            "assignment topic %s was deleted: keeping the current assignment", self._topic
                        )
                        consumer.unassign()
                        pending = assigned = None
                    else:
                        log.warning("assignment topic %s: %s", self._topic, error)
                    continue
                self._offer(
                    message.key(), message.value(), f"{self._topic}-{message.partition()}@{message.offset()}"
                )
        except Exception:  # noqa: BLE001 - the consumer thread must log, not die silently
            log.exception("assignment follower for %s/%s stopped", *self._key)
        finally:
            consumer.close()


@dataclass
class _Held:
    """A partition this instance claimed and consumes."""

    claimed_at: int  # assignment epoch of the claim: commits and releases are checked against it
    position: int  # next offset to process
    committed: int  # last offset this instance committed (the claim start at first)
    txn: PartitionTransaction | None  # fenced mode
    paused: bool = False  # fenced mode: a commit waits to be retried; no records are returned


@dataclass(frozen=True)
class _ClaimInput:
    """What a claim thread needs, taken on the caller's thread when the claim starts."""

    tp: TopicPartitionKey
    who: Claimant  # member, instance, the epoch claimed at, fenced at that epoch
    waited: float  # since the partition was gained (for the takeover timeout)
    consumer: Consumer  # the consumer of that moment (a wedged one may be replaced meanwhile)
    txn: PartitionTransaction | None  # fenced: the producer made ahead, if any
    remembered: int | None  # unfenced: our position when a commit was last refused
    group_metadata: Any  # fenced: the consumer's group metadata for the claim transaction


@dataclass
class _ClaimOutcome:
    """A finished claim, applied on the caller's thread; ``start`` None: not claimed this time."""

    tp: TopicPartitionKey
    epoch: int
    start: int | None = None
    txn: PartitionTransaction | None = None  # claimed: its producer; not claimed: a spare one
    took: str = ""
    again: bool = False  # check again at once (a newer epoch, a stale read), not after check_interval
    #: AccessRefused (raised on the caller's thread), a KafkaException (the group coordinator did not
    #: answer), or any other error (logged there; the claim is tried again)
    error: BaseException | None = None
    answered: bool = False  # the group coordinator answered a read (KafkaException: it did not)


class _ClaimRunner:
    """Claims in flight, one thread per partition; finished ones wait for the caller's thread.

    A claim is a few blocking round trips (mark read, ``init_transactions``, settle read, the claim
    transaction), each up to the request timeout when a broker or a previous owner misbehaves. On
    the caller's thread one partition's slow claim held up the member's other handovers and its
    commits (the slowest normal handovers of the fenced torture runs); here it holds up nothing.
    """

    def __init__(self, member_id: str) -> None:
        self._member_id = member_id
        self._lock = threading.Lock()
        self._running: dict[TopicPartitionKey, threading.Thread] = {}
        self._done: list[_ClaimOutcome] = []
        self._closed = False
        #: set by close(): claims stop at their next step and give their producers up
        self.cancelled = threading.Event()

    def running(self) -> bool:
        with self._lock:
            return bool(self._running) or bool(self._done)

    def busy(self, tp: TopicPartitionKey) -> bool:
        """A claim of ``tp`` runs, or finished and was not applied yet: start no second one (it
        would fence the first one's producer; seen in a calm run, the member fenced itself)."""
        with self._lock:
            return tp in self._running or any(outcome.tp == tp for outcome in self._done)

    def start(self, tp: TopicPartitionKey, epoch: int, work: Any) -> None:
        def run() -> None:
            try:
                outcome = work()
            except BaseException as error:  # noqa: BLE001 - handed to the caller's thread
                outcome = _ClaimOutcome(tp, epoch, error=error)
            with self._lock:
                del self._running[tp]
                if not self._closed:
                    self._done.append(outcome)
                    return
            if outcome.txn is not None:  # finished after close() gave up waiting for it
                outcome.txn.close()

        thread = threading.Thread(target=run, name=f"claim-{self._member_id}-{tp[0]}-{tp[1]}", daemon=True)
        with self._lock:
            self._running[tp] = thread
        thread.start()

    def finished(self) -> list[_ClaimOutcome]:
        with self._lock:
            done, self._done = self._done, []
        return done

    def join(self, timeout: float) -> None:
        """Wait up to ``timeout`` for the claims running now to end."""
        deadline = time.monotonic() + timeout
        with self._lock:
            threads = list(self._running.values())
        for thread in threads:
            thread.join(max(deadline - time.monotonic(), 0))

    def close(self, timeout: float) -> list[_ClaimOutcome]:
        """Cancel the claims in flight, wait for them (bounded); the finished ones, for a release."""
        self.cancelled.set()
        self.join(timeout)
        with self._lock:
            self._closed = True
            done, self._done = self._done, []
            left = len(self._running)
        if left:
            log.warning(
                "%s: %d claim(s) still running after %.0f s: their producers close when they end",
                self._member_id, left, timeout,
            )  # fmt: skip
        return done


class AssignedConsumer:
    """A confluent-kafka consumer whose partitions come from the advisor's published assignments.

    ``poll()`` returns only messages of partitions this member owns; positions of returned messages
    count as processed at the next ``commit()``/``close()``. In fenced mode (default) a commit is a
    transaction per partition holding its offset and every output sent with :meth:`produce` since
    the previous commit: exactly once across handovers. ``takeover_timeout`` must exceed the
    longest pause between two ``poll()`` calls, or a slow member is taken over (and, fenced, stopped).
    ``capacity_window_s``: how far back the capacity written into each mark looks (capacity_report.py).
    """

    def __init__(
        self,
        config: Mapping[str, Any],
        group_id: str,
        member_id: str,
        *,
        topic: str = DEFAULT_TOPIC,
        fenced: bool = True,
        takeover_timeout: float = 60.0,
        check_interval: float = 0.25,
        request_timeout: float = 10.0,
        ready_timeout: float = 30.0,
        mark_read_bound: float = 0.5,
        transaction_timeout: float = 60.0,
        capacity_window_s: float = 60.0,
    ) -> None:
        if config.get("group.id", group_id) != group_id:
            raise ClientError(f"config has group.id={config['group.id']!r} but the group is {group_id!r}")
        if not member_id:
            raise ClientError("member_id must be a non-empty string (a stable id per consumer instance)")
        self.group_id, self.member_id, self.fenced = group_id, member_id, fenced
        #: this run of the member id: tells a restarted member from its paused former self
        self.instance = uuid.uuid4().hex[:12]
        self.takeover_timeout, self.check_interval = takeover_timeout, check_interval
        self.request_timeout, self.mark_read_bound = request_timeout, mark_read_bound
        self._reset_earliest = str(config.get("auto.offset.reset", "latest")) in _EARLIEST
        self._settings = connection_settings(dict(config))
        self._txn_settings = {
            **self._settings,
            "transaction.timeout.ms": int(transaction_timeout * 1000),
            # librdkafka's own request timeout (default 60 s) bounds the transactional calls when a
            # coordinator moves (a broker restart); keep them near request_timeout, not a minute
            "socket.timeout.ms": max(int(min(request_timeout, transaction_timeout - 1) * 1000), 1000),
        }
        if fenced:
            probe_transactions(
                self._txn_settings, group_id, member_id, request_timeout, patience=ready_timeout
            )
        self._consumer_config = {
            **config,
            "group.id": group_id,
            "enable.auto.commit": False,
            "enable.auto.offset.store": False,
            # committed() then waits for open transactions: a claim reads settled offsets
            "isolation.level": "read_committed",
        }
        self._consumer = Consumer(self._consumer_config)
        #: the unfenced claims' own consumer (mark reads and claim writes; it never polls): a
        #: synchronous commit or watermark query on the polled consumer from another thread was
        #: seen to wait until the caller's thread stopped polling
        self._claim_consumer = Consumer(self._consumer_config)
        #: fenced claims' reads, one consumer per read in flight (offset_reads.py): the mark that
        #: decides whether to fence is read without waiting for stable offsets (a dead owner's open
        #: transaction would hold it until transaction.timeout.ms), the offset after the fence stable
        self._hints = OffsetReaders(self._consumer_config, stable=False, name=f"{member_id} hints")
        self._settled = OffsetReaders(self._consumer_config, stable=True, name=f"{member_id} settled")
        self._assignment_topic = topic
        #: since when the group coordinator has not answered this consumer (None: it answers)
        self._unanswered_since: float | None = None
        self.epoch = 0
        self.assigned: frozenset[TopicPartitionKey] = frozenset()  # what the latest known epoch gives us
        self._held: dict[TopicPartitionKey, _Held] = {}
        self._pending: dict[TopicPartitionKey, float] = {}  # gained, not yet claimed -> waiting since
        self._fenced_at: dict[TopicPartitionKey, int] = {}  # lost to someone at this epoch of ours
        self._remembered: dict[TopicPartitionKey, int] = {}  # unfenced: position when refused
        self._warm: dict[TopicPartitionKey, PartitionTransaction] = {}  # fenced: producers made ahead
        self._claims = _ClaimRunner(member_id)  # claims in flight, each on a thread of its own
        self._admin: AdminClient | None = None  # start offsets of never-committed partitions
        self._admin_lock = threading.Lock()
        self._next_check = 0.0
        self._last_call = time.monotonic()
        #: busy and idle time around poll(): the capacity written into each mark (capacity_report.py)
        self._meter = UtilisationMeter(window_s=capacity_window_s)
        # key ranges of split partitions (record format 2): their own consumers, see range_set.py
        self._ranges = RangeSet(
            self._settings, group_id, member_id, self._whole_owner_released,
            instance=self.instance, epoch=lambda: self.epoch, takeover_timeout=takeover_timeout,
            fenced=fenced, transaction_settings=self._txn_settings, request_timeout=request_timeout,
        )  # fmt: skip
        self._follower = AssignmentFollower(self._settings, topic, group_id, member_id)
        self._follower.start()
        if self._follower.ready.wait(ready_timeout) and self._follower.refused:
            self.close(release=False)
            raise AccessRefused(
                f"{member_id}: cannot read assignment topic {topic}: {self._follower.refused}"
            )
        if not self._follower.ready.is_set():
            log.warning(
                "%s: assignment topic %s not read to its end within %.0f s (broker restarting or "
                "unreachable?): consuming nothing until it is",
                member_id, topic, ready_timeout,
            )  # fmt: skip
        elif self._follower.latest() is None:
            log.warning(
                "%s: no assignment for member %s of group %s on %s: consuming nothing until a plan "
                "assigns it (is the member registered with the advisor, and its id spelled the same?)",
                member_id, member_id, group_id, topic,
            )  # fmt: skip
        try:
            self._maintain()
        except BaseException:  # a refused first claim: the caller gets no member to close, so stop here
            self.close(release=False)
            raise

    # -- the public API --------------------------------------------------------------------------

    @property
    def owned(self) -> frozenset[TopicPartitionKey]:
        """Partitions this member consumes now (claimed); ``assigned`` minus those still waiting."""
        return frozenset(self._held)

    @property
    def malformed_records(self) -> int:
        return self._follower.malformed

    def poll(self, timeout: float = 1.0):
        """The next message of an owned partition, or None; applies new epochs and claims first.

        After a gap of more than half the takeover timeout (a pause: GC, SIGSTOP, a slow handler)
        ownership is checked again before a message is returned, so a member taken over meanwhile
        drops the partition instead of handing out the batch its blocked fetch returned.

        Time inside this call is idle, time between calls busy: records returned per busy second is
        the capacity the member reports in its commits' marks (capacity_report.py).
        """
        self._meter.poll_started()
        message = None
        try:
            message = self._poll(timeout)
            return message
        finally:
            self._meter.poll_ended(0 if message is None else 1)

    def _poll(self, timeout: float):
        deadline = time.monotonic() + timeout
        while True:
            self._note_gap()
            self._maintain()
            remaining = deadline - time.monotonic()
            if self._ranges.held:  # key ranges first (without waiting while whole partitions are held)
                message = self._ranges.poll(
                    0.0 if self._held else max(min(remaining, self.check_interval), 0)
                )
                if message is not None:
                    return message
                if not self._held:
                    if time.monotonic() >= deadline:
                        return None
                    continue
            message = self._consumer.poll(max(min(remaining, self._poll_slice()), 0))
            self._note_gap()
            if message is not None:
                if message.error():
                    self._refused(message.error(), message.topic())
                    if message.error().code() != KafkaError._PARTITION_EOF:
                        log.warning("%s: consumer error: %s", self.member_id, message.error())
                else:
                    tp = (message.topic(), message.partition())
                    held = self._held.get(tp)
                    if held is not None and not held.paused and message.offset() >= held.position:
                        if self._ranges.already_done(tp, message):  # a merge: a range owner did it
                            held.position = message.offset() + 1
                            continue
                        if held.txn is not None:
                            try:
                                held.txn.begin()
                            except KafkaException as error:
                                self._transaction_failed(tp, error, "begin")
                                continue
                        held.position = message.offset() + 1
                        return message
            if time.monotonic() >= deadline:
                return None

    def _poll_slice(self) -> float:
        """How long one wait inside ``poll()`` may block: short while claims run, so a finished
        claim is applied (and its partition fetched) within that, not after ``check_interval``."""
        return _CLAIM_APPLY_S if self._claims.running() else self.check_interval

    def fencing_token(self, message_or_partition) -> FencingToken:
        """The token under which a message (or a ``(topic, partition)``) is held now.

        Sinks outside Kafka store the highest token per partition and refuse lower ones.
        """
        tp = message_or_partition
        if not isinstance(tp, tuple):
            tp = (tp.topic(), tp.partition())
        held = self._held.get(tp)
        if held is None and (token := self._ranges.token(tp)) is not None:  # a key range of tp
            return token
        if held is None:
            raise ClientError(f"{tp[0]}-{tp[1]} is not held by {self.member_id} (any more): skip the write")
        producer = held.txn.producer if held.txn is not None else None
        return FencingToken(*(producer or (None, None)), held.claimed_at)

    def produce(self, message, topic: str, value: Any = None, key: Any = None, **kwargs: Any) -> None:
        """Send an output in the transaction of ``message``'s partition (fenced mode only).

        It becomes visible to ``read_committed`` readers with the commit that moves that partition
        past ``message``; if the member is fenced first it never does, and the new owner redoes it.
        """
        if not self.fenced:
            raise ClientError("produce() needs fenced mode: outputs ride on the partition's transaction")
        tp = (message.topic(), message.partition())
        held = self._held.get(tp)
        if held is None and self._ranges.produce(message, topic, value, key, **kwargs):  # a key range
            return
        if held is None or held.txn is None:
            raise ClientError(f"{tp[0]}-{tp[1]} is no longer held by {self.member_id}: drop this output")
        try:
            held.txn.produce(topic, value, key, **kwargs)
        except KafkaException as error:
            self._transaction_failed(tp, error, "produce")
            raise ClientError(f"{tp[0]}-{tp[1]}: output not sent ({error}); it will be redone") from error

    def commit(self) -> dict[TopicPartitionKey, int]:
        """Commit processed positions of owned partitions (with our mark); returns what was written.

        Partitions another member took over are not committed: they are dropped instead. A broker
        that cannot be reached is logged; the positions are committed by a later call.
        """
        self._note_gap()
        self._maintain()
        ranged = self._ranges.commit()  # key ranges: commits under their derived groups (range_set.py)
        if self.fenced:
            return {**self._commit_fenced(OWNED), **ranged}
        changed = {tp: h.position for tp, h in self._held.items() if h.committed != h.position}
        try:
            written, refused = self._checked_commit(changed, OWNED)
        except ClientError as error:
            log.warning("%s: commit failed, will retry: %s", self.member_id, error)
            return ranged
        for tp in refused:
            self._drop(tp, fenced=True)
        return {**written, **ranged}

    def close(self, release: bool = True) -> None:
        """Commit and release what this member holds (so a successor need not wait), then stop."""
        try:
            if hasattr(self, "_claims"):  # claims in flight: cancel, wait; a finished one is released
                for outcome in self._claims.close(self.request_timeout + 5.0):
                    self._apply_claim(outcome)
            if release and self._held:
                self._release(sorted(self._held))
        finally:
            self._ranges.close()
            for held in self._held.values():
                if held.txn is not None:
                    held.txn.close()
            self._held.clear()
            for txn in self._warm.values():
                txn.close()
            self._warm.clear()
            self._follower.stop()
            self._follower.join(5)
            if hasattr(self, "_consumer"):
                self._consumer.close()
            if hasattr(self, "_claim_consumer"):
                self._claim_consumer.close()
            if hasattr(self, "_hints"):
                self._hints.close()
                self._settled.close()

    # -- epochs, claims, releases -----------------------------------------------------------------

    def _note_gap(self) -> None:
        now = time.monotonic()
        gap, self._last_call = now - self._last_call, now
        if gap > self.takeover_timeout / 2 and self._held:
            log.warning("%s: %.1f s since the last call: checking ownership again", self.member_id, gap)
            self._revalidate(sorted(self._held))

    def _maintain(self) -> None:
        for outcome in self._claims.finished():  # before a new epoch: a claim it lost is released
            self._apply_claim(outcome)
        record = self._follower.latest()
        if record is not None and record.epoch > self.epoch:
            self._apply(record)
        self._ranges.start_ready()
        if self._pending and time.monotonic() >= self._next_check:
            self._next_check = time.monotonic() + self.check_interval
            self._start_claims()
            self._warm_up()
        if self.fenced and any(h.paused for h in self._held.values()):
            self._commit_fenced(OWNED, only_paused=True)

    def _apply(self, record: AssignmentRecord) -> None:
        new = frozenset(record.partitions)
        change = plan_handover(self.assigned, new, self.epoch, record.epoch)
        log.info(
            "%s: epoch %d -> %d (plan %s): keep %d, re-check %d, gain %d, lose %d",
            self.member_id, self.epoch, record.epoch, record.plan_id,
            len(change.kept), len(change.reclaim), len(change.gained), len(change.lost),
        )  # fmt: skip
        self.epoch, self.assigned = record.epoch, new
        for tp in change.lost:
            self._pending.pop(tp, None)
            self._remembered.pop(tp, None)
        lost_held = sorted(tp for tp in change.lost if tp in self._held)
        if lost_held:
            self._release(lost_held)
        held_again = sorted(tp for tp in change.reclaim if tp in self._held)
        if held_again:
            self._revalidate(held_again)
        now = time.monotonic()
        for tp in change.gained | change.reclaim:
            if tp not in self._held:
                self._pending.setdefault(tp, now)
        self._warm_up()
        self._next_check = 0.0
        self._ranges.apply(record.ranges)  # after our own releases: a split of ours starts from them

    def _whole_owner_released(self, tp: TopicPartitionKey, waited: float) -> bool:
        """May a key range of ``tp`` start: its whole-partition owner (parent group's mark) let it go?
        Never while the mark is of a newer epoch than ours (we are the stale one: wait for it)."""
        try:
            _, mark = self._read_marks([tp], self._hints)[tp]  # a hint: the range start fences
        except ClientError as error:
            log.warning("%s: cannot check %s-%d before starting a key range: %s", self.member_id, *tp, error)
            return False
        if mark is not None and mark.epoch > self.epoch:
            return False
        if waited > self.takeover_timeout:
            return True
        return mark is None or mark.state == RELEASED or mark.written_by(self.member_id, self.instance)

    def _revalidate(self, tps: list[TopicPartitionKey]) -> None:
        """Check partitions we hold against their marks (fenced: by committing); drop the lost ones."""
        if self.fenced:
            self._commit_fenced(OWNED, only=set(tps), force=True)
            return
        try:
            marks = self._read_marks(tps)
        except ClientError as error:
            log.warning("%s: cannot re-check %s yet: %s", self.member_id, _names(tps), error)
            return
        for tp in tps:
            mark = marks[tp][1]
            if not may_commit(self.member_id, self.instance, self._held[tp].claimed_at, mark):
                log.warning(
                    "%s: %s-%d was taken by %s at epoch %d meanwhile: dropping it",
                    self.member_id, tp[0], tp[1], mark.member, mark.epoch,
                )  # fmt: skip
                self._drop(tp, fenced=True)

    def _read_marks(
        self, tps: list[TopicPartitionKey], consumer: Consumer | OffsetReaders | None = None
    ) -> Marks:
        """Committed offsets and marks of ``tps``. ``consumer`` given: on a claim thread, whose
        outcome tells the caller's thread whether the coordinator answered (see _apply_claim)."""
        try:
            result = (consumer or self._consumer).committed(
                [TopicPartition(t, p) for t, p in tps], timeout=self.request_timeout
            )
        except KafkaException as error:
            self._refused(error)
            if consumer is None:
                self._coordinator_unanswered(error)
            raise ClientError(f"reading committed offsets of group {self.group_id}: {error}") from error
        except RuntimeError as error:  # a claim thread's consumer was replaced and closed meanwhile
            raise ClientError(f"reading committed offsets of group {self.group_id}: {error}") from error
        if consumer is None:
            self._unanswered_since = None
        marks: Marks = {}
        for item in result:
            if item.error:
                self._refused(item.error, item.topic)
                raise ClientError(f"reading committed offset of {item.topic}-{item.partition}: {item.error}")
            offset = item.offset if item.offset >= 0 else None
            marks[(item.topic, item.partition)] = (offset, decode_mark(item.metadata))
        return marks

    def _refused(self, error: KafkaException | KafkaError, topic: str | None = None) -> None:
        """Raise AccessRefused naming the grant when the broker's ACLs refused this member's consumer
        (READ on the group to fetch and commit its offsets, READ on the topics it consumes)."""
        needed = Grant("READ", "Topic", topic) if topic else Grant("READ", "Group", self.group_id)
        if error_code(error) == "GROUP_AUTHORIZATION_FAILED":
            needed = Grant("READ", "Group", self.group_id)
        if hint := refusal(error, needed):
            raise AccessRefused(f"{self.member_id}: {hint}")

    def _coordinator_unanswered(self, error: KafkaException) -> None:
        """Replace the consumer when its group coordinator requests keep timing out.

        Seen in the torture run: after a broker restart one librdkafka consumer timed out on every
        ``committed()`` for minutes while a new consumer of the same group was answered in 50 ms,
        so the member could never claim again. Past three request timeouts the consumer is
        replaced; what this member holds is assigned to the new one at the processed positions.
        """
        code = error.args[0].code() if error.args and isinstance(error.args[0], KafkaError) else None
        if code != KafkaError._TIMED_OUT:
            return
        now = time.monotonic()
        if self._unanswered_since is None:
            self._unanswered_since = now
        elif now - self._unanswered_since >= 3 * self.request_timeout:
            log.warning(
                "%s: the group coordinator has not answered this consumer for %.0f s: replacing "
                "the consumer", self.member_id, now - self._unanswered_since,
            )  # fmt: skip
            self._unanswered_since = None
            old, self._consumer = self._consumer, Consumer(self._consumer_config)
            old_claims, self._claim_consumer = self._claim_consumer, Consumer(self._consumer_config)
            held = sorted(self._held.items())
            if held:
                self._consumer.incremental_assign([TopicPartition(t, p, h.position) for (t, p), h in held])
                paused = [TopicPartition(t, p) for (t, p), h in held if h.paused]
                if paused:
                    self._consumer.pause(paused)
            # closing a wedged consumer can block as long as its requests: not on this thread, and
            # only once the claims that still use it have ended
            claims = self._claims

            def close_old() -> None:
                old.close()
                claims.join(3 * self.request_timeout + 10.0)
                old_claims.close()

            threading.Thread(target=close_old, name="consumer-close", daemon=True).start()

    def _mark(self, tp: TopicPartitionKey, state: str, claimed_at: int | None = None) -> str:
        held = self._held.get(tp)
        epoch = claimed_at if claimed_at is not None else held.claimed_at
        producer = held.txn.producer if held is not None and held.txn is not None else None
        mark = OwnerMark(self.member_id, epoch, state, self.instance, producer, self.epoch)
        return mark.encode(self._meter.report())

    # -- unfenced mode: checked commits -----------------------------------------------------------

    def _write(
        self,
        offsets: dict[TopicPartitionKey, int],
        metadata: dict[TopicPartitionKey, str],
        consumer: Consumer | None = None,
    ) -> None:
        batch = [TopicPartition(t, p, off, metadata=metadata[(t, p)]) for (t, p), off in offsets.items()]
        try:
            result = (consumer or self._consumer).commit(offsets=batch, asynchronous=False) or []
        except KafkaException as error:
            if consumer is None:
                self._coordinator_unanswered(error)
            raise ClientError(f"commit for group {self.group_id} failed: {error}") from error
        except RuntimeError as error:  # a claim thread's consumer was replaced and closed meanwhile
            raise ClientError(f"commit for group {self.group_id} failed: {error}") from error
        for item in result:
            if item.error:
                raise ClientError(f"commit of {item.topic}-{item.partition} failed: {item.error}")

    def _checked_commit(
        self, positions: dict[TopicPartitionKey, int], state: str
    ) -> tuple[dict[TopicPartitionKey, int], list[TopicPartitionKey]]:
        """Commit positions unless another member took the partition over: (written, refused).

        A read older than ``mark_read_bound`` when the write is due (the process was paused in
        between) is read again first.
        """
        if not positions:
            return {}, []
        for _ in range(5):
            read_at = time.monotonic()
            marks = self._read_marks(list(positions))
            allowed, refused = {}, []
            for tp, position in positions.items():
                committed, mark = marks[tp]
                if may_commit(self.member_id, self.instance, self._held[tp].claimed_at, mark):
                    allowed[tp] = commit_offset(position, committed)
                else:
                    refused.append(tp)
                    log.warning(
                        "%s: not committing %s-%d: %s took it at epoch %d (claimed by us at %d)",
                        self.member_id, tp[0], tp[1], mark.member, mark.epoch, self._held[tp].claimed_at,
                    )  # fmt: skip
            if time.monotonic() - read_at <= self.mark_read_bound:
                break
            log.info("%s: mark read took too long (paused?): reading again", self.member_id)
        if allowed:
            self._write(allowed, {tp: self._mark(tp, state) for tp in allowed})
            for tp, offset in allowed.items():
                self._held[tp].committed = offset
        return allowed, refused

    # -- fenced mode: transactions ----------------------------------------------------------------

    def _commit_fenced(
        self, state: str, only: set | None = None, only_paused: bool = False, force: bool = False
    ) -> dict[TopicPartitionKey, int]:
        due = []
        for tp in sorted(self._held):
            held = self._held.get(tp)
            if held is None or only is not None and tp not in only or only_paused and not held.paused:
                continue
            outputs = held.txn.outputs if held.txn is not None else 0
            if not force and not held.paused and held.position == held.committed and not outputs:
                continue
            due.append(tp)
        return self._commit_many(due, state)

    def _commit_many(
        self, tps: list[TopicPartitionKey], state: str, consuming: bool = True
    ) -> dict[TopicPartitionKey, int]:
        """Each partition's transaction (its processed offset with our mark, and its outputs).

        The transactions run at once, one thread each: a commit is a few round trips to the
        transaction coordinator, and in sequence they added up in every handover (a release, a
        claim) and every commit round. Outcomes are handled here, on the caller's thread.
        Returns what was committed; failed partitions went through ``_transaction_failed``.
        """
        if not tps:
            return {}
        metadata = self._consumer.consumer_group_metadata()
        work = {}
        for tp in tps:
            held = self._held[tp]
            offsets = [TopicPartition(tp[0], tp[1], held.position, metadata=self._mark(tp, state))]
            work[tp] = (held, held.position, offsets)
        errors: dict[TopicPartitionKey, KafkaException | None] = {}
        aborts: dict[TopicPartitionKey, KafkaException | None] = {}

        def one(tp: TopicPartitionKey) -> None:
            txn = work[tp][0].txn
            try:
                txn.commit(work[tp][2], metadata)
                errors[tp] = None
            except KafkaException as error:
                errors[tp] = error
                if classify(error) == "abort":  # aborted here too: in parallel, not in turn below
                    try:
                        txn.abort()
                        aborts[tp] = None
                    except KafkaException as abort_error:
                        aborts[tp] = abort_error

        _in_parallel(one, [(tp,) for tp in tps])
        written = {}
        for tp, (held, offset, _) in work.items():
            error = errors.get(tp, KafkaException(KafkaError(KafkaError._FAIL, "commit thread ended")))
            if error is not None:
                self._transaction_failed(tp, error, "commit", consuming, aborts.get(tp, _NOT_TRIED))
                continue
            held.committed = offset
            written[tp] = offset
            if held.paused:
                held.paused = False
                if consuming:
                    self._resume_at(tp, held.position)
        return written

    def _resume_at(self, tp: TopicPartitionKey, offset: int) -> None:
        """Fetch again from ``offset``: records dropped while paused are fetched again, none skipped."""
        self._pause(tp, False)
        try:
            self._consumer.seek(TopicPartition(tp[0], tp[1], offset))
        except KafkaException as error:  # not fetching yet: re-assign at the offset instead
            log.info("%s: seek of %s-%d: %s; re-assigning", self.member_id, *tp, error)
            self._consumer.incremental_unassign([TopicPartition(*tp)])
            self._consumer.incremental_assign([TopicPartition(tp[0], tp[1], offset)])

    def _pause(self, tp: TopicPartitionKey, pause: bool) -> None:
        try:
            (self._consumer.pause if pause else self._consumer.resume)([TopicPartition(*tp)])
        except KafkaException as error:
            log.debug("%s: pause/resume of %s-%d: %s", self.member_id, *tp, error)

    def _transaction_failed(
        self,
        tp: TopicPartitionKey,
        error: KafkaException,
        action: str,
        consuming: bool = True,
        aborted: Any = _NOT_TRIED,
    ) -> None:
        """Fenced: drop the partition now. Abortable: abort and rewind. Retriable: pause and retry.

        ``aborted``: the outcome of an abort already tried on the commit's thread (None: done, a
        KafkaException: failed); the default ``_NOT_TRIED`` aborts here.
        """
        kind = classify(error)
        held = self._held.get(tp)
        if held is None:
            return
        if kind == "stuck":
            log.warning(
                "%s: %s of %s-%d is stuck (%s): giving this producer up, claiming the partition again",
                self.member_id, action, tp[0], tp[1], error,
            )  # fmt: skip
            self._drop(tp, fenced=False, consuming=consuming)
        elif kind == "fenced":
            log.warning(
                "%s: fenced on %s-%d (another member claimed it): dropping it, nothing committed (%s)",
                self.member_id, tp[0], tp[1], error,
            )  # fmt: skip
            self._drop(tp, fenced=True, consuming=consuming)
        elif kind == "retry" and held.txn.committing:
            log.warning("%s: %s of %s-%d failed, will retry: %s", self.member_id, action, *tp, error)
            if not held.paused:
                held.paused = True
                if consuming:
                    self._pause(tp, True)
        else:
            log.warning(
                "%s: %s of %s-%d failed (%s): aborting, redoing from offset %d",
                self.member_id, action, tp[0], tp[1], error, held.committed,
            )  # fmt: skip
            try:
                if aborted is _NOT_TRIED:
                    held.txn.abort()
                elif aborted is not None:
                    raise aborted
            except KafkaException as abort_error:
                if classify(abort_error) == "fenced":
                    self._drop(tp, fenced=True, consuming=consuming)
                    return
                log.warning("%s: abort of %s-%d failed: %s", self.member_id, *tp, abort_error)
                self._drop(
                    tp, fenced=False, consuming=consuming
                )  # the next claim starts from the committed offset
                return
            held.position = held.committed
            if consuming:
                self._rewind(tp, held)

    def _rewind(self, tp: TopicPartitionKey, held: _Held) -> None:
        """Fetch again from the last committed offset: the aborted outputs must be redone."""
        held.paused = False
        self._resume_at(tp, held.committed)

    # -- both modes ---------------------------------------------------------------------------------

    def _drop(self, tp: TopicPartitionKey, fenced: bool, consuming: bool = True) -> None:
        """Stop consuming a partition (someone else holds it now); if still assigned it waits again."""
        held = self._held.pop(tp)
        if consuming:
            self._consumer.incremental_unassign([TopicPartition(*tp)])
        if held.txn is not None:
            held.txn.close()
        else:
            self._remembered[tp] = held.position
        if fenced:
            self._fenced_at[tp] = self.epoch
        if tp in self.assigned:
            self._pending[tp] = time.monotonic()
            self._warm_up()

    def _release(self, tps: list[TopicPartitionKey]) -> None:
        """Stop fetching first, then commit the processed position with a ``released`` mark."""
        started = time.monotonic()
        self._consumer.incremental_unassign([TopicPartition(*tp) for tp in tps])
        released = []
        if self.fenced:
            deadline = time.monotonic() + self.request_timeout
            waiting = list(tps)
            while waiting and time.monotonic() < deadline:
                released += self._commit_many(waiting, RELEASED, consuming=False)
                # aborted and rewound: release what is done at once; a retriable failure: wait a bit
                waiting = [tp for tp in waiting if tp in self._held and tp not in released]
                if any(self._held[tp].paused for tp in waiting):
                    time.sleep(0.2)
            for tp in tps:
                if tp in self._held:
                    self._held.pop(tp).txn.close()
        else:
            positions = {tp: self._held[tp].position for tp in tps}
            try:
                written, _ = self._checked_commit(positions, RELEASED)
                released = list(written)
            except ClientError as error:  # the successor takes over after its timeout instead
                log.error("%s: release of %s failed: %s", self.member_id, _names(tps), error)
            for tp in tps:
                self._held.pop(tp, None)
        log.info(
            "%s: released %s at epoch %d (%.3f s)",
            self.member_id, _names(released), self.epoch, time.monotonic() - started,
        )  # fmt: skip

    def _start_claims(self) -> None:
        """Start a claim thread for each partition we wait for that has none running.

        Unfenced, the claims run here, in turn: their mark read-then-write is their only guard,
        and on threads of their own a process pause (GC, SIGSTOP) that came after one claim's
        read landed inside another claim's read-to-write window (a 4-minute torture run: 2
        committed-offset regressions and 5 stale writes, against none with claims in turn).
        """
        if self._newer_epoch_known(self.epoch):
            self._next_check = 0.0  # apply it first (at the next call)
            return
        now = time.monotonic()
        metadata = self._consumer.consumer_group_metadata() if self.fenced else None
        for tp in sorted(self._pending):
            if self._claims.busy(tp):
                continue
            who = Claimant(self.member_id, self.instance, self.epoch, self._fenced_at.get(tp) == self.epoch)
            claim = _ClaimInput(
                tp, who, now - self._pending[tp], self._claim_consumer, self._warm.pop(tp, None),
                self._remembered.get(tp), metadata,
            )  # fmt: skip
            if self.fenced:
                self._claims.start(tp, self.epoch, lambda claim=claim: self._claim(claim))
                continue
            try:
                outcome = self._claim(claim)
            except AccessRefused:
                raise  # a grant is missing: waiting will not bring it
            except Exception as error:  # noqa: BLE001 - a claim is retried at the next check
                outcome = _ClaimOutcome(tp, self.epoch, error=error)
            self._apply_claim(outcome)
            if self._newer_epoch_known(self.epoch):
                self._next_check = 0.0
                return

    def _newer_epoch_known(self, epoch: int) -> bool:
        """Has an epoch newer than ``epoch`` arrived? Then a claim at ``epoch`` waits for it.

        A claim at an epoch the plan has already moved on from can land over the claim of the
        member the newer epoch gives the partition to (seen in a torture run: a restarted member
        claimed at epoch 37 although 38 had arrived, over its successor's claim at 38); fenced,
        it would fence that member for a moment.
        """
        latest = self._follower.latest()
        return latest is not None and latest.epoch > epoch

    # -- a claim, on its own thread (_ClaimRunner): reads only what _ClaimInput carries --------

    def _claim(self, claim: _ClaimInput) -> _ClaimOutcome:
        """Read the mark, decide, claim (fenced or not); never touches the caller's state."""
        tp, epoch = claim.tp, claim.who.epoch
        outcome = _ClaimOutcome(tp, epoch, txn=claim.txn)  # not claimed: the spare producer goes back
        read_at = time.monotonic()
        try:  # fenced: a hint only, read without waiting for open transactions (offset_reads.py)
            committed, mark = self._read_marks([tp], self._hints if self.fenced else claim.consumer)[tp]
        except AccessRefused as error:  # a grant is missing: the caller's thread raises it
            outcome.error = error
            return outcome
        except ClientError as error:
            log.warning("%s: cannot check %s-%d to claim yet: %s", self.member_id, *tp, error)
            outcome.error = error.__cause__ if isinstance(error.__cause__, KafkaException) else None
            return outcome
        outcome.answered = True
        decision = claim_decision(claim.who, mark, claim.waited, self.takeover_timeout)
        if decision not in (Claim.TAKE, Claim.TAKE_OVER):
            return outcome
        if decision is Claim.TAKE_OVER:
            log.warning(
                "%s: taking over %s-%d from %s (epoch %d): no release within %.1f s",
                self.member_id, tp[0], tp[1], mark.member, mark.epoch, self.takeover_timeout,
            )  # fmt: skip
        # a merge: the partition's key ranges must be released, and (fenced) their holders fenced
        if not self._ranges.ranges_released(tp, claim.waited):
            return outcome
        if self._newer_epoch_known(epoch) or self._claims.cancelled.is_set():
            outcome.again = True
            return outcome
        if not self.fenced:
            return self._claim_unfenced(claim, committed, read_at, outcome)
        if not self._may_fence(tp, epoch):
            outcome.again = True
            return outcome
        if time.monotonic() - read_at > _FENCE_READ_BOUND_S and not self._still_takes(claim, outcome):
            return outcome
        if not self._ranges.fence_ranges(tp):
            return outcome
        outcome.txn = None
        return self._claim_fenced(claim, read_at, outcome)

    def _may_fence(self, tp: TopicPartitionKey, epoch: int) -> bool:
        """Is ``epoch`` still the newest one, read from the assignment topic up to an end queried
        now? A member resumed from a pause knows only the epochs before it, and its claim fenced
        the new owner (docs/protocol/liveness.md, "Stale claims")."""
        partitions = self._follower.partitions()
        try:
            ends = self._settled.ends(self._assignment_topic, partitions, self.request_timeout)
        except (KafkaException, RuntimeError) as error:
            log.info("%s: cannot read the assignment topic's end before fencing: %s", self.member_id, error)
            return False
        if not self._follower.caught_up(ends, self.request_timeout) or self._newer_epoch_known(epoch):
            log.info(
                "%s: not fencing %s-%d at epoch %d: a newer epoch or none read", self.member_id, *tp, epoch
            )
            return False
        return True

    def _still_takes(self, claim: _ClaimInput, outcome: _ClaimOutcome) -> bool:
        """The mark was read too long ago to fence on (a pause, or a slow machine): read it again;
        does the claim still take the partition? (A restarted instance of this member id may have
        claimed it meanwhile, at the same epoch: the newest-epoch check cannot tell.)"""
        log.info("%s: mark of %s-%d read too long ago (paused?): reading again", self.member_id, *claim.tp)
        try:
            _, mark = self._read_marks([claim.tp], self._hints)[claim.tp]
        except ClientError as error:
            log.warning("%s: cannot check %s-%d to claim yet: %s", self.member_id, *claim.tp, error)
            return False
        decision = claim_decision(claim.who, mark, claim.waited, self.takeover_timeout)
        if decision not in (Claim.TAKE, Claim.TAKE_OVER):
            outcome.again = decision is Claim.STALE
            return False
        return True

    def _start_offset(self, tp: TopicPartitionKey) -> int | None:
        """Where to start a never-committed partition, by ``auto.offset.reset`` (default latest).

        Asked through an AdminClient: the consumer's ``get_watermark_offsets`` called on a claim
        thread was seen to block until the caller's thread stopped polling.
        """
        spec = OffsetSpec.earliest() if self._reset_earliest else OffsetSpec.latest()
        try:
            with self._admin_lock:
                if self._admin is None:
                    self._admin = AdminClient(self._settings)
                admin = self._admin
            futures = admin.list_offsets({TopicPartition(*tp): spec}, request_timeout=self.request_timeout)
            return next(iter(futures.values())).result(self.request_timeout + 1).offset
        except (KafkaException, RuntimeError, TimeoutError) as error:
            log.warning("%s: no offsets for %s-%d yet: %s", self.member_id, tp[0], tp[1], error)
            return None

    def _claim_unfenced(
        self, claim: _ClaimInput, committed: int | None, read_at: float, outcome: _ClaimOutcome
    ) -> _ClaimOutcome:
        tp, epoch = claim.tp, claim.who.epoch
        start = claim_start(committed, claim.remembered, None)
        start = start if start is not None else self._start_offset(tp)
        if start is None:
            return outcome
        write_at = time.monotonic()
        if self._newer_epoch_known(epoch) or self._claims.cancelled.is_set():
            outcome.again = True
            return outcome
        if write_at - read_at > self.mark_read_bound:
            # checked here, after the start offset was looked up (a watermark query can be slow
            # too): a claim written from a stale read overwrote a newer owner's commit in a test
            log.info("%s: mark read took too long (paused?): reading again before claiming", self.member_id)
            outcome.again = True
            return outcome
        mark = OwnerMark(self.member_id, epoch, OWNED, self.instance, None, epoch).encode()
        try:
            self._write({tp: start}, {tp: mark}, claim.consumer)
            check_at = time.monotonic()
            offset, check = self._read_marks([tp], claim.consumer)[
                tp
            ]  # did a concurrent claim land after ours?
        except ClientError as error:
            log.warning("%s: claim failed, will retry: %s", self.member_id, error)
            return outcome
        if check is None or not check.written_by(self.member_id, self.instance) or check.epoch != epoch:
            log.warning("%s: claim of %s-%d was overwritten: waiting again", self.member_id, *tp)
            return outcome
        outcome.start = self._ranges.merged_start(tp, max(start, offset or 0))
        outcome.took = (
            f"read {write_at - read_at:.3f} s; claim written {check_at - write_at:.3f} s; "
            f"re-checked {time.monotonic() - check_at:.3f} s"
        )
        return outcome

    def _claim_fenced(self, claim: _ClaimInput, read_at: float, outcome: _ClaimOutcome) -> _ClaimOutcome:
        """Fence, read the settled mark, write our claim in a transaction of the new producer."""
        tp, epoch = claim.tp, claim.who.epoch
        fence_from, warm = time.monotonic(), claim.txn is not None
        txn = claim.txn or self._new_transaction(tp)

        def moved_on() -> bool:  # checked between init_transactions attempts
            return self._claims.cancelled.is_set() or self._newer_epoch_known(epoch)

        try:
            producer = txn.fence(moved_on)
        except KafkaException as error:
            log.warning("%s: cannot fence %s-%d yet: %s", self.member_id, tp[0], tp[1], error)
            txn.close()  # a stopped fence: its producer retries no more
            outcome.again = moved_on()
            return outcome
        fenced_at = time.monotonic()
        log.info(
            "%s: fence of %s-%d by a claim at epoch %d: producer %s (%.3f s)",
            self.member_id, tp[0], tp[1], epoch, list(producer), fenced_at - fence_from,
        )  # fmt: skip
        try:
            if self._claims.cancelled.is_set():
                raise ClientError("closing")
            committed, mark = self._read_marks([tp], self._settled)[tp]  # after fencing: final
        except ClientError as error:
            log.warning("%s: claim failed, will retry: %s", self.member_id, error)
            txn.close()
            return outcome
        settled_at = time.monotonic()
        decision = claim_decision(claim.who, mark, claim.waited, self.takeover_timeout)
        if decision is Claim.WAIT:
            # an owner of an older epoch claimed it between our read and our fence (its claim was
            # in flight when its next epoch arrived): we fenced it, so it can never release it;
            # waiting would only cost the takeover timeout
            log.warning(
                "%s: taking over %s-%d from %s (epoch %d): it claimed meanwhile and we fenced it",
                self.member_id, tp[0], tp[1], mark.member, mark.epoch,
            )  # fmt: skip
        elif decision is not Claim.TAKE and decision is not Claim.TAKE_OVER:
            log.warning(
                "%s: %s-%d was claimed by %s meanwhile: backing off", self.member_id, *tp, mark.member
            )
            txn.close()
            return outcome
        start = committed if committed is not None else self._start_offset(tp)
        first = None if start is None else self._ranges.merged_start(tp, start)  # after fence_ranges
        if start is None or first is None:
            txn.close()  # claimed again at the next check
            return outcome
        if self._newer_epoch_known(epoch) or self._claims.cancelled.is_set():
            # a claim mark of an epoch already moved on would make that epoch's claimant wait for
            # (or fence) us; the previous owner's mark stays as it was
            log.info(
                "%s: claim of %s-%d at epoch %d dropped after its fence: a newer epoch",
                self.member_id,
                *tp,
                epoch,
            )
            txn.close()
            outcome.again = True
            return outcome
        # The claim itself: a transaction that writes our mark at the settled offset.
        mark_text = OwnerMark(self.member_id, epoch, OWNED, self.instance, txn.producer, epoch).encode()
        offsets = [TopicPartition(tp[0], tp[1], start, metadata=mark_text)]
        deadline = time.monotonic() + self.request_timeout
        while True:
            try:
                txn.commit(offsets, claim.group_metadata)
                break
            except KafkaException as error:
                kind = classify(error)
                if kind == "retry" and txn.committing and time.monotonic() < deadline:
                    time.sleep(0.2)
                    continue
                log.warning(
                    "%s: claim transaction of %s-%d failed (%s, %s): claiming again",
                    self.member_id, tp[0], tp[1], kind, error,
                )  # fmt: skip
                txn.close()  # its open transaction is aborted by the next fence
                return outcome
        outcome.start, outcome.txn = first, txn
        outcome.took = (
            f"read {fence_from - read_at:.3f} s; fencing ({'warm' if warm else 'cold'}) "
            f"{fenced_at - fence_from:.3f} s; settled {settled_at - fenced_at:.3f} s; "
            f"claim transaction {time.monotonic() - settled_at:.3f} s"
        )
        return outcome

    def _new_transaction(self, tp: TopicPartitionKey) -> PartitionTransaction:
        return PartitionTransaction(
            self._txn_settings, transactional_id(self.group_id, *tp), self.request_timeout, topic=tp[0]
        )

    def _warm_up(self) -> None:
        """Create the producers of partitions we wait for, without fencing anyone yet.

        A new librdkafka producer needs up to 0.5 s to connect and find the transaction
        coordinator (measured: 54-530 ms cold, 3-10 ms warm); paying that while the previous owner
        still releases keeps it out of the handover pause. ``init_transactions`` waits for the claim.
        """
        if not self.fenced:
            return
        for tp in self._pending:
            if tp not in self._warm and not self._claims.busy(tp):  # a running claim has its own
                self._warm[tp] = self._new_transaction(tp)
        for tp in [tp for tp in self._warm if tp not in self._pending]:
            self._warm.pop(tp).close()

    def _apply_claim(self, outcome: _ClaimOutcome) -> None:
        """On the caller's thread: assign a finished claim at its offset, or note why it did not.

        A claim runs at the epoch it started under. Finished at a later epoch, it is kept when that
        epoch still gives us the partition and none was skipped (as a kept partition would be), and
        released at once when it no longer does (our mark says we own it: the successor would wait
        for the takeover timeout otherwise); after skipped epochs it is claimed again.
        """
        tp = outcome.tp
        if isinstance(outcome.error, AccessRefused):
            if outcome.txn is not None:
                outcome.txn.close()
            raise outcome.error  # a grant is missing: waiting will not bring it
        if isinstance(outcome.error, KafkaException) and not self.fenced:
            # unfenced claims read through the claims' consumer; fenced ones through readers lent
            # per read, which replace themselves (offset_reads.py): the polled consumer reads no
            # offsets in fenced mode, replacing it would only re-fetch what it holds
            self._coordinator_unanswered(outcome.error)
        elif outcome.answered:
            self._unanswered_since = None
        elif outcome.error is not None:
            log.error("%s: claim of %s-%d failed, will retry: %r", self.member_id, *tp, outcome.error)
        if outcome.again:
            self._next_check = 0.0
        if outcome.start is None:
            if outcome.txn is not None:  # the spare producer made ahead
                if tp in self._pending and tp not in self._warm:
                    self._warm[tp] = outcome.txn
                else:
                    outcome.txn.close()
            return
        skipped = outcome.epoch < self.epoch - 1
        if tp in self._held or (tp in self.assigned and skipped):
            if outcome.txn is not None:
                outcome.txn.close()
            self._next_check = 0.0
            return
        self._consumer.incremental_assign([TopicPartition(tp[0], tp[1], outcome.start)])
        self._held[tp] = _Held(outcome.epoch, outcome.start, outcome.start, outcome.txn)
        self._pending.pop(tp, None)
        self._remembered.pop(tp, None)
        log.info(
            "%s: claimed %s-%d at epoch %d (%s)", self.member_id, tp[0], tp[1], outcome.epoch, outcome.took
        )
        if tp not in self.assigned:  # a newer epoch took it away while the claim ran
            self._release([tp])


def _in_parallel(target, calls: list[tuple]) -> None:
    """Run ``target(*args)`` for each args tuple on a thread of its own; return when all ended."""
    if len(calls) == 1:
        target(*calls[0])
        return
    threads = [threading.Thread(target=target, args=args, daemon=True) for args in calls]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()


def _names(tps) -> str:
    return ", ".join(f"{t}-{p}" for t, p in sorted(tps)) or "nothing"
