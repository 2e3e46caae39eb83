"""The key ranges one AssignedConsumer holds (assignment record format 2, assignment_records.py).

:class:`AssignedConsumer` hands the ranges of each new epoch to :meth:`RangeSet.apply`; this keeps
one :class:`~rebalance_advisor_client.range_member.RangeMember` per held range (its own consumer,
committing under the range's derived group ``<group>.keyrange.<lo>-<hi>``) and interleaves their
records into the consumer's ``poll()``. Progress is exact (a new owner skips what any earlier owner
of a hash committed, ``key_ranges.HashProgress``), so a split or a merge neither loses nor
reorders a key's records once the previous owners have committed. A whole-partition claim of a
partition that had ranges (a merge) starts at the least progress over the hash space and skips
the records a range owner already committed (:meth:`RangeSet.merged_start`, :meth:`already_done`).

Handover order: a range starts only after the partition's whole owner (the parent group's mark)
and every other member's range of that partition that overlaps it have been released (their last
commit carries the helper's owner mark, OWNED or RELEASED), or after ``takeover_timeout``; a whole
claim of a partition that had ranges (a merge) waits the same way for all of its ranges.

Fenced mode (AssignedConsumer's default): each range has its own transactional producer,
``transactional.id`` = ``fencing.transactional_id(<group>.keyrange.<lo>-<hi>, topic, partition)``
(under the group's ACL prefix). Starting a range first fences every earlier holder of its hashes
at the broker: ``init_transactions`` on the partition's whole-owner id, on the id of every derived
range group of the partition that overlaps the range (all that the cluster knows: earlier cuts
included), and on the range's own id, which it keeps; only then is the progress read (settled:
the fenced holders' open transactions are aborted). In the whole-owner id's transaction it leaves
a RELEASED mark of its own at the current epoch on the parent group (offset unchanged), so a whole
owner paused across the split backs off when it returns instead of claiming again at its old epoch. A merge's whole claim fences every range id
of the partition the same way (:meth:`RangeSet.fence_ranges`) before the whole-partition claim.
Commits and outputs (:meth:`RangeSet.produce`) go into the range's transaction, so a range owner
paused past its takeover can neither move its offsets nor publish output after its successor
fenced it: the broker refuses its commit (``PRODUCER_FENCED``) and it drops the range.
Unfenced mode (``fenced=False``): no transactions; owner marks alone order the handover, and a
range owner paused past ``takeover_timeout`` is taken over without being stopped (it may then
process records twice).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from confluent_kafka import Consumer, KafkaException, TopicPartition

from rebalance_advisor_client.assignment_records import KeyRangeKey
from rebalance_advisor_client.errors import ClientError
from rebalance_advisor_client.fencing import (
    FencingToken,
    PartitionTransaction,
    classify,
    transactional_id,
)
from rebalance_advisor_client.handover_rules import OWNED, RELEASED, OwnerMark, decode_mark
from rebalance_advisor_client.key_hash import HASH_SPACE, positive_hashes
from rebalance_advisor_client.key_ranges import HashProgress, parse_range_group, range_group
from rebalance_advisor_client.range_member import (
    RangeMember,
    client_settings,
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
    claimed_at: int = 0  # assignment epoch at which the range started


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
        fenced: bool = False,
        transaction_settings: Mapping[str, Any] | None = None,
        request_timeout: float = 10.0,
    ):
        """``settings``: the connection config (servers, security) every client here uses;
        ``fenced``: one transactional producer per range, made with ``transaction_settings``."""
        self._bootstrap = str(settings.get("bootstrap.servers", ""))
        self._config = {k: v for k, v in settings.items() if k != "bootstrap.servers"}
        self.group_id, self.member_id = group_id, member_id
        self._released = released
        self._instance, self._epoch, self._takeover_timeout = instance, epoch, takeover_timeout
        self.fenced, self._request_timeout = fenced, request_timeout
        self._txn_settings = dict(transaction_settings or settings)
        self._lanes: dict[KeyRangeKey, _Lane] = {}
        self._waiting: dict[KeyRangeKey, float] = {}  # assigned, whole owner not yet released -> since
        self._turn = 0
        self._next_try = 0.0
        self._merged: dict[tuple[str, int], HashProgress] = {}
        self._admin_client: Any = None
        self._assigned: frozenset[KeyRangeKey] = frozenset()

    @property
    def held(self) -> frozenset[KeyRangeKey]:
        return frozenset(self._lanes)

    @property
    def active(self) -> bool:
        return bool(self._lanes or self._waiting)

    def apply(self, ranges: tuple[KeyRangeKey, ...]) -> None:
        """A new epoch's ranges: commit and stop the lost ones, then wait to start the gained ones."""
        wanted = set(ranges)
        self._assigned = frozenset(wanted)
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
            transaction = None
            if self.fenced:
                transaction = self._fence_for_range(key)
                if transaction is None:
                    continue  # tried again at the next check
            member = None
            try:
                member = RangeMember(
                    self._bootstrap, self.group_id, topic, partition, lo, hi, config=self._config,
                    transaction=transaction,
                )  # fmt: skip
                # the range's group exists (listed, so fenced and waited for by a merge) and
                # carries our OWNED mark before any record is processed, not at its first commit
                member.commit(member.position, self._mark(OWNED))
            except KafkaException as error:
                log.warning("%s: cannot start key range %s-%d [%d, %d) yet: %s", self.member_id, *key, error)
                if member is not None:
                    member.close()
                if transaction is not None:
                    transaction.close()
                continue
            del self._waiting[key]
            self._lanes[key] = _Lane(member, claimed_at=self._epoch())
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

            self._admin_client = AdminClient(client_settings(self._bootstrap, self._config))
        return self._admin_client

    def _mark(self, state: str) -> str:
        return OwnerMark(self.member_id, self._epoch(), state, self._instance).encode()

    def ranges_released(self, tp: tuple[str, int], waited: float, lo: int = 0, hi: int = HASH_SPACE) -> bool:
        """Have other members' ranges of ``tp`` overlapping ``[lo, hi)`` been released (their last
        commit marked RELEASED, or no mark at all)? True after ``takeover_timeout``, unless one was
        written at a newer epoch than ours (then this member is the stale one and waits)."""
        timed_out = waited > self._takeover_timeout
        try:
            groups = range_group_ids(self._bootstrap, self.group_id, timeout=10.0, admin=self._admin())
            for group_id in groups:
                parsed = parse_range_group(group_id)
                if parsed is None or parsed[2] <= lo or parsed[1] >= hi:
                    continue
                _, metadata = committed_with_metadata(
                    self._bootstrap, group_id, tp[0], tp[1], 10.0, self._config
                )
                mark = decode_mark(metadata)
                if mark is None or mark.written_by(self.member_id, self._instance):
                    continue
                if mark.epoch > self._epoch() or (mark.state == OWNED and not timed_out):
                    return False
        except Exception as error:  # noqa: BLE001 - any client error: check again later
            log.warning("%s: cannot read key-range owners of %s-%d yet: %r", self.member_id, *tp, error)
            self._admin_client = None  # a listing that timed out: ask with a new client next time
            return timed_out  # past the timeout the start goes on (fenced mode fences them first)
        return True

    def merged_start(self, tp: tuple[str, int], offset: int) -> int | None:
        """Where a whole-partition claim of ``tp`` starts when key ranges of it made progress (a
        merge): the least progress over the hash space; records up to the furthest range are then
        filtered by :meth:`already_done`. Unchanged when no range got ahead of ``offset``; None
        when the progress cannot be read now (the claim waits: starting at ``offset`` would
        process again what the ranges committed)."""
        try:
            if not range_group_ids(self._bootstrap, self.group_id, timeout=10.0, admin=self._admin()):
                return offset  # never shared: the usual whole-partition claim
            progress = read_progress(
                self._bootstrap, self.group_id, tp[0], tp[1], config=self._config, admin=self._admin()
            )
        except Exception as error:  # noqa: BLE001 - any client error: the claim is tried again
            log.warning("%s: cannot read key-range progress of %s-%d yet: %s", self.member_id, *tp, error)
            self._admin_client = None
            return None
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

    # -- fenced mode ---------------------------------------------------------------------------------

    def _transaction(self, txn_id: str) -> PartitionTransaction:
        return PartitionTransaction(self._txn_settings, txn_id, self._request_timeout)

    def _fence_ids(self, txn_ids: list[str]) -> bool:
        """``init_transactions`` on each id with a throw-away producer: every earlier holder of it
        is fenced (its open transaction aborted, its later commits refused). False on any failure."""
        for txn_id in txn_ids:
            transaction = self._transaction(txn_id)
            try:
                transaction.fence()
            except KafkaException as error:
                log.warning("%s: cannot fence %s yet: %s", self.member_id, txn_id, error)
                return False
            finally:
                transaction.close()
        return True

    def _overlapping_range_groups(self, tp: tuple[str, int], lo: int, hi: int) -> list[str]:
        """Derived range groups of the parent the cluster knows whose range overlaps ``[lo, hi)``."""
        groups = range_group_ids(
            self._bootstrap, self.group_id, timeout=self._request_timeout, admin=self._admin()
        )
        out = []
        for group_id in groups:
            parsed = parse_range_group(group_id)
            if parsed is not None and parsed[1] < hi and lo < parsed[2]:
                out.append(group_id)
        return out

    def _fence_for_range(self, key: KeyRangeKey) -> PartitionTransaction | None:
        """Fence every earlier holder of the range's hashes, then claim the range's own id (kept)."""
        topic, partition, lo, hi = key
        own = range_group(self.group_id, lo, hi)
        try:
            others = [g for g in self._overlapping_range_groups((topic, partition), lo, hi) if g != own]
        except Exception as error:  # noqa: BLE001 - any client error: try again at the next check
            log.warning(
                "%s: cannot list the key ranges of %s-%d yet: %r", self.member_id, topic, partition, error
            )
            self._admin_client = None
            return None
        earlier = [transactional_id(g, topic, partition) for g in others]
        if not self._fence_whole_owner((topic, partition)) or not self._fence_ids(earlier):
            return None
        transaction = self._transaction(transactional_id(own, topic, partition))
        try:
            transaction.fence()
        except KafkaException as error:
            log.warning("%s: cannot fence key range %s-%d [%d, %d) yet: %s", self.member_id, *key, error)
            transaction.close()
            return None
        log.info(
            "%s: key range %s-%d [%d, %d) fenced %d earlier holder id(s) and claimed %s",
            self.member_id, topic, partition, lo, hi, len(earlier) + 1, transaction.transactional_id,
        )  # fmt: skip
        return transaction

    def _fence_whole_owner(self, tp: tuple[str, int]) -> bool:
        """Fence the partition's whole-owner id and, in that id's transaction, leave a RELEASED mark
        of ours at the current epoch on the parent group's offset (offset unchanged). A whole owner
        paused across the split reads it when it comes back at its old epoch and backs off
        (``handover_rules.claim_decision``: a mark at a newer epoch), instead of claiming again."""
        transaction = self._transaction(transactional_id(self.group_id, *tp))
        parent = None
        try:
            transaction.fence()
            parent = Consumer(
                {
                    **client_settings(self._bootstrap, self._config),
                    "group.id": self.group_id,
                    "enable.auto.commit": False,
                }
            )
            offset, _ = committed_with_metadata(
                self._bootstrap, self.group_id, tp[0], tp[1], self._request_timeout, self._config
            )
            if offset is not None:  # settled: the fenced holder's open transaction is aborted
                mark = TopicPartition(tp[0], tp[1], offset, metadata=self._mark(RELEASED))
                transaction.commit([mark], parent.consumer_group_metadata())
            return True
        except KafkaException as error:
            log.warning("%s: cannot fence the whole owner of %s-%d yet: %s", self.member_id, *tp, error)
            return False
        finally:
            transaction.close()
            if parent is not None:
                parent.close()

    def fence_ranges(self, tp: tuple[str, int]) -> bool:
        """Before a whole claim of ``tp`` (a merge): fence every key-range holder of it. True when
        done (or the partition never had ranges); False: not yet, ask again at the next check."""
        if not self.fenced:
            return True
        try:
            groups = self._overlapping_range_groups(tp, 0, HASH_SPACE)
        except Exception as error:  # noqa: BLE001 - any client error: try again at the next check
            log.warning("%s: cannot list the key ranges of %s-%d yet: %r", self.member_id, *tp, error)
            self._admin_client = None
            return False
        return self._fence_ids([transactional_id(g, *tp) for g in groups])

    def _lane_of(self, tp: tuple[str, int]) -> tuple[KeyRangeKey, _Lane] | None:
        """The held range of partition ``tp`` (a member holds at most one range of a partition)."""
        for key, lane in self._lanes.items():
            if key[:2] == tp:
                return key, lane
        return None

    def produce(self, message: Any, topic: str, value: Any = None, key: Any = None, **kwargs: Any) -> bool:
        """Send an output in the transaction of ``message``'s range; False when no range of its
        partition is held here (the caller's whole partitions then). Fenced mode only."""
        found = self._lane_of((message.topic(), message.partition()))
        if found is None:
            return False
        range_key, lane = found
        if lane.member.transaction is None:
            raise ClientError("produce() needs fenced mode: outputs ride on the range's transaction")
        try:
            lane.member.transaction.produce(topic, value, key, **kwargs)
        except KafkaException as error:
            self._failed(range_key, error, "produce")
            raise ClientError(
                f"{message.topic()}-{message.partition()}: output not sent ({error})"
            ) from error
        return True

    def token(self, tp: tuple[str, int]) -> FencingToken | None:
        """The fencing token of the held range of ``tp`` (None: no range of it held here)."""
        found = self._lane_of(tp)
        if found is None:
            return None
        transaction = found[1].member.transaction
        producer = transaction.producer if transaction is not None else None
        return FencingToken(*(producer or (None, None)), found[1].claimed_at)

    def _failed(self, key: KeyRangeKey, error: KafkaException, action: str) -> None:
        """A fenced range is dropped at once (nothing of it commits); otherwise its open transaction
        is aborted and the range rewinds to its last commit (its outputs are redone)."""
        lane = self._lanes.get(key)
        if lane is None:
            return
        kind = classify(error)
        if kind not in ("fenced", "stuck"):
            log.warning(
                "%s: %s of key range %s-%d [%d, %d) failed (%s): aborting",
                self.member_id,
                action,
                *key,
                error,
            )
            try:
                lane.member.transaction.abort()
                lane.buffer.clear()
                lane.member.rewind()
                lane.handed = lane.member.position
                return
            except KafkaException as abort_error:
                error, kind = abort_error, classify(abort_error)
                if kind != "fenced":  # our producer is unusable: claim the range again
                    kind = "stuck"
        if kind in ("fenced", "stuck"):
            why = "another member claimed it" if kind == "fenced" else "its producer is unusable"
            log.warning(
                "%s: %s on key range %s-%d [%d, %d) (%s): dropping it, nothing committed (%s)",
                self.member_id, kind, *key, why, error,
            )  # fmt: skip
            self._lanes.pop(key)
            lane.member.transaction.close()
            lane.member.close()
            if kind == "stuck" and key in self._assigned:  # our producer hung: claim the range again
                self._waiting[key] = time.monotonic()
            # fenced: a newer owner holds it; a later epoch that gives it back starts it again (apply)

    # -- both modes --------------------------------------------------------------------------------

    def commit(self) -> dict[KeyRangeKey, int]:
        """Commit each range's processed position (up to the last record handed out)."""
        done = {}
        for key, lane in list(self._lanes.items()):
            position = lane.member.position if not lane.buffer else lane.handed
            if position is None:
                continue
            transaction = lane.member.transaction
            if transaction is not None and position == lane.member.committed and not transaction.outputs:
                continue  # fenced mode: nothing new, no transaction round trips
            try:
                lane.member.commit(position, self._mark(OWNED))
            except KafkaException as error:
                if lane.member.transaction is None:
                    log.warning("%s: commit of key range %s-%d [%d, %d) failed, will retry: %s",
                                self.member_id, *key, error)  # fmt: skip
                    continue
                self._failed(key, error, "commit")
                continue
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
        except KafkaException as error:  # the successor takes over after its timeout (and fences)
            log.warning("%s: release of key range %s-%d [%d, %d) failed: %s", self.member_id, *key, error)
        finally:
            if lane.member.transaction is not None:
                lane.member.transaction.close()
            lane.member.close()
        log.info("%s: key range %s-%d [%d, %d) stopped", self.member_id, *key)
