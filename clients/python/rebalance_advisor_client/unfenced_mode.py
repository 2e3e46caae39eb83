"""Unfenced mode (``fenced=False``): owner marks are the only guard, read before every write.

Claims run on the caller's thread, in turn: on threads of their own, a process pause that came
after one claim's read landed inside another claim's read-to-write window (docs/protocol/threads.md,
"Unfenced claims"). Guarantees and limits: docs/protocol/fenced.md, "Unfenced mode".
"""

from __future__ import annotations

import logging
import time
from typing import TYPE_CHECKING, Any

from confluent_kafka import TopicPartition

from rebalance_advisor_client.assignment_records import TopicPartitionKey
from rebalance_advisor_client.claim_runner import ClaimInput, ClaimOutcome
from rebalance_advisor_client.errors import AccessRefused, ClientError
from rebalance_advisor_client.handover_rules import (
    OWNED,
    RELEASED,
    OwnerMark,
    claim_start,
    commit_offset,
    may_commit,
)
from rebalance_advisor_client.partition_states import PartitionRecord, partition_names

if TYPE_CHECKING:
    from rebalance_advisor_client.consumer import AssignedConsumer

log = logging.getLogger(__name__)


class UnfencedMode:
    """The unfenced :class:`~rebalance_advisor_client.claim_modes.HandoverMode`."""

    def __init__(self, owner: AssignedConsumer, ready_timeout: float) -> None:
        self._owner = owner

    # -- commits and releases ----------------------------------------------------------------------

    def commit(self) -> dict[TopicPartitionKey, int]:
        owner = self._owner
        changed = {}
        for tp in owner._partitions.held_partitions():
            record = owner._partitions.held(tp)
            if record.committed != record.position:
                changed[tp] = record.position
        try:
            written, refused = self._checked_commit(changed, OWNED)
        except ClientError as error:
            log.warning("%s: commit failed, will retry: %s", owner.member_id, error)
            return {}
        for tp in refused:
            owner._drop(tp, fenced=True)
        return written

    def retry_commits(self) -> None:
        """Nothing to retry: an unfenced commit that fails is written again by the next commit()."""

    def revalidate(self, tps: list[TopicPartitionKey]) -> None:
        owner = self._owner
        try:
            marks = owner._read_marks(tps)
        except ClientError as error:
            log.warning("%s: cannot re-check %s yet: %s", owner.member_id, partition_names(tps), error)
            return
        for tp in tps:
            mark = marks[tp][1]
            if not may_commit(owner.member_id, owner.instance, owner._partitions.held(tp).claimed_at, mark):
                log.warning(
                    "%s: %s-%d was taken by %s at epoch %d meanwhile: dropping it",
                    owner.member_id, tp[0], tp[1], mark.member, mark.epoch,
                )  # fmt: skip
                owner._drop(tp, fenced=True)

    def release(self, tps: list[TopicPartitionKey]) -> list[TopicPartitionKey]:
        owner = self._owner
        positions = {tp: owner._partitions.held(tp).position for tp in tps}
        try:
            written, _ = self._checked_commit(positions, RELEASED)
            return list(written)
        except ClientError as error:  # the successor takes over after its timeout instead
            log.error("%s: release of %s failed: %s", owner.member_id, partition_names(tps), error)
            return []

    def _checked_commit(
        self, positions: dict[TopicPartitionKey, int], state: str
    ) -> tuple[dict[TopicPartitionKey, int], list[TopicPartitionKey]]:
        """Commit positions unless another member took the partition over: (written, refused).

        A read older than ``mark_read_bound`` when the write is due (the process was paused in
        between) is read again first.
        """
        if not positions:
            return {}, []
        owner = self._owner
        for _ in range(5):
            read_at = time.monotonic()
            allowed, refused = self._allowed(positions, owner._read_marks(list(positions)))
            if time.monotonic() - read_at <= owner.mark_read_bound:
                break
            log.info("%s: mark read took too long (paused?): reading again", owner.member_id)
        if allowed:
            self.write(allowed, {tp: owner._mark(tp, state) for tp in allowed})
            for tp, offset in allowed.items():
                owner._partitions.held(tp).committed = offset
        return allowed, refused

    def _allowed(
        self, positions: dict[TopicPartitionKey, int], marks: dict
    ) -> tuple[dict[TopicPartitionKey, int], list[TopicPartitionKey]]:
        """Which positions may be written by the marks just read (handover rules 3 and 4)."""
        owner = self._owner
        allowed, refused = {}, []
        for tp, position in positions.items():
            committed, mark = marks[tp]
            claimed_at = owner._partitions.held(tp).claimed_at
            if may_commit(owner.member_id, owner.instance, claimed_at, mark):
                allowed[tp] = commit_offset(position, committed)
            else:
                refused.append(tp)
                log.warning(
                    "%s: not committing %s-%d: %s took it at epoch %d (claimed by us at %d)",
                    owner.member_id, tp[0], tp[1], mark.member, mark.epoch, claimed_at,
                )  # fmt: skip
        return allowed, refused

    def write(
        self,
        offsets: dict[TopicPartitionKey, int],
        metadata: dict[TopicPartitionKey, str],
        consumer: Any = None,
    ) -> None:
        """Commit ``offsets`` with their marks (on the polled consumer unless ``consumer`` is given)."""
        owner = self._owner
        batch = [TopicPartition(t, p, off, metadata=metadata[(t, p)]) for (t, p), off in offsets.items()]
        result = owner._group_request(
            consumer,
            lambda writer: writer.commit(offsets=batch, asynchronous=False),
            f"commit for group {owner.group_id} failed",
        )
        for item in result or []:
            if item.error:
                raise ClientError(f"commit of {item.topic}-{item.partition} failed: {item.error}")

    # -- consuming ---------------------------------------------------------------------------------

    def begin(self, tp: TopicPartitionKey, record: PartitionRecord) -> bool:
        return True  # no transaction: outputs are the application's own

    def produce(self, message: Any, topic: str, value: Any, key: Any, **kwargs: Any) -> None:
        raise ClientError("produce() needs fenced mode: outputs ride on the partition's transaction")

    # -- claims ------------------------------------------------------------------------------------

    def group_metadata(self) -> Any:
        return None

    def launch(self, claim: ClaimInput) -> bool:
        """Run the claim here and apply it at once (claims in turn: the module docstring)."""
        owner = self._owner
        try:
            outcome = owner._claim(claim)
        except AccessRefused:  # a grant is missing: waiting will not bring it
            owner._claim_undone(claim.tp, claim.who.epoch)
            raise
        except Exception as error:  # noqa: BLE001 - a claim is retried at the next check
            outcome = ClaimOutcome(claim.tp, claim.who.epoch, error=error)
        owner._apply_claim(outcome)
        return not owner._newer_epoch_known(owner.epoch)

    def hint_reader(self, claim: ClaimInput) -> Any:
        return claim.consumer  # the claims' own consumer: its reads and writes are the guard

    def finish(
        self, claim: ClaimInput, committed: int | None, read_at: float, outcome: ClaimOutcome
    ) -> ClaimOutcome:
        """Write the claim mark at ``max(read, remembered)``, then read it back: a claim that was
        overwritten meanwhile waits again (docs/protocol/fenced.md, "Unfenced mode")."""
        owner, tp, epoch = self._owner, claim.tp, claim.who.epoch
        start = claim_start(committed, claim.remembered, None)
        start = start if start is not None else owner._start_offset(tp)
        if start is None:
            return outcome
        write_at = time.monotonic()
        if owner._newer_epoch_known(epoch) or owner._claims.cancelled.is_set():
            outcome.again = True
            return outcome
        if write_at - read_at > owner.mark_read_bound:
            # checked here, after the start offset was looked up (a watermark query can be slow
            # too): a claim written from a stale read overwrote a newer owner's commit in a test
            log.info("%s: mark read took too long (paused?): reading again before claiming", owner.member_id)
            outcome.again = True
            return outcome
        return self._write_claim(claim, start, (read_at, write_at), outcome)

    def _write_claim(
        self, claim: ClaimInput, start: int, times: tuple[float, float], outcome: ClaimOutcome
    ) -> ClaimOutcome:
        owner, tp, epoch = self._owner, claim.tp, claim.who.epoch
        mark = OwnerMark(owner.member_id, epoch, OWNED, owner.instance, None, epoch).encode()
        try:
            self.write({tp: start}, {tp: mark}, claim.consumer)
            check_at = time.monotonic()
            offset, check = owner._read_marks([tp], claim.consumer)[
                tp
            ]  # did a concurrent claim land after ours?
        except ClientError as error:
            log.warning("%s: claim failed, will retry: %s", owner.member_id, error)
            return outcome
        if check is None or not check.written_by(owner.member_id, owner.instance) or check.epoch != epoch:
            log.warning("%s: claim of %s-%d was overwritten: waiting again", owner.member_id, *tp)
            return outcome
        outcome.start = owner._ranges.merged_start(tp, max(start, offset or 0))
        read_at, write_at = times
        outcome.took = (
            f"read {write_at - read_at:.3f} s; claim written {check_at - write_at:.3f} s; "
            f"re-checked {time.monotonic() - check_at:.3f} s"
        )
        return outcome

    def warm_up(self) -> None:
        """Nothing to prepare: an unfenced claim makes no producer."""

    def unanswered(self, error: BaseException) -> bool:
        """The claims read through the claims' consumer: replace it (and the polled one) when the
        group coordinator keeps not answering it (docs/protocol/fenced.md)."""
        self._owner._coordinator_unanswered(error)
        return True
