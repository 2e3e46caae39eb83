"""``roundrobin``: Kafka's RoundRobinAssignor.

All partitions in (topic, partition) order are dealt to ALL members in member order, cyclically,
skipping members not subscribed to the partition's topic. Per topic that is a cyclic run over the
topic's subscribers starting at the first one at or after the dealer's position, so it is computed
one topic at a time with NumPy instead of one partition at a time.
"""

from __future__ import annotations

import numpy as np

from rebalance_advisor.domain.group_spec import GroupSpec

NAME = "roundrobin"
OPTIONS: dict = {}


def owners(spec: GroupSpec) -> np.ndarray:
    out = np.full(spec.num_partitions, -1, dtype=np.int32)
    starts = spec.topic_start
    position = 0  # index (in member order) of the member the dealer points at
    for t, subs in enumerate(spec.topic_subscribers):  # topics are sorted by name
        members = len(subs)
        lo, hi = int(starts[t]), int(starts[t + 1])
        if not members or hi == lo:
            continue
        first = int(np.searchsorted(subs, position)) % members
        chosen = subs[(first + np.arange(hi - lo)) % members]
        out[lo:hi] = chosen
        position = (int(chosen[-1]) + 1) % spec.num_members
    return out
