"""Fenced mode (the default): one transactional producer per claimed partition.

A claim fences every earlier holder at the broker before it reads the settled offset; commits and
outputs go into one transaction per partition; claims run on threads of their own
(docs/protocol/threads.md). Guarantees: docs/protocol/fenced.md; liveness under faults:
docs/protocol/liveness.md.
"""

from __future__ import annotations

import logging
import threading
import time
from typing import TYPE_CHECKING, Any

from confluent_kafka import KafkaError, KafkaException, TopicPartition

from rebalance_advisor_client.assignment_records import TopicPartitionKey
from rebalance_advisor_client.claim_runner import ClaimInput, ClaimOutcome
from rebalance_advisor_client.errors import ClientError
from rebalance_advisor_client.fencing import classify, probe_transactions, transactional_id
from rebalance_advisor_client.handover_rules import OWNED, RELEASED, Claim, OwnerMark, claim_decision
from rebalance_advisor_client.partition_states import PartitionRecord

if TYPE_CHECKING:
    from rebalance_advisor_client.consumer import AssignedConsumer

log = logging.getLogger(__name__)

_NOT_TRIED = object()  # _transaction_failed: no abort was tried yet
#: a fenced claim whose mark read is older than this when it is about to fence reads it again (the
#: process was paused in between); wider than mark_read_bound, which guards unfenced writes, because
#: a fenced claim's later reads are exact and a loaded machine often takes 0.5 s between two steps
_FENCE_READ_BOUND_S = 2.0


class FencedMode:
    """The fenced :class:`~rebalance_advisor_client.claim_modes.HandoverMode`; checks at
    construction that this member may use transactions under the group's prefix."""

    def __init__(self, owner: AssignedConsumer, ready_timeout: float) -> None:
        self._owner = owner
        probe_transactions(
            owner._txn_settings, owner.group_id, owner.member_id, owner.request_timeout,
            patience=ready_timeout, make=owner._clients.transaction,
        )  # fmt: skip

    # -- commits: one transaction per partition ----------------------------------------------------

    def commit(self) -> dict[TopicPartitionKey, int]:
        return self._commit_due(OWNED)

    def retry_commits(self) -> None:
        partitions = self._owner._partitions
        if any(partitions.held(tp).paused for tp in partitions.held_partitions()):
            self._commit_due(OWNED, only_paused=True)

    def revalidate(self, tps: list[TopicPartitionKey]) -> None:
        """By committing: a fenced member's commit is refused by the broker (and it drops the partition)."""
        self._commit_due(OWNED, only=set(tps), force=True)

    def release(self, tps: list[TopicPartitionKey]) -> list[TopicPartitionKey]:
        """Commit with a released mark; an aborted one is released from its last commit at once, a
        retriable failure is tried again for up to ``request_timeout``."""
        owner = self._owner
        deadline = time.monotonic() + owner.request_timeout
        waiting, released = list(tps), []
        while waiting and time.monotonic() < deadline:
            released += self._commit_many(waiting, RELEASED, consuming=False)
            waiting = [tp for tp in waiting if owner._partitions.held(tp) and tp not in released]
            if any(owner._partitions.held(tp).paused for tp in waiting):
                time.sleep(0.2)
        return released

    def _commit_due(
        self, state: str, only: set | None = None, only_paused: bool = False, force: bool = False
    ) -> dict[TopicPartitionKey, int]:
        """Commit the held partitions that have something new (all of ``only`` when ``force``)."""
        due = []
        for tp in self._owner._partitions.held_partitions():
            record = self._owner._partitions.held(tp)
            if only is not None and tp not in only or only_paused and not record.paused:
                continue
            outputs = record.txn.outputs if record.txn is not None else 0
            if not force and not record.paused and record.position == record.committed and not outputs:
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
        owner = self._owner
        metadata = owner._consumer.consumer_group_metadata()
        work = {}
        for tp in tps:
            record = owner._partitions.held(tp)
            offsets = [TopicPartition(tp[0], tp[1], record.position, metadata=owner._mark(tp, state))]
            work[tp] = (record, record.position, offsets)
        errors, aborts = _commit_all(work, metadata)
        return self._committed(work, errors, aborts, consuming)

    def _committed(
        self, work: dict, errors: dict, aborts: dict, consuming: bool
    ) -> dict[TopicPartitionKey, int]:
        """Note what each transaction did: committed (a paused partition fetches again), or failed."""
        written = {}
        for tp, (record, offset, _) in work.items():
            error = errors.get(tp, KafkaException(KafkaError(KafkaError._FAIL, "commit thread ended")))
            if error is not None:
                self._transaction_failed(tp, error, "commit", consuming, aborts.get(tp, _NOT_TRIED))
                continue
            record.committed = offset
            written[tp] = offset
            if record.paused:
                record.paused = False
                if consuming:
                    self._resume_at(tp, record.position)
        return written

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
        kind, owner = classify(error), self._owner
        record = owner._partitions.held(tp)
        if record is None:
            return
        if kind == "stuck":
            log.warning(
                "%s: %s of %s-%d is stuck (%s): giving this producer up, claiming the partition again",
                owner.member_id, action, tp[0], tp[1], error,
            )  # fmt: skip
            owner._drop(tp, fenced=False, consuming=consuming)
        elif kind == "fenced":
            log.warning(
                "%s: fenced on %s-%d (another member claimed it): dropping it, nothing committed (%s)",
                owner.member_id, tp[0], tp[1], error,
            )  # fmt: skip
            owner._drop(tp, fenced=True, consuming=consuming)
        elif kind == "retry" and record.txn.committing:
            log.warning("%s: %s of %s-%d failed, will retry: %s", owner.member_id, action, *tp, error)
            if not record.paused:
                record.paused = True
                if consuming:
                    self._pause(tp, True)
        else:
            self._abort(tp, record, f"{action} of {tp[0]}-{tp[1]} failed ({error})", consuming, aborted)

    def _abort(
        self, tp: TopicPartitionKey, record: PartitionRecord, what: str, consuming: bool, aborted: Any
    ) -> None:
        """Abort the open transaction and redo from the last commit; an abort that fails drops it."""
        owner = self._owner
        log.warning("%s: %s: aborting, redoing from offset %d", owner.member_id, what, record.committed)
        try:
            if aborted is _NOT_TRIED:
                record.txn.abort()
            elif aborted is not None:
                raise aborted
        except KafkaException as abort_error:
            if classify(abort_error) == "fenced":
                owner._drop(tp, fenced=True, consuming=consuming)
                return
            log.warning("%s: abort of %s-%d failed: %s", owner.member_id, *tp, abort_error)
            owner._drop(
                tp, fenced=False, consuming=consuming
            )  # the next claim starts from the committed offset
            return
        record.position = record.committed
        if consuming:  # fetch again from the last committed offset: the aborted outputs must be redone
            record.paused = False
            self._resume_at(tp, record.committed)

    def _resume_at(self, tp: TopicPartitionKey, offset: int) -> None:
        """Fetch again from ``offset``: records dropped while paused are fetched again, none skipped."""
        owner = self._owner
        self._pause(tp, False)
        try:
            owner._consumer.seek(TopicPartition(tp[0], tp[1], offset))
        except KafkaException as error:  # not fetching yet: re-assign at the offset instead
            log.info("%s: seek of %s-%d: %s; re-assigning", owner.member_id, *tp, error)
            owner._consumer.incremental_unassign([TopicPartition(*tp)])
            owner._consumer.incremental_assign([TopicPartition(tp[0], tp[1], offset)])

    def _pause(self, tp: TopicPartitionKey, pause: bool) -> None:
        consumer = self._owner._consumer
        try:
            (consumer.pause if pause else consumer.resume)([TopicPartition(*tp)])
        except KafkaException as error:
            log.debug("%s: pause/resume of %s-%d: %s", self._owner.member_id, *tp, error)

    # -- consuming ---------------------------------------------------------------------------------

    def begin(self, tp: TopicPartitionKey, record: PartitionRecord) -> bool:
        """Open the partition's transaction: the record's outputs and offset commit in it."""
        if record.txn is None:
            return True
        try:
            record.txn.begin()
            return True
        except KafkaException as error:
            self._transaction_failed(tp, error, "begin")
            return False

    def produce(self, message: Any, topic: str, value: Any, key: Any, **kwargs: Any) -> None:
        owner = self._owner
        tp = (message.topic(), message.partition())
        record = owner._partitions.held(tp)
        if record is None and owner._ranges.produce(message, topic, value, key, **kwargs):  # a key range
            return
        if record is None or record.txn is None:
            raise ClientError(f"{tp[0]}-{tp[1]} is no longer held by {owner.member_id}: drop this output")
        try:
            record.txn.produce(topic, value, key, **kwargs)
        except KafkaException as error:
            self._transaction_failed(tp, error, "produce")
            raise ClientError(f"{tp[0]}-{tp[1]}: output not sent ({error}); it will be redone") from error

    # -- claims: fence, read the settled offset, commit the claim ----------------------------------

    def group_metadata(self) -> Any:
        return self._owner._consumer.consumer_group_metadata()

    def launch(self, claim: ClaimInput) -> bool:
        """Start the claim on a thread of its own (docs/protocol/threads.md)."""
        owner = self._owner
        owner._claims.start(claim.tp, claim.who.epoch, lambda: owner._claim(claim))
        return True

    def hint_reader(self, claim: ClaimInput) -> Any:
        return self._owner._hints  # a hint only, read without waiting for open transactions (offset_reads.py)

    def finish(
        self, claim: ClaimInput, committed: int | None, read_at: float, outcome: ClaimOutcome
    ) -> ClaimOutcome:
        """Fence only under the newest epoch and a fresh read; the claim itself: _claim_fenced."""
        if not self._may_fence(claim.tp, claim.who.epoch):
            outcome.again = True
            return outcome
        if time.monotonic() - read_at > _FENCE_READ_BOUND_S and not self._still_takes(claim, outcome):
            return outcome
        if not self._owner._ranges.fence_ranges(claim.tp):
            return outcome
        outcome.txn = None
        return self._claim_fenced(claim, read_at, outcome)

    def _may_fence(self, tp: TopicPartitionKey, epoch: int) -> bool:
        """Is ``epoch`` still the newest one, read from the assignment topic up to an end queried
        now? A member resumed from a pause knows only the epochs before it, and its claim fenced
        the new owner (docs/protocol/liveness.md, "Stale claims")."""
        owner = self._owner
        partitions = owner._follower.partitions()
        try:
            ends = owner._settled.ends(owner._assignment_topic, partitions, owner.request_timeout)
        except (KafkaException, RuntimeError) as error:
            log.info("%s: cannot read the assignment topic's end before fencing: %s", owner.member_id, error)
            return False
        if not owner._follower.caught_up(ends, owner.request_timeout) or owner._newer_epoch_known(epoch):
            log.info(
                "%s: not fencing %s-%d at epoch %d: a newer epoch or none read", owner.member_id, *tp, epoch
            )
            return False
        return True

    def _still_takes(self, claim: ClaimInput, outcome: ClaimOutcome) -> bool:
        """The mark was read too long ago to fence on (a pause, or a slow machine): read it again;
        does the claim still take the partition? (A restarted instance of this member id may have
        claimed it meanwhile, at the same epoch: the newest-epoch check cannot tell.)"""
        owner = self._owner
        log.info("%s: mark of %s-%d read too long ago (paused?): reading again", owner.member_id, *claim.tp)
        try:
            _, mark = owner._read_marks([claim.tp], owner._hints)[claim.tp]
        except ClientError as error:
            log.warning("%s: cannot check %s-%d to claim yet: %s", owner.member_id, *claim.tp, error)
            return False
        decision = claim_decision(claim.who, mark, claim.waited, owner.takeover_timeout)
        if decision not in (Claim.TAKE, Claim.TAKE_OVER):
            outcome.again = decision is Claim.STALE
            return False
        return True

    def _claim_fenced(self, claim: ClaimInput, read_at: float, outcome: ClaimOutcome) -> ClaimOutcome:
        """Fence, read the settled mark, write our claim in a transaction of the new producer."""
        fence_from, warm = time.monotonic(), claim.txn is not None
        txn = claim.txn or self.new_transaction(claim.tp)
        if not self._fence(claim, txn, fence_from, outcome):
            return outcome
        fenced_at = time.monotonic()
        starts = self._settled_start(claim, txn, outcome)
        if starts is None:
            return outcome
        settled_at = time.monotonic()
        if not self._commit_claim(claim, txn, starts[0]):
            return outcome
        outcome.start, outcome.txn = starts[1], txn
        outcome.took = (
            f"read {fence_from - read_at:.3f} s; fencing ({'warm' if warm else 'cold'}) "
            f"{fenced_at - fence_from:.3f} s; settled {settled_at - fenced_at:.3f} s; "
            f"claim transaction {time.monotonic() - settled_at:.3f} s"
        )
        return outcome

    def _fence(self, claim: ClaimInput, txn: Any, fence_from: float, outcome: ClaimOutcome) -> bool:
        """``init_transactions`` in attempts, stopped once the claim no longer stands (closing, or a
        newer epoch, read up to the assignment topic's end as before the fence: the member's
        follower may lag after a pause): docs/protocol/liveness.md, "Stale claims"."""
        owner, tp, epoch = self._owner, claim.tp, claim.who.epoch
        stopped = False

        def known_moved_on() -> bool:
            return owner._claims.cancelled.is_set() or owner._newer_epoch_known(epoch)

        def moved_on() -> bool:  # checked between init_transactions attempts
            nonlocal stopped
            stopped = known_moved_on() or not self._may_fence(tp, epoch)
            return stopped

        try:
            producer = txn.fence(moved_on)
        except KafkaException as error:
            log.warning("%s: cannot fence %s-%d yet: %s", owner.member_id, tp[0], tp[1], error)
            txn.close()  # a stopped fence: its producer retries no more
            # stopped: claim again at once; a fence that failed (e.g. the broker away) asks no broker
            # again here, and waits for the next check unless a newer epoch is already known
            outcome.again = stopped or known_moved_on()
            return False
        log.info(
            "%s: fence of %s-%d by a claim at epoch %d: producer %s (%.3f s)",
            owner.member_id, tp[0], tp[1], epoch, list(producer), time.monotonic() - fence_from,
        )  # fmt: skip
        return True

    def _settled_start(self, claim: ClaimInput, txn: Any, outcome: ClaimOutcome) -> tuple[int, int] | None:
        """After the fence: the settled offset to claim at and the first offset to fetch (a merge
        skips what key ranges did), or None (the producer closed) when the claim does not go on."""
        owner, tp, epoch = self._owner, claim.tp, claim.who.epoch
        try:
            if owner._claims.cancelled.is_set():
                raise ClientError("closing")
            committed, mark = owner._read_marks([tp], owner._settled)[tp]  # after fencing: final
        except ClientError as error:
            log.warning("%s: claim failed, will retry: %s", owner.member_id, error)
            txn.close()
            return None
        start = None
        if self._settled_takes(claim, mark):
            start = committed if committed is not None else owner._start_offset(tp)
        first = None if start is None else owner._ranges.merged_start(tp, start)  # after fence_ranges
        if start is None or first is None:
            txn.close()  # claimed again at the next check
            return None
        if owner._newer_epoch_known(epoch) or owner._claims.cancelled.is_set():
            # a claim mark of an epoch already moved on would make that epoch's claimant wait for
            # (or fence) us; the previous owner's mark stays as it was
            log.info(
                "%s: claim of %s-%d at epoch %d dropped after its fence: a newer epoch",
                owner.member_id,
                *tp,
                epoch,
            )
            txn.close()
            outcome.again = True
            return None
        return start, first

    def _settled_takes(self, claim: ClaimInput, mark: OwnerMark | None) -> bool:
        """Does the settled mark let the claim go on? An owner of an older epoch that claimed between
        our read and our fence (its claim was in flight when its next epoch arrived) was just fenced
        by us, so it can never release it: waiting would only cost the takeover timeout."""
        owner, tp = self._owner, claim.tp
        decision = claim_decision(claim.who, mark, claim.waited, owner.takeover_timeout)
        if decision is Claim.WAIT:
            log.warning(
                "%s: taking over %s-%d from %s (epoch %d): it claimed meanwhile and we fenced it",
                owner.member_id, tp[0], tp[1], mark.member, mark.epoch,
            )  # fmt: skip
        elif decision is not Claim.TAKE and decision is not Claim.TAKE_OVER:
            log.warning(
                "%s: %s-%d was claimed by %s meanwhile: backing off", owner.member_id, *tp, mark.member
            )
            return False
        return True

    def _commit_claim(self, claim: ClaimInput, txn: Any, start: int) -> bool:
        """The claim itself: a transaction that writes our mark at the settled offset (retriable
        failures retried for up to ``request_timeout``); False: the producer closed, claim again."""
        owner, tp, epoch = self._owner, claim.tp, claim.who.epoch
        mark_text = OwnerMark(owner.member_id, epoch, OWNED, owner.instance, txn.producer, epoch).encode()
        offsets = [TopicPartition(tp[0], tp[1], start, metadata=mark_text)]
        deadline = time.monotonic() + owner.request_timeout
        while True:
            try:
                txn.commit(offsets, claim.group_metadata)
                return True
            except KafkaException as error:
                kind = classify(error)
                if kind == "retry" and txn.committing and time.monotonic() < deadline:
                    time.sleep(0.2)
                    continue
                log.warning(
                    "%s: claim transaction of %s-%d failed (%s, %s): claiming again",
                    owner.member_id, tp[0], tp[1], kind, error,
                )  # fmt: skip
                txn.close()  # its open transaction is aborted by the next fence
                return False

    def new_transaction(self, tp: TopicPartitionKey) -> Any:
        owner = self._owner
        return owner._clients.transaction(
            owner._txn_settings, transactional_id(owner.group_id, *tp), owner.request_timeout, topic=tp[0]
        )

    def warm_up(self) -> None:
        """Create the producers of partitions we wait for, without fencing anyone yet.

        A new librdkafka producer needs up to 0.5 s to connect and find the transaction
        coordinator (measured: 54-530 ms cold, 3-10 ms warm); paying that while the previous owner
        still releases keeps it out of the handover pause. ``init_transactions`` waits for the claim.
        """
        self._owner._partitions.make_spares(self.new_transaction)

    def unanswered(self, error: BaseException) -> bool:
        """Fenced claims read through readers lent per read, which replace themselves
        (offset_reads.py): the polled consumer reads no offsets in fenced mode, replacing it would
        only re-fetch what it holds. The caller logs the error."""
        return False


def _commit_all(work: dict, metadata: Any) -> tuple[dict, dict]:
    """Commit each partition's transaction on a thread of its own; (errors, aborts) per partition
    (None: done). An abortable failure is aborted there too: in parallel, not in turn after."""
    errors: dict[TopicPartitionKey, KafkaException | None] = {}
    aborts: dict[TopicPartitionKey, KafkaException | None] = {}

    def one(tp: TopicPartitionKey) -> None:
        txn = work[tp][0].txn
        try:
            txn.commit(work[tp][2], metadata)
            errors[tp] = None
        except KafkaException as error:
            errors[tp] = error
            if classify(error) == "abort":
                try:
                    txn.abort()
                    aborts[tp] = None
                except KafkaException as abort_error:
                    aborts[tp] = abort_error

    calls = list(work)
    if len(calls) == 1:
        one(calls[0])
        return errors, aborts
    threads = [threading.Thread(target=one, args=(tp,), daemon=True) for tp in calls]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return errors, aborts
