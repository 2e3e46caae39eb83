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
their previous owner released them, or after ``takeover_timeout`` (a dead owner). Each partition's
state is one record (partition_states.py); what differs between the modes is a
:class:`~rebalance_advisor_client.claim_modes.HandoverMode` chosen at construction.

Fenced mode (default, fenced_mode.py): each claimed partition has its own transactional producer;
claiming it fences every earlier holder at the broker, offsets and outputs commit in one
transaction per partition, and each claim runs on a thread of its own (claim_runner.py), so one
partition's slow claim delays nothing else. Unfenced mode (``fenced=False``, unfenced_mode.py):
commit metadata marks are read before every write. docs/protocol/ (the protocol; the states:
docs/protocol/states.md; the threads: docs/protocol/threads.md).
"""

from __future__ import annotations

import logging
import threading
import time
import uuid
from collections.abc import Callable, Mapping
from typing import Any

from confluent_kafka import KafkaError, KafkaException, TopicPartition
from confluent_kafka.admin import OffsetSpec

from rebalance_advisor_client.access import Grant, error_code, refusal
from rebalance_advisor_client.assignment_follower import AssignmentFollower
from rebalance_advisor_client.assignment_records import (
    DEFAULT_TOPIC,
    AssignmentRecord,
    TopicPartitionKey,
    connection_settings,
)
from rebalance_advisor_client.capacity_report import UtilisationMeter
from rebalance_advisor_client.claim_modes import HandoverMode
from rebalance_advisor_client.claim_runner import ClaimInput, ClaimOutcome, ClaimRunner
from rebalance_advisor_client.errors import AccessRefused, ClientError
from rebalance_advisor_client.fenced_mode import FencedMode
from rebalance_advisor_client.fencing import FencingToken
from rebalance_advisor_client.handover_rules import (
    RELEASED,
    Claim,
    OwnerMark,
    claim_decision,
    decode_mark,
    plan_handover,
)
from rebalance_advisor_client.kafka_clients import KafkaClients
from rebalance_advisor_client.partition_states import (
    ClaimVerdict,
    PartitionState,
    PartitionTable,
    partition_names,
)
from rebalance_advisor_client.range_set import RangeSet
from rebalance_advisor_client.unfenced_mode import UnfencedMode

log = logging.getLogger(__name__)

_EARLIEST = {"earliest", "smallest", "beginning"}
Marks = dict[TopicPartitionKey, tuple[int | None, OwnerMark | None]]
#: poll()'s wait slice while claims run: how soon a finished claim is applied (at most)
_CLAIM_APPLY_S = 0.02
_AGAIN = object()  # _deliver: look at the next message at once
#: the names tests/unit/test_client_claim_runner.py imports from here
_ClaimOutcome, _ClaimRunner = ClaimOutcome, ClaimRunner


class AssignedConsumer:
    """A confluent-kafka consumer whose partitions come from the advisor's published assignments.

    ``poll()`` returns only messages of partitions this member owns; positions of returned messages
    count as processed at the next ``commit()``/``close()``. In fenced mode (default) a commit is a
    transaction per partition holding its offset and every output sent with :meth:`produce` since
    the previous commit: exactly once across handovers. ``takeover_timeout`` must exceed the
    longest pause between two ``poll()`` calls, or a slow member is taken over (and, fenced, stopped).
    ``capacity_window_s``: how far back the capacity written into each mark looks (capacity_report.py).
    ``clients``: the factories of the Kafka clients it makes (kafka_clients.py; confluent-kafka's).
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
        clients: KafkaClients | None = None,
    ) -> None:
        _check_ids(config, group_id, member_id)
        self.group_id, self.member_id, self.fenced = group_id, member_id, fenced
        #: this run of the member id: tells a restarted member from its paused former self
        self.instance = uuid.uuid4().hex[:12]
        self.takeover_timeout, self.check_interval = takeover_timeout, check_interval
        self.request_timeout, self.mark_read_bound = request_timeout, mark_read_bound
        self._clients = clients or KafkaClients()
        self._reset_earliest = str(config.get("auto.offset.reset", "latest")) in _EARLIEST
        self._settings = connection_settings(dict(config))
        self._txn_settings = _transaction_settings(self._settings, request_timeout, transaction_timeout)
        #: what differs between the modes, chosen once (claim_modes.py); fenced checks transactions here
        self._mode: HandoverMode = (FencedMode if fenced else UnfencedMode)(self, ready_timeout)
        self._consumer_config = _consumer_config(config, group_id)
        self._make_consumers()
        self._assignment_topic = topic
        self._init_state(capacity_window_s)
        self._ranges = self._make_ranges()
        self._start_following(topic, ready_timeout)

    def _init_state(self, capacity_window_s: float) -> None:
        #: since when the group coordinator has not answered this consumer (None: it answers)
        self._unanswered_since: float | None = None
        self.epoch = 0
        self.assigned: frozenset[TopicPartitionKey] = frozenset()  # what the latest known epoch gives us
        self._partitions = PartitionTable()  # each partition's state (partition_states.py)
        self._claims = ClaimRunner(self.member_id)  # claims in flight, each on a thread of its own
        self._admin: Any = None  # start offsets of never-committed partitions
        self._admin_lock = threading.Lock()
        self._next_check = 0.0
        self._last_call = time.monotonic()
        #: busy and idle time around poll(): the capacity written into each mark (capacity_report.py)
        self._meter = UtilisationMeter(window_s=capacity_window_s)

    def _make_ranges(self) -> RangeSet:
        """Key ranges of split partitions (record format 2): their own consumers, see range_set.py."""
        return RangeSet(
            self._settings, self.group_id, self.member_id, self._whole_owner_released,
            instance=self.instance, epoch=lambda: self.epoch, takeover_timeout=self.takeover_timeout,
            fenced=self.fenced, transaction_settings=self._txn_settings, request_timeout=self.request_timeout,
        )  # fmt: skip

    def _make_consumers(self) -> None:
        make = self._clients.consumer
        self._consumer = make(self._consumer_config)
        #: the unfenced claims' own consumer (mark reads and claim writes; it never polls): a
        #: synchronous commit or watermark query on the polled consumer from another thread was
        #: seen to wait until the caller's thread stopped polling
        self._claim_consumer = make(self._consumer_config)
        #: fenced claims' reads, one consumer per read in flight (offset_reads.py): the mark that
        #: decides whether to fence is read without waiting for stable offsets (a dead owner's open
        #: transaction would hold it until transaction.timeout.ms), the offset after the fence stable
        readers = self._clients.offset_readers
        self._hints = readers(
            self._consumer_config, stable=False, name=f"{self.member_id} hints", make_consumer=make
        )
        self._settled = readers(
            self._consumer_config, stable=True, name=f"{self.member_id} settled", make_consumer=make
        )

    def _start_following(self, topic: str, ready_timeout: float) -> None:
        """Start the assignment follower, wait for it to read the topic, apply what it found."""
        self._follower = AssignmentFollower(
            self._settings, topic, self.group_id, self.member_id, make_consumer=self._clients.consumer
        )
        self._follower.start()
        if self._follower.ready.wait(ready_timeout) and self._follower.refused:
            self.close(release=False)
            raise AccessRefused(
                f"{self.member_id}: cannot read assignment topic {topic}: {self._follower.refused}"
            )
        if not self._follower.ready.is_set():
            log.warning(
                "%s: assignment topic %s not read to its end within %.0f s (broker restarting or "
                "unreachable?): consuming nothing until it is",
                self.member_id, topic, ready_timeout,
            )  # fmt: skip
        elif self._follower.latest() is None:
            log.warning(
                "%s: no assignment for member %s of group %s on %s: consuming nothing until a plan "
                "assigns it (is the member registered with the advisor, and its id spelled the same?)",
                self.member_id, self.member_id, self.group_id, topic,
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
        return self._partitions.owned()

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
            holds = self._partitions.holding()
            if self._ranges.held:  # key ranges first (without waiting while whole partitions are held)
                message = self._ranges.poll(0.0 if holds else max(min(remaining, self.check_interval), 0))
                if message is not None:
                    return message
                if not holds:
                    if time.monotonic() >= deadline:
                        return None
                    continue
            message = self._consumer.poll(max(min(remaining, self._poll_slice()), 0))
            self._note_gap()
            if message is not None:
                found = self._deliver(message)
                if found is _AGAIN:
                    continue
                if found is not None:
                    return found
            if time.monotonic() >= deadline:
                return None

    def _deliver(self, message: Any) -> Any:
        """``message`` when the application gets it; None when not; ``_AGAIN``: poll again at once."""
        if message.error():
            self._refused(message.error(), message.topic())
            if message.error().code() != KafkaError._PARTITION_EOF:
                log.warning("%s: consumer error: %s", self.member_id, message.error())
            return None
        tp = (message.topic(), message.partition())
        record = self._partitions.held(tp)
        if record is None or record.paused or message.offset() < record.position:
            return None
        if self._ranges.already_done(tp, message):  # a merge: a range owner did it
            record.position = message.offset() + 1
            return _AGAIN
        if not self._mode.begin(tp, record):
            return _AGAIN
        record.position = message.offset() + 1
        return message

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
        record = self._partitions.held(tp)
        if record is None and (token := self._ranges.token(tp)) is not None:  # a key range of tp
            return token
        if record is None:
            raise ClientError(f"{tp[0]}-{tp[1]} is not held by {self.member_id} (any more): skip the write")
        producer = record.txn.producer if record.txn is not None else None
        return FencingToken(*(producer or (None, None)), record.claimed_at)

    def produce(self, message, topic: str, value: Any = None, key: Any = None, **kwargs: Any) -> None:
        """Send an output in the transaction of ``message``'s partition (fenced mode only).

        It becomes visible to ``read_committed`` readers with the commit that moves that partition
        past ``message``; if the member is fenced first it never does, and the new owner redoes it.
        """
        self._mode.produce(message, topic, value, key, **kwargs)

    def commit(self) -> dict[TopicPartitionKey, int]:
        """Commit processed positions of owned partitions (with our mark); returns what was written.

        Partitions another member took over are not committed: they are dropped instead. A broker
        that cannot be reached is logged; the positions are committed by a later call.
        """
        self._note_gap()
        self._maintain()
        ranged = self._ranges.commit()  # key ranges: commits under their derived groups (range_set.py)
        return {**self._mode.commit(), **ranged}

    def close(self, release: bool = True) -> None:
        """Commit and release what this member holds (so a successor need not wait), then stop."""
        try:
            if hasattr(self, "_claims"):  # claims in flight: cancel, wait; a finished one is released
                for outcome in self._claims.close(self.request_timeout + 5.0):
                    self._apply_claim(outcome)
            if release and self._partitions.holding():
                self._release(self._partitions.held_partitions())
        finally:
            self._ranges.close()
            self._partitions.close()
            self._follower.stop()
            self._follower.join(5)
            for name in ("_consumer", "_claim_consumer", "_hints", "_settled"):
                if hasattr(self, name):
                    getattr(self, name).close()

    # -- epochs, claims, releases -----------------------------------------------------------------

    def _note_gap(self) -> None:
        now = time.monotonic()
        gap, self._last_call = now - self._last_call, now
        if gap > self.takeover_timeout / 2 and self._partitions.holding():
            log.warning("%s: %.1f s since the last call: checking ownership again", self.member_id, gap)
            self._mode.revalidate(self._partitions.held_partitions())

    def _maintain(self) -> None:
        self._apply_claims(self._claims.finished())  # before a new epoch: a claim it lost is released
        record = self._follower.latest()
        if record is not None and record.epoch > self.epoch:
            self._apply(record)
        self._ranges.start_ready()
        if self._partitions.waiting() and time.monotonic() >= self._next_check:
            self._next_check = time.monotonic() + self.check_interval
            self._start_claims()
            self._mode.warm_up()
        self._mode.retry_commits()

    def _apply(self, record: AssignmentRecord) -> None:
        new = frozenset(record.partitions)
        change = plan_handover(self.assigned, new, self.epoch, record.epoch)
        log.info(
            "%s: epoch %d -> %d (plan %s): keep %d, re-check %d, gain %d, lose %d",
            self.member_id, self.epoch, record.epoch, record.plan_id,
            len(change.kept), len(change.reclaim), len(change.gained), len(change.lost),
        )  # fmt: skip
        self.epoch, self.assigned = record.epoch, new
        lost_held = self._partitions.lose(change.lost)
        if lost_held:
            self._release(lost_held)
        held_again = sorted(tp for tp in change.reclaim if self._partitions.held(tp) is not None)
        if held_again:
            self._mode.revalidate(held_again)
        now = time.monotonic()
        for tp in change.gained | change.reclaim:
            self._partitions.gain(tp, now)
        self._mode.warm_up()
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

    def _read_marks(self, tps: list[TopicPartitionKey], consumer: Any = None) -> Marks:
        """Committed offsets and marks of ``tps``. ``consumer`` given: on a claim thread, whose
        outcome tells the caller's thread whether the coordinator answered (see _apply_claim)."""
        partitions = [TopicPartition(t, p) for t, p in tps]
        result = self._group_request(
            consumer,
            lambda reader: reader.committed(partitions, timeout=self.request_timeout),
            f"reading committed offsets of group {self.group_id}",
            check_refusal=True,
        )
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

    def _group_request(
        self, consumer: Any, call: Callable[[Any], Any], what: str, check_refusal: bool = False
    ) -> Any:
        """``call`` on ``consumer`` (the polled one when None); its errors become a ClientError saying
        ``what`` failed. The polled consumer's timeouts count toward replacing it."""
        try:
            return call(consumer or self._consumer)
        except KafkaException as error:
            if check_refusal:
                self._refused(error)
            if consumer is None:
                self._coordinator_unanswered(error)
            raise ClientError(f"{what}: {error}") from error
        except RuntimeError as error:  # a claim thread's consumer was replaced and closed meanwhile
            raise ClientError(f"{what}: {error}") from error

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
            self._replace_consumers()

    def _replace_consumers(self) -> None:
        """New polled and claims' consumers; what this member holds is assigned at its positions."""
        old, self._consumer = self._consumer, self._clients.consumer(self._consumer_config)
        old_claims, self._claim_consumer = self._claim_consumer, self._clients.consumer(self._consumer_config)
        held = [(tp, self._partitions.held(tp)) for tp in self._partitions.held_partitions()]
        if held:
            self._consumer.incremental_assign([TopicPartition(t, p, r.position) for (t, p), r in held])
            paused = [TopicPartition(t, p) for (t, p), r in held if r.paused]
            if paused:
                self._consumer.pause(paused)
        # closing a wedged consumer can block as long as its requests: not on this thread, and
        # only once the claims that still use it have ended
        claims, patience = self._claims, 3 * self.request_timeout + 10.0

        def close_old() -> None:
            old.close()
            claims.join(patience)
            old_claims.close()

        threading.Thread(target=close_old, name="consumer-close", daemon=True).start()

    def _mark(self, tp: TopicPartitionKey, state: str, claimed_at: int | None = None) -> str:
        record = self._partitions.held(tp)
        epoch = claimed_at if claimed_at is not None else record.claimed_at
        producer = record.txn.producer if record is not None and record.txn is not None else None
        mark = OwnerMark(self.member_id, epoch, state, self.instance, producer, self.epoch)
        return mark.encode(self._meter.report())

    def _drop(self, tp: TopicPartitionKey, fenced: bool, consuming: bool = True) -> None:
        """Stop consuming a partition (someone else holds it now); if still assigned it waits again."""
        assigned = tp in self.assigned
        self._partitions.drop(tp, self.epoch, fenced, assigned, time.monotonic())
        if consuming:
            self._consumer.incremental_unassign([TopicPartition(*tp)])
        if assigned:
            self._mode.warm_up()

    def _release(self, tps: list[TopicPartitionKey]) -> None:
        """Stop fetching first, then commit the processed position with a ``released`` mark."""
        started = time.monotonic()
        self._consumer.incremental_unassign([TopicPartition(*tp) for tp in tps])
        self._partitions.start_release(tps)
        released = self._mode.release(tps)
        for tp in tps:
            self._partitions.released(tp)
        log.info(
            "%s: released %s at epoch %d (%.3f s)",
            self.member_id, partition_names(released), self.epoch, time.monotonic() - started,
        )  # fmt: skip

    def _start_claims(self) -> None:
        """Start (fenced) or run (unfenced, in turn: unfenced_mode.py) a claim for each partition
        that waits and has none running."""
        if self._newer_epoch_known(self.epoch):
            self._next_check = 0.0  # apply it first (at the next call)
            return
        now = time.monotonic()
        metadata = self._mode.group_metadata()
        for tp in self._partitions.claimable():
            record = self._partitions.get(tp)
            if record is None or record.state is not PartitionState.WAITING:
                continue  # an earlier claim's outcome changed it
            who = record.claimant(self.member_id, self.instance, self.epoch)
            waited, remembered = now - record.waiting_since, record.remembered
            spare = self._partitions.start_claim(tp)
            claim = ClaimInput(tp, who, waited, self._claim_consumer, spare, remembered, metadata)
            if not self._mode.launch(claim):
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

    # -- a claim, on its own thread in fenced mode: reads only what ClaimInput carries ------------

    def _claim(self, claim: ClaimInput) -> ClaimOutcome:
        """Read the mark, decide, then claim through the mode; never touches the caller's state."""
        tp, epoch = claim.tp, claim.who.epoch
        outcome = ClaimOutcome(tp, epoch, txn=claim.txn)  # not claimed: the spare producer goes back
        read_at = time.monotonic()
        try:  # fenced: a hint only, read without waiting for open transactions (offset_reads.py)
            committed, mark = self._read_marks([tp], self._mode.hint_reader(claim))[tp]
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
        return self._mode.finish(claim, committed, read_at, outcome)

    def _start_offset(self, tp: TopicPartitionKey) -> int | None:
        """Where to start a never-committed partition, by ``auto.offset.reset`` (default latest).

        Asked through an AdminClient: the consumer's ``get_watermark_offsets`` called on a claim
        thread was seen to block until the caller's thread stopped polling.
        """
        spec = OffsetSpec.earliest() if self._reset_earliest else OffsetSpec.latest()
        try:
            with self._admin_lock:
                if self._admin is None:
                    self._admin = self._clients.admin(self._settings)
                admin = self._admin
            futures = admin.list_offsets({TopicPartition(*tp): spec}, request_timeout=self.request_timeout)
            return next(iter(futures.values())).result(self.request_timeout + 1).offset
        except (KafkaException, RuntimeError, TimeoutError) as error:
            log.warning("%s: no offsets for %s-%d yet: %s", self.member_id, tp[0], tp[1], error)
            return None

    # -- finished claims, on the caller's thread ---------------------------------------------------

    def _apply_claims(self, outcomes: list[ClaimOutcome]) -> None:
        for index, outcome in enumerate(outcomes):
            try:
                self._apply_claim(outcome)
            except BaseException:  # a missing grant: the others were not applied, they wait again
                for rest in outcomes[index + 1 :]:
                    self._partitions.finish_claim(
                        rest.tp, rest.epoch, None, rest.txn, self.epoch, rest.tp in self.assigned
                    )
                raise

    def _apply_claim(self, outcome: ClaimOutcome) -> None:
        """Assign a finished claim at its offset, or note why it did not go through
        (``PartitionTable.finish_claim`` says which, and why a claim of an older epoch is kept,
        released at once or claimed again)."""
        tp = outcome.tp
        if isinstance(outcome.error, AccessRefused):
            if outcome.txn is not None:
                outcome.txn.close()
            self._claim_undone(tp, outcome.epoch)
            raise outcome.error  # a grant is missing: waiting will not bring it
        self._note_claim_error(outcome)
        if outcome.again:
            self._next_check = 0.0
        verdict = self._partitions.finish_claim(
            tp, outcome.epoch, outcome.start, outcome.txn, self.epoch, tp in self.assigned
        )
        if verdict is ClaimVerdict.CLAIM_AGAIN:
            self._next_check = 0.0
        if verdict not in (ClaimVerdict.ASSIGN, ClaimVerdict.RELEASE_AT_ONCE):
            return
        self._consumer.incremental_assign([TopicPartition(tp[0], tp[1], outcome.start)])
        log.info(
            "%s: claimed %s-%d at epoch %d (%s)", self.member_id, tp[0], tp[1], outcome.epoch, outcome.took
        )
        if verdict is ClaimVerdict.RELEASE_AT_ONCE:  # a newer epoch took it away while the claim ran
            self._release([tp])

    def _claim_undone(self, tp: TopicPartitionKey, epoch: int) -> None:
        """A claim that raised: its partition waits again (a later check claims it again)."""
        self._partitions.finish_claim(tp, epoch, None, None, self.epoch, tp in self.assigned)

    def _note_claim_error(self, outcome: ClaimOutcome) -> None:
        if isinstance(outcome.error, KafkaException) and self._mode.unanswered(outcome.error):
            return
        if outcome.answered:
            self._unanswered_since = None
        elif outcome.error is not None:
            log.error("%s: claim of %s-%d failed, will retry: %r", self.member_id, *outcome.tp, outcome.error)


def _check_ids(config: Mapping[str, Any], group_id: str, member_id: str) -> None:
    if config.get("group.id", group_id) != group_id:
        raise ClientError(f"config has group.id={config['group.id']!r} but the group is {group_id!r}")
    if not member_id:
        raise ClientError("member_id must be a non-empty string (a stable id per consumer instance)")


def _transaction_settings(
    settings: dict[str, Any], request_timeout: float, transaction_timeout: float
) -> dict:
    return {
        **settings,
        "transaction.timeout.ms": int(transaction_timeout * 1000),
        # librdkafka's own request timeout (default 60 s) bounds the transactional calls when a
        # coordinator moves (a broker restart); keep them near request_timeout, not a minute
        "socket.timeout.ms": max(int(min(request_timeout, transaction_timeout - 1) * 1000), 1000),
    }


def _consumer_config(config: Mapping[str, Any], group_id: str) -> dict[str, Any]:
    return {
        **config,
        "group.id": group_id,
        "enable.auto.commit": False,
        "enable.auto.offset.store": False,
        # committed() then waits for open transactions: a claim reads settled offsets
        "isolation.level": "read_committed",
    }
