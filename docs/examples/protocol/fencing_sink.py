"""A side-effect sink that refuses a fenced member's late writes (docs/protocol/fenced.md,
"Fencing token"). PostgreSQL; tests/docs/test_examples.py runs it with two real consumers.
"""

from collections.abc import Callable

# --8<-- [start:imports]
from rebalance_advisor_client import AssignedConsumer
from sqlalchemy import Connection, Engine, text

# --8<-- [end:imports]

FENCE_TABLE = """CREATE TABLE IF NOT EXISTS fence (
    topic TEXT NOT NULL, part INTEGER NOT NULL, producer_id BIGINT NOT NULL, producer_epoch INTEGER NOT NULL,
    PRIMARY KEY (topic, part))"""


class StaleWriter(Exception):
    """The write comes from a member the broker has fenced: drop it."""


def write(db: Engine, consumer: AssignedConsumer, message, side_effect: Callable[[Connection], None]) -> None:
    """Run ``side_effect`` in the transaction that checks and stores the partition's fencing token."""
    # --8<-- [start:sink]
    token = consumer.fencing_token(message)
    key = {"t": message.topic(), "p": message.partition()}
    with db.begin() as tx:
        row = tx.execute(
            text("SELECT producer_id, producer_epoch FROM fence WHERE topic = :t AND part = :p FOR UPDATE"),
            key,
        ).first()
        if row is not None and (token.producer_id, token.producer_epoch) < tuple(row):
            raise StaleWriter(f"{message.topic()}-{message.partition()}: fenced by {tuple(row)}")
        tx.execute(
            text(
                "INSERT INTO fence VALUES (:t, :p, :id, :epoch) ON CONFLICT (topic, part)"
                " DO UPDATE SET producer_id = :id, producer_epoch = :epoch"
            ),
            {**key, "id": token.producer_id, "epoch": token.producer_epoch},
        )
        side_effect(tx)  # the write itself, in the same transaction
    # --8<-- [end:sink]
