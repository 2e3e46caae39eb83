"""The states of each partition an :class:`AssignedConsumer` waits for, claims or holds. No I/O.

One :class:`PartitionRecord` per partition replaces what were parallel partition-keyed maps (held,
waiting since, fenced out at, remembered position, producers made ahead). The transitions are the
methods of :class:`PartitionTable`; the consumer performs the Kafka calls each one implies
(assign, unassign, commit) around them. docs/protocol/states.md describes the states and the
transitions with a diagram; the handover rules that decide *whether* to claim are
``handover_rules``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from enum import Enum
from typing import Protocol

from rebalance_advisor_client.assignment_records import TopicPartitionKey
from rebalance_advisor_client.handover_rules import Claimant


class PartitionState(Enum):
    """Where a partition is in this member's handover (docs/protocol/states.md)."""

    WAITING = "waiting"  # the epoch gives it to us; a claim starts at the next check
    CLAIMING = "claiming"  # a claim runs (fenced: on its own thread), or finished and waits to be applied
    OWNED = "owned"  # claimed: fetched, handed out by poll(), committed under our mark
    RELEASING = "releasing"  # lost: its processed position is being committed with a released mark


class HeldProducer(Protocol):
    """What a record keeps of a partition's transactional producer (fencing.PartitionTransaction)."""

    def close(self) -> None: ...


@dataclass
class PartitionRecord:
    """One partition of this member: its state and what that state needs.

    ``waiting_since`` is the takeover clock: when the partition was gained (or lost to someone and
    still assigned). None while owned, and while a claim of an epoch that no longer gives it to
    us still runs. ``fenced_out_at``: this instance lost it to another claimant at that epoch of
    ours; its claims at that epoch then treat other instances of its member id as strangers
    (``handover_rules.Claimant.fenced``).
    """

    tp: TopicPartitionKey
    state: PartitionState
    waiting_since: float | None = None
    claimed_at: int = 0  # assignment epoch of the claim: commits and releases are checked against it
    position: int = 0  # next offset to process
    committed: int = 0  # last offset this instance committed (the claim start at first)
    txn: HeldProducer | None = None  # fenced: the producer that holds it (OWNED, RELEASING)
    spare: HeldProducer | None = None  # fenced: a producer made ahead while it waits
    paused: bool = False  # fenced: a commit waits to be retried; no records are handed out
    fenced_out_at: int | None = None
    remembered: int | None = None  # unfenced: our position when a commit was refused

    @property
    def held(self) -> bool:
        """Claimed and not yet let go: it has a claim epoch, a position and (fenced) a producer."""
        return self.state in (PartitionState.OWNED, PartitionState.RELEASING)

    def claimant(self, member: str, instance: str, epoch: int) -> Claimant:
        """Who claims it at ``epoch``: fenced when this instance was fenced out at that epoch."""
        return Claimant(member, instance, epoch, self.fenced_out_at == epoch)


class ClaimVerdict(Enum):
    """What a finished claim does to its partition (PartitionTable.finish_claim)."""

    NOT_CLAIMED = "not_claimed"  # the claim did not go through: the partition waits again (or is gone)
    ASSIGN = "assign"  # consume from the claimed offset
    RELEASE_AT_ONCE = "release_at_once"  # a newer epoch moved it away while the claim ran: assign, release
    CLAIM_AGAIN = "claim_again"  # epochs were skipped while it ran: another member may have held it


class PartitionTable:
    """The records of one member, keyed by partition; every state change goes through a method."""

    def __init__(self) -> None:
        self._records: dict[TopicPartitionKey, PartitionRecord] = {}

    def get(self, tp: TopicPartitionKey) -> PartitionRecord | None:
        return self._records.get(tp)

    def held(self, tp: TopicPartitionKey) -> PartitionRecord | None:
        """The record of ``tp`` while this instance holds it (OWNED or RELEASING), else None."""
        record = self._records.get(tp)
        return record if record is not None and record.held else None

    def held_partitions(self) -> list[TopicPartitionKey]:
        return sorted(tp for tp, record in self._records.items() if record.held)

    def holding(self) -> bool:
        return any(record.held for record in self._records.values())

    def owned(self) -> frozenset[TopicPartitionKey]:
        return frozenset(tp for tp, record in self._records.items() if record.held)

    def waiting(self) -> list[TopicPartitionKey]:
        """Partitions the epoch gives us that are not claimed yet (a claim may be running)."""
        return sorted(tp for tp, record in self._records.items() if record.waiting_since is not None)

    # -- epochs ----------------------------------------------------------------------------------

    def lose(self, tps: Iterable[TopicPartitionKey]) -> list[TopicPartitionKey]:
        """A new epoch took ``tps`` away: waiting ones are forgotten; the held ones, returned, are
        released by the caller; a running claim's outcome decides for itself (finish_claim)."""
        held = []
        for tp in sorted(tps):
            record = self._records.get(tp)
            if record is None:
                continue
            record.remembered = None
            if record.held:
                held.append(tp)
            elif record.state is PartitionState.CLAIMING:
                record.waiting_since = None
            else:
                self._forget(tp)
        return held

    def gain(self, tp: TopicPartitionKey, now: float) -> None:
        """The epoch gives us ``tp``: it waits from ``now`` unless held or already waiting."""
        record = self._records.get(tp)
        if record is None:
            self._records[tp] = PartitionRecord(tp, PartitionState.WAITING, waiting_since=now)
        elif not record.held and record.waiting_since is None:
            record.waiting_since = now

    # -- claims ----------------------------------------------------------------------------------

    def claimable(self) -> list[TopicPartitionKey]:
        """Waiting partitions with no claim running: a claim may start for each."""
        return sorted(tp for tp, r in self._records.items() if r.state is PartitionState.WAITING)

    def make_spares(self, make: Callable[[TopicPartitionKey], HeldProducer]) -> None:
        """Fenced: give every waiting partition with no claim running a producer made ahead (the
        claim then fences at once: docs/protocol/fenced.md, "The fence in a handover")."""
        for tp in self.claimable():
            record = self._records[tp]
            if record.spare is None:
                record.spare = make(tp)

    def start_claim(self, tp: TopicPartitionKey) -> HeldProducer | None:
        """WAITING -> CLAIMING; returns the producer made ahead (the claim fences with it)."""
        record = self._records[tp]
        assert record.state is PartitionState.WAITING, record
        record.state = PartitionState.CLAIMING
        spare, record.spare = record.spare, None
        return spare

    def finish_claim(
        self,
        tp: TopicPartitionKey,
        claim_epoch: int,
        start: int | None,
        txn: HeldProducer | None,
        epoch: int,
        assigned: bool,
    ) -> ClaimVerdict:
        """A claim at ``claim_epoch`` finished while the member is at ``epoch``; ``start`` None: not
        claimed. Kept when ``epoch`` still gives the partition (``assigned``) and no epoch was
        skipped, as a kept partition would be; released at once when it no longer gives it (our
        mark says we own it: the successor would wait for the takeover timeout otherwise); after
        skipped epochs claimed again. A producer nobody keeps is closed here."""
        record = self._records.get(tp)
        if start is None:
            self._claim_failed(tp, record, txn)
            return ClaimVerdict.NOT_CLAIMED
        skipped = claim_epoch < epoch - 1
        if (record is not None and record.held) or (assigned and skipped):
            if txn is not None:
                txn.close()
            if record is not None and record.state is PartitionState.CLAIMING:
                self._back_to_waiting(tp, record)
            return ClaimVerdict.CLAIM_AGAIN
        self._records[tp] = PartitionRecord(
            tp, PartitionState.OWNED, None, claim_epoch, start, start, txn,
            fenced_out_at=None if record is None else record.fenced_out_at,
        )  # fmt: skip
        return ClaimVerdict.ASSIGN if assigned else ClaimVerdict.RELEASE_AT_ONCE

    def _claim_failed(
        self, tp: TopicPartitionKey, record: PartitionRecord | None, txn: HeldProducer | None
    ) -> None:
        """The claim did not go through: a partition still assigned waits again and keeps the claim's
        producer as its spare; one no longer assigned is forgotten."""
        waits = record is not None and not record.held and record.waiting_since is not None
        if txn is not None and (not waits or record.spare is not None):
            txn.close()
        elif txn is not None:
            record.spare = txn
        if record is not None and record.state is PartitionState.CLAIMING:
            self._back_to_waiting(tp, record)

    def _back_to_waiting(self, tp: TopicPartitionKey, record: PartitionRecord) -> None:
        if record.waiting_since is None:
            self._forget(tp)
        else:
            record.state = PartitionState.WAITING

    # -- holding and letting go ------------------------------------------------------------------

    def drop(
        self, tp: TopicPartitionKey, epoch: int, fenced: bool, assigned: bool, now: float
    ) -> PartitionRecord:
        """Someone else holds ``tp`` now (``fenced``: it took it from us at ``epoch``), or our producer
        is unusable: stop holding it. Still assigned, it waits again from ``now``; unfenced, the
        position is remembered, so a claim again does not redo what this instance processed."""
        record = self._records.pop(tp)
        assert record.held, record
        if record.txn is not None:
            record.txn.close()
        if assigned:
            self._records[tp] = PartitionRecord(
                tp, PartitionState.WAITING, waiting_since=now,
                fenced_out_at=epoch if fenced else record.fenced_out_at,
                remembered=record.position if record.txn is None else record.remembered,
            )  # fmt: skip
        return record

    def start_release(self, tps: Iterable[TopicPartitionKey]) -> None:
        """OWNED -> RELEASING: no more records are handed out; the released mark is written next."""
        for tp in tps:
            self._records[tp].state = PartitionState.RELEASING

    def released(self, tp: TopicPartitionKey) -> None:
        """The release ended (written or not): forget ``tp`` and close its producer."""
        record = self._records.get(tp)
        if record is not None and record.held:
            del self._records[tp]
            if record.txn is not None:
                record.txn.close()

    def close(self) -> None:
        """Close every producer (held ones and spares) and forget everything."""
        for record in self._records.values():
            for producer in (record.txn, record.spare):
                if producer is not None:
                    producer.close()
        self._records.clear()

    def _forget(self, tp: TopicPartitionKey) -> None:
        record = self._records.pop(tp)
        if record.spare is not None:
            record.spare.close()


def partition_names(tps: Iterable[TopicPartitionKey]) -> str:
    """``t-0, t-1`` for logs; ``nothing`` when empty."""
    return ", ".join(f"{t}-{p}" for t, p in sorted(tps)) or "nothing"
