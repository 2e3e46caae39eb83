"""``rate_aware`` (ours): balance each member's load under the load model, not its lag of the moment.

A partition weighs w = produce rate + lag / horizon (messages/s: the throughput it needs to be
caught up within the horizon) plus a small per-partition overhead (0.1 % of the mean weight, so
equal or zero weights still spread by count). Partitions go, heaviest first (ties: lower index), to
the subscribed member whose utilisation (load + w) / capacity would be lowest (ties: member order;
capacity 1 when unknown). That is greedy bin packing (LPT) on utilisation, which minimises, in
order, the members with load above capacity and the max catch-up time at the horizon: a member
with utilisation u ≤ 1 has Λ < μ and T ≤ horizon. It keeps nothing of the current assignment
(``rate_aware_sticky`` does); rates and capacities come from the spec (see ``load_model``).

``returns`` (the rule passes them: ``group_planning.return_pairs``): (partition, member) pairs that
would be moves back; such a partition goes to the best other member when that one takes it within
its capacity (utilisation <= 1) or no worse (docs/concepts/decision-rules.md, "Hysteresis in the
strategies"). The light tail dealt in rounds ignores them.

Cost: the heaviest min(P, 64·C) partitions are placed one by one (one NumPy argmin over the members
each); with one shared subscription the light tail is dealt in rounds of C, the round's heaviest to
the least-utilised member, which is LPT's choice up to ties within a round.
"""

from __future__ import annotations

import numpy as np

from rebalance_advisor.domain.assignors._options import index_pairs, optional_amount
from rebalance_advisor.domain.group_spec import GroupSpec
from rebalance_advisor.domain.load_model import LoadInputs, load_inputs

NAME = "rate_aware"
OPTIONS = {"horizon_s": optional_amount("horizon_s"), "returns": index_pairs("returns")}

DEFAULT_HORIZON_S = 900.0
EXACT_PER_MEMBER = 64
#: up to this many members (one shared subscription), the exact placement runs in plain Python
SCALAR_MEMBERS = 32
OVERHEAD = 1e-3


def partition_weights(spec: GroupSpec, horizon_s: float | None) -> tuple[np.ndarray, np.ndarray]:
    """(weight per partition incl. overhead, capacity per member: 1.0 for every member when unknown)."""
    return _weights(load_inputs(spec), spec, horizon_s)


def weights_and_inputs(spec: GroupSpec, horizon_s: float | None) -> tuple[np.ndarray, np.ndarray, bool]:
    """:func:`partition_weights` and whether capacities are known (one pass over the load inputs)."""
    inputs = load_inputs(spec)
    return (*_weights(inputs, spec, horizon_s), inputs.capacity is not None)


def _weights(inputs: LoadInputs, spec: GroupSpec, horizon_s: float | None) -> tuple[np.ndarray, np.ndarray]:
    horizon = horizon_s if horizon_s else DEFAULT_HORIZON_S
    w = inputs.rate + spec.lag.astype(np.float64) / horizon
    w = w + max(float(w.mean()) if len(w) else 0.0, 1e-9) * OVERHEAD
    caps = (
        np.ones(spec.num_members)
        if inputs.capacity is None
        else np.asarray(inputs.capacity, dtype=np.float64)
    )
    return w, caps


def eligibility(spec: GroupSpec) -> np.ndarray:
    """bool [T, M]: may member m hold partitions of topic t."""
    return spec.class_topics[spec.member_class].T


def place(
    spec: GroupSpec,
    out: np.ndarray,
    parts: np.ndarray,
    weights: np.ndarray,
    caps: np.ndarray,
    load: np.ndarray,
    back: np.ndarray | None = None,
) -> None:
    """LPT: give ``parts`` (any order) to eligible members, updating ``out`` and ``load`` in place.
    ``back`` [P, M]: partition p was with member m within the hysteresis window (module docstring)."""
    if not len(parts):
        return
    order = parts[np.lexsort((parts, -weights[parts]))]
    members = spec.num_members
    elig = None if spec.identical_subscriptions else eligibility(spec)
    exact = len(order) if elig is not None else min(len(order), EXACT_PER_MEMBER * members)
    inv_caps = 1.0 / caps
    head = order[:exact]
    if elig is None and members <= SCALAR_MEMBERS and finite_positive(caps, weights[head]):
        _place_scalar(out, head, weights, inv_caps, load, back)
    else:
        _place_vector(out, head, weights, inv_caps, load, elig, spec.topic_index, back)
    tail = order[exact:]
    for r0 in range(0, len(tail), members):
        batch = tail[r0 : r0 + members]
        pick = np.argsort(load * inv_caps, kind="stable")[: len(batch)]
        out[batch] = pick
        load[pick] += weights[batch]


def finite_positive(caps: np.ndarray, weights: np.ndarray) -> bool:
    """Whether the plain-Python paths apply: no inf or NaN scores can arise (NumPy's argmin rules)."""
    return bool(np.isfinite(caps).all() and (caps > 0).all() and np.isfinite(weights).all())


def _place_vector(
    out: np.ndarray,
    order: np.ndarray,
    weights: np.ndarray,
    inv_caps: np.ndarray,
    load: np.ndarray,
    elig: np.ndarray | None,
    topic_of: np.ndarray,
    back: np.ndarray | None = None,
) -> None:
    """Each of ``order`` in turn to the eligible member of lowest utilisation after it (one argmin),
    not one it was moved away from recently (``back``) while another takes it within its capacity
    (or no worse)."""
    for k in order.tolist():
        w = weights[k]
        score = (load + w) * inv_caps
        if elig is not None:
            score = np.where(elig[topic_of[k]], score, np.inf)
        if back is not None and back[k].any():
            other = np.where(back[k], np.inf, score)
            score = other if other.min() <= max(score.min(), 1.0) else score
        m = int(np.argmin(score))
        if not np.isfinite(score[m]):
            continue  # no subscriber: stays unassigned
        out[k] = m
        load[m] += w


def _place_scalar(
    out: np.ndarray, order: np.ndarray, weights: np.ndarray, inv_caps: np.ndarray, load: np.ndarray,
    back: np.ndarray | None = None,
) -> None:  # fmt: skip
    """:func:`_place_vector` for few members, every one eligible, finite weights and capacities > 0:
    the same float64 operations in plain Python (the first minimum wins, as with ``np.argmin``),
    without NumPy's per-call cost, which is most of the work at ten members."""
    loads = load.tolist()
    inv = inv_caps.tolist()
    rest = range(1, len(loads))
    picked = []
    for k, w in zip(order.tolist(), weights[order].tolist(), strict=True):
        best_m, best = 0, (loads[0] + w) * inv[0]
        for m in rest:
            score = (loads[m] + w) * inv[m]
            if score < best:
                best_m, best = m, score
        if back is not None and back[k, best_m]:
            best_m = _other_than_back(loads, inv, w, back[k], best_m, best)
        loads[best_m] += w
        picked.append(best_m)
    out[order] = picked
    load[:] = loads


def _other_than_back(
    loads: list[float], inv: list[float], w: float, back: np.ndarray, best_m: int, best: float
) -> int:
    """:func:`_place_scalar`'s member for a partition whose best member is one it left recently: the
    best of the others when that stays within its capacity or is no worse, else ``best_m``."""
    others = [((loads[m] + w) * inv[m], m) for m in range(len(loads)) if not back[m]]
    if not others:
        return best_m
    score, m = min(others)
    return m if score <= max(best, 1.0) else best_m


def owners(spec: GroupSpec, horizon_s: float | None = None, returns: np.ndarray | None = None) -> np.ndarray:
    out = np.full(spec.num_partitions, -1, dtype=np.int32)
    weights, caps = partition_weights(spec, horizon_s)
    back = returns_mask(returns, spec.num_partitions, spec.num_members)
    place(spec, out, np.flatnonzero(spec.assignable), weights, caps, np.zeros(spec.num_members), back)
    return out


def returns_mask(returns: np.ndarray | None, partitions: int, members: int) -> np.ndarray | None:
    """bool [P, M]: giving partition p to member m would move it back (the ``returns`` pairs)."""
    if returns is None or not len(returns):
        return None
    mask = np.zeros((partitions, members), dtype=bool)
    mask[returns[:, 0], returns[:, 1]] = True
    return mask
