"""Fencing by the broker: one transactional producer per claimed partition.

``init_transactions()`` with a ``transactional.id`` derived from group, topic and partition bumps
the producer epoch: the broker aborts the previous owner's open transaction and rejects its every
later commit (``PRODUCER_FENCED``). Offsets go into the transaction (``send_offsets_to_transaction``)
together with the user's outputs, so a fenced member can neither move the group's offsets nor
publish output. Pre-KIP-447 exactly-once: it needs no consumer-group generation, which
``assign()`` consumers do not have. Measured cost per claimed partition: docs/benchmarks/fencing.md.
"""

from __future__ import annotations

import logging
import re
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from confluent_kafka import KafkaError, KafkaException, Producer

from rebalance_advisor_client.errors import TransactionsUnavailable

log = logging.getLogger(__name__)

#: how much longer than its own timeout a transactional call may take before it counts as stuck
_MARGIN_S = 5.0
#: a fence asks ``init_transactions`` for at most this long at a time, and between two attempts
#: whether its claim still stands: a claim whose epoch moved on stops fencing (docs/protocol/liveness.md)
FENCE_ATTEMPT_S = 0.5
_PID = re.compile(r"Acquired PID\{Id:(\d+),Epoch:(\d+)\}")
_FENCED_CODES = {
    KafkaError._FENCED,
    KafkaError.PRODUCER_FENCED,
    KafkaError.INVALID_PRODUCER_EPOCH,
    KafkaError.TRANSACTION_COORDINATOR_FENCED,
}
_DENIED_CODES = {
    KafkaError.TRANSACTIONAL_ID_AUTHORIZATION_FAILED,
    KafkaError.CLUSTER_AUTHORIZATION_FAILED,
    KafkaError.GROUP_AUTHORIZATION_FAILED,
    KafkaError.TOPIC_AUTHORIZATION_FAILED,
}


@dataclass(frozen=True, order=True)
class FencingToken:
    """Under which claim a record was delivered: pass it to sinks outside Kafka.

    Ordered by ``(producer_id, producer_epoch)``, the order in which the broker fenced owners of
    the partition (a new producer id is only handed out with a higher number, when the epoch
    would overflow). A sink keeps the highest token per partition and rejects writes carrying a
    lower one: they come from a fenced member. ``epoch`` is the assignment epoch of the claim, for
    logs; it does not order claims (a late member can claim at an older epoch and be fenced).
    In unfenced mode the producer fields are None and the token fences nothing.
    """

    producer_id: int | None
    producer_epoch: int | None
    epoch: int


def transactional_id(group: str, topic: str, partition: int) -> str:
    """The unit of fencing: one id per group and partition, stable across members and restarts."""
    return f"{transactional_id_prefix(group)}{topic}.{partition}"


def transactional_id_prefix(group: str) -> str:
    """Every id of a group starts with this: grant the ACLs on it as a prefixed resource."""
    return f"rebalance-advisor-client.{group}."


def classify(error: BaseException) -> str:
    """``fenced`` (drop the partition), ``abort`` (abort, rewind, redo), ``retry``, or ``other``."""
    kafka_error = error.args[0] if isinstance(error, KafkaException) and error.args else None
    if not isinstance(kafka_error, KafkaError):
        return "other"
    if kafka_error.code() in _FENCED_CODES or kafka_error.fatal():
        return "fenced"
    if "did not return within" in kafka_error.str():
        return "stuck"
    if kafka_error.txn_requires_abort():
        return "abort"
    if kafka_error.retriable() or kafka_error.code() in (KafkaError._TIMED_OUT, KafkaError._TRANSPORT):
        return "retry"
    return "other"


class _PidLog(logging.Logger):
    """librdkafka's ``eos`` debug log, kept only for the line that names the acquired producer id."""

    def __init__(self) -> None:
        super().__init__("rebalance_advisor_client.pid", logging.DEBUG)
        self.acquired: tuple[int, int] | None = None
        self._lock = threading.Lock()

    def log(self, level: int, msg: object, *args: object, **kwargs: Any) -> None:  # type: ignore[override]
        text = str(msg) % args if args else str(msg)
        found = _PID.search(text)
        if found:
            with self._lock:
                self.acquired = (int(found.group(1)), int(found.group(2)))
        elif level >= logging.WARNING:
            log.log(level, "producer: %s", text)


class PartitionTransaction:
    """The transactional producer that holds one partition for this member (fenced mode).

    Call order: ``fence()`` once; then any number of ``begin()`` ... ``commit()``/``abort()``.
    A ``retry`` failure of ``commit()`` leaves the transaction committing: call ``commit()`` again.
    """

    def __init__(
        self, settings: dict[str, Any], transactional_id: str, timeout: float, topic: str | None = None
    ) -> None:
        self.transactional_id, self.timeout = transactional_id, timeout
        self._pid_log = _PidLog()
        self._producer = Producer(
            {
                **settings,
                "transactional.id": transactional_id,
                "debug": "eos",
                "logger": self._pid_log,
            }
        )
        self.open = False
        self.committing = False
        self.outputs = 0
        self.stuck = False
        self._connected = threading.Event()
        threading.Thread(
            target=self._connect, args=(topic,), name=f"connect-{transactional_id}", daemon=True
        ).start()

    def _connect(self, topic: str | None) -> None:
        """Open a broker connection now, so that ``fence()`` finds one up.

        A new librdkafka producer connects to nothing until asked, and drops its bootstrap
        connection once it knows the brokers; ``init_transactions()`` then finds no broker up and
        looks for the coordinator only when a fixed 500 ms timer fires (measured: 0.505-0.525 s per
        claim, nearly every handover). A metadata request answered by a broker the cluster named
        (not the bootstrap address, which is dropped) leaves a connection up: measured 0 of 30
        such fences slow, against 11 of 25 after one request that the bootstrap address answered.
        """
        producer = self._producer  # close() may drop the attribute meanwhile
        try:
            for _ in range(3):
                if producer is None or producer.list_topics(topic, timeout=self.timeout).orig_broker_id >= 0:
                    break
                producer = self._producer
        except (KafkaException, RuntimeError) as error:  # init_transactions() reports it properly
            log.debug("%s: connecting: %s", self.transactional_id, error)
        finally:
            self._connected.set()

    def _bounded(self, call: Any, *args: Any) -> Any:
        """Run a blocking transactional call with a deadline of our own.

        librdkafka's timeouts were seen not to hold while a coordinator moved on a loaded machine
        (a commit blocked for over a minute): past ``timeout`` plus a margin the call counts as
        failed (``_TIMED_OUT``, classified ``stuck``) and the caller gives this producer up. The
        call runs on a daemon thread, so a call that never returns cannot hold up the exit either.
        """
        outcome: list = []

        def run() -> None:
            try:
                outcome.append((True, call(*args)))
            except BaseException as error:  # noqa: BLE001 - handed to the caller below
                outcome.append((False, error))

        thread = threading.Thread(target=run, name=f"txn-{self.transactional_id}", daemon=True)
        thread.start()
        thread.join(self.timeout + _MARGIN_S)
        if not outcome:
            self.stuck = True
            raise KafkaException(
                KafkaError(
                    KafkaError._TIMED_OUT,
                    f"{call.__name__} did not return within {self.timeout + _MARGIN_S:.0f} s",
                )
            )
        ok, value = outcome.pop()
        if ok:
            return value
        try:
            raise value
        finally:
            # the exception's traceback holds this frame: without this, frame -> value -> traceback
            # -> frame is a cycle that keeps ``call``'s producer (and its InitProducerId retries)
            # alive until the cyclic garbage collector runs, seconds later (docs/protocol/liveness.md)
            del value
            call = None  # the closure's cell: the producer is not held by the traceback

    def fence(self, stop: Callable[[], bool] | None = None) -> tuple[int, int]:
        """``init_transactions()``: fence every earlier holder of this id; (producer id, epoch).

        Asked in attempts of ``FENCE_ATTEMPT_S``; before each further attempt ``stop()`` may end
        it (raises ``_TIMED_OUT``): librdkafka retries ``InitProducerId`` every 500 ms, and each
        retry aborts the transaction the id's newest holder has open. Seen: a claim of an epoch
        already moved on aborted its successor's transactions three times. The caller closes
        this producer then, which ends librdkafka's retries.
        """
        deadline = time.monotonic() + self.timeout
        while not self._connected.wait(max(min(FENCE_ATTEMPT_S, deadline - time.monotonic()), 0)):
            if time.monotonic() >= deadline:  # made ahead (warm): long done
                break
            if stop is not None and stop():
                raise _stopped()
        while True:
            attempt = max(min(FENCE_ATTEMPT_S, deadline - time.monotonic()), 0.001)
            try:
                self._bounded(self._producer.init_transactions, attempt)
                break
            except KafkaException as error:
                kafka_error = error.args[0] if error.args else None
                # an attempt that timed out reports the last error of librdkafka's retries (e.g.
                # CONCURRENT_TRANSACTIONS), retriable: calling again resumes the same fence
                again = isinstance(kafka_error, KafkaError) and (
                    kafka_error.retriable() or kafka_error.code() == KafkaError._TIMED_OUT
                )
                if not again or self.stuck or time.monotonic() >= deadline:
                    raise
                if stop is not None and stop():
                    raise _stopped() from error
        self._producer.poll(0)  # serves the log queue
        if self._pid_log.acquired is None:
            raise KafkaException(KafkaError(KafkaError._STATE, "no producer id was logged by librdkafka"))
        return self._pid_log.acquired

    @property
    def producer(self) -> tuple[int, int] | None:
        """(producer id, producer epoch) the broker gave this producer last (None before fence())."""
        return self._pid_log.acquired

    def begin(self) -> None:
        if not self.open:
            self._producer.begin_transaction()
            self.open, self.outputs = True, 0

    def produce(self, topic: str, value: Any = None, key: Any = None, **kwargs: Any) -> None:
        self.begin()
        self._producer.produce(topic, value, key, **kwargs)
        self.outputs += 1
        self._producer.poll(0)

    def commit(self, offsets: list, group_metadata: Any) -> None:
        """Put ``offsets`` (with their metadata) into the open transaction and commit it."""
        if not self.committing:
            self.begin()
            self._bounded(self._producer.send_offsets_to_transaction, offsets, group_metadata, self.timeout)
            self.committing = True
        self._bounded(self._producer.commit_transaction, self.timeout)
        self.open = self.committing = False
        self.outputs = 0
        self._producer.poll(0)

    def abort(self) -> None:
        """Abort the open transaction (outputs vanish, offsets stay); quiet when there is none."""
        if self.open:
            self._bounded(self._producer.abort_transaction, self.timeout)
        self.open = self.committing = False
        self.outputs = 0

    def close(self) -> None:
        """Drop the producer; an open transaction is left to the broker (aborted by the next owner).

        Destroying a librdkafka producer waits for its requests in flight (seconds to minutes
        while a broker restarts), so that happens on a background thread, never the caller's.
        """
        producer, self._producer = self._producer, None
        if producer is not None and not self.stuck:
            _destroy_off_thread(producer)
        # a stuck producer is left to its call's thread: destroying it now would block there too


def _stopped() -> KafkaException:
    return KafkaException(KafkaError(KafkaError._TIMED_OUT, "fence stopped: its claim no longer stands"))


def _destroy_off_thread(producer: Producer) -> None:
    """Destroy a dropped producer on a thread of its own, at once.

    Until it is destroyed, librdkafka keeps retrying the producer's ``InitProducerId`` every
    500 ms, and each retry fences whoever holds the id now: a queue of producers destroyed one
    after another (a destroy waits for requests in flight, seconds while a broker restarts) let
    a dropped fence stop the partition's next owner seconds later (docs/protocol/liveness.md,
    "Dropped producers").
    """
    held = [producer]

    def destroy() -> None:
        doomed = held.pop()
        try:
            doomed.purge()
            doomed.flush(0)
        except (KafkaException, RuntimeError) as error:
            log.debug("closing a producer: %s", error)
        del doomed  # librdkafka's destroy runs here, once the last call on it has returned

    threading.Thread(target=destroy, name="rebalance-advisor-client-destroy", daemon=True).start()


def probe_transactions(
    settings: dict[str, Any],
    group: str,
    member: str,
    timeout: float,
    patience: float,
    make: Callable[..., PartitionTransaction] = PartitionTransaction,
) -> None:
    """Fenced mode's start check: can this client initialise a transaction under the group's prefix?

    Transient answers (a coordinator loading after a broker restart) are retried for ``patience``
    seconds. Raises :class:`TransactionsUnavailable` naming the ACL or broker setting that is missing.
    """
    txn_id = f"{transactional_id_prefix(group)}_probe.{member}"  # one per member: no contention
    deadline = time.monotonic() + patience
    transaction = make(settings, txn_id, timeout)
    try:
        while True:
            try:
                transaction.fence()
                return
            except KafkaException as error:
                kafka_error = error.args[0] if error.args else None
                denied = isinstance(kafka_error, KafkaError) and kafka_error.code() in _DENIED_CODES
                if classify(error) == "fenced" and not denied:
                    return  # another member's probe fenced ours: transactions work
                if denied or time.monotonic() >= deadline:
                    raise TransactionsUnavailable(_explain(error, group, patience)) from error
                log.info("transactions not ready yet (%s): retrying", error)
                time.sleep(min(1.0, max(deadline - time.monotonic(), 0)))
    finally:
        transaction.close()


_UNFENCED_HINT = (
    "Or run without broker fencing: AssignedConsumer(..., fenced=False) (weaker guarantees, "
    "docs/protocol/fenced.md, 'Unfenced mode')."
)


def _explain(error: KafkaException, group: str, timeout: float) -> str:
    kafka_error = error.args[0] if error.args else None
    code = kafka_error.code() if isinstance(kafka_error, KafkaError) else None
    reason = kafka_error.str() if isinstance(kafka_error, KafkaError) else str(error)
    prefix = transactional_id_prefix(group)
    if code in _DENIED_CODES:
        return (
            f"fenced mode needs Kafka transactions, and the cluster refused them ({reason}). Grant "
            f"this client's principal WRITE and DESCRIBE on TransactionalId prefix '{prefix}' "
            f"(kafka-acls --add --allow-principal User:<you> --operation Write --operation Describe "
            f"--transactional-id '{prefix}' --resource-pattern-type prefixed) and READ on group "
            f"'{group}' (and IDEMPOTENT_WRITE on the cluster for brokers before 2.8). {_UNFENCED_HINT}"
        )
    if code in (KafkaError.UNSUPPORTED_VERSION, KafkaError._UNSUPPORTED_FEATURE):
        return (
            f"fenced mode needs Kafka transactions, which this broker does not support ({reason}): "
            f"they need Kafka 0.11 or newer. {_UNFENCED_HINT}"
        )
    return (
        f"fenced mode needs Kafka transactions, and no transaction coordinator answered within "
        f"{timeout:.0f} s ({reason}). The broker needs transaction.state.log.replication.factor "
        f"at most the number of brokers and transaction.state.log.min.isr replicas in sync (the "
        f"__transaction_state topic must be creatable). {_UNFENCED_HINT}"
    )
