"""The client helper's vectorised murmur2 against Kafka's own Java code.

One JVM (Java 17's single-file source launcher on tests/support/KafkaKeyHashReference.java, with
the cached kafka-clients jar) hashes a few thousand seeded random keys with ``Utils.murmur2``,
``Utils.toPositive`` and the producer's ``BuiltInPartitioner.partitionForKey``; ours must give
the same three numbers for every key. The keys cover every length 0..70 (all tail sizes, many
block counts in one batch), high bytes (Java's signed ``byte``), UTF-8 strings and equal-length
batches (the no-mask packing path). No broker is needed, only Java and the cached jars.
"""

from __future__ import annotations

import random

import numpy as np
import pytest
from rebalance_advisor_client.key_hash import default_partitions, murmur2_batch, positive_hashes

from tests.support.kafka_java import run_reference


def _keys() -> list[bytes]:
    rng = random.Random(20260415)
    keys = [bytes(rng.getrandbits(8) for _ in range(n)) for n in range(71) for _ in range(20)]
    keys += [bytes([0xFF] * n) for n in range(1, 12)] + [bytes([0x80] * n) for n in range(1, 12)]
    keys += [f"user-{rng.randrange(10**9)}-é€😀".encode() for _ in range(500)]
    keys += [f"key-{i:06d}".encode() for i in range(1000)]  # equal length: no-mask path
    keys += [rng.randbytes(1000) for _ in range(5)]
    rng.shuffle(keys)
    return keys


def _reference(keys: list[bytes], partitions: list[int]) -> np.ndarray:
    text = "".join(f"{k.hex() or '-'} {n}\n" for k, n in zip(keys, partitions, strict=True))
    rows = [
        list(map(int, line.split())) for line in run_reference("KafkaKeyHashReference", text).splitlines()
    ]
    assert len(rows) == len(keys)
    return np.asarray(rows, dtype=np.int64)


@pytest.mark.slow
def test_murmur2_and_default_partition_equal_kafkas_java_client():
    keys = _keys()
    rng = random.Random(7)
    partitions = [rng.choice([1, 3, 6, 7, 12, 50, 1000]) for _ in keys]
    java = _reference(keys, partitions)
    assert len(set(java[:, 0].tolist())) > len(keys) * 0.99  # the reference really hashed the keys
    assert (java[:, 0] < 0).any() and (java[:, 0] > 0).any()  # both signs occur
    np.testing.assert_array_equal(murmur2_batch(keys).astype(np.int64), java[:, 0])
    np.testing.assert_array_equal(positive_hashes(keys), java[:, 1])
    # per partition count, since default_partitions takes one count for a batch
    for n in sorted(set(partitions)):
        idx = [i for i, p in enumerate(partitions) if p == n]
        np.testing.assert_array_equal(default_partitions([keys[i] for i in idx], n), java[idx, 2])
    # batch-independence: one key hashed alone equals its value inside the mixed batch
    for i in range(0, len(keys), 97):
        assert int(murmur2_batch([keys[i]])[0]) == java[i, 0]
