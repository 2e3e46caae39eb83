"""``rate_aware_sticky`` (ours): keep what members own, then a few load-model moves within a budget.

Start from the valid owned partitions (``GroupSpec.owner_valid``); partitions no one validly owns
are placed as ``rate_aware`` places them, onto the loads members already carry (these handovers are
forced and do not count against the budget). Then, while the budget allows, take the member with
the highest utilisation u = load / capacity (load and weights as in ``rate_aware``) and move the
one partition, to an eligible member, that lowers max(u_from, u_to) most; stop when the best move
lowers the top utilisation by less than ``min_gain`` (default 1 %) of it. Every move lowers the
top member's utilisation without raising the receiver above it, so the max utilisation never rises.

``move_budget`` caps the owned partitions moved (None: no cap besides the gain threshold).
"""

from __future__ import annotations

import numpy as np

from rebalance_advisor.domain.assignors import rate_aware
from rebalance_advisor.domain.assignors._options import optional_amount, optional_count
from rebalance_advisor.domain.group_spec import GroupSpec

NAME = "rate_aware_sticky"
OPTIONS = {
    "move_budget": optional_count("move_budget"),
    "horizon_s": optional_amount("horizon_s"),
    "min_gain": optional_amount("min_gain"),
}

DEFAULT_MIN_GAIN = 0.01


def owners(
    spec: GroupSpec,
    move_budget: int | None = None,
    horizon_s: float | None = None,
    min_gain: float | None = None,
) -> np.ndarray:
    weights, caps = rate_aware.partition_weights(spec, horizon_s)
    out = np.where(spec.owner_valid, spec.owner, -1).astype(np.int32)
    members = spec.num_members
    held = out >= 0
    load = np.bincount(out[held], weights=weights[held], minlength=members).astype(np.float64)
    rate_aware.place(spec, out, np.flatnonzero((out < 0) & spec.assignable), weights, caps, load)
    if members < 2:
        return out
    gain_floor = DEFAULT_MIN_GAIN if min_gain is None else min_gain
    elig = None if spec.identical_subscriptions else rate_aware.eligibility(spec)
    budget = spec.num_partitions if move_budget is None else move_budget
    moved = 0
    while moved < budget:
        util = load / caps
        top = int(np.argmax(util))
        mine = np.flatnonzero(out == top)
        if len(mine) == 0:
            break
        w = weights[mine]
        # utilisation after the move: source (load - w)/cap_top, receiver (load_b + w)/cap_b
        after_src = (load[top] - w) / caps[top]  # [k]
        after_dst = (load[None, :] + w[:, None]) / caps[None, :]  # [k, M]
        worst = np.maximum(after_src[:, None], after_dst)
        worst[:, top] = np.inf
        if elig is not None:
            worst = np.where(elig[spec.topic_index[mine]], worst, np.inf)
        i, b = np.unravel_index(int(np.argmin(worst)), worst.shape)
        if not worst[i, b] < util[top] * (1.0 - gain_floor):
            break
        k = int(mine[i])
        out[k] = b
        load[top] -= weights[k]
        load[b] += weights[k]
        if spec.owner[k] >= 0:
            moved += 1
    return out
