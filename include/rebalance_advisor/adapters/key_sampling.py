"""Key samples for key_range: a bounded read of each partition's latest records (domain/assignors/key_range.py).

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
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from rebalance_advisor.adapters import LIBRDKAFKA_LOG
from rebalance_advisor.domain.assignors.key_range import KeySample, KeySharingPolicy
from rebalance_advisor.domain.key_range_advice import KeySharingInputs
from rebalance_advisor.domain.parameters import Thresholds
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
    from confluent_kafka import Consumer

    if per_partition < 1:
        raise AdvisorError(f"key sample size must be >= 1, got {per_partition}")
    config = {
        "bootstrap.servers": bootstrap_servers,
        "group.id": f"rebalance-advisor-key-sample-{uuid.uuid4()}",
        "enable.auto.commit": False,
        "enable.partition.eof": True,
        **(client_config or {}),
    }
    consumer = Consumer(config, logger=LIBRDKAFKA_LOG)
    try:
        ends = _sample_ranges(consumer, sorted(set(partitions)), per_partition, timeout)
        keys = _read_keys(consumer, ends, timeout) if ends else {}
    finally:
        consumer.close()
    return {tp: KeySample.from_keys(k) for tp, k in keys.items() if k}


def _sample_ranges(
    consumer: Any, wanted: Sequence[tuple[str, int]], per_partition: int, timeout: float
) -> dict[tuple[str, int], int]:
    """Assign each non-empty partition from ``per_partition`` records before its end (or its log
    start, if later); return (topic, partition) -> its end, where the sample stops."""
    from confluent_kafka import KafkaException, TopicPartition

    ends: dict[tuple[str, int], int] = {}
    starts = []
    for topic, partition in wanted:
        try:
            low, high = consumer.get_watermark_offsets(TopicPartition(topic, partition), timeout=timeout)
        except KafkaException as error:
            raise AdvisorError(f"cannot read offsets of {topic}-{partition}: {error.args[0].str()}") from None
        if high > low:
            ends[topic, partition] = high
            starts.append(TopicPartition(topic, partition, max(low, high - per_partition)))
    if starts:
        consumer.assign(starts)
    return ends


def _read_keys(
    consumer: Any, ends: Mapping[tuple[str, int], int], timeout: float
) -> dict[tuple[str, int], list[bytes | None]]:
    """The keys of the assigned records up to each partition's end (end of partition, or its last
    offset, closes it); AdvisorError naming the partitions still open after ``timeout``."""
    from confluent_kafka import KafkaError

    keys: dict[tuple[str, int], list[bytes | None]] = {tp: [] for tp in ends}
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
    return keys


#: most partitions one advisor run samples (the heaviest by lag): bounds the run's Kafka reads
MAX_SAMPLED_PARTITIONS = 64


def sharing_candidates(
    docs: Sequence[dict[str, Any]], policy: KeySharingPolicy, flagged: Mapping[str, frozenset[str]]
) -> dict[str, list[tuple[str, int, int]]]:
    """group -> [(topic, partition, lag)] key_range could split: an allow-listed topic with
    backlog or inflow, subscribed by at least two of the group's flagged members."""
    out: dict[str, list[tuple[str, int, int]]] = {}
    for doc in docs:
        members = flagged.get(doc["group_id"], frozenset())
        sharers: dict[str, int] = {}
        for m in doc.get("members") or ():
            if m["member_id"] in members:
                for topic in m.get("topics") or ():
                    sharers[topic] = sharers.get(topic, 0) + 1
        for p in doc.get("partitions") or ():
            busy = int(p.get("lag") or 0) > 0 or float(p.get("produce_rate") or 0.0) > 0
            if busy and sharers.get(p["topic"], 0) >= 2 and policy.topic_allowed(p["topic"]):
                out.setdefault(doc["group_id"], []).append((p["topic"], int(p["partition"]), int(p["lag"])))
    return out


def attach_key_samples(
    docs: Sequence[dict[str, Any]],
    thresholds: Thresholds,
    flagged_members: Mapping[str, frozenset[str]],
    kafka_config: Mapping[str, Any],
    per_partition: int = DEFAULT_SAMPLE,
) -> int:
    """Put ``key_sharing`` (flagged members, key samples) into the documents key_range may split.

    Only when the run allows key sharing and names ``key_range``; reads at most
    :data:`MAX_SAMPLED_PARTITIONS` partitions (the heaviest by lag), each at most ``per_partition``
    records, once even when several groups read it. Returns how many partitions were sampled.
    """
    if not (
        thresholds.key_sharing and "key_range" in thresholds.strategies and thresholds.key_sharing_topics
    ):
        return 0
    policy = KeySharingPolicy.from_run(thresholds, ())
    allowed_groups = [
        d for d in docs if any(policy.topic_allowed(p["topic"]) for p in d.get("partitions") or ())
    ]
    flagged = {d["group_id"]: flagged_members.get(d["group_id"], frozenset()) for d in allowed_groups}
    candidates = sharing_candidates(allowed_groups, policy, flagged)
    heaviest: dict[tuple[str, int], int] = {}
    for parts in candidates.values():
        for topic, partition, lag in parts:
            heaviest[topic, partition] = max(lag, heaviest.get((topic, partition), 0))
    chosen = sorted(heaviest, key=lambda tp: (-heaviest[tp], tp))[:MAX_SAMPLED_PARTITIONS]
    if not chosen:
        return 0
    config = dict(kafka_config)
    bootstrap = config.pop("bootstrap.servers", None)
    if not bootstrap:
        raise AdvisorError(
            "key sharing samples record keys: the Kafka connection has no bootstrap.servers "
            "(give --bootstrap-servers or set the run's Kafka connection)"
        )
    samples = sample_keys(str(bootstrap), chosen, per_partition, client_config=config)
    for doc in allowed_groups:
        parts = candidates.get(doc["group_id"], ())
        found = {(t, p): samples[t, p] for t, p, _ in parts if (t, p) in samples}
        if found:
            doc["key_sharing"] = KeySharingInputs(flagged[doc["group_id"]], found).to_doc()
    return len(samples)
