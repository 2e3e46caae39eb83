"""Kafka's default-partitioner key hash, vectorised over a batch of keys with NumPy.

Kafka's Java client places a keyed record on ``toPositive(murmur2(key)) % numPartitions``, where
``murmur2`` is ``org.apache.kafka.common.utils.Utils.murmur2`` over the serialized key bytes
(MurmurHash2, 32-bit, seed ``0x9747b28c``) and ``toPositive`` clears the sign bit. Key ranges
cut the same positive 31-bit value, so a range member and the partitioner agree on what a key's
hash is: the hash space is ``[0, HASH_SPACE)`` with ``HASH_SPACE = 2**31``.

A record consumer sees a few hundred records per poll, so the hash runs over a whole batch at
once: the keys are packed row-wise into a zero-padded 2-D ``uint8`` array, read as little-endian
32-bit words, and the 4-byte blocks are mixed one column at a time for all keys together (a key
whose blocks are used up keeps its state through a mask). The trailing 1-3 bytes of a key are the
zero-padded word after its last full block, which is exactly the XOR of the tail bytes the Java
code does byte by byte. All arithmetic is ``uint32``, which wraps like Java's ``int``.

Null keys: Kafka does not hash them (the partitioner spreads them), and they have no order to
keep. For key ranges they count as hash :data:`NULL_KEY_HASH` (0), so they go to the range that
holds hash 0, the first range of a split partition.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol, TypeVar

import numpy as np


class KeyedRecord(Protocol):
    def key(self) -> bytes | None: ...


R = TypeVar("R", bound=KeyedRecord)

#: size of the positive hash space ranges are cut from: hashes are 0 .. HASH_SPACE - 1
HASH_SPACE = 2**31
#: the hash a record with a null key counts as (it goes to the range holding 0)
NULL_KEY_HASH = 0

_SEED = np.uint32(0x9747B28C)
_M = np.uint32(0x5BD1E995)
_R = np.uint32(24)
_SIGN_OFF = np.uint32(0x7FFFFFFF)


def _pack(keys: Sequence[bytes | None]) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray | None]:
    """Keys -> (lengths int64 [N], null mask [N], words uint32 [W, N], row order or None).

    Row ``j`` of ``words`` holds bytes 4j..4j+3 of every key (zero past a key's end), so each
    block step reads one contiguous row. When lengths differ, the columns are the keys sorted by
    length, longest first (``order``; lengths and nulls stay in input order): a block step then
    touches only a prefix, the keys that still have a block there.
    """
    n = len(keys)
    lengths = np.fromiter((-1 if k is None else len(k) for k in keys), dtype=np.int64, count=n)
    nulls = lengths < 0
    lengths[nulls] = 0
    width = int(lengths.max()) // 4 + 1 if n else 1  # full blocks of the longest key + its tail word
    padded = np.zeros((n, width * 4), dtype=np.uint8)
    order = None
    if n and (lengths == lengths[0]).all():
        data = np.frombuffer(b"".join(k for k in keys if k), dtype=np.uint8)
        padded[:, : lengths[0]] = data.reshape(n, int(lengths[0]))
    elif n:
        order = np.argsort(-lengths, kind="stable")
        data = np.frombuffer(b"".join([keys[i] or b"" for i in order.tolist()]), dtype=np.uint8)
        # row-major boolean assignment fills each row's first len(key) bytes in key order
        padded[np.arange(width * 4)[None, :] < lengths[order][:, None]] = data
    words = np.ascontiguousarray(padded.view("<u4").T, dtype=np.uint32)
    return lengths, nulls, words, order


def murmur2_batch(keys: Sequence[bytes | None]) -> np.ndarray:
    """``Utils.murmur2`` of every key as Java's signed ``int`` (int32 [N]); None hashes as b''."""
    lengths, _, words, order = _pack(keys)
    return _murmur2(lengths, words, order)


def _murmur2(lengths: np.ndarray, words: np.ndarray, order: np.ndarray | None) -> np.ndarray:
    n = len(lengths)
    sorted_lengths = lengths if order is None else lengths[order]
    blocks = sorted_lengths >> 2
    h = _SEED ^ sorted_lengths.astype(np.uint32)
    # keys with more than j blocks: a prefix (blocks descend), its length from one search
    active = np.searchsorted(-blocks, -np.arange(int(blocks.max()) if n else 0), side="left")
    for j, count in enumerate(active.tolist()):
        k = words[j, :count] * _M
        k ^= k >> _R
        k *= _M
        head = h[:count]  # a view: updated in place
        head *= _M
        head ^= k
    tail_len = sorted_lengths & 3
    if tail_len.any():
        tail = words[blocks, np.arange(n)]
        np.copyto(h, (h ^ tail) * _M, where=tail_len > 0)
    h ^= h >> np.uint32(13)
    h *= _M
    h ^= h >> np.uint32(15)
    if order is not None:
        out = np.empty_like(h)
        out[order] = h
        h = out
    return h.view(np.int32)


def positive_hashes(keys: Sequence[bytes | None]) -> np.ndarray:
    """``toPositive(murmur2(key))`` per key (int64 [N], 0 .. HASH_SPACE - 1); a null key -> NULL_KEY_HASH."""
    lengths, nulls, words, order = _pack(keys)
    h = (_murmur2(lengths, words, order).view(np.uint32) & _SIGN_OFF).astype(np.int64)
    h[nulls] = NULL_KEY_HASH
    return h


def default_partitions(keys: Sequence[bytes], num_partitions: int) -> np.ndarray:
    """The partition Kafka's default partitioner picks for each (non-null) key."""
    if num_partitions < 1:
        raise ValueError(f"num_partitions must be >= 1, got {num_partitions}")
    return positive_hashes(keys) % num_partitions


def select_in_range(records: Sequence[R], lo: int, hi: int) -> list[R]:
    """The records (objects with ``key()``, such as confluent-kafka messages) whose key hash is in [lo, hi).

    Order is kept. A null key counts as :data:`NULL_KEY_HASH`.
    """
    if not records:
        return []
    hashes = positive_hashes([r.key() for r in records])
    keep = np.flatnonzero((hashes >= lo) & (hashes < hi)).tolist()
    if len(keep) == len(records):
        return list(records)
    return [records[i] for i in keep]


def range_cover_problem(ranges: Sequence[tuple[int, int]]) -> str | None:
    """Why half-open ``[lo, hi)`` ranges of one partition do not tile ``[0, HASH_SPACE)`` exactly, or None.

    The one rule for a split partition's ranges, used by the assignor, by hand-written plans and
    by the helper reading assignment records: integers, each non-empty, no overlap, no gap.
    """
    if not ranges:
        return "no ranges"
    for lo, hi in ranges:
        if not all(isinstance(v, int) and not isinstance(v, bool) for v in (lo, hi)):
            return f"range [{lo!r}, {hi!r}) is not two integers"
        if not 0 <= lo < hi <= HASH_SPACE:
            return f"range [{lo}, {hi}) is empty or outside [0, {HASH_SPACE})"
    ordered = sorted(ranges)
    if ordered[0][0] != 0:
        return f"gap: hashes [0, {ordered[0][0]}) are in no range"
    for (lo1, hi1), (lo2, hi2) in zip(ordered, ordered[1:], strict=False):
        if lo2 < hi1:
            return f"overlap: ranges [{lo1}, {hi1}) and [{lo2}, {hi2})"
        if lo2 > hi1:
            return f"gap: hashes [{hi1}, {lo2}) are in no range"
    if ordered[-1][1] != HASH_SPACE:
        return f"gap: hashes [{ordered[-1][1]}, {HASH_SPACE}) are in no range"
    return None
