"""A fence stops between its init_transactions attempts once its claim no longer stands.

librdkafka retries InitProducerId every 500 ms until the call's timeout, and each retry aborts the
transaction the id's newest holder has open (docs/protocol/liveness.md, "Stale claims"). A real
librdkafka producer against an address where no broker listens never gets a producer id: the
fence must end soon after ``stop()`` turns true, not at its 30 s timeout.
"""

from __future__ import annotations

import gc
import threading
import time
import weakref

import pytest
from confluent_kafka import KafkaError, KafkaException
from rebalance_advisor.devtools.local_kafka import free_port
from rebalance_advisor_client.fencing import FENCE_ATTEMPT_S, PartitionTransaction


def test_a_fence_whose_claim_moved_on_stops_retrying() -> None:
    moved_on = threading.Event()
    txn = PartitionTransaction(
        {"bootstrap.servers": f"127.0.0.1:{free_port()}", "log_level": 0}, "t.fence-attempts", 30.0
    )
    threading.Timer(1.0, moved_on.set).start()
    started = time.monotonic()
    try:
        with pytest.raises(KafkaException, match="no longer stands"):
            txn.fence(moved_on.is_set)
        took = time.monotonic() - started
    finally:
        txn.close()
    assert moved_on.is_set()
    assert took < 30.0 / 2, took  # one attempt after the claim moved on, not the whole timeout
    assert FENCE_ATTEMPT_S < 30.0 / 4


class _Client:
    """Stands in for a producer whose call fails (``_bounded`` only calls it)."""

    def init_transactions(self, timeout: float) -> None:
        raise KafkaException(KafkaError(KafkaError._TIMED_OUT, f"no answer within {timeout} s"))


def test_a_failed_call_leaves_nothing_holding_the_producer() -> None:
    """A producer given up after a failed call is freed when its owner drops it, not when the cyclic
    garbage collector runs: until it is freed, librdkafka keeps retrying a fence's InitProducerId
    (docs/protocol/liveness.md, "Dropped producers")."""
    txn = PartitionTransaction(
        {"bootstrap.servers": f"127.0.0.1:{free_port()}", "log_level": 0}, "t.failed-call", 5.0
    )
    client = _Client()
    freed = weakref.ref(client)
    collecting = gc.isenabled()
    gc.disable()
    try:
        with pytest.raises(KafkaException, match="no answer"):
            txn._bounded(client.init_transactions, 0.1)
        del client
        assert freed() is None
    finally:
        if collecting:
            gc.enable()
        txn.close()
