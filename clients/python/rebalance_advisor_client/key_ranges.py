"""Progress of a partition shared by key ranges: where each range commits, and what is done (pure).

Derived groups: a member that owns the range ``[lo, hi)`` of a partition of group ``G`` commits
its position under the consumer group ``G.keyrange.<lo>-<hi>`` (decimal bounds, e.g.
``orders.keyrange.0-536870912``), so ranges of one partition never overwrite each other's
offsets; a whole-partition owner commits under ``G`` itself. A committed offset ``c`` of a range
means every record of the partition below ``c`` whose key hash is in the range has been
processed (records of other ranges are skipped by that member, not processed).

What is done, exactly: ownership of a hash moves only through fenced handovers, and each new
owner starts at or after its predecessor's progress, so the commits covering one hash only grow
over time. The progress of hash ``h`` is therefore the *maximum* committed offset over the parent
group and every derived group whose range contains ``h``. A member that takes a range (after a
split, a merge, or any re-cut) starts at the minimum of that progress over its range, and skips a
record at offset ``o`` with hash ``h`` when ``o < progress(h)``: another owner already processed
it. No key is processed twice, none is skipped unprocessed, and each key's records are processed
in offset order.

The partition's progress (for lag, and where a later whole owner starts) is the minimum of the
progress over the whole hash space: with the current ranges' commits that is the minimum over the
ranges. :func:`fold_range_commits` turns a snapshot's committed offsets of derived groups into
their parent's, which is what lag and the advisor use (the parent's lag = max over its ranges).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np

from rebalance_advisor_client.key_hash import HASH_SPACE

#: separates the parent group id from the range in a derived group id
RANGE_GROUP_MARKER = ".keyrange."

TopicPartition = tuple[str, int]


def range_group(parent: str, lo: int, hi: int) -> str:
    """The derived consumer group a member owning ``[lo, hi)`` of a partition of ``parent`` commits under."""
    if not 0 <= lo < hi <= HASH_SPACE:
        raise ValueError(f"range [{lo}, {hi}) is empty or outside [0, {HASH_SPACE})")
    return f"{parent}{RANGE_GROUP_MARKER}{lo}-{hi}"


def parse_range_group(group_id: str) -> tuple[str, int, int] | None:
    """(parent, lo, hi) of a derived group id, or None for any other group id."""
    parent, marker, tail = group_id.rpartition(RANGE_GROUP_MARKER)
    if not marker or not parent:
        return None
    lo_text, dash, hi_text = tail.partition("-")
    if not dash or not lo_text.isdigit() or not hi_text.isdigit():
        return None
    lo, hi = int(lo_text), int(hi_text)
    if not 0 <= lo < hi <= HASH_SPACE or tail != f"{lo}-{hi}":
        return None
    return parent, lo, hi


@dataclass(frozen=True, eq=False)
class HashProgress:
    """Progress per hash as a step function: hashes in ``[starts[i], starts[i+1])`` are done below ``offsets[i]``."""

    starts: np.ndarray  # int64 [S], starts[0] == 0, ascending
    offsets: np.ndarray  # int64 [S], -1 = nothing committed for those hashes

    @classmethod
    def from_commits(cls, parent: int | None, ranges: Mapping[tuple[int, int], int]) -> HashProgress:
        """Max rule over the parent's commit (all hashes) and each range's commit (its hashes)."""
        cuts = sorted({0, *(b for lo, hi in ranges for b in (lo, hi) if b < HASH_SPACE)})
        starts = np.asarray(cuts, dtype=np.int64)
        offsets = np.full(len(starts), -1 if parent is None else parent, dtype=np.int64)
        for (lo, hi), committed in ranges.items():
            inside = (starts >= lo) & (starts < hi)
            offsets[inside] = np.maximum(offsets[inside], committed)
        return cls(starts, offsets)

    def at(self, hashes: np.ndarray) -> np.ndarray:
        """Progress of each hash (-1 where nothing is committed)."""
        return self.offsets[np.searchsorted(self.starts, hashes, side="right") - 1]

    def start(self, lo: int = 0, hi: int = HASH_SPACE) -> int:
        """Where an owner of ``[lo, hi)`` starts: the least progress over its hashes (-1: none committed)."""
        seg_end = np.append(self.starts[1:], HASH_SPACE)
        overlap = (self.starts < hi) & (seg_end > lo)
        return int(self.offsets[overlap].min())

    def already_done(self, hashes: np.ndarray, offsets: np.ndarray) -> np.ndarray:
        """Mask of records (hash, offset) a previous owner of their hash has processed."""
        return offsets < self.at(hashes)


def fold_range_commits(
    committed: Mapping[str, Mapping[TopicPartition, int]],
) -> dict[str, dict[TopicPartition, int]]:
    """Committed offsets per group with derived range groups folded into their parents.

    For a parent with range groups on a partition, the folded offset is the partition's progress
    (:meth:`HashProgress.start` over the whole hash space) when every hash has some commit;
    partitions without range groups keep the parent's offset; derived groups disappear. A
    partition whose hashes are not all covered keeps the parent's own offset if it has one (a
    range never committed means nothing is known beyond it), else is left out.
    """
    out: dict[str, dict[TopicPartition, int]] = {}
    ranges: dict[str, dict[TopicPartition, dict[tuple[int, int], int]]] = {}
    for group, offsets in committed.items():
        parsed = parse_range_group(group)
        if parsed is None:
            out.setdefault(group, {}).update(offsets)
            continue
        parent, lo, hi = parsed
        for tp, offset in offsets.items():
            ranges.setdefault(parent, {}).setdefault(tp, {})[lo, hi] = offset
    for parent, per_partition in ranges.items():
        folded = out.setdefault(parent, {})
        for tp, commits in per_partition.items():
            progress = HashProgress.from_commits(folded.get(tp), commits).start()
            if progress >= 0:
                folded[tp] = progress
    return out


def range_lags(
    end_offset: int, parent: int | None, ranges: Mapping[tuple[int, int], int]
) -> dict[tuple[int, int], int]:
    """Lag of each range of a partition (records below the end it has not passed); the partition's lag
    is the max of these, the same as ``end_offset`` minus the folded progress."""
    progress = HashProgress.from_commits(parent, ranges)
    return {(lo, hi): end_offset - max(progress.start(lo, hi), 0) for lo, hi in ranges}
