"""``lag_aware_sticky`` (ours): sticky's balanced, mostly-kept assignment, then a few lag-aware moves.

Start from ``sticky``. Then repeatedly take the most loaded member A and look at the least-loaded
members B (a few candidates): move one partition A -> B (only while A holds more partitions than
B, so the partition-count spread never grows) or swap one of A's partitions with a smaller one of
B's (counts unchanged). Pick the step that lowers max(load A, load B) most — it targets a transfer
of half the A/B difference by binary search over A's partitions sorted by lag. Stop when the best
step for A gains less than ``min_gain`` (default: 0.1% of the mean member lag, at least 1), or
would take the moves versus the owned partitions over the allowance: max(``move_budget``, the
moves sticky itself makes). So ``move_budget`` caps the total moves, except that sticky's moves
(forced by balance or changed subscriptions) are never undone to meet it.

Guarantees: every accepted step lowers A's load below its old value without raising B above it,
so the maximum member lag never rises above sticky's; moves versus owned partitions (as
``metrics.moves`` counts them) never exceed max(move_budget, sticky's own moves) — balance-forced
moves that sticky makes are taken even when they alone exceed the budget. With differing
subscriptions a partition only goes to a member subscribed to its topic.
"""

from __future__ import annotations

import heapq
from bisect import bisect_left, insort

import numpy as np

from rebalance_advisor.domain.assignors import sticky
from rebalance_advisor.domain.assignors._common import member_sums
from rebalance_advisor.domain.assignors._options import optional_amount, optional_count
from rebalance_advisor.domain.group_spec import GroupSpec

NAME = "lag_aware_sticky"
OPTIONS = {"move_budget": optional_count("move_budget"), "min_gain": optional_amount("min_gain")}

PARTNERS = 16  # least-loaded members considered per step
SWAP_PROBES = 64  # partitions of B tried per swap search (evenly spread over B's lags)


def owners(spec: GroupSpec, move_budget: int | None = None, min_gain: float | None = None) -> np.ndarray:
    out = sticky.owners(spec).copy()
    if spec.num_members < 2 or spec.num_partitions == 0:
        return out
    return _Search(spec, out, move_budget, min_gain).run()


class _Search:
    """Mutable state of the greedy search; lives only inside one ``owners`` call."""

    def __init__(self, spec: GroupSpec, out: np.ndarray, move_budget: int | None, min_gain: float | None):
        self.spec = spec
        self.out = out
        self.lag = spec.lag
        self.original = spec.owner
        self.num_members = spec.num_members
        self.load = member_sums(out, spec.lag, spec.num_members).tolist()
        self.count = np.bincount(out[out >= 0], minlength=spec.num_members).tolist()
        held = self.original >= 0
        self.moves = int(np.count_nonzero(out[held] != self.original[held]))
        self.allowed = float("inf") if move_budget is None else max(move_budget, self.moves)
        mean = sum(self.load) / self.num_members
        self.min_gain = max(1.0, 0.001 * mean) if min_gain is None else max(min_gain, 1.0)
        self.identical = spec.identical_subscriptions
        if not self.identical:  # plain lists: eligible() runs tens of thousands of times per plan
            self._class_rows: list[list[bool]] = spec.class_topics.tolist()
            self._member_class: list[int] = spec.member_class.tolist()
            self._topic_of: list[int] = spec.topic_index.tolist()
        order = np.argsort(out, kind="stable")
        self._order = order
        self._ptr = np.searchsorted(out[order], np.arange(self.num_members + 1))
        self.parts: dict[int, list[tuple[int, int]]] = {}  # member -> sorted [(lag, partition index)]

    # ---- state helpers ------------------------------------------------------------------

    def held(self, member: int) -> list[tuple[int, int]]:
        """The member's partitions sorted by lag, built on first use (untouched members never change)."""
        lst = self.parts.get(member)
        if lst is None:
            ks = self._order[self._ptr[member] : self._ptr[member + 1]]
            lst = sorted(zip(self.lag[ks].tolist(), ks.tolist(), strict=True))
            self.parts[member] = lst
        return lst

    def eligible(self, member: int, k: int) -> bool:
        """May ``member`` hold partition ``k`` (``spec.subscribes`` on plain lists)."""
        return self.identical or self._class_rows[self._member_class[member]][self._topic_of[k]]

    def move_cost(self, k: int, src: int, dst: int) -> int:
        owner = int(self.original[k])
        if owner < 0:
            return 0
        return int(owner != dst) - int(owner != src)

    def transfer(self, k: int, lag: int, src: int, dst: int) -> None:
        self.held(src).remove((lag, k))
        insort(self.held(dst), (lag, k))
        self.moves += self.move_cost(k, src, dst)
        self.out[k] = dst
        self.load[src] -= lag
        self.load[dst] += lag
        self.count[src] -= 1
        self.count[dst] += 1

    # ---- search -------------------------------------------------------------------------

    def run(self) -> np.ndarray:
        high = [(-v, m) for m, v in enumerate(self.load)]
        low = [(v, m) for m, v in enumerate(self.load)]
        heapq.heapify(high)
        heapq.heapify(low)
        for _ in range(2 * self.spec.num_partitions + self.num_members):
            while -high[0][0] != self.load[high[0][1]]:
                heapq.heapreplace(high, (-self.load[high[0][1]], high[0][1]))
            top = high[0][1]
            partners = self._partners(low, top)
            best = self._best_step(top, partners)
            if best is None:
                break
            _, _, kind, b, k_a, lag_a, k_b, lag_b = best
            self.transfer(k_a, lag_a, top, b)
            if kind == 1:
                self.transfer(k_b, lag_b, b, top)
            for m in (top, b):
                heapq.heappush(high, (-self.load[m], m))
                heapq.heappush(low, (self.load[m], m))
        return self.out

    def _partners(self, low: list[tuple[int, int]], top: int) -> list[int]:
        """Up to PARTNERS least-loaded members other than ``top`` (lazy heap, entries restored)."""
        taken: list[tuple[int, int]] = []
        found: list[int] = []
        seen: set[int] = set()
        while low and len(found) < PARTNERS:
            load, m = heapq.heappop(low)
            if load != self.load[m] or m in seen:
                continue  # stale entry: a fresh one was pushed when the load changed
            seen.add(m)
            taken.append((load, m))
            if m != top:
                found.append(m)
        for entry in taken:
            heapq.heappush(low, entry)
        return found

    def _best_step(self, top: int, partners: list[int]):
        """The best move or swap of ``top`` with one of ``partners`` (None below ``min_gain``).

        Candidates are ranked by (gain, fewer moves, move before swap, lower partner, lower
        partition index of A), the first one seen winning full ties. A step can gain at most
        floor(diff / 2) and partners come least-loaded first, so once the best gain exceeds that
        bound no later partner can win; and a candidate gaining less than the best so far is
        dropped before its move cost is looked at. Both cuts only skip candidates that could not
        win, so the step chosen is the one the full scan would choose.
        """
        load = self.load
        count = self.count
        load_a = load[top]
        mine = self.held(top)
        if not mine:
            return None
        mine_lags = [lag for lag, _ in mine]
        identical = self.identical
        min_step = 2 * self.min_gain
        best = None
        best_key: tuple = ()
        best_gain = 0  # a candidate must gain more than 0
        for b in partners:
            diff = load_a - load[b]
            if diff < min_step:
                continue  # a step gains at most half the difference
            if best_gain > diff // 2:
                break  # partners are least-loaded first: later differences are no larger
            half = diff / 2
            if count[top] > count[b]:
                for lag_a, k_a in self._near(mine, mine_lags, half, b, identical):
                    gain = min(lag_a, diff - lag_a)
                    if gain >= best_gain and gain > 0:
                        key = self._key(gain, 0, b, k_a, -1, top)
                        if key is not None and (best is None or key > best_key):
                            best, best_key, best_gain = (gain, key[1], 0, b, k_a, lag_a, -1, 0), key, gain
            theirs = self.held(b)
            step = max(1, len(theirs) // SWAP_PROBES)
            for lag_b, k_b in theirs[::step]:
                if identical:  # _near inlined: the hot loop of a group with one subscription
                    i = bisect_left(mine_lags, lag_b + half)
                    near = mine[i - 1 : i + 1] if i else mine[:2]
                elif self.eligible(top, k_b):
                    near = self._near(mine, mine_lags, lag_b + half, b, identical)
                else:
                    continue
                for lag_a, k_a in near:
                    delta = lag_a - lag_b
                    gain = delta if delta < diff - delta else diff - delta
                    if gain >= best_gain and gain > 0:
                        key = self._key(gain, 1, b, k_a, k_b, top)
                        if key is not None and (best is None or key > best_key):
                            best, best_key, best_gain = (
                                (gain, key[1], 1, b, k_a, lag_a, k_b, lag_b),
                                key,
                                gain,
                            )
        if best is None or best[0] < self.min_gain:
            return None
        return best

    def _near(
        self, mine: list[tuple[int, int]], mine_lags: list[int], value: float, dst: int, identical: bool
    ) -> list[tuple[int, int]]:
        """A's partitions whose lag is just below and just above ``value`` that ``dst`` may take."""
        i = bisect_left(mine_lags, value)  # == bisect_left(mine, (value, -1)): indices are >= 0
        if identical:  # everyone may take anything: one below, then up to two at or above
            return mine[i - 1 : i + 1] if i else mine[:2]
        found = []
        j = i - 1
        while j >= 0 and len(found) < 1 and i - j <= 8:
            if self.eligible(dst, mine[j][1]):
                found.append(mine[j])
            j -= 1
        j = i
        while j < len(mine) and len(found) < 2 and j - i <= 8:
            if self.eligible(dst, mine[j][1]):
                found.append(mine[j])
            j += 1
        return found

    def _key(self, gain: int, kind: int, b: int, k_a: int, k_b: int, top: int) -> tuple | None:
        """Rank of a candidate step, (gain, -cost, -kind, -b, -k_a); None when over the move budget."""
        cost = self.move_cost(k_a, top, b) + (self.move_cost(k_b, b, top) if kind else 0)
        if self.moves + cost > self.allowed:
            return None
        return (gain, -cost, -kind, -b, -k_a)
