"""A fenced commit whose transactional call timed out in librdkafka gives its producer up.

Aborted and reused instead, that producer's next ``send_offsets_to_transaction`` hung 10 s after
a broker restart (8 times in the 2026-11-28 main run), and its queued request may land late under
the same producer epoch; dropped, the partition is claimed again by a new producer whose fence
bumps the epoch (docs/protocol/liveness.md, "After a broker restart"). Plain fakes stand in for
the member and the producer: what is checked is the transition the helper makes, not the broker.
"""

from __future__ import annotations

from types import SimpleNamespace

import pytest
from confluent_kafka import KafkaError, KafkaException
from rebalance_advisor_client.fenced_mode import FencedMode

TP = ("in", 3)


class _Txn:
    def __init__(self, committing: bool) -> None:
        self.committing, self.aborted = committing, 0

    def abort(self) -> None:
        self.aborted += 1


def _mode(txn: _Txn) -> tuple[FencedMode, list]:
    dropped: list = []
    record = SimpleNamespace(txn=txn, paused=False, committed=100, position=140)
    owner = SimpleNamespace(
        member_id="m1",
        _partitions=SimpleNamespace(held=lambda tp: record),
        _drop=lambda tp, fenced, consuming=True: dropped.append((tp, fenced)),
    )
    mode = object.__new__(FencedMode)  # no probe of transactions: no broker here
    mode._owner = owner
    return mode, dropped


@pytest.mark.parametrize("committing", [False, True])
def test_a_timed_out_commit_drops_the_partition_without_reusing_its_producer(committing: bool) -> None:
    txn = _Txn(committing)
    mode, dropped = _mode(txn)
    error = KafkaException(
        KafkaError(KafkaError._TIMED_OUT, "Failed to add offsets to transaction: Local: Timed out")
    )
    mode._transaction_failed(TP, error, "commit", consuming=False)
    assert dropped == [
        (TP, False)
    ]  # claimed again (not fenced out): the new producer's fence bumps the epoch
    assert txn.aborted == 0  # no abort at the old epoch


def test_a_transport_failure_while_committing_is_retried_with_the_same_producer() -> None:
    txn = _Txn(committing=True)
    mode, dropped = _mode(txn)
    error = KafkaException(KafkaError(KafkaError._TRANSPORT, "broker down"))
    mode._transaction_failed(TP, error, "commit", consuming=False)
    assert dropped == [] and txn.aborted == 0
