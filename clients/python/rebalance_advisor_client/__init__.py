"""Client helper for manual-assign consumers that follow rebalance-advisor's published assignments.

Install it on its own (``pip install ./clients/python``; it needs confluent-kafka and numpy).
"""

from rebalance_advisor_client.consumer import AssignedConsumer
from rebalance_advisor_client.errors import AccessRefused, ClientError, TransactionsUnavailable
from rebalance_advisor_client.fencing import FencingToken

__all__ = ["AccessRefused", "AssignedConsumer", "ClientError", "FencingToken", "TransactionsUnavailable"]
