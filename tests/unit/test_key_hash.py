"""The client helper's key hash: batch rules that the Java comparison does not cover (null keys,
batch independence, the range filter). Equality with Kafka's murmur2 is in
tests/integration/test_key_hash_kafka_java.py."""

from __future__ import annotations

import random

import numpy as np
from confluent_kafka import Message
from rebalance_advisor_client.key_hash import (
    HASH_SPACE,
    NULL_KEY_HASH,
    murmur2_batch,
    positive_hashes,
    select_in_range,
)


def test_empty_batch():
    assert murmur2_batch([]).shape == (0,)
    assert positive_hashes([]).shape == (0,)
    assert select_in_range([], 0, HASH_SPACE) == []


def test_null_key_counts_as_hash_zero_but_empty_key_is_hashed():
    h = positive_hashes([None, b"", None, b"x"])
    assert h[0] == NULL_KEY_HASH == 0 and h[2] == 0
    assert h[1] != 0  # murmur2(b"") = 275646681 (Kafka's value, see the Java test)
    assert h[1] == 275646681


def test_batch_result_does_not_depend_on_its_neighbours():
    rng = random.Random(3)
    keys = [rng.randbytes(rng.randint(0, 40)) for _ in range(300)]
    together = murmur2_batch(keys)
    alone = np.array([murmur2_batch([k])[0] for k in keys])
    np.testing.assert_array_equal(together, alone)
    shuffled = list(range(300))
    rng.shuffle(shuffled)
    np.testing.assert_array_equal(murmur2_batch([keys[i] for i in shuffled]), together[shuffled])


def test_positive_hashes_fill_the_31_bit_space():
    h = positive_hashes([i.to_bytes(4, "big") for i in range(20000)])
    assert h.min() >= 0 and h.max() < HASH_SPACE
    assert h.min() < HASH_SPACE // 100 and h.max() > HASH_SPACE - HASH_SPACE // 100


def test_select_in_range_splits_a_batch_exactly_and_keeps_order():
    rng = random.Random(5)
    msgs = [
        Message(
            key=None if i % 17 == 0 else rng.randbytes(rng.randint(1, 30)), topic="t", partition=0, offset=i
        )
        for i in range(2000)
    ]
    cuts = [0, 1 << 29, 1 << 30, 3 << 29, HASH_SPACE]
    parts = [select_in_range(msgs, lo, hi) for lo, hi in zip(cuts, cuts[1:], strict=False)]
    offsets = [[m.offset() for m in p] for p in parts]
    assert all(o == sorted(o) for o in offsets)
    assert sorted(sum(offsets, [])) == list(range(2000))  # every record in exactly one range
    assert all(p for p in parts)
    assert all(m.key() is None or m.offset() % 17 for m in msgs)
    nulls = {m.offset() for m in msgs if m.key() is None}
    assert nulls <= set(offsets[0])  # null keys go to the range holding hash 0
    # independent membership check, one key at a time
    for m in msgs[:200]:
        h = 0 if m.key() is None else int(positive_hashes([m.key()])[0])
        owner = next(i for i in range(4) if cuts[i] <= h < cuts[i + 1])
        assert m.offset() in offsets[owner]
