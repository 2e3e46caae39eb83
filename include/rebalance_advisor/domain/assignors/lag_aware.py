"""``lag_aware``: the KAFKA-5337 proposal, per topic, counts first and lag second.

Per topic (in name order): partitions by lag, largest first (ties: lower partition id); each goes
to the subscribed member with the fewest partitions of that topic, among those the lowest assigned
lag, then the first in member order. ``lag_scope`` picks what "assigned lag" means: ``group`` (the
default) is the member's whole assigned lag so far, ``topic`` only this topic's (the proposal's
prototype), which lets the first member in order collect the hottest partition of every topic.

Because every subscriber must get one partition of the topic before anyone gets a second, the
topic is dealt in rounds of C partitions, and within a round the members' loads do not change
until they are served: a round is a sort of the members by (load, member order) zipped with the
next C partitions. That makes the cost O(rounds x C log C) in NumPy, not O(P) in Python.
"""

from __future__ import annotations

import numpy as np

from rebalance_advisor.domain.assignors._options import choice
from rebalance_advisor.domain.group_spec import GroupSpec

NAME = "lag_aware"
OPTIONS = {"lag_scope": choice("lag_scope", ("group", "topic"))}


def _lowest(loads: np.ndarray, k: int) -> np.ndarray:
    """Positions of the k smallest loads, ordered by (load, position): stable and O(C)."""
    if k >= len(loads):
        return np.argsort(loads, kind="stable")
    cut = np.partition(loads, k - 1)[k - 1]
    below = np.flatnonzero(loads < cut)
    at = np.flatnonzero(loads == cut)[: k - len(below)]
    chosen = np.concatenate([below, at])
    return chosen[np.argsort(loads[chosen], kind="stable")]  # chosen is in position order


def owners(spec: GroupSpec, lag_scope: str = "group") -> np.ndarray:
    out = np.full(spec.num_partitions, -1, dtype=np.int32)
    group_load = np.zeros(spec.num_members, dtype=np.int64)
    starts = spec.topic_start
    for t, subs in enumerate(spec.topic_subscribers):
        members = len(subs)
        lo, hi = int(starts[t]), int(starts[t + 1])
        if not members or hi == lo:
            continue
        lags = spec.lag[lo:hi]
        order = np.argsort(-lags, kind="stable")  # partitions are in id order: ties keep the lower id
        load = group_load[subs] if lag_scope == "group" else np.zeros(members, dtype=np.int64)
        for r0 in range(0, hi - lo, members):
            batch = order[r0 : r0 + members]
            pick = _lowest(load, len(batch))
            out[lo + batch] = subs[pick]
            load[pick] += lags[batch]
        if lag_scope == "group":
            group_load[subs] = load
    return out
