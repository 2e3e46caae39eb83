"""A fenced claim whose stable read after its fence is not answered reads the last committed offset.

After the fence every earlier transaction of the partition's ``transactional.id`` has ended; a
stable read that still waits is held by a hanging transaction (offsets the group coordinator keeps
pending and no transaction coordinator will end), and the claim transaction replaces them
(docs/protocol/liveness.md, "A hanging transaction after the fence"). Before, the claim gave up
its producer at every such read, for minutes. Plain fakes stand in for the readers: what is
checked is the claim's own step, not what a broker does (tests/integration/test_client_*.py).
"""

from __future__ import annotations

import threading
from types import SimpleNamespace

from confluent_kafka import KafkaError, KafkaException
from rebalance_advisor_client.claim_runner import ClaimInput, ClaimOutcome
from rebalance_advisor_client.errors import ClientError
from rebalance_advisor_client.fenced_mode import FencedMode
from rebalance_advisor_client.handover_rules import OWNED, RELEASED, Claimant, OwnerMark

TP = ("in", 5)


class _Producer:
    def __init__(self) -> None:
        self.closed = False

    def close(self) -> None:
        self.closed = True


def _mode(stable: object, uncommitted: object) -> tuple[FencedMode, list[str]]:
    """A fenced mode whose owner reads ``stable`` / ``uncommitted`` (a marks value, or an error)."""
    reads: list[str] = []
    settled, hints = object(), object()

    def read_marks(tps, reader, timeout=None):
        name, answer = ("stable", stable) if reader is settled else ("uncommitted", uncommitted)
        reads.append(name)
        if isinstance(answer, Exception):
            raise ClientError(f"reading committed offsets: {answer}") from answer
        return {TP: answer}

    owner = SimpleNamespace(
        member_id="m1", instance="i1", takeover_timeout=3.0, request_timeout=5.0,
        _claims=SimpleNamespace(cancelled=threading.Event()), _settled=settled, _hints=hints,
        _read_marks=read_marks, _start_offset=lambda tp: 0, _newer_epoch_known=lambda epoch: False,
        _ranges=SimpleNamespace(merged_start=lambda tp, start: start),
    )  # fmt: skip
    mode = object.__new__(FencedMode)  # no probe of transactions: no broker here
    mode._owner = owner
    return mode, reads


def _settle(mode: FencedMode) -> tuple[tuple[int, int] | None, _Producer]:
    claim = ClaimInput(TP, Claimant("m1", "i1", 4, False), 0.0, None, None, None, None)
    txn = _Producer()
    return mode._settled_start(claim, txn, ClaimOutcome(TP, 4)), txn


UNSTABLE = KafkaException(KafkaError(KafkaError._TIMED_OUT, "Local: Timed out (UNSTABLE_OFFSET_COMMIT)"))


def test_a_stable_read_held_by_a_hanging_transaction_falls_back_to_the_last_committed_offset() -> None:
    mode, reads = _mode(UNSTABLE, (1200, OwnerMark("m1", 3, OWNED, "i0")))
    start, txn = _settle(mode)
    assert start == (1200, 1200)  # claimed at the last committed offset, with the fencing producer
    assert not txn.closed
    assert reads == ["stable", "uncommitted"]


def test_an_answered_stable_read_is_used_as_it_is() -> None:
    mode, reads = _mode((900, OwnerMark("m0", 3, RELEASED, "i0")), (1200, None))
    start, txn = _settle(mode)
    assert start == (900, 900) and reads == ["stable"] and not txn.closed


def test_the_fallback_read_decides_like_the_stable_one() -> None:
    """A newer epoch's claim found by the fallback read is never overridden: the claim backs off."""
    mode, _ = _mode(UNSTABLE, (1200, OwnerMark("m2", 5, OWNED, "i2")))
    start, txn = _settle(mode)
    assert start is None and txn.closed


def test_no_answer_at_all_leaves_the_claim_to_be_tried_again() -> None:
    mode, reads = _mode(UNSTABLE, KafkaException(KafkaError(KafkaError._TIMED_OUT, "coordinator down")))
    start, txn = _settle(mode)
    assert start is None and txn.closed and reads == ["stable", "uncommitted"]
