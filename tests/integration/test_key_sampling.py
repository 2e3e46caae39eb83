"""Key samples read from a real broker: the latest N records of each partition, hashed."""

from __future__ import annotations

import numpy as np
import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic
from rebalance_advisor.adapters.key_sampling import sample_keys
from rebalance_advisor.errors import AdvisorError
from rebalance_advisor_client.key_hash import positive_hashes

pytestmark = pytest.mark.kafka


def test_sample_reads_the_latest_records_of_each_partition(kafka_bootstrap: str) -> None:
    topic = "kr-sample"
    admin = AdminClient({"bootstrap.servers": kafka_bootstrap})  # kept alive until the topic exists
    admin.create_topics([NewTopic(topic, 3, 1)])[topic].result(60)
    producer = Producer({"bootstrap.servers": kafka_bootstrap})
    sent: dict[int, list[bytes | None]] = {0: [], 1: []}
    for i in range(500):
        key = None if i % 50 == 0 else f"k{i % 37}".encode()
        producer.produce(topic, key=key, value=b"x", partition=0)
        sent[0].append(key)
    for i in range(40):
        producer.produce(topic, key=f"only-{i}".encode(), value=b"x", partition=1)
        sent[1].append(f"only-{i}".encode())
    assert producer.flush(30) == 0
    samples = sample_keys(kafka_bootstrap, [(topic, 0), (topic, 1), (topic, 2)], per_partition=100)
    assert set(samples) == {(topic, 0), (topic, 1)}  # partition 2 is empty
    for p, count in ((0, 100), (1, 40)):
        expected = np.sort(positive_hashes(sent[p][-count:]))
        s = samples[topic, p]
        assert s.total == count
        np.testing.assert_array_equal(np.repeat(s.hashes, s.counts), expected)
    assert samples[topic, 0].hashes[0] == 0  # the null keys among the last 100 count as hash 0
    with pytest.raises(AdvisorError, match="must be >= 1"):
        sample_keys(kafka_bootstrap, [(topic, 0)], per_partition=0)
