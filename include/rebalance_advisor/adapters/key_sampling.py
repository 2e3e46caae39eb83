"""Key samples for key_range: a bounded read of each partition's latest records (issue 15).

key_range places cut points by observed load, so it needs the key hashes of a partition's recent
records. This reads at most ``per_partition`` records from the end of each partition (records
still in the log: after retention or compaction the start may be later), hashes their keys with
the client package's murmur2 (as Kafka's default partitioner does; a null key counts as hash 0)
and returns one :class:`KeySample` per partition. It never commits and never joins a group: the
consumer uses ``assign()`` under a throwaway group id. Values are not kept.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterable

from rebalance_advisor.domain.assignors.key_range import KeySample
from rebalance_advisor.errors import AdvisorError

#: records read per partition unless told otherwise: enough for a 1 % load share per range
DEFAULT_SAMPLE = 20_000


def sample_keys(
    bootstrap_servers: str,
    partitions: Iterable[tuple[str, int]],
    per_partition: int = DEFAULT_SAMPLE,
    timeout: float = 30.0,
    client_config: dict[str, str] | None = None,
) -> dict[tuple[str, int], KeySample]:
    """(topic, partition) -> sample of its latest ``per_partition`` record keys (empty partitions left out)."""
    from confluent_kafka import Consumer, KafkaError, KafkaException, TopicPartition

    if per_partition < 1:
        raise AdvisorError(f"key sample size must be >= 1, got {per_partition}")
    wanted = sorted(set(partitions))
    config = {
        "bootstrap.servers": bootstrap_servers,
        "group.id": f"rebalance-advisor-key-sample-{uuid.uuid4()}",
        "enable.auto.commit": False,
        "enable.partition.eof": True,
        **(client_config or {}),
    }
    consumer = Consumer(config)
    keys: dict[tuple[str, int], list[bytes | None]] = {}
    try:
        ends: dict[tuple[str, int], int] = {}
        starts = []
        for topic, partition in wanted:
            try:
                low, high = consumer.get_watermark_offsets(TopicPartition(topic, partition), timeout=timeout)
            except KafkaException as error:
                raise AdvisorError(
                    f"cannot read offsets of {topic}-{partition}: {error.args[0].str()}"
                ) from None
            if high > low:
                ends[topic, partition] = high
                keys[topic, partition] = []
                starts.append(TopicPartition(topic, partition, max(low, high - per_partition)))
        if not starts:
            return {}
        consumer.assign(starts)
        open_parts = set(ends)
        deadline = time.monotonic() + timeout
        while open_parts:
            if time.monotonic() > deadline:
                missing = ", ".join(f"{t}-{p}" for t, p in sorted(open_parts)[:5])
                raise AdvisorError(f"key sample timed out after {timeout:g} s reading {missing}")
            for m in consumer.consume(1000, 1.0):
                tp = (m.topic(), m.partition())
                if m.error() is not None:
                    if m.error().code() == KafkaError._PARTITION_EOF:
                        open_parts.discard(tp)
                    continue
                if m.offset() < ends[tp]:
                    keys[tp].append(m.key())
                if m.offset() + 1 >= ends[tp]:
                    open_parts.discard(tp)
    finally:
        consumer.close()
    return {tp: KeySample.from_keys(k) for tp, k in keys.items() if k}
