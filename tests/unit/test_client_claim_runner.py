"""The client helper's claim threads (consumer._ClaimRunner): what close() hands back and what it
leaves to the threads. No broker: the runner only runs callables and keeps their outcomes."""

from __future__ import annotations

import threading

from rebalance_advisor_client.consumer import _ClaimOutcome, _ClaimRunner


class _Producer:
    """Stands in for a PartitionTransaction: the runner only ever calls close() on it."""

    def __init__(self) -> None:
        self.closed = threading.Event()

    def close(self) -> None:
        self.closed.set()


def test_finished_claims_wait_for_the_caller_and_failures_become_outcomes() -> None:
    runner = _ClaimRunner("m")
    runner.start(("t", 0), 3, lambda: _ClaimOutcome(("t", 0), 3, start=17))
    runner.start(("t", 1), 3, lambda: 1 / 0)
    runner.join(5)
    # finished but not applied yet: still busy, or a second claim would fence the first one's producer
    assert runner.busy(("t", 0)) and runner.busy(("t", 1))
    done = sorted(runner.finished(), key=lambda o: o.tp)
    assert not runner.busy(("t", 0)) and not runner.busy(("t", 1))
    assert [(o.tp, o.epoch, o.start) for o in done] == [(("t", 0), 3, 17), (("t", 1), 3, None)]
    assert isinstance(done[1].error, ZeroDivisionError)
    assert runner.finished() == []  # handed out once


def test_close_cancels_waits_and_a_late_claim_closes_its_own_producer() -> None:
    runner = _ClaimRunner("m")
    go_on = threading.Event()
    quick, late = _Producer(), _Producer()

    def slow_claim() -> _ClaimOutcome:
        go_on.wait(10)
        return _ClaimOutcome(("t", 1), 3, start=5, txn=late)

    def cancellable_claim() -> _ClaimOutcome:
        runner.cancelled.wait(10)  # a claim checks the flag between its steps
        return _ClaimOutcome(("t", 0), 3, start=9, txn=quick)

    runner.start(("t", 0), 3, cancellable_claim)
    runner.start(("t", 1), 3, slow_claim)
    assert runner.running() and runner.busy(("t", 1))
    done = runner.close(0.5)  # the slow one does not end in time
    assert [(o.tp, o.start) for o in done] == [(("t", 0), 9)]  # the caller releases this one
    assert not quick.closed.is_set()
    go_on.set()
    assert late.closed.wait(5)  # ended after close(): nobody applies it, its producer is closed
    assert runner.finished() == []
