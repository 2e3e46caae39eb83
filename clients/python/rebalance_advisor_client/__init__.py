"""Client helper for manual-assign consumers that follow rebalance-advisor's published assignments.

Install it on its own (``pip install ./clients/python``; it needs confluent-kafka and numpy).

The Kafka-free modules (``assignment_records``, ``key_hash``, ``key_ranges``, ``handover_rules``,
``capacity_report``) are what the advisor's pure domain imports, in every Spark executor; so this
package loads confluent-kafka only when a name below that needs it is first used (PEP 562). The
consumer's state machine is Kafka-free too (``partition_states``, ``claim_runner``, ``claim_modes``:
docs/protocol/states.md).
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from rebalance_advisor_client.errors import AccessRefused, ClientError, TransactionsUnavailable

if TYPE_CHECKING:
    from rebalance_advisor_client.consumer import AssignedConsumer
    from rebalance_advisor_client.fencing import FencingToken

#: public name -> the module that defines it, imported on first use (both import confluent-kafka)
_LAZY = {
    "AssignedConsumer": "rebalance_advisor_client.consumer",
    "FencingToken": "rebalance_advisor_client.fencing",
}

__all__ = ["AccessRefused", "AssignedConsumer", "ClientError", "FencingToken", "TransactionsUnavailable"]


def __getattr__(name: str) -> Any:
    """The public names, imported when first asked for; anything else is an AttributeError (so
    ``from rebalance_advisor_client import consumer`` still finds the submodule)."""
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})
