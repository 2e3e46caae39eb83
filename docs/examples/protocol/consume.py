"""A consume-transform-produce loop on the client helper (docs/protocol/fenced.md).

tests/docs/test_examples.py runs ``run`` against a real broker after publishing a plan.
"""

from collections.abc import Callable

# --8<-- [start:imports]
from rebalance_advisor_client import AssignedConsumer

# --8<-- [end:imports]


def run(
    bootstrap_servers: str,
    running: Callable[[], bool],
    enrich: Callable[[bytes | None], bytes],
    group: str = "orders",
    member: str = "worker-1",
    output_topic: str = "orders-enriched",
) -> None:
    """Consume what ``member`` is assigned, write ``enrich(value)`` to ``output_topic``, until not ``running()``."""
    # --8<-- [start:consume]
    consumer = AssignedConsumer(
        {"bootstrap.servers": bootstrap_servers, "auto.offset.reset": "earliest"},
        group,
        member,
        takeover_timeout=60,  # fenced=True is the default
    )
    try:
        while running():
            message = consumer.poll(1.0)  # only partitions this member owns; applies new epochs
            if message is not None:
                consumer.produce(message, output_topic, enrich(message.value()), key=message.key())
            consumer.commit()  # e.g. every N messages: offsets + outputs, one transaction per partition
    finally:
        consumer.close()  # commit and release
    # --8<-- [end:consume]
