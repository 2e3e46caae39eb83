"""Pure rules of the handover protocol: who may claim, commit or release a partition. No I/O.

Ownership is recorded in the commit metadata of each partition as an :class:`OwnerMark`: which
member (and which running instance of it) claimed the partition at which epoch, and whether it
still holds it. In fenced mode the broker rejects a fenced member's commits and the mark only
steers the cooperative handover; in unfenced mode the mark is the only guard, so these rules are
what keeps a late member from overwriting its successor. docs/protocol/index.md, "The rules".
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from enum import Enum

from rebalance_advisor_client.assignment_records import TopicPartitionKey
from rebalance_advisor_client.capacity_report import (
    MARK_KEY,
    CapacityReport,
    mark_document,
    reported_document,
)

OWNED = "owned"
RELEASED = "released"
#: v1 marks (member, epoch, state) are still read; v2 adds the instance and the fencing token
_MARK_VERSIONS = (1, 2)


@dataclass(frozen=True)
class OwnerMark:
    """What the last helper to commit a partition said: ``member`` claimed it at ``epoch``.

    ``instance`` tells two runs of one member id apart (a restart and a paused zombie);
    ``producer`` is ``(producer id, producer epoch)`` of the transactional producer that committed
    (fenced mode only): the order in which the broker fenced owners.
    """

    member: str
    epoch: int
    state: str  # OWNED or RELEASED
    instance: str = ""
    producer: tuple[int, int] | None = None
    #: the writer's latest applied epoch when it wrote (for audits: a commit of a partition that
    #: epoch did not give it is visible in the commit history); None in marks written without it
    seen: int | None = None

    def encode(self, report: CapacityReport | None = None) -> str:
        """Commit metadata text (Kafka keeps up to ``offsets.metadata.max.bytes``, 4096 by default),
        with the member's capacity ``report`` when it has one (capacity_report.py)."""
        data: dict[str, object] = {
            MARK_KEY: 2,
            "member": self.member,
            "epoch": self.epoch,
            "state": self.state,
            "instance": self.instance,
        }
        if self.producer is not None:
            data["producer"] = list(self.producer)
        if self.seen is not None:
            data["seen"] = self.seen
        if report is not None:
            data.update(report.fields())
        return json.dumps(data, separators=(",", ":"))

    def written_by(self, member: str, instance: str) -> bool:
        return self.member == member and self.instance == instance


def _non_negative_int(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


def decode_mark(metadata: str | None) -> OwnerMark | None:
    """The mark in commit metadata, or None when it was not written by the helper (no owner known)."""
    data = mark_document(metadata)
    return None if data is None else _mark_in(data)


def decode_reported_mark(metadata: str | None) -> tuple[OwnerMark, CapacityReport] | None:
    """The mark and the capacity report in commit metadata, parsed once (the snapshot reads both
    for every committed offset); None unless both are there."""
    found = reported_document(metadata)
    mark = None if found is None else _mark_in(found[0])
    return None if mark is None else (mark, found[1])  # type: ignore[index]


def _mark_in(data: dict) -> OwnerMark | None:
    """The mark in a helper-written document (:func:`capacity_report.mark_document`), when valid."""
    if data.get(MARK_KEY) not in _MARK_VERSIONS:
        return None
    member, epoch, state = data.get("member"), data.get("epoch"), data.get("state")
    instance, producer, seen = data.get("instance", ""), data.get("producer"), data.get("seen")
    if not isinstance(member, str) or not member or state not in (OWNED, RELEASED):
        return None
    if not _non_negative_int(epoch) or not isinstance(instance, str):
        return None
    if producer is not None:
        if not (isinstance(producer, list) and len(producer) == 2 and all(map(_non_negative_int, producer))):
            return None
        producer = (producer[0], producer[1])
    if seen is not None and not _non_negative_int(seen):
        return None
    return OwnerMark(member, epoch, state, instance, producer, seen)


@dataclass(frozen=True)
class Handover:
    """How a member's partitions change when it applies a new epoch.

    ``reclaim``: partitions it holds and still gets, but epochs were skipped in between, so
    someone else may have held them: their mark is checked like a new claim's before it goes on.
    """

    kept: frozenset[TopicPartitionKey]
    gained: frozenset[TopicPartitionKey]
    lost: frozenset[TopicPartitionKey]
    reclaim: frozenset[TopicPartitionKey] = frozenset()


def plan_handover(
    old: frozenset[TopicPartitionKey],
    new: frozenset[TopicPartitionKey],
    old_epoch: int | None = None,
    new_epoch: int | None = None,
) -> Handover:
    """Split a member's move from ``old`` (at ``old_epoch``) to ``new`` (at ``new_epoch``).

    Lost ones are released first, gained ones claimed. A partition in both is kept only when no
    epoch was skipped (``new_epoch == old_epoch + 1``, or epochs not given): otherwise another member
    may have held it in the epochs this member never saw, and it is re-claimed.
    """
    both = old & new
    skipped = old_epoch is not None and new_epoch is not None and new_epoch > old_epoch + 1
    return Handover(
        kept=frozenset() if skipped else both,
        gained=new - old,
        lost=old - new,
        reclaim=both if skipped else frozenset(),
    )


class Claim(Enum):
    """What a member that gained a partition does after reading the partition's mark."""

    TAKE = "take"  # free, released, or ours: claim it now
    WAIT = "wait"  # an older owner still holds it: wait for its release (or the dead-owner timeout)
    TAKE_OVER = "take_over"  # the older owner did not release within the timeout: presumed dead
    STALE = "stale"  # a newer epoch touched it: our assignment is outdated, never take it


@dataclass(frozen=True)
class Claimant:
    """Who asks to claim: a member id, this run of it, its latest epoch, and whether it was fenced.

    ``fenced`` means this instance lost the partition to someone at its current epoch (a takeover
    while it was paused, or a restart of the same member id): it then treats a mark of its own
    member id from another instance as someone else's, so a zombie cannot take back what its
    restarted self claimed.
    """

    member: str
    instance: str
    epoch: int
    fenced: bool = False


def claim_decision(who: Claimant, mark: OwnerMark | None, waited: float, takeover_timeout: float) -> Claim:
    """May ``who``, whose latest assignment gives it the partition, start consuming it?

    The previous owner's release is the normal path; a timeout covers a dead previous owner. A mark
    at a newer epoch, or another claim at the same epoch, is never overridden.
    """
    if mark is None:
        return Claim.TAKE
    if mark.epoch > who.epoch:
        return Claim.STALE
    if mark.written_by(who.member, who.instance) or mark.state == RELEASED:
        return Claim.TAKE
    if mark.member == who.member and not who.fenced:
        return Claim.TAKE  # an earlier run of this member id (a restart): its partitions are ours
    if mark.epoch == who.epoch:
        return Claim.STALE  # another claim under our own epoch: not ours to fight over
    return Claim.TAKE_OVER if waited >= takeover_timeout else Claim.WAIT


def may_commit(member: str, instance: str, claimed_at: int, mark: OwnerMark | None) -> bool:
    """May this instance commit or release a partition it claimed at epoch ``claimed_at``?

    Compared with the claim's epoch, not the member's latest: a member that skipped epochs (held p
    at 4, p went elsewhere at 5 and stayed at 6) must not write over the owner of epoch 5. Refused
    when anyone else wrote the mark at ``claimed_at`` or later; a mark of another writer at an
    older epoch came from a late member that overwrote ours, and the claim re-asserts itself.
    """
    if mark is None or mark.written_by(member, instance):
        return True
    return mark.epoch < claimed_at


def commit_offset(ours: int, committed: int | None) -> int:
    """The offset to write: never below what is committed (committed offsets never go backwards)."""
    return ours if committed is None or committed < 0 else max(ours, committed)


def claim_start(committed: int | None, remembered: int | None, reset: int | None) -> int | None:
    """Where an unfenced claim starts: the committed offset, never below what this instance processed.

    ``remembered`` is the in-memory position of an instance that was refused and claims again: a
    committed offset below it was regressed by a late member, and re-reading from there would only
    repeat work. ``reset`` (the ``auto.offset.reset`` end) applies when nothing was ever committed.
    """
    known = [x for x in (committed, remembered) if x is not None and x >= 0]
    return max(known) if known else reset
