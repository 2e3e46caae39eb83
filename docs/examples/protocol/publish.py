"""Publish a plan's assignments by hand (docs/protocol/index.md, "The assignment topic").

tests/docs/test_examples.py runs ``publish`` against a real broker and reads the records back.
"""

# --8<-- [start:imports]
from rebalance_advisor.adapters.assignment_publisher import PublishResult, publish_assignments

# --8<-- [end:imports]


def publish(bootstrap_servers: str, group: str = "orders", topic: str = "orders") -> PublishResult:
    """Plan 42: worker-1 gets partitions 0 and 3 of ``topic``, worker-2 partition 1."""
    # --8<-- [start:publish]
    result = publish_assignments(
        {"bootstrap.servers": bootstrap_servers},
        group,
        "42",  # the plan id
        {"worker-1": [(topic, 0), (topic, 3)], "worker-2": [(topic, 1)]},
    )
    # what was written, or found already written: the epoch, whether anything changed, dropped members
    print(result.epoch, result.changed, result.dropped, len(result.records))
    # --8<-- [end:publish]
    return result
