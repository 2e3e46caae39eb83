"""Small NumPy helpers shared by strategies and metrics."""

from __future__ import annotations

import numpy as np

#: Up to this many partitions, per-member sums and counts are computed in plain Python: NumPy's cost
#: per call on a handful of values was most of a small group's planning (docs/benchmarks/sizing.md,
#: "Plain Python for small groups"). Only where both give the same numbers: integers, or float
#: sums added in NumPy's own order (tests/unit/test_metrics_paths.py compares both paths).
SMALL_PARTITIONS = 64


def small_member_sums(owners: np.ndarray, values: np.ndarray, num_members: int) -> list[int]:
    """:func:`member_sums` as Python ints, for up to :data:`SMALL_PARTITIONS` partitions."""
    sums = [0] * num_members
    for m, v in zip(owners.tolist(), values.tolist(), strict=True):
        if m >= 0:
            sums[m] += v
    return sums


def member_sums(owners: np.ndarray, values: np.ndarray, num_members: int) -> np.ndarray:
    """Exact int64 sum of ``values`` per member index (owners -1 are ignored)."""
    if len(owners) <= SMALL_PARTITIONS:
        return np.asarray(small_member_sums(owners, values, num_members), dtype=np.int64)
    held = owners >= 0
    who = owners[held]
    vals = values[held]
    if not len(vals):
        return np.zeros(num_members, dtype=np.int64)
    if int(vals.sum()) < 2**53:  # float bincount is exact below 2**53 and far faster than add.at
        return np.rint(np.bincount(who, weights=vals, minlength=num_members)).astype(np.int64)
    sums = np.zeros(num_members, dtype=np.int64)
    np.add.at(sums, who, vals)
    return sums
