"""Reads the client-telemetry topic that the broker plugin writes (docs/operations/telemetry.md).

Each record is one member's newest telemetry (JSON, key = group and member id); a tombstone means
the member left; records keyed by a broker hold that broker's counters. Malformed records are
skipped and counted, never raised: the source is then simply absent.
"""

from __future__ import annotations

import json
import math
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from rebalance_advisor.domain.telemetry import TelemetrySample

TOPIC = "_rebalance_advisor_client_telemetry"
READ_TIMEOUT_S = 10.0


@dataclass
class TelemetryRead:
    """The newest sample per (group, member id), the brokers' counters and what was skipped."""

    samples: dict[tuple[str, str], TelemetrySample] = field(default_factory=dict)
    broker_counters: dict[str, dict[str, Any]] = field(default_factory=dict)
    skipped: int = 0


def _number(value: Any) -> float | None:
    """A finite number, or None (absent, null, NaN, text)."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return float(value) if math.isfinite(value) else None


def decode_sample(value: Mapping[str, Any]) -> TelemetrySample | None:
    """One record's value as a sample; None when it is not a member's sample of version 1."""
    if value.get("version") != 1 or not value.get("group") or not value.get("member_id"):
        return None
    received = _number(value.get("received_ms"))
    interval = _number(value.get("push_interval_ms"))
    if received is None or interval is None or interval <= 0:
        return None
    return TelemetrySample(
        group=str(value["group"]),
        member_id=str(value["member_id"]),
        instance_id=str(value.get("instance_id") or ""),
        client_id=str(value.get("client_id") or ""),
        software_name=str(value.get("software_name") or ""),
        software_version=str(value.get("software_version") or ""),
        idle_ratio=_number(value.get("idle_ratio")),
        idle_time=(_number(value.get("idle_time_ms")) or 0.0) / 1000.0,
        records_consumed=_number(value.get("records_consumed")),
        records_start=(_number(value.get("records_start_ms")) or 0.0) / 1000.0,
        records_time=(_number(value.get("records_time_ms")) or 0.0) / 1000.0,
        records_delta=bool(value.get("records_delta")),
        push_interval_s=interval / 1000.0,
        received=received / 1000.0,
        time_between_poll_ms=_number(value.get("time_between_poll_ms")),
        recent_idle=_recent(value.get("recent_idle")),
    )


def _recent(value: Any) -> tuple[tuple[float, float], ...]:
    """The recent ``[time_ms, idle]`` pairs (seconds, idle); pairs that are not two numbers are left out."""
    if not isinstance(value, list):
        return ()
    pairs = [p for p in value if isinstance(p, list) and len(p) == 2]
    numbers = [(_number(t), _number(i)) for t, i in pairs]
    return tuple((t / 1000.0, i) for t, i in numbers if t is not None and i is not None)


def apply_record(read: TelemetryRead, key: bytes | None, value: bytes | None) -> None:
    """Folds one record of the topic into ``read`` (later records win, as compaction keeps them)."""
    try:
        parsed_key = json.loads(key) if key is not None else None
        if not isinstance(parsed_key, dict):
            raise ValueError("key is not a JSON object")
        if "broker" in parsed_key:
            if value is not None:
                read.broker_counters[str(parsed_key["broker"])] = json.loads(value)
            return
        member = (str(parsed_key["group"]), str(parsed_key["member_id"]))
        if value is None:
            read.samples.pop(member, None)
            return
        sample = decode_sample(json.loads(value))
    except (ValueError, KeyError, TypeError):
        read.skipped += 1
        return
    if sample is None:
        read.skipped += 1
    else:
        read.samples[(sample.group, sample.member_id)] = sample


def read_telemetry(
    client_config: Mapping[str, Any], topic: str = TOPIC, timeout: float = READ_TIMEOUT_S
) -> TelemetryRead:
    """The topic read to its end now; an empty read when it does not exist (no plugin)."""
    from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaException, TopicPartition

    from rebalance_advisor.adapters import LIBRDKAFKA_LOG

    read = TelemetryRead()
    config = {**client_config, "group.id": "rebalance-advisor-telemetry-reader", "enable.auto.commit": False}
    consumer = Consumer(config, logger=LIBRDKAFKA_LOG)
    try:
        metadata = consumer.list_topics(topic, timeout=timeout).topics.get(topic)
        if metadata is None or metadata.error is not None or not metadata.partitions:
            return read
        partitions = [TopicPartition(topic, p, OFFSET_BEGINNING) for p in metadata.partitions]
        ends = {tp.partition: consumer.get_watermark_offsets(tp, timeout=timeout)[1] for tp in partitions}
        pending = {p for p, end in ends.items() if end > 0}
        consumer.assign(partitions)
        deadline = time.monotonic() + timeout
        while pending and time.monotonic() < deadline:
            for msg in consumer.consume(500, 0.5):
                if msg.error():
                    continue
                apply_record(read, msg.key(), msg.value())
                if msg.offset() + 1 >= ends[msg.partition()]:
                    pending.discard(msg.partition())
    except KafkaException:
        return TelemetryRead()
    finally:
        consumer.close()
    return read
