"""Small NumPy helpers shared by strategies and metrics."""

from __future__ import annotations

import numpy as np


def member_sums(owners: np.ndarray, values: np.ndarray, num_members: int) -> np.ndarray:
    """Exact int64 sum of ``values`` per member index (owners -1 are ignored)."""
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
