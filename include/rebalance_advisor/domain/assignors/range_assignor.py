"""``range``: Kafka's RangeAssignor (racks ignored).

Per topic, the subscribed members in member order each take a contiguous block of the topic's
partitions in partition order; the first P mod C members take one extra. Vectorised per topic.
"""

from __future__ import annotations

import numpy as np

from rebalance_advisor.domain.group_spec import GroupSpec

NAME = "range"
OPTIONS: dict = {}


def owners(spec: GroupSpec) -> np.ndarray:
    out = np.full(spec.num_partitions, -1, dtype=np.int32)
    starts = spec.topic_start
    for t, subs in enumerate(spec.topic_subscribers):
        members = len(subs)
        lo, hi = int(starts[t]), int(starts[t + 1])
        count = hi - lo
        if not members or not count:
            continue
        quota, extra = divmod(count, members)
        k = np.arange(count)
        head = extra * (quota + 1)  # partitions taken by the members with one extra
        slot = np.where(k < head, k // (quota + 1), extra + (k - head) // max(quota, 1))
        out[lo:hi] = subs[slot]
    return out
