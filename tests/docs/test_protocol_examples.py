"""The handover protocol's examples (docs/protocol/), run against a real broker and PostgreSQL."""

from __future__ import annotations

import json
import time
import uuid
from pathlib import Path
from types import ModuleType

import pytest

from tests.support.scripts import load_script

EXAMPLES = Path(__file__).resolve().parents[2] / "docs" / "examples" / "protocol"


def _example(name: str) -> ModuleType:
    """Import docs/examples/protocol/<name>.py (not a package: the docs include it as a file)."""
    return load_script(EXAMPLES / f"{name}.py", f"docs_example_{name}")


def test_documented_assignment_record_decodes() -> None:
    from rebalance_advisor_client.assignment_records import decode_record, encode_key

    value = (EXAMPLES / "assignment-record.json").read_bytes()
    record = decode_record(encode_key("orders", "worker-1"), value)
    assert (record.group, record.member, record.epoch, record.plan_id) == ("orders", "worker-1", 7, "42")
    assert [tuple(p) for p in record.partitions] == [("orders", 0), ("orders", 3)]


def test_documented_mark_decodes_with_its_capacity_report() -> None:
    from rebalance_advisor_client.handover_rules import decode_reported_mark

    decoded = decode_reported_mark(json.dumps(json.loads((EXAMPLES / "mark.json").read_text())))
    assert decoded is not None, "docs/examples/protocol/mark.json is not a mark the helper reads"
    mark, report = decoded
    assert (mark.member, mark.epoch, mark.state) == ("worker-1", 7, "owned")
    assert report.capacity == pytest.approx(241.1)


def _topic(bootstrap: str, partitions: int, records_per_partition: int) -> str:
    from tests.support.kafka_offsets import new_topic

    return new_topic(bootstrap, partitions, records_per_partition, name=f"docs-{uuid.uuid4().hex[:10]}")


def _committed_values(bootstrap: str, topic: str) -> list[bytes]:
    """Every committed record of partition 0 of ``topic`` (read_committed), up to its end."""
    from confluent_kafka import Consumer, KafkaError, TopicPartition

    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"reader-{uuid.uuid4().hex[:6]}",
            "isolation.level": "read_committed",
            "enable.partition.eof": True,
        }
    )
    consumer.assign([TopicPartition(topic, 0, -2)])
    values: list[bytes] = []
    try:
        while True:
            message = consumer.poll(10)
            assert message is not None, "no end of the output topic within 10 s"
            if message.error():
                assert message.error().code() == KafkaError._PARTITION_EOF
                return values
            values.append(message.value())
    finally:
        consumer.close()


@pytest.mark.kafka
@pytest.mark.slow
def test_publish_then_consume_examples(kafka_bootstrap: str) -> None:
    """worker-1 gets partitions 0 and 3 (2 records each) and writes each once, enriched; worker-2's
    partition 1 is not read; publishing the same plan again writes nothing."""
    publish, consume = _example("publish").publish, _example("consume").run
    group = f"docs-{uuid.uuid4().hex[:8]}"
    data = _topic(kafka_bootstrap, 4, 2)
    out = _topic(kafka_bootstrap, 1, 0)
    result = publish(kafka_bootstrap, group, data)
    assert result.changed and {r.member for r in result.records} == {"worker-1", "worker-2"}
    seen: list[bytes | None] = []
    deadline = time.monotonic() + 90

    def enrich(value: bytes | None) -> bytes:
        seen.append(value)
        return b"enriched:" + (value or b"")

    consume(
        kafka_bootstrap, lambda: len(seen) < 4 and time.monotonic() < deadline, enrich, group, "worker-1", out
    )
    assert len(seen) == 4, f"worker-1 processed {len(seen)} of its 4 records in 90 s"
    assert _committed_values(kafka_bootstrap, out) == [b"enriched:x"] * 4
    again = publish(kafka_bootstrap, group, data)
    assert not again.changed and again.epoch == result.epoch


@pytest.mark.kafka
@pytest.mark.postgres
@pytest.mark.slow
def test_fencing_sink_refuses_the_fenced_member(kafka_bootstrap: str, postgres_server) -> None:
    """A restart with the same member id fences the first instance: its late write is refused."""
    import sqlalchemy as sa
    from rebalance_advisor.adapters.assignment_publisher import publish_assignments
    from rebalance_advisor_client import AssignedConsumer

    sink = _example("fencing_sink")
    url = postgres_server.create_database(f"fence_{uuid.uuid4().hex[:10]}")
    engine = sa.create_engine(url)
    config = {"bootstrap.servers": kafka_bootstrap, "auto.offset.reset": "earliest"}
    group, assignments, data = (
        f"docs-{uuid.uuid4().hex[:8]}",
        f"docs-{uuid.uuid4().hex[:8]}",
        _topic(kafka_bootstrap, 1, 3),
    )
    publish_assignments(config, group, "p1", {"m": [(data, 0)]}, topic=assignments)
    first = AssignedConsumer(config, group, "m", topic=assignments, check_interval=0.05)
    second = None
    rows: list[str] = []
    try:
        with engine.begin() as conn:
            conn.execute(sa.text(sink.FENCE_TABLE))
        late = _poll(first)
        second = AssignedConsumer(config, group, "m", topic=assignments, check_interval=0.05)
        fresh = _poll(second)
        sink.write(engine, second, fresh, lambda tx: rows.append("second"))
        with pytest.raises(sink.StaleWriter, match="fenced by"):
            sink.write(engine, first, late, lambda tx: rows.append("first, fenced"))
        assert rows == ["second"]
        with engine.connect() as conn:
            stored = conn.execute(sa.text("SELECT producer_id, producer_epoch FROM fence")).fetchall()
        token = second.fencing_token(fresh)
        assert [tuple(r) for r in stored] == [(token.producer_id, token.producer_epoch)]
    finally:
        first.close()
        if second is not None:
            second.close()
        engine.dispose()


def _poll(consumer, timeout: float = 30.0):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        message = consumer.poll(0.1)
        if message is not None:
            return message
    raise AssertionError(f"no record within {timeout} s")
