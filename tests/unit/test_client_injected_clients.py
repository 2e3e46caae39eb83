"""The client helper makes its Kafka clients through the factories it is given (kafka_clients.py).

Plain fakes, and no claim about what a broker does: what is checked is the helper's own bookkeeping
of the clients it made (each closed once it closes; none made when fenced mode cannot start). The
protocol itself is proven against real brokers (tests/integration/test_client_*.py).
"""

from __future__ import annotations

from types import SimpleNamespace

import pytest
from confluent_kafka import KafkaError, KafkaException
from rebalance_advisor_client import AssignedConsumer, TransactionsUnavailable
from rebalance_advisor_client.kafka_clients import KafkaClients


class _Consumer:
    """Answers only what a member with no assignment topic asks: the topic's metadata (missing)."""

    def __init__(self, config: dict) -> None:
        self.config, self.closed = config, 0

    def list_topics(self, topic: str, timeout: float) -> SimpleNamespace:
        return SimpleNamespace(topics={})

    def close(self) -> None:
        self.closed += 1


class _DeniedTransaction:
    def __init__(
        self, settings: dict, transactional_id: str, timeout: float, topic: str | None = None
    ) -> None:
        self.transactional_id, self.closed = transactional_id, False

    def fence(self, stop=None) -> tuple[int, int]:
        raise KafkaException(KafkaError(KafkaError.TRANSACTIONAL_ID_AUTHORIZATION_FAILED, "denied"))

    def close(self) -> None:
        self.closed = True


def _recording(made: list, factory):
    def make(*args, **kwargs):
        client = factory(*args, **kwargs)
        made.append(client)
        return client

    return make


def test_every_consumer_the_member_made_is_closed_once_it_closes() -> None:
    made: list[_Consumer] = []
    clients = KafkaClients(consumer=_recording(made, _Consumer))
    member = AssignedConsumer(
        {"bootstrap.servers": "fake:9092"}, "g", "m1", fenced=False, ready_timeout=5.0, clients=clients
    )
    assert member.owned == frozenset() and member.epoch == 0  # no topic yet: nothing assigned
    groups = sorted({c.config.get("group.id") for c in made})
    member.close()
    assert len(made) == 3  # the polled consumer, the claims' consumer, the assignment follower's
    assert "g" in groups  # the polled and the claims' consumers are of the member's group
    assert [c.closed for c in made] == [1, 1, 1]


def test_fenced_mode_refused_makes_no_consumer_and_closes_its_probe() -> None:
    consumers: list[_Consumer] = []
    probes: list[_DeniedTransaction] = []
    clients = KafkaClients(
        consumer=_recording(consumers, _Consumer), transaction=_recording(probes, _DeniedTransaction)
    )
    with pytest.raises(TransactionsUnavailable, match="TransactionalId prefix 'rebalance-advisor-client.g.'"):
        AssignedConsumer({"bootstrap.servers": "fake:9092"}, "g", "m1", ready_timeout=5.0, clients=clients)
    assert consumers == []
    assert [p.closed for p in probes] == [True]
    assert probes[0].transactional_id.startswith("rebalance-advisor-client.g.")
