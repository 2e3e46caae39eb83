"""``sticky``: balance partition counts first, then keep as much of what members own as balance allows.

Owned partitions count only if valid: the partition exists, the owner is still subscribed to its
topic, and the owner won the generation rule (a partition claimed twice goes to the higher
generation, to neither on a tie) — see ``GroupSpec.owner``.

Identical subscriptions (KAFKA-9987's constrained algorithm, source 003): quotas floor(P/C) and
ceil(P/C) with exactly P mod C members at the ceiling. In member order each member keeps its owned
partitions in (partition, topic) order up to its quota: all of them below the floor, the ceiling
if it owns that many and ceiling slots remain, else the floor. The released and unowned partitions
are dealt in (partition, topic) order round-robin to the members below the floor, then one each to
members at the floor while ceiling slots remain. That keeps the most owned partitions any balanced
assignment can keep: sum(min(owned, floor)) + min(#members owning >= ceil, P mod C).

Differing subscriptions: keep every valid owned partition; give each unowned one to the
least-loaded eligible member (topics grouped by their subscriber set, smallest sets first, filled
by water-levelling); then, while some member holds two or more partitions more than a member
eligible for one of them, move one (a newly assigned one before an owned one). Every such move
lowers the sum of squared counts, so the loop ends, with Kafka's balance criterion met.
"""

from __future__ import annotations

import heapq

import numpy as np

from rebalance_advisor.domain.assignors._common import SMALL_PARTITIONS
from rebalance_advisor.domain.group_spec import GroupSpec

NAME = "sticky"
OPTIONS: dict = {}


def owners(spec: GroupSpec) -> np.ndarray:
    if spec.identical_subscriptions:
        return _small_constrained(spec) if spec.num_partitions <= SMALL_PARTITIONS else _constrained(spec)
    return _general(spec)


def _kept_claims(spec: GroupSpec) -> tuple[np.ndarray, np.ndarray]:
    """Valid owned partitions as (member, partition index), sorted by member then (partition, topic)."""
    parts = np.flatnonzero(spec.owner_valid)
    members = spec.owner[parts]
    order = np.lexsort((spec.topic_index[parts], spec.partition[parts], members))
    return members[order], parts[order]


def _constrained(spec: GroupSpec) -> np.ndarray:
    num_members = spec.num_members
    out = np.full(spec.num_partitions, -1, dtype=np.int32)
    assignable = np.flatnonzero(spec.assignable)
    total = len(assignable)
    floor, extra = divmod(total, num_members)
    ceil = floor + (1 if extra else 0)

    claim_members, claim_parts = _kept_claims(spec)
    owned_count = np.bincount(claim_members, minlength=num_members)
    wants_ceil = (owned_count >= ceil) & (ceil > floor)
    gets_ceil = wants_ceil & (np.cumsum(wants_ceil) <= extra)
    keep = np.where(gets_ceil, ceil, np.minimum(owned_count, floor))
    member_start = np.searchsorted(claim_members, np.arange(num_members))
    rank_in_member = np.arange(len(claim_members)) - member_start[claim_members]
    kept = rank_in_member < keep[claim_members]
    out[claim_parts[kept]] = claim_members[kept]

    free = assignable[out[assignable] < 0]
    free = free[np.lexsort((spec.topic_index[free], spec.partition[free]))]  # (partition, topic)
    deficit = np.maximum(floor - keep, 0)
    # round-robin to members below the floor: cycle c serves every member still short after c rounds
    takers = np.repeat(np.arange(num_members), deficit)
    cycle = np.arange(len(takers)) - np.repeat(np.cumsum(deficit) - deficit, deficit)
    takers = takers[np.lexsort((takers, cycle))]
    slots_left = extra - int(gets_ceil.sum())
    topped = np.flatnonzero(~gets_ceil)[:slots_left] if slots_left > 0 else np.empty(0, dtype=np.int64)
    recipients = np.concatenate([takers, topped]).astype(np.int32)
    out[free] = recipients[: len(free)]  # lengths agree: sum(quota) == total
    return out


def _small_constrained(spec: GroupSpec) -> np.ndarray:
    """:func:`_constrained` in plain Python for a few partitions (integers: the same owners,
    tests/unit/test_metrics_paths.py): keep each member's claims up to its quota, then deal the
    free partitions round-robin to the members below the floor and one each to those topped up."""
    num_members, owner, part, topic = (
        spec.num_members,
        spec.owner.tolist(),
        spec.partition.tolist(),
        spec.topic_index.tolist(),
    )
    out = [-1] * spec.num_partitions
    assignable = [k for k, a in enumerate(spec.assignable.tolist()) if a]
    floor, extra = divmod(len(assignable), num_members)
    ceil = floor + (1 if extra else 0)
    claims = sorted(
        (k for k, v in enumerate(spec.owner_valid.tolist()) if v), key=lambda k: (owner[k], part[k], topic[k])
    )
    owned = [0] * num_members
    for k in claims:
        owned[owner[k]] += 1
    keep, gets_ceil, wanting = [], [], 0
    for m in range(num_members):
        wanting += owned[m] >= ceil > floor
        gets_ceil.append(owned[m] >= ceil > floor and wanting <= extra)
        keep.append(ceil if gets_ceil[m] else min(owned[m], floor))
    rank = [0] * num_members
    for k in claims:
        m = owner[k]
        if rank[m] < keep[m]:
            out[k] = m
        rank[m] += 1
    free = sorted((k for k in assignable if out[k] < 0), key=lambda k: (part[k], topic[k]))
    deficit = [max(floor - keep[m], 0) for m in range(num_members)]
    takers = [m for c in range(max(deficit, default=0)) for m in range(num_members) if deficit[m] > c]
    slots_left = extra - sum(gets_ceil)
    topped = [m for m in range(num_members) if not gets_ceil[m]][:slots_left] if slots_left > 0 else []
    for k, m in zip(free, (takers + topped)[: len(free)], strict=True):
        out[k] = m
    return np.asarray(out, dtype=np.int32)


def _general(spec: GroupSpec) -> np.ndarray:
    num_members = spec.num_members
    out = np.full(spec.num_partitions, -1, dtype=np.int32)
    claim_members, claim_parts = _kept_claims(spec)
    out[claim_parts] = claim_members
    counts = np.bincount(claim_members, minlength=num_members).astype(np.int64)

    groups = _topic_groups(spec)
    for subs, parts in groups:  # fill: least-loaded eligible member first
        free = parts[out[parts] < 0]
        if len(free):
            free = free[np.lexsort((spec.topic_index[free], spec.partition[free]))]
            gains = _water_fill(counts[subs], len(free))
            out[free] = np.repeat(subs, gains)
            counts[subs] += gains

    original = spec.owner
    moved = True
    while moved:  # balance: single moves to an eligible member two or more below
        moved = False
        for subs, parts in groups:
            moved |= _balance_group(subs, parts, out, counts, original)
    return out


def _topic_groups(spec: GroupSpec) -> list[tuple[np.ndarray, np.ndarray]]:
    """Topics sharing one subscriber set -> (subscribers, partition indices); smallest sets first."""
    by_set: dict[int, list[int]] = {}
    arrays: dict[int, np.ndarray] = {}
    for t, subs in enumerate(spec.topic_subscribers):
        if len(subs):
            by_set.setdefault(id(subs), []).append(t)
            arrays[id(subs)] = subs
    groups = []
    for key, topics in by_set.items():
        parts = np.concatenate([np.arange(spec.topic_start[t], spec.topic_start[t + 1]) for t in topics])
        groups.append((len(arrays[key]), topics[0], arrays[key], parts))
    groups.sort(key=lambda g: (g[0], g[1]))
    return [(subs, parts) for _, _, subs, parts in groups]


def _water_fill(counts: np.ndarray, items: int) -> np.ndarray:
    """How many of ``items`` each member gets when each item goes to the lowest count (then order)."""
    order = np.lexsort((np.arange(len(counts)), counts))
    level = counts[order]
    cost = np.arange(1, len(level) + 1) * level - np.cumsum(level)  # raise the first j to level[j-1]
    j = int(np.searchsorted(cost, items, side="right"))  # first j members take part
    rest = items - int(cost[j - 1])
    per, spare = divmod(rest, j)
    target = np.zeros(len(counts), dtype=np.int64)
    target[order[:j]] = level[j - 1] + per
    # the spare ones go to the first members in order among the j levelled ones
    target[np.sort(order[:j])[:spare]] += 1
    gains = np.maximum(target - counts, 0)
    gains[order[j:]] = 0
    return gains


def _balance_group(
    subs: np.ndarray, parts: np.ndarray, out: np.ndarray, counts: np.ndarray, original: np.ndarray
) -> bool:
    """Move partitions of this topic group from the fullest holder to the emptiest subscriber.

    One move per step, each from the member with the most partitions among those holding some of
    this group (ties: lower index) to the top of a lazy min-heap of subscribers by count (an entry
    is refreshed only when it reaches the top, so a member that gave partitions away may wait).
    Each step touches only plain ints: the groups of a 500,000-partition group take tens of
    thousands of steps. What a holder gives away, in which order: :func:`_give_away_queues`.
    """
    holders = out[parts]
    if int(counts[holders].max()) - int(counts[subs].min()) < 2:
        return False
    queue, nxt, end, uniq = _give_away_queues(parts, holders, original, len(counts))
    received: dict[int, list[int]] = {}  # partitions moved to a member in this call, a stack
    c = counts.tolist()
    # heap entries are single ints ordered like the tuples (-count, m) and (count, m): m < size
    size = len(c)
    high, low = [m - c[m] * size for m in uniq.tolist()], [c[m] * size + m for m in subs.tolist()]
    heapq.heapify(high)
    heapq.heapify(low)
    heappush, heappop, heapreplace = heapq.heappush, heapq.heappop, heapq.heapreplace
    moved = False
    while high and low:
        src = high[0] % size
        src_received = received.get(src)
        has = bool(src_received) or nxt[src] < end[src]
        if high[0] != src - c[src] * size or not has:
            heappop(high)
            if has:
                heappush(high, src - c[src] * size)
            continue
        cnt, dst = divmod(low[0], size)
        if cnt != c[dst]:
            heapreplace(low, c[dst] * size + dst)
            continue
        if c[src] - cnt < 2:
            break
        if src_received:
            k = src_received.pop()
        else:
            k = queue[nxt[src]]
            nxt[src] += 1
        received.setdefault(dst, []).append(k)
        c[src] -= 1
        c[dst] = cnt = cnt + 1
        heapreplace(low, cnt * size + dst)
        heappush(high, dst - cnt * size)
        if src_received or nxt[src] < end[src]:
            heapreplace(high, src - c[src] * size)
        else:
            heappop(high)
        moved = True
    if moved:
        for member, ks in received.items():
            out[ks] = member  # each moved partition sits on exactly one stack: its last taker's
        counts[:] = c
    return moved


def _give_away_queues(
    parts: np.ndarray, holders: np.ndarray, original: np.ndarray, num_members: int
) -> tuple[list[int], list[int], list[int], np.ndarray]:
    """Each holder's partitions in the order it gives them away (after those it received in the
    call, last received first): newly assigned ones before owned ones, each in partition-index
    order, as one NumPy sort. Returns the queue (per holder, contiguous), each member's next and
    end position in it, and the holders."""
    order = np.lexsort((parts, original[parts] == holders, holders))
    queue = parts[order].tolist()
    sorted_holders = holders[order]
    starts = np.flatnonzero(np.r_[True, sorted_holders[1:] != sorted_holders[:-1]])
    uniq = sorted_holders[starts]
    nxt_arr = np.zeros(num_members, dtype=np.int64)
    end_arr = np.zeros(num_members, dtype=np.int64)
    nxt_arr[uniq] = starts
    end_arr[uniq] = np.r_[starts[1:], len(queue)]
    return queue, nxt_arr.tolist(), end_arr.tolist(), uniq
