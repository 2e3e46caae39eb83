"""Fenced mode's start refusal names what to fix (docs/protocol/fenced.md).

The not-authorised and unavailable cases run against real brokers in
tests/integration/test_client_fencing.py; a broker without transactions (before Kafka 0.11)
cannot be started here, so its answer is built by hand.
"""

from __future__ import annotations

import pytest
from confluent_kafka import KafkaError, KafkaException
from rebalance_advisor_client.fencing import _explain, classify


@pytest.mark.parametrize("code", [KafkaError.UNSUPPORTED_VERSION, KafkaError._UNSUPPORTED_FEATURE])
def test_transactions_unsupported_names_the_broker_version_and_the_unfenced_mode(code: int) -> None:
    error = KafkaException(KafkaError(code, "InitProducerId (KIP-98) not supported by broker"))
    message = _explain(error, "orders", 30)
    assert "Kafka 0.11 or newer" in message
    assert "fenced=False" in message
    assert "\n" not in message


def test_transactions_denied_names_the_acl_on_the_groups_prefix() -> None:
    error = KafkaException(KafkaError(KafkaError.TRANSACTIONAL_ID_AUTHORIZATION_FAILED, "denied"))
    message = _explain(error, "orders", 30)
    assert "TransactionalId prefix 'rebalance-advisor-client.orders.'" in message
    assert "--resource-pattern-type prefixed" in message and "fenced=False" in message


@pytest.mark.parametrize(
    ("code", "kind"),
    [
        (KafkaError.PRODUCER_FENCED, "fenced"),
        (KafkaError.INVALID_PRODUCER_EPOCH, "fenced"),
        (KafkaError._TIMED_OUT, "retry"),
        (KafkaError._TRANSPORT, "retry"),
    ],
)
def test_transaction_errors_are_sorted_by_what_the_helper_does(code: int, kind: str) -> None:
    assert classify(KafkaException(KafkaError(code))) == kind
