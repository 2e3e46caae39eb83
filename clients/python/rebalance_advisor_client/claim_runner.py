"""Claims in flight (no Kafka import): what a claim needs (taken on the caller's thread), what it found, and the
threads that run fenced claims (docs/protocol/threads.md, "Claims on threads of their own")."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from rebalance_advisor_client.assignment_records import TopicPartitionKey
from rebalance_advisor_client.handover_rules import Claimant
from rebalance_advisor_client.partition_states import HeldProducer

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class ClaimInput:
    """What a claim thread needs, taken on the caller's thread when the claim starts."""

    tp: TopicPartitionKey
    who: Claimant  # member, instance, the epoch claimed at, fenced at that epoch
    waited: float  # since the partition was gained (for the takeover timeout)
    consumer: Any  # unfenced: the claims' consumer of that moment (a wedged one may be replaced meanwhile)
    txn: HeldProducer | None  # fenced: the producer made ahead, if any
    remembered: int | None  # unfenced: our position when a commit was last refused
    group_metadata: Any  # fenced: the consumer's group metadata for the claim transaction


@dataclass
class ClaimOutcome:
    """A finished claim, applied on the caller's thread; ``start`` None: not claimed this time."""

    tp: TopicPartitionKey
    epoch: int
    start: int | None = None
    txn: HeldProducer | None = None  # claimed: its producer; not claimed: a spare one
    took: str = ""
    again: bool = False  # check again at once (a newer epoch, a stale read), not after check_interval
    #: AccessRefused (raised on the caller's thread), a KafkaException (the group coordinator did not
    #: answer), or any other error (logged there; the claim is tried again)
    error: BaseException | None = None
    answered: bool = False  # the group coordinator answered a read (KafkaException: it did not)


class ClaimRunner:
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
        self._done: list[ClaimOutcome] = []
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

    def start(self, tp: TopicPartitionKey, epoch: int, work: Callable[[], ClaimOutcome]) -> None:
        def run() -> None:
            try:
                outcome = work()
            except BaseException as error:  # noqa: BLE001 - handed to the caller's thread
                outcome = ClaimOutcome(tp, epoch, error=error)
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

    def finished(self) -> list[ClaimOutcome]:
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

    def close(self, timeout: float) -> list[ClaimOutcome]:
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
