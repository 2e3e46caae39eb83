"""``rate_aware_sticky`` (ours): keep what members own, then a few load-model moves within a budget.

Start from the valid owned partitions (``GroupSpec.owner_valid``); partitions no one validly owns
are placed as ``rate_aware`` places them, onto the loads members already carry (these handovers are
forced and do not count against the budget). Then, while the budget allows, take the member with
the highest utilisation u = load / capacity (load and weights as in ``rate_aware``) and move the
one partition, to an eligible member, that lowers max(u_from, u_to) most; stop when the best move
lowers the top utilisation by less than ``min_gain`` (default 1 %) of it — unless, with capacities,
the top member is overloaded (utilisation >= 1 - ``margin``, the rule's ``capacity_margin``): then any move that lowers it is made, since a
small partition off an overloaded member may be what removes the overload; and when no single
move helps it, one level of ejection chain (:func:`ejection_chain`: make room on a peer by moving
the peer's lightest partitions elsewhere), and when that fails too, a re-pack of the top member with
its ``POOL_PEERS`` least-utilised peers (:func:`pool_repack`), instead of leaving the fix to a full
repack that moves nearly every partition (bench/drain.py large-500: 3,192 handovers for one
overloaded member). Every single move lowers the top member's utilisation without raising the
receiver above it, and a chain or a pool re-pack is applied only when it leaves every member it
touches below the rule's capacity, so the max utilisation never rises. In groups of at least
``POOL_BALANCE_MEMBERS`` members, balancing that stalls (no single move gains ``min_gain``, e.g. the
top member's hottest partition is most of its load) also tries a pool re-pack that lowers the top by
``min_gain``: otherwise the sticky plan stops short, and the rule picks the full ``rate_aware``
repack (bench/drain.py large-500: 3,196 handovers where the sticky plan had made 23).

With capacities and ``settle`` (the rule sets it when no capacity is a guess from a member's own
consume rate), balancing stops once every member is at most at the fill level: halfway between the
group's mean utilisation and the overload line, the level the oracle of domain/simulation.py packs
to. Below it a move buys headroom the drift between two plans does not need (bench/drain.py
large-500: 759 -> 478 handovers per hour at the same overload). A member above the fill level (or
overloaded) that no move, chain or pool re-pack helps is skipped and the next one is balanced (one
such member in a row, :data:`SKIPS_IN_A_ROW`): until now one such member ended the plan and left the others overloaded, and the rule took the full
``rate_aware`` repack instead (3,197 handovers to relieve one more member).

``returns`` (the rule passes them: ``group_planning.return_pairs``): (partition, member) pairs that
would be moves back, a partition given back to a member it left within the hysteresis window. A
move is chosen among the others first, and a move back only when none of them helps
(:func:`_pick`; docs/concepts/decision-rules.md, "Hysteresis in the strategies").

``move_budget`` caps the owned partitions moved (None: no cap besides the gain threshold).
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass

import numpy as np

from rebalance_advisor.domain.assignors import rate_aware
from rebalance_advisor.domain.assignors._options import flag, index_pairs, optional_amount, optional_count
from rebalance_advisor.domain.group_spec import GroupSpec
from rebalance_advisor.errors import AdvisorError

NAME = "rate_aware_sticky"
OPTIONS = {
    "move_budget": optional_count("move_budget"),
    "horizon_s": optional_amount("horizon_s"),
    "min_gain": optional_amount("min_gain"),
    "margin": optional_amount("margin"),
    "settle": flag("settle"),
    "returns": index_pairs("returns"),
}

DEFAULT_MIN_GAIN = 0.01
#: peers (most room first) an ejection chain tries before giving up
CHAIN_PEERS = 8
#: least-utilised peers re-packed together with an overloaded member when no move or chain helps
POOL_PEERS = 8
#: members skipped one after another (no move, chain or pool re-pack between) before the plan ends:
#: one relieves the others behind a member nothing helps (bench/drain.py large-500); more only
#: retries chains and pool re-packs that fail again (bench/pipeline.py: 4.19 ms per group with no
#: limit, 3.37 with one, the same drain results)
SKIPS_IN_A_ROW = 1
#: groups of at least this many members (the pool at most half the group) also balance by pool
#: re-packs; in smaller groups a pool re-pack is nearly a full one, which the rule already weighs
POOL_BALANCE_MEMBERS = 2 * (POOL_PEERS + 1)


def owners(
    spec: GroupSpec,
    move_budget: int | None = None,
    horizon_s: float | None = None,
    min_gain: float | None = None,
    margin: float | None = None,
    settle: bool = False,
    returns: np.ndarray | None = None,
) -> np.ndarray:
    weights, caps, known_caps = rate_aware.weights_and_inputs(spec, horizon_s)
    out = np.where(spec.owner_valid, spec.owner, -1).astype(np.int32)
    members = spec.num_members
    load = np.bincount(out[out >= 0], weights=weights[out >= 0], minlength=members).astype(np.float64)
    rate_aware.place(spec, out, np.flatnonzero((out < 0) & spec.assignable), weights, caps, load)
    if members < 2:
        return out
    plan = _Balancing(
        gain=DEFAULT_MIN_GAIN if min_gain is None else min_gain,
        full=_overload_line(margin),  # utilisation at which the rule counts a member overloaded
        known_caps=known_caps,
        elig=None if spec.identical_subscriptions else rate_aware.eligibility(spec),
        budget=spec.num_partitions if move_budget is None else move_budget,
        scalar=members <= rate_aware.SCALAR_MEMBERS and rate_aware.finite_positive(caps, weights),
        back=rate_aware.returns_mask(returns, spec.num_partitions, members),
    )
    fill = fill_level(load, caps, plan.full) if settle and known_caps else None
    _balance(spec, out, load, weights, caps, plan, fill)
    return out


@dataclass(frozen=True)
class _Balancing:
    """What :func:`_balance` balances by: the gain a move must make, the overload line, whether
    capacities are known, eligibility (None: one shared subscription), the move budget, whether the
    plain-Python step applies, and the moves back to avoid (``returns`` as a [P, M] mask)."""

    gain: float
    full: float
    known_caps: bool
    elig: np.ndarray | None
    budget: int
    scalar: bool
    back: np.ndarray | None


def _balance(
    spec: GroupSpec, out: np.ndarray, load: np.ndarray, weights: np.ndarray, caps: np.ndarray,
    plan: _Balancing, fill: float | None,
) -> None:  # fmt: skip
    """The module docstring's balancing loop, on ``out`` and ``load`` in place."""
    skipped = np.zeros(spec.num_members, dtype=bool)  # above the line, and nothing helps them
    line = plan.full if fill is None else min(plan.full, fill)
    step = scalar_step if plan.scalar and plan.elig is None else _best_move
    in_a_row = moved = steps = 0  # steps: a guard, each step lowers the top utilisation but ties could cycle
    while moved < plan.budget and steps < 4 * spec.num_partitions + 16:
        steps += 1
        util = np.where(skipped, -np.inf, load / caps)
        top = int(np.argmax(util))
        u_top = util[top]
        mine = np.flatnonzero(out == top)
        if not np.isfinite(u_top) or (fill is not None and u_top <= fill) or len(mine) == 0:
            break
        # a move must gain min_gain, or, with capacities, at least make an overloaded member less so
        over = plan.known_caps and u_top >= plan.full
        helps = functools.partial(_helps, u_top=u_top, gain=plan.gain, overloaded=over)
        i, b, best = _pick(step, helps, load, caps, weights[mine], top, plan.elig, spec, mine, plan.back)
        if not helps(best):
            rearranged = _rearrange_off(spec, out, load, weights, caps, plan.elig, top, plan.budget - moved,
                                        plan.full if over else None, u_top * (1.0 - plan.gain))  # fmt: skip
            if rearranged is not None:
                moved, in_a_row = moved + rearranged, 0
            elif plan.known_caps and u_top >= line and in_a_row < SKIPS_IN_A_ROW:
                skipped[top], in_a_row = True, in_a_row + 1  # balance the next member above the line
            else:
                break
            continue
        k = int(mine[i])
        in_a_row = 0
        _move(out, load, weights, k, b)
        moved += int(spec.owner[k] >= 0)


def _helps(best: float, u_top: float, gain: float, overloaded: bool) -> bool:
    """Whether a move leaving ``best`` as the larger utilisation of its two members is worth making:
    it gains ``gain`` of the top member's utilisation, or relieves an ``overloaded`` top member at all."""
    return bool(best < u_top * (1.0 - gain) or (overloaded and best < u_top))


def _pick(
    step, helps, load: np.ndarray, caps: np.ndarray, w: np.ndarray, top: int, elig: np.ndarray | None,
    spec: GroupSpec, mine: np.ndarray, back: np.ndarray | None,
) -> tuple[int, int, float]:  # fmt: skip
    """The move off ``top``: the best one that gives no partition back to a member it left within the
    hysteresis window (``back``), when that one ``helps``; else the best of all. A move back is the
    one the rule's hysteresis weighs, and the member a partition left is often the one with most room
    (it was relieved), so the best single move was a move back 54 times in a traced run
    (bench/drain.py large-50x500-steps, docs/benchmarks/drain.md)."""
    banned = None if back is None else back[mine]
    if banned is not None and banned.any():
        found = step(load, caps, w, top, elig, spec, mine, banned)
        if helps(found[2]):
            return found
    return step(load, caps, w, top, elig, spec, mine)


def _overload_line(margin: float | None) -> float:
    """The utilisation at which a member counts as overloaded: 1 - ``margin``."""
    if margin is not None and margin >= 1:
        raise AdvisorError(f"option margin={margin!r}: must be below 1 (a fraction of each capacity)")
    return 1.0 - (margin or 0.0)


def _rearrange_off(
    spec: GroupSpec, out: np.ndarray, load: np.ndarray, weights: np.ndarray, caps: np.ndarray,
    elig: np.ndarray | None, top: int, budget: int, overload_line: float | None, limit: float,
) -> int | None:  # fmt: skip
    """When no single move helps the top member: an overloaded one (``overload_line`` set) first
    tries an ejection chain, then a pool re-pack under that line; in a large group a pool re-pack
    that takes min_gain off its utilisation (under ``limit``) comes next, instead of leaving the
    rule a full repack (its hottest partition is most of its load). Returns how many previously
    owned partitions moved, None when nothing helps."""
    elig_pm = None if elig is None else elig[spec.topic_index]
    if overload_line is not None:
        chain = ejection_chain(spec, out, load, weights, caps * overload_line, elig, top, budget)
        if chain:
            return sum(spec.owner[k] >= 0 for k, _ in chain)
        pool = pool_repack(out, load, weights, caps, overload_line, top, budget, elig_pm, spec.owner)
        if pool:
            return sum(spec.owner[k] >= 0 for k, _ in pool)
    if spec.num_members >= POOL_BALANCE_MEMBERS:
        pool = pool_repack(out, load, weights, caps, limit, top, budget, elig_pm, spec.owner)
        if pool:
            return sum(spec.owner[k] >= 0 for k, _ in pool)
    return None


def fill_level(load: np.ndarray, caps: np.ndarray, full: float) -> float:
    """The utilisation balancing settles at: halfway between the group's mean utilisation and
    ``full`` (the overload line), as the oracle packs (domain/simulation.py)."""
    mean = float(load.sum() / caps.sum()) if caps.sum() > 0 else 0.0
    return mean + (full - mean) / 2


def _best_move(
    load: np.ndarray,
    caps: np.ndarray,
    w: np.ndarray,
    top: int,
    elig: np.ndarray | None,
    spec: GroupSpec,
    mine: np.ndarray,
    banned: np.ndarray | None = None,
) -> tuple[int, int, float]:
    """(row in ``mine``, receiver, max utilisation of the two after it) of the best single move off
    ``top``: the first minimum in (partition, member) order; ``banned`` [len(mine), M]: moves not to make."""
    # utilisation after the move: source (load - w)/cap_top, receiver (load_b + w)/cap_b
    after_src = (load[top] - w) / caps[top]  # [k]
    after_dst = (load[None, :] + w[:, None]) / caps[None, :]  # [k, M]
    worst = np.maximum(after_src[:, None], after_dst)
    worst[:, top] = np.inf
    if elig is not None:
        worst = np.where(elig[spec.topic_index[mine]], worst, np.inf)
    if banned is not None:
        worst[banned] = np.inf
    i, b = np.unravel_index(int(np.argmin(worst)), worst.shape)
    return int(i), int(b), float(worst[i, b])


def scalar_step(
    load: np.ndarray,
    caps: np.ndarray,
    w: np.ndarray,
    top: int,
    elig: np.ndarray | None,
    spec: GroupSpec,
    mine: np.ndarray,
    banned: np.ndarray | None = None,
) -> tuple[int, int, float]:
    """:func:`_best_move` in plain Python for few members, all eligible, finite weights and
    capacities > 0: the same float64 operations, the first minimum wins; NumPy's per-call cost is
    most of the work at ten members."""
    loads = load.tolist()
    cap = caps.tolist()
    others = [b for b in range(len(loads)) if b != top]
    src_load, src_cap = loads[top], cap[top]
    skip = banned.tolist() if banned is not None else None
    best_i, best_b, best = 0, others[0], math.inf
    for i, wi in enumerate(w.tolist()):
        src = (src_load - wi) / src_cap
        if src >= best:
            continue  # no receiver can make this row better than the best so far
        for b in others:
            if skip is not None and skip[i][b]:
                continue
            dst = (loads[b] + wi) / cap[b]
            worst = dst if dst > src else src
            if worst < best:
                best_i, best_b, best = i, b, worst
    return best_i, best_b, best


def _move(out: np.ndarray, load: np.ndarray, weights: np.ndarray, k: int, to: int) -> None:
    load[out[k]] -= weights[k]
    load[to] += weights[k]
    out[k] = to


def ejection_chain(
    spec: GroupSpec,
    out: np.ndarray,
    load: np.ndarray,
    weights: np.ndarray,
    caps: np.ndarray,
    elig: np.ndarray | None,
    top: int,
    budget: int,
) -> list[tuple[int, int]]:
    """Relieve an overloaded ``top`` none of whose partitions fits anywhere: make room on a peer by
    moving the peer's lightest partitions to third members, then move top's lightest partition
    there (one level, as the oracle of domain/simulation.py does). Applied in place only when it
    works within ``budget`` moves and leaves every member it touches below capacity; returns the
    moves made (partition, new owner), empty when none.
    """
    mine = np.flatnonzero(out == top)
    if len(mine) < 2:
        return []  # a single partition above capacity: no plan helps
    k = int(mine[np.argmin(weights[mine])])
    room = caps - load
    peers = np.flatnonzero(room > 0)
    if elig is not None:
        peers = peers[elig[spec.topic_index[k], peers]]
    peers = peers[peers != top]
    for b in peers[np.argsort(-room[peers], kind="stable")][:CHAIN_PEERS].tolist():
        if load[b] - weights[out == b].sum() + weights[k] >= caps[b]:
            continue  # even emptied, b could not take k
        trial_out, trial_load = out.copy(), load.copy()
        made: list[tuple[int, int]] = []
        theirs = np.flatnonzero(out == b)
        for j in theirs[np.argsort(weights[theirs], kind="stable")].tolist():
            if trial_load[b] + weights[k] < caps[b] or len(made) + 1 >= budget:
                break
            fits = (trial_load + weights[j]) < caps
            fits[[top, b]] = False
            if elig is not None:
                fits &= elig[spec.topic_index[j]]
            if not fits.any():
                continue
            c = int(np.argmax(np.where(fits, caps - trial_load, -np.inf)))
            _move(trial_out, trial_load, weights, j, c)
            made.append((j, c))
        if trial_load[b] + weights[k] < caps[b] and len(made) < budget:
            _move(trial_out, trial_load, weights, k, b)
            made.append((k, b))
            out[:] = trial_out
            load[:] = trial_load
            return made
    return []


def pool_repack(
    out: np.ndarray,
    load: np.ndarray,
    weights: np.ndarray,
    caps: np.ndarray,
    limit: float,
    top: int,
    budget: int,
    elig_pm: np.ndarray | None = None,
    counted: np.ndarray | None = None,
    level: float | None = None,
    peers: int = POOL_PEERS,
) -> list[tuple[int, int]]:
    """Re-pack ``top`` together with its ``peers`` least-utilised peers, for an overload that neither
    one move nor one ejection chain removes (two partitions that together exceed a capacity while
    every peer is too full to take either: bench/drain.py large-500).

    The pool's partitions are dealt heaviest first (stable): a partition stays with its current
    owner while that owner's utilisation stays at most ``level`` (default: halfway between the
    pool's mean utilisation and ``limit``), else it goes to the pool member with the lowest
    utilisation after taking it (first in pool order on ties: top, then peers by utilisation).
    Applied in place only when every pool member ends below ``limit`` (a utilisation) and the moves
    of partitions with ``counted`` >= 0 (owned ones; default all) fit ``budget``; returns the moves
    made (partition, new owner), empty when none. ``elig_pm`` [P, M]: may member m hold partition p.
    """
    members = len(load)
    mine = np.flatnonzero(out == top)
    if len(mine) < 2:
        return []  # a single partition above capacity: no plan helps
    util = load / caps
    cand = np.flatnonzero(np.arange(members) != top)
    if elig_pm is not None:
        cand = cand[elig_pm[np.ix_(mine, cand)].all(axis=0)]
    pool = np.r_[top, cand[np.argsort(util[cand], kind="stable")][:peers]].astype(np.int64)
    if len(pool) < 2:
        return []
    parts = np.flatnonzero(np.isin(out, pool))
    parts = parts[np.argsort(-weights[parts], kind="stable")]
    pool_caps = caps[pool]
    if level is None:
        mean = float(weights[parts].sum() / pool_caps.sum())
        level = mean + (limit - mean) / 2
    trial, new_load = _deal(out, parts, pool, weights, pool_caps, level, elig_pm)
    if not (new_load / pool_caps < limit).all():
        return []
    moved = np.flatnonzero(trial != out)
    owned = moved if counted is None else moved[counted[moved] >= 0]
    if not moved.size or len(owned) > budget:
        return []
    out[moved] = trial[moved]
    load[pool] = new_load
    return [(int(k), int(out[k])) for k in moved.tolist()]


def _deal(
    out: np.ndarray, parts: np.ndarray, pool: np.ndarray, weights: np.ndarray, pool_caps: np.ndarray,
    level: float, elig_pm: np.ndarray | None,
) -> tuple[np.ndarray, np.ndarray]:  # fmt: skip
    """:func:`pool_repack`'s deal of ``parts`` (heaviest first) over ``pool``: the trial owners and
    the pool members' new loads."""
    slot = {int(m): i for i, m in enumerate(pool.tolist())}
    new_load = np.zeros(len(pool))
    trial = out.copy()
    for k in parts.tolist():
        w = weights[k]
        cur = slot[int(out[k])]
        if (new_load[cur] + w) / pool_caps[cur] <= level:
            new_load[cur] += w
            continue
        score = (new_load + w) / pool_caps
        if elig_pm is not None:
            score = np.where(elig_pm[k, pool], score, np.inf)
        best = int(np.argmin(score))
        new_load[best] += w
        trial[k] = pool[best]
    return trial, new_load
