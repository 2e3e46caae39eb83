"""The Kafka clients an :class:`AssignedConsumer` makes, as factories passed in (confluent-kafka's
by default).

One place says which client each part of the helper uses: the polled consumer, the claims' and the
assignment follower's consumers (``consumer``), the offset readers of fenced claims
(``offset_readers``), the admin client for start offsets (``admin``) and the transactional producer
of each claimed partition (``transaction``). Tests that claim nothing about a broker pass plain
fakes; everything about the protocol is proven against real brokers (tests/integration). Key-range
members (range_set.py) make their own clients.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from confluent_kafka import Consumer
from confluent_kafka.admin import AdminClient

from rebalance_advisor_client.fencing import PartitionTransaction
from rebalance_advisor_client.offset_reads import OffsetReaders


@dataclass(frozen=True)
class KafkaClients:
    """Factories of the clients the helper uses; each is called like the class it defaults to."""

    consumer: Callable[[dict[str, Any]], Any] = Consumer
    admin: Callable[[dict[str, Any]], Any] = AdminClient
    #: (settings, transactional id, timeout, topic=...) -> a PartitionTransaction
    transaction: Callable[..., Any] = PartitionTransaction
    #: (config, stable=..., name=..., make_consumer=...) -> an OffsetReaders pool
    offset_readers: Callable[..., Any] = OffsetReaders
