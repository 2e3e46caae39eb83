"""Pure rules of the handover protocol: who may claim, commit or release a partition.

Kafka does not fence offset commits of simple (``assign()``) groups, so ownership is recorded in
the commit metadata of each partition as an :class:`OwnerMark` (member, epoch, owned/released).
Every helper reads the mark before it writes one; these functions decide what it may do. They
take no I/O so they can be tested exhaustively.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from enum import Enum

TopicPartitionKey = tuple[str, int]

OWNED = "owned"
RELEASED = "released"
_MARK_VERSION = 1


@dataclass(frozen=True)
class OwnerMark:
    """What the last helper to commit a partition said: ``member`` holds (or released) it at ``epoch``."""

    member: str
    epoch: int
    state: str  # OWNED or RELEASED

    def encode(self) -> str:
        """Commit metadata text (Kafka keeps up to ``offsets.metadata.max.bytes``, 4096 by default)."""
        return json.dumps(
            {
                "rebalance_advisor": _MARK_VERSION,
                "member": self.member,
                "epoch": self.epoch,
                "state": self.state,
            },
            separators=(",", ":"),
        )


def decode_mark(metadata: str | None) -> OwnerMark | None:
    """The mark in commit metadata, or None when it was not written by the helper (no owner known)."""
    if not metadata:
        return None
    try:
        data = json.loads(metadata)
    except ValueError:
        return None
    if not isinstance(data, dict) or data.get("rebalance_advisor") != _MARK_VERSION:
        return None
    member, epoch, state = data.get("member"), data.get("epoch"), data.get("state")
    if not isinstance(member, str) or not member or state not in (OWNED, RELEASED):
        return None
    if not isinstance(epoch, int) or isinstance(epoch, bool) or epoch < 0:
        return None
    return OwnerMark(member, epoch, state)


@dataclass(frozen=True)
class Handover:
    """How a member's partitions change between two assignments it holds."""

    kept: frozenset[TopicPartitionKey]
    gained: frozenset[TopicPartitionKey]
    lost: frozenset[TopicPartitionKey]


def plan_handover(old: frozenset[TopicPartitionKey], new: frozenset[TopicPartitionKey]) -> Handover:
    """Split a member's move from ``old`` to ``new``: lost ones are released first, gained ones claimed."""
    return Handover(kept=old & new, gained=new - old, lost=old - new)


class Claim(Enum):
    """What a member that gained a partition does after reading the partition's mark."""

    TAKE = "take"  # free, released, or ours: claim it now
    WAIT = "wait"  # an older owner still holds it: wait for its release (or the dead-owner timeout)
    TAKE_OVER = "take_over"  # the older owner did not release within the timeout: presumed dead
    STALE = "stale"  # a newer epoch touched it: our assignment is outdated, never take it


def claim_decision(
    member: str, epoch: int, mark: OwnerMark | None, waited: float, takeover_timeout: float
) -> Claim:
    """May ``member``, whose latest assignment (``epoch``) gives it the partition, start consuming it?

    The previous owner's release is the normal path; a timeout covers a dead previous owner. A mark
    at a newer epoch, or another member's claim at the same epoch, is never overridden.
    """
    if mark is None:
        return Claim.TAKE
    if mark.epoch > epoch:
        return Claim.STALE
    if mark.member == member or mark.state == RELEASED:
        return Claim.TAKE
    if mark.epoch == epoch:
        return Claim.STALE  # another member claims it under our own epoch: not ours to fight over
    return Claim.TAKE_OVER if waited >= takeover_timeout else Claim.WAIT


def may_commit(member: str, epoch: int, mark: OwnerMark | None) -> bool:
    """May ``member`` (at its latest ``epoch``) commit or release a partition it holds, given the mark?

    Refused when another member wrote a mark at our epoch or a newer one: it took the partition
    over, so our progress is no longer ours to record. A mark from another member at an *older*
    epoch came from a late member that overwrote ours; the newer epoch re-asserts itself.
    """
    if mark is None or mark.member == member:
        return True
    return mark.epoch < epoch


def commit_offset(ours: int, committed: int | None) -> int:
    """The offset to write: never below what is committed (committed offsets never go backwards)."""
    return ours if committed is None or committed < 0 else max(ours, committed)
