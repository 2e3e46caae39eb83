"""The key ranges one AssignedConsumer holds (assignment record format 2, issue 15).

:class:`AssignedConsumer` hands the ranges of each new epoch to :meth:`RangeSet.apply`; this keeps
one :class:`~rebalance_advisor_client.range_member.RangeMember` per held range (its own consumer,
committing under the range's derived group ``<group>.keyrange.<lo>-<hi>``) and interleaves their
records into the consumer's ``poll()``. Progress is exact (a new owner skips what any earlier owner
of a hash committed, ``key_ranges.HashProgress``), so a split or a merge neither loses nor
reorders a key's records once the previous owners have committed. A whole-partition claim of a
partition that had ranges (a merge) starts at the least progress over the hash space and skips
the records a range owner already committed (:meth:`RangeSet.merged_start`, :meth:`already_done`).

What is fenced and what is not: range commits carry the helper's owner mark (member, epoch,
OWNED or RELEASED, instance) in their metadata, as whole-partition commits do. A range starts only
after the partition's whole owner (the parent group's mark) and every other member's range of
that partition that overlaps it have been released, or after ``takeover_timeout``; a whole claim
of a partition that had ranges (a merge) waits the same way for all of its ranges. So split,
re-split and merge are exact between members that release (a new epoch seen, or ``close()``).
Not fenced: a range owner paused longer than ``takeover_timeout`` is taken over without being
stopped, and may then process records twice; ranges use no transactions (per-range fencing, a
transactional id per group + partition + range, is not built).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from rebalance_advisor_client.assignment_records import KeyRangeKey
from rebalance_advisor_client.handover_rules import OWNED, RELEASED, OwnerMark, decode_mark
from rebalance_advisor_client.key_hash import HASH_SPACE, positive_hashes
from rebalance_advisor_client.key_ranges import HashProgress, parse_range_group
from rebalance_advisor_client.range_member import (
    RangeMember,
    committed_with_metadata,
    range_group_ids,
    read_progress,
)

log = logging.getLogger(__name__)

#: (topic, partition) -> True when its whole-partition owner has let it go (or may be taken over)
ReleasedCheck = Callable[[tuple[str, int], float], bool]


@dataclass
class _Lane:
    member: RangeMember
    buffer: list[Any] = field(default_factory=list)
    handed: int | None = None  # offset + 1 of the last record handed to the application


class RangeSet:
    """Held key ranges and their consumers (module docstring)."""

    def __init__(
        self,
        settings: Mapping[str, Any],
        group_id: str,
        member_id: str,
        released: ReleasedCheck,
        *,
        instance: str = "",
        epoch: Callable[[], int] = lambda: 0,
        takeover_timeout: float = 60.0,
    ):
        self._bootstrap = str(settings.get("bootstrap.servers", ""))
        self._config = {k: v for k, v in settings.items() if k != "bootstrap.servers"}
        self.group_id, self.member_id = group_id, member_id
        self._released = released
        self._instance, self._epoch, self._takeover_timeout = instance, epoch, takeover_timeout
        self._lanes: dict[KeyRangeKey, _Lane] = {}
        self._waiting: dict[KeyRangeKey, float] = {}  # assigned, whole owner not yet released -> since
        self._turn = 0
        self._next_try = 0.0
        self._merged: dict[tuple[str, int], HashProgress] = {}
        self._admin_client: Any = None

    @property
    def held(self) -> frozenset[KeyRangeKey]:
        return frozenset(self._lanes)

    @property
    def active(self) -> bool:
        return bool(self._lanes or self._waiting)

    def apply(self, ranges: tuple[KeyRangeKey, ...]) -> None:
        """A new epoch's ranges: commit and stop the lost ones, then wait to start the gained ones."""
        wanted = set(ranges)
        for key in sorted(set(self._lanes) - wanted):
            self._stop(key)
        self._waiting = {k: self._waiting.get(k, time.monotonic()) for k in wanted - set(self._lanes)}
        self._next_try = 0.0
        self.start_ready()

    def start_ready(self, every: float = 0.25) -> None:
        """Start the waiting ranges whose partition's whole owner has released it (checked at most
        once per ``every`` seconds: each check reads the parent group's committed offsets)."""
        if not self._waiting or time.monotonic() < self._next_try:
            return
        self._next_try = time.monotonic() + every
        for key in sorted(self._waiting):
            topic, partition, lo, hi = key
            waited = time.monotonic() - self._waiting[key]
            if not self._released((topic, partition), waited):
                continue
            if not self.ranges_released((topic, partition), waited, lo, hi):
                continue
            del self._waiting[key]
            member = RangeMember(
                self._bootstrap, self.group_id, topic, partition, lo, hi, config=self._config
            )
            self._lanes[key] = _Lane(member)
            log.info(
                "%s: key range %s-%d [%d, %d) started at offset %d",
                self.member_id, topic, partition, lo, hi, member.position,
            )  # fmt: skip

    def poll(self, timeout: float) -> Any:
        """The next record of a held range (lanes taken in turn), or None within ``timeout``."""
        keys = sorted(self._lanes)
        for i in range(len(keys)):
            lane = self._lanes[keys[(self._turn + i) % len(keys)]]
            if not lane.buffer:  # everything before the member's position is handed out or skipped
                lane.handed = lane.member.position
                lane.buffer = lane.member.poll(timeout=timeout if i == len(keys) - 1 else 0.0)
            if lane.buffer:
                self._turn = (self._turn + i + 1) % len(keys)
                message = lane.buffer.pop(0)
                lane.handed = message.offset() + 1
                return message
        return None

    def _admin(self) -> Any:
        """One AdminClient for the group listings (made on first use)."""
        if self._admin_client is None:
            from confluent_kafka.admin import AdminClient

            self._admin_client = AdminClient({"bootstrap.servers": self._bootstrap, **self._config})
        return self._admin_client

    def _mark(self, state: str) -> str:
        return OwnerMark(self.member_id, self._epoch(), state, self._instance).encode()

    def ranges_released(self, tp: tuple[str, int], waited: float, lo: int = 0, hi: int = HASH_SPACE) -> bool:
        """Have other members' ranges of ``tp`` overlapping ``[lo, hi)`` been released (their last
        commit marked RELEASED, or no mark at all)? True after ``takeover_timeout`` whatever they say."""
        if waited > self._takeover_timeout:
            return True
        try:
            groups = range_group_ids(self._bootstrap, self.group_id, timeout=10.0, admin=self._admin())
            for group_id in groups:
                parsed = parse_range_group(group_id)
                if parsed is None or parsed[2] <= lo or parsed[1] >= hi:
                    continue
                _, metadata = committed_with_metadata(self._bootstrap, group_id, tp[0], tp[1], 10.0)
                mark = decode_mark(metadata)
                if (
                    mark is not None
                    and mark.state == OWNED
                    and not mark.written_by(self.member_id, self._instance)
                ):
                    return False
        except Exception as error:  # noqa: BLE001 - any client error: check again later
            log.warning("%s: cannot read key-range owners of %s-%d yet: %s", self.member_id, *tp, error)
            return False
        return True

    def merged_start(self, tp: tuple[str, int], offset: int) -> int:
        """Where a whole-partition claim of ``tp`` starts when key ranges of it made progress (a
        merge): the least progress over the hash space; records up to the furthest range are then
        filtered by :meth:`already_done`. Unchanged when no range got ahead of ``offset``."""
        try:
            if not range_group_ids(self._bootstrap, self.group_id, timeout=10.0, admin=self._admin()):
                return offset  # never shared: the usual whole-partition claim
            progress = read_progress(self._bootstrap, self.group_id, tp[0], tp[1])
        except Exception as error:  # noqa: BLE001 - any client error: start as a whole claim would
            log.warning("%s: cannot read key-range progress of %s-%d: %s", self.member_id, *tp, error)
            return offset
        if int(progress.offsets.max()) <= offset:
            return offset
        self._merged[tp] = progress
        return max(offset, progress.start())

    def already_done(self, tp: tuple[str, int], message: Any) -> bool:
        """Did an earlier range owner process this record of a merged partition (skip it)?"""
        progress = self._merged.get(tp)
        if progress is None:
            return False
        if message.offset() >= int(progress.offsets.max()):
            del self._merged[tp]
            return False
        hashes = positive_hashes([message.key()])
        return bool(progress.already_done(hashes, np.asarray([message.offset()], dtype=np.int64))[0])

    def commit(self) -> dict[KeyRangeKey, int]:
        """Commit each range's processed position (up to the last record handed out)."""
        done = {}
        for key, lane in self._lanes.items():
            position = lane.member.position if not lane.buffer else lane.handed
            if position is not None:
                lane.member.commit(position, self._mark(OWNED))
                done[key] = position
        return done

    def close(self) -> None:
        for key in sorted(self._lanes):
            self._stop(key)
        self._waiting.clear()

    def _stop(self, key: KeyRangeKey) -> None:
        lane = self._lanes.pop(key)
        try:
            position = lane.member.position if not lane.buffer else lane.handed
            lane.member.commit(lane.member.position if position is None else position, self._mark(RELEASED))
        finally:
            lane.member.close()
        log.info("%s: key range %s-%d [%d, %d) stopped", self.member_id, *key)
