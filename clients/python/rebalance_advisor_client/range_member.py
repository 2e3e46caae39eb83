"""A consumer of one key range of one partition (or of the whole partition), with exact progress.

This is the range path of the client helper in its smallest form: it reads its start from the
committed offsets of the parent group and of every derived range group of the partition
(:mod:`key_ranges`), fetches the partition, hands the application only the records whose key
hash is in its range and that no earlier owner processed, and commits its position under its own
derived group (the parent group for a whole partition).

It does not follow published epochs: whoever runs it must stop (or fence) the previous owners of
the partition's hashes before starting it (the handover). ``AssignedConsumer`` runs one per
published range through :mod:`range_set`, which fences them at the broker in fenced mode and
hands each its :class:`~rebalance_advisor_client.fencing.PartitionTransaction`: commits then go
into that transaction (``send_offsets_to_transaction`` under the derived group).

``config``: the connection part of the client config (``security.protocol``, ``sasl.*``,
``ssl.*``, ...; ``assignment_records.connection_settings``), used by every client made here.
Progress is read ``read_committed``: a committed offset still inside an open transaction is
waited for, not read half-way.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np
from confluent_kafka import Consumer, KafkaError, KafkaException, TopicPartition
from confluent_kafka.admin import AdminClient

from rebalance_advisor_client.fencing import PartitionTransaction
from rebalance_advisor_client.key_hash import HASH_SPACE, positive_hashes
from rebalance_advisor_client.key_ranges import (
    HashProgress,
    parse_range_group,
    range_group,
)

_RETRIABLE = {
    KafkaError.NOT_COORDINATOR,
    KafkaError.COORDINATOR_LOAD_IN_PROGRESS,
    KafkaError.COORDINATOR_NOT_AVAILABLE,
    KafkaError._TIMED_OUT,
    KafkaError.UNSTABLE_OFFSET_COMMIT,  # a transaction holding an offset commit is still open
}


def client_settings(bootstrap: str, config: Mapping[str, Any] | None) -> dict[str, Any]:
    """The settings of every client the range path makes: the servers and the connection config."""
    return {**(config or {}), "bootstrap.servers": bootstrap}


def _committed(
    bootstrap: str, group: str, topic: str, partition: int, timeout: float, config: Mapping[str, Any] | None
) -> int | None:
    """The group's committed offset of one partition, or None (see :func:`committed_with_metadata`)."""
    return committed_with_metadata(bootstrap, group, topic, partition, timeout, config)[0]


def committed_with_metadata(
    bootstrap: str,
    group: str,
    topic: str,
    partition: int,
    timeout: float,
    config: Mapping[str, Any] | None = None,
) -> tuple[int | None, str | None]:
    """The group's committed offset of one partition (or None) and the commit's metadata.

    Read with a consumer of that group (``committed()``), not with the AdminClient's
    ``list_consumer_group_offsets``, which can crash the process for a group the coordinator does
    not know (confluent-kafka-python issue #1982, seen here with 2.16.1).
    """
    consumer = Consumer(
        {
            **client_settings(bootstrap, config),
            "group.id": group,
            "enable.auto.commit": False,
            "isolation.level": "read_committed",  # waits for offsets inside open transactions
        }
    )
    try:
        tp = _committed_retrying(consumer, TopicPartition(topic, partition), timeout)
    finally:
        consumer.close()
    if tp.error is not None:  # never read as "nothing committed": a new owner would redo it all
        raise KafkaException(tp.error)
    if tp.offset < 0:
        return None, None
    return tp.offset, tp.metadata


def _committed_retrying(consumer: Consumer, partition: TopicPartition, timeout: float) -> TopicPartition:
    """``committed()`` asked again while the coordinator loads or moves, or a transaction settles."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            (tp,) = consumer.committed([partition], timeout=timeout)
            code = tp.error.code() if tp.error is not None else None
            if code not in _RETRIABLE or time.monotonic() > deadline:
                return tp
        except KafkaException as error:  # a coordinator still loading or moving: ask again
            if error.args[0].code() not in _RETRIABLE or time.monotonic() > deadline:
                raise
        # also UNSTABLE_OFFSET_COMMIT: the aborting or committing transaction settles shortly
        time.sleep(0.2)


def range_group_ids(
    bootstrap: str,
    parent: str,
    timeout: float = 30.0,
    admin: Any = None,
    config: Mapping[str, Any] | None = None,
) -> list[str]:
    """The derived key-range groups of ``parent`` the cluster knows (one ListGroups request).

    Raises when a broker's listing failed: a range missed here would be neither fenced nor
    skipped by a merge (its records processed twice).
    """
    if admin is None:  # not `admin or ...`: a client's len() is its queue length, so a new one is falsy
        admin = AdminClient(client_settings(bootstrap, config))
    listed = admin.list_consumer_groups(request_timeout=timeout).result(timeout)
    if listed.errors:  # a broker that did not answer: its range groups are unknown, not absent
        error = listed.errors[0]
        raise error if isinstance(error, KafkaException) else KafkaException(error)
    return sorted(g.group_id for g in listed.valid if (parse_range_group(g.group_id) or ("",))[0] == parent)


def read_progress(
    bootstrap: str,
    parent: str,
    topic: str,
    partition: int,
    timeout: float = 30.0,
    config: Mapping[str, Any] | None = None,
    admin: Any = None,
) -> HashProgress:
    """Committed progress of a partition over the hash space: the parent group's and each derived group's."""
    ranges: dict[tuple[int, int], int] = {}
    for group_id in range_group_ids(bootstrap, parent, timeout, admin, config):
        parsed = parse_range_group(group_id)
        assert parsed is not None
        offset = _committed(bootstrap, group_id, topic, partition, timeout, config)
        if offset is not None:
            ranges[parsed[1], parsed[2]] = offset
    parent_offset = _committed(bootstrap, parent, topic, partition, timeout, config)
    return HashProgress.from_commits(parent_offset, ranges)


class RangeMember:
    """Consume ``[lo, hi)`` of one partition of ``parent``'s topic; ``lo, hi = 0, HASH_SPACE`` and
    ``whole=True`` for a whole-partition owner (commits under the parent group). ``transaction``:
    fenced mode, the range's claimed transactional producer (the caller fenced every earlier owner
    of these hashes before this reads the progress); commits then go through it."""

    def __init__(
        self,
        bootstrap: str,
        parent: str,
        topic: str,
        partition: int,
        lo: int = 0,
        hi: int = HASH_SPACE,
        whole: bool = False,
        config: Mapping[str, Any] | None = None,
        transaction: PartitionTransaction | None = None,
    ) -> None:
        self.topic, self.partition, self.lo, self.hi = topic, partition, lo, hi
        self.group = parent if whole else range_group(parent, lo, hi)
        self.transaction = transaction
        self.progress = read_progress(bootstrap, parent, topic, partition, config=config)
        start = self.progress.start(lo, hi)
        self.position = start if start >= 0 else 0
        #: records of this range skipped because an earlier owner had processed them
        self.skipped = 0
        # below this offset some hash of the range may be done already; at or above, none is
        self._done_below = int(self.progress.offsets.max())
        self.consumer = Consumer(
            {
                **client_settings(bootstrap, config),
                "group.id": self.group,
                "enable.auto.commit": False,
                "enable.auto.offset.store": False,
                "auto.offset.reset": "earliest",
            }
        )
        #: the last position committed (the start at first): where an aborted transaction rewinds to
        self.committed = self.position
        self.consumer.assign([TopicPartition(topic, partition, self.position)])

    def poll(
        self, max_records: int = 1000, timeout: float = 0.5, until_offset: int | None = None
    ) -> list[Any]:
        """The next batch of records of this range not yet processed by anyone, in offset order
        (none at or past ``until_offset``: the position then stops there)."""
        msgs = self.consumer.consume(max_records, timeout)
        if not msgs:
            return []
        if any(m.error() is not None for m in msgs):
            msgs = [m for m in msgs if m.error() is None]
            if not msgs:
                return []
        last = msgs[-1].offset() + 1
        if until_offset is not None and last > until_offset:
            msgs = [m for m in msgs if m.offset() < until_offset]
            last = until_offset
        first = msgs[0].offset() if msgs else last
        self.position = max(self.position, last)
        if not msgs:
            return []
        hashes = positive_hashes([m.key() for m in msgs])
        keep = (hashes >= self.lo) & (hashes < self.hi)
        if first < self._done_below:  # an earlier owner may have processed some of these
            offsets = np.fromiter((m.offset() for m in msgs), dtype=np.int64, count=len(msgs))
            fresh = keep & ~self.progress.already_done(hashes, offsets)
            self.skipped += int(np.count_nonzero(keep)) - int(np.count_nonzero(fresh))
            keep = fresh
        picked = np.flatnonzero(keep).tolist()
        return msgs if len(picked) == len(msgs) else [msgs[i] for i in picked]

    def commit(self, position: int | None = None, metadata: str | None = None) -> None:
        """Commit ``position`` (default: the position): every record of this range below it is processed;
        ``metadata``: the owner mark AssignedConsumer writes with it (range_set.py). Fenced: in the
        range's transaction, with the outputs sent since the last commit; raises KafkaException
        (``fencing.classify`` says what it means) when the broker refuses it."""
        at = self.position if position is None else position
        tp = TopicPartition(self.topic, self.partition, at)
        if metadata is not None:
            tp = TopicPartition(self.topic, self.partition, at, metadata=metadata)
        if self.transaction is not None:
            self.transaction.commit([tp], self.consumer.consumer_group_metadata())
        else:
            self.consumer.commit(offsets=[tp], asynchronous=False)
        self.committed = at

    def rewind(self) -> None:
        """Fetch again from the last commit (an aborted transaction's outputs must be redone)."""
        self.position = self.committed
        tp = TopicPartition(self.topic, self.partition, self.committed)
        try:
            self.consumer.seek(tp)
        except KafkaException:  # not fetching yet: assign again at the offset instead
            self.consumer.assign([tp])

    def close(self) -> None:
        self.consumer.close()

    def run(
        self,
        handle: Callable[[Sequence[Any]], None],
        until_offset: int | None = None,
        should_stop: Callable[[], bool] = lambda: False,
    ) -> None:
        """Poll, hand batches to ``handle``, commit after each; stop at ``until_offset`` or when told."""
        while not should_stop() and (until_offset is None or self.position < until_offset):
            batch = self.poll(until_offset=until_offset)
            if batch:
                handle(batch)
            self.commit()


def range_members(record: Any, bootstrap: str, config: Mapping[str, Any] | None = None) -> list[RangeMember]:
    """One :class:`RangeMember` per key range of a member's assignment record (format 2), each
    committing under its derived group; the record's whole partitions are left to AssignedConsumer."""
    return [
        RangeMember(bootstrap, record.group, topic, partition, lo, hi, config=config)
        for topic, partition, lo, hi in record.ranges
    ]
