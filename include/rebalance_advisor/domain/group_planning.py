"""Advise one group: observed state -> every requested strategy -> metrics -> decision -> advice.

:func:`advise_group` is the one pure function the Spark planner (inside ``applyInPandas``), the
``plan`` CLI, the benchmarks and the simulator call; it only calls the assignors, metrics and the
decision rules of :mod:`rebalance_advisor.domain.decisions`. :func:`plan_group` is the same for a
spec *document* (the JSON shape built by :mod:`rebalance_advisor.domain.spec_documents`)::

    {"group_id": "g", "members": [...], "partitions": [...],   # parse_group_spec's format
     "weight": "lag",                                           # what partition "lag" means
     "note": null,                                             # why the spec may be missing
     "standing": {"plan_id": 3, "status": "recommended", "created_at": "..."} | null}

Both return a :class:`~rebalance_advisor.domain.advice.GroupAdvice` and never raise for a bad
group: an invalid spec becomes outcome ``error`` with the message, so one broken group cannot stop
the others from planning.
"""

from __future__ import annotations

import dataclasses
from datetime import datetime
from typing import Any

import numpy as np

from rebalance_advisor.domain.advice import (
    CandidatePlan,
    ChosenPlan,
    GroupAdvice,
    GroupObservation,
    RecentMove,
    StandingPlan,
)
from rebalance_advisor.domain.assignors import get_assignor
from rebalance_advisor.domain.decisions import (
    Decision,
    GroupState,
    Thresholds,
    cooldown_reason,
    cooldown_until,
    decide,
    is_flagged,
    seconds,
    within_move_budget,
)
from rebalance_advisor.domain.group_spec import (
    GroupSpec,
    parse_group_spec,
    parse_rate_interval,
    parse_recent_moves,
)
from rebalance_advisor.domain.key_range_advice import (
    KeySharingInputs,
    current_range_view,
    current_ranges_from_doc,
    range_rows,
    ranged_candidate,
)
from rebalance_advisor.domain.load_model import (
    LoadInputs,
    catch_up_time,
    load_inputs,
    member_totals,
    summarize,
    usable_capacity,
)
from rebalance_advisor.domain.metrics import GroupMetrics, compute_metrics, lower_bound_max_lag
from rebalance_advisor.domain.snapshot_model import estimated_capacity_members, own_rate_capacity_members
from rebalance_advisor.domain.timestamps import as_utc
from rebalance_advisor.errors import AdvisorError

NO_MEMBERS = "no members and no registered static members"


def strategy_options(strategy: str, thresholds: Thresholds, settle: bool = False) -> dict[str, Any]:
    """Options a strategy gets from the run's thresholds (budget and horizon where they apply);
    ``settle``: rate_aware_sticky stops balancing at the fill level (no capacity is an own-rate guess)."""
    if strategy == "lag_aware_sticky":
        return {"move_budget": thresholds.move_budget}
    if strategy == "rate_aware":
        return {"horizon_s": thresholds.horizon_s}
    if strategy == "rate_aware_sticky":
        return {
            "move_budget": thresholds.move_budget,
            "horizon_s": thresholds.horizon_s,
            "margin": thresholds.capacity_margin_in_force,
            "settle": settle,
        }
    return {}


def candidate_owners(spec: GroupSpec, thresholds: Thresholds, settle: bool = False) -> dict[str, np.ndarray]:
    """Every requested strategy's owners array for the spec (the exact assignor calls)."""
    return {
        name: get_assignor(name).owners(spec, **strategy_options(name, thresholds, settle))
        for name in thresholds.strategies
    }


def _rounded(metrics: GroupMetrics) -> GroupMetrics:
    """Floats to 6 decimals: what is stored and compared across runs."""
    return dataclasses.replace(
        metrics,
        imbalance=round(float(metrics.imbalance), 6),
        lag_cv=round(float(metrics.lag_cv), 6),
        gap=round(float(metrics.gap), 6),
    )


#: The document keys :func:`observe_document` reads; the Spark planner ships only these (the others,
#: such as ``time_lags``, are for people and would double what crosses the Spark boundary).
DOCUMENT_KEYS = (
    "group_id",
    "members",
    "partitions",
    "weight",
    "note",
    "standing",
    "recent_moves",
    "broker_assigned",
    "key_sharing",
    "current_ranges",
    "capacity_sources",
    "rate_interval_s",
)


def observe_document(doc: dict[str, Any]) -> GroupObservation:
    """A spec document -> the observation; an invalid spec raises AdvisorError (reads only DOCUMENT_KEYS)."""
    if not isinstance(doc, dict):
        raise AdvisorError("input must be a JSON object with group_id, members and partitions")
    group_id = str(doc.get("group_id"))
    standing_doc = doc.get("standing")
    standing = None
    if standing_doc:
        standing = StandingPlan(
            standing_doc["plan_id"],
            standing_doc["status"],
            datetime.fromisoformat(standing_doc["created_at"]),
        )
    common = {
        "weight": doc.get("weight", "lag"),
        "note": doc.get("note"),
        "standing": standing,
        "recent_moves": parse_recent_moves(doc.get("recent_moves")),
        "broker_assigned": bool(doc.get("broker_assigned")),
        "key_sharing": KeySharingInputs.from_doc(doc.get("key_sharing")),
        "current_ranges": current_ranges_from_doc(doc.get("current_ranges")),
        "estimated_capacity": estimated_capacity_members((doc.get("capacity_sources") or {}).items()),
        "own_rate_capacity": own_rate_capacity_members((doc.get("capacity_sources") or {}).items()),
        "rate_interval_s": parse_rate_interval(doc.get("rate_interval_s")),
    }
    if not doc.get("members"):
        total_lag = int(sum(int(p.get("lag", 0)) for p in doc.get("partitions") or []))
        return GroupObservation(group_id, None, total_lag, **common)
    spec = parse_group_spec({k: doc[k] for k in ("group_id", "members", "partitions") if k in doc})
    return GroupObservation(group_id, spec, int(spec.lag.sum()), **common)


def plan_group(doc: dict[str, Any], thresholds: Thresholds, now: datetime) -> GroupAdvice:
    """:func:`advise_group` for a spec document (module docstring); never raises for a bad group."""
    try:
        observation = observe_document(doc)
    except AdvisorError as error:
        group_id = str(doc.get("group_id"))
        total_lag = int(sum(int(p.get("lag", 0)) for p in doc.get("partitions") or [] if isinstance(p, dict)))
        return GroupAdvice(group_id, "error", f"invalid group spec: {error}", total_lag)
    return advise_group(observation, thresholds, now)


def empty_members(spec: GroupSpec, owners: np.ndarray) -> int:
    """Members owning nothing while a peer holds two or more partitions of a topic they subscribe to."""
    counts = np.bincount(owners[owners >= 0], minlength=spec.num_members)
    empty = np.flatnonzero(counts == 0)
    if not len(empty) or counts.max(initial=0) < 2:
        return 0
    if spec.identical_subscriptions:
        return len(empty)
    rich = (owners >= 0) & (counts[np.maximum(owners, 0)] >= 2)
    topics = np.zeros(len(spec.topics), dtype=bool)
    topics[spec.topic_index[rich]] = True
    subscribed = spec.class_topics[spec.member_class[empty]]  # [E, T]
    return int(np.count_nonzero((subscribed & topics[None, :]).any(axis=1)))


def moves_back(
    spec: GroupSpec, owners: np.ndarray, recent: tuple[RecentMove, ...], now: datetime, window_s: float
) -> int:
    """Partitions ``owners`` hands back to a member they left within ``window_s`` before ``now``."""
    if not recent or window_s <= 0:
        return 0
    index = {m: i for i, m in enumerate(spec.member_ids)}
    topic_pos = {t: i for i, t in enumerate(spec.topics)}
    count = 0
    seen: set[int] = set()
    for move in recent:
        age = (as_utc(now) - as_utc(move.at)).total_seconds()
        left = index.get(move.from_member)
        if age > window_s or left is None or move.topic not in topic_pos:
            continue
        lo, hi = spec.topic_start[topic_pos[move.topic]], spec.topic_start[topic_pos[move.topic] + 1]
        k = lo + int(np.searchsorted(spec.partition[lo:hi], move.partition))
        if k >= hi or spec.partition[k] != move.partition or k in seen:
            continue
        if owners[k] == left and spec.owner[k] != left:
            seen.add(k)
            count += 1
    return count


def group_state(spec: GroupSpec, inputs: LoadInputs, thresholds: Thresholds) -> tuple[GroupState, Any]:
    """The rules' view of the current assignment, and its per-member load."""
    # the summary against the usable capacity (the rule's margin); the members' view against the full one
    summary, members = summarize(
        spec, spec.owner, inputs, thresholds.horizon_s, margin=thresholds.capacity_margin_in_force
    )
    inflow, backlog = member_totals(spec, spec.owner, inputs.rate)
    load = inflow + backlog / thresholds.horizon_s
    mean = float(load.mean()) if len(load) else 0.0
    state = GroupState(
        total_lag=int(spec.lag.sum()),
        load=summary,
        load_imbalance=float(load.max()) / mean if mean > 0 else 1.0,
        empty_members=empty_members(spec, spec.owner),
        capacities_known=inputs.capacity is not None,
        note=inputs.note,
    )
    return state, members


def advise_group(observation: GroupObservation, thresholds: Thresholds, now: datetime) -> GroupAdvice:
    """One group's outcome, numbers and (when a plan is stored) the chosen assignment."""
    group_id = observation.group_id
    spec = observation.spec
    if spec is None:
        outcome = "broker_assigned" if observation.broker_assigned else "no_members"
        return GroupAdvice(group_id, outcome, observation.note or NO_MEMBERS, observation.total_lag)
    total_lag = int(spec.lag.sum())
    thresholds = thresholds.for_rate_interval(observation.rate_interval_s)  # the auto margin, resolved
    try:
        inputs = optimistic_estimates(
            spec,
            load_inputs(spec),
            thresholds,
            observation.estimated_capacity & recent_receivers(observation),
        )
        bound = lower_bound_max_lag(spec)
        # key ranges of a published ranged plan: the current state is measured in their range view
        # (domain/key_range_advice.py), where each range is owned by its member
        sharing = observation.key_sharing
        now_spec = spec
        if observation.current_ranges:
            samples = sharing.samples if sharing is not None else None
            now_spec = current_range_view(spec, observation.current_ranges, samples) or spec
        now_inputs = inputs if now_spec is spec else load_inputs(now_spec)
        state, current_members = group_state(now_spec, now_inputs, thresholds)
        current = _rounded(
            compute_metrics(
                now_spec, now_spec.owner, bound if now_spec is spec else lower_bound_max_lag(now_spec)
            )
        )
        unowned_lag = int(now_spec.lag[now_spec.owner < 0].sum())
        # Idle and balanced groups need no candidates: skipping them is most of a quiet cluster's work.
        settle = not observation.own_rate_capacity
        owners_by_strategy = (
            candidate_owners(spec, thresholds, settle) if is_flagged(state, thresholds) else {}
        )
        # key_range with the run's samples: measured in its range view (domain/key_range_advice.py)
        ranged = None
        if "key_range" in owners_by_strategy and sharing is not None:
            ranged = ranged_candidate(spec, thresholds, sharing, inputs, observation.current_ranges)
            owners_by_strategy["key_range"] = ranged.plan.owners
    except AdvisorError as error:
        return GroupAdvice(group_id, "error", f"invalid group spec: {error}", total_lag)
    metrics_by_strategy: dict[str, GroupMetrics] = {}
    candidates = []
    # Strategies often agree (range, sticky and the current owners); the numbers depend on the owners alone.
    seen: dict[bytes, tuple[GroupMetrics, CandidatePlan]] = {}

    def measure(name: str, o: np.ndarray) -> None:
        s, so, s_inputs, s_bound = spec, o, inputs, bound
        key: bytes | None = o.astype(np.int64, copy=False).tobytes()
        if name == "key_range" and ranged is not None and ranged.plan.ranges:
            s, so = ranged.view, ranged.view_owners
            s_inputs, s_bound = load_inputs(s), lower_bound_max_lag(s)
            key = None  # measured in its range view: never shared with whole-partition plans
        if key is not None and key in seen:
            m, same = seen[key]
            metrics_by_strategy[name] = m
            candidates.append(dataclasses.replace(same, strategy=name))
            return
        handovers = int(np.count_nonzero((so >= 0) & (so != s.owner)))
        m = dataclasses.replace(_rounded(compute_metrics(s, so, s_bound)), moves=handovers)
        metrics_by_strategy[name] = m
        load, _ = summarize(
            s,
            so,
            s_inputs,
            thresholds.horizon_s,
            thresholds.handover_cost_s,
            thresholds.capacity_margin_in_force,
        )
        candidates.append(
            CandidatePlan(
                name,
                m.max_member_lag,
                handovers,
                m.imbalance,
                load,
                moves_back(s, so, observation.recent_moves, now, thresholds.hysteresis_window_s),
                empty_members(s, so),
            )
        )
        if key is not None:
            seen[key] = (m, candidates[-1])

    for name, o in owners_by_strategy.items():
        measure(name, o)
    forced = int(np.count_nonzero(now_spec.assignable & ~now_spec.owner_valid))
    decision = decide(
        state, candidates, thresholds, forced_handovers=forced, standing=observation.standing, now=now
    )
    if decision.outcome == "no_better_plan" and state.capacities_known and now_spec is spec:
        isolated = isolate_backlog(spec, inputs, thresholds, observation.estimated_capacity)
        if isolated is not None:  # one more candidate, judged by the same rule
            owners_by_strategy[ISOLATE_BACKLOG] = isolated[0]
            measure(ISOLATE_BACKLOG, isolated[0])
            again = decide(
                state, candidates, thresholds, forced_handovers=forced, standing=observation.standing, now=now
            )
            if again.chosen is not None and again.chosen.strategy == ISOLATE_BACKLOG:
                decision = dataclasses.replace(
                    again, reason=f"{again.reason}; {ISOLATE_BACKLOG}: {isolated[1]}"
                )
            elif again.outcome != "no_better_plan":
                decision = again
    if decision.outcome == "no_better_plan" and state.capacities_known and now_spec is spec:
        floor = catch_up_floor(spec, inputs, thresholds)
        if floor is not None:  # why nothing improves: what physics allows (catch_up_floor)
            decision = dataclasses.replace(
                decision,
                reason=f"{decision.reason}; on these capacities no plan catches up in under {seconds(floor[0])}: {floor[1]}",
            )
    if (
        decision.outcome == "no_better_plan"
        and now_spec is spec
        and within_move_budget(1, forced, thresholds.move_budget)
    ):
        probe = capacity_probe(spec, inputs, thresholds, observation.estimated_capacity)
        if probe is not None:
            owners, why = probe
            owners_by_strategy[CAPACITY_PROBE] = owners
            measure(CAPACITY_PROBE, owners)
            chosen = candidates[-1]
            if chosen.moves_back == 0:  # never back to an owner the partition just left
                decision = Decision(
                    "recommended",
                    f"{decision.reason}; {CAPACITY_PROBE}: {why}",
                    chosen,
                    "recommended",
                    chosen,
                )
    plan = None
    reason = decision.reason
    if decision.chosen is not None and decision.plan_status is not None:
        name = decision.chosen.strategy
        is_ranged = name == "key_range" and ranged is not None and bool(ranged.plan.ranges)
        owners = owners_by_strategy[name]
        member_ids = spec.member_ids
        keys = spec.partition_keys
        lags = spec.lag.tolist()
        plan = ChosenPlan(
            strategy=name,
            status=decision.plan_status,
            weight=observation.weight,
            metrics=metrics_by_strategy[name],
            equivalent_strategies=tuple(
                sorted(
                    other
                    for other, o in owners_by_strategy.items()
                    if other != name and np.array_equal(o, owners)
                )
            ),
            assignments=tuple(
                (member_ids[m], keys[k][0], keys[k][1], lags[k])
                for k, m in enumerate(owners.tolist())
                if m >= 0
            ),
            members=summarize(spec, owners, inputs, thresholds.horizon_s)[1],
        )
        if is_ranged:  # whole partitions as above, plus one row per key range; hot keys in the reason
            plan = dataclasses.replace(
                plan,
                key_ranges=range_rows(ranged),
                members=summarize(
                    ranged.view, ranged.view_owners, load_inputs(ranged.view), thresholds.horizon_s
                )[1],
            )
            reason = f"{reason}; key_range: {ranged.plan.reason}"
    return GroupAdvice(
        group_id=group_id,
        outcome=decision.outcome,
        reason=reason,
        total_lag=total_lag,
        current=current,
        unowned_lag=unowned_lag,
        current_load=state.load,
        current_members=current_members,
        candidates=tuple(candidates),
        best=decision.best,
        plan=plan,
    )


def recent_receivers(observation: GroupObservation) -> frozenset[str]:
    """Members that received a partition within the hysteresis window (its recent moves)."""
    return frozenset(move.to_member for move in observation.recent_moves)


def optimistic_estimates(
    spec: GroupSpec, inputs: LoadInputs, thresholds: Thresholds, estimated: frozenset[str]
) -> LoadInputs:
    """Raise each estimated capacity to what the member needs for its current load.

    An estimated member (never seen saturated) is never called overloaded or slow on its estimate:
    its capacity is taken as at least what drains its current backlog within the target on top of
    its inflow. If it really is slower, it saturates, the next snapshot measures it, and the rule
    acts on the measured value one interval later. Without this, a member that had just been given
    a hot partition (a probe, or a plan) was "relieved" on its estimate the next interval, before it
    could be measured (bench/closed_loop.py run B: the hot partition went back and forth).
    """
    caps = inputs.capacity
    if caps is None or not estimated:
        return inputs
    est = np.array([m in estimated for m in spec.member_ids])
    if not est.any():
        return inputs
    inflow, backlog = member_totals(spec, spec.owner, inputs.rate)
    need = (
        (inflow + backlog / thresholds.target_catch_up_s) / (1.0 - thresholds.capacity_margin_in_force) * 1.01
    )
    raised = np.where(est, np.maximum(caps, need), caps)
    raised.setflags(write=False)
    return dataclasses.replace(inputs, capacity=raised)


def catch_up_floor(spec: GroupSpec, inputs: LoadInputs, thresholds: Thresholds) -> tuple[float, str] | None:
    """The shortest predicted catch-up any plan can reach, and the partition that sets it.

    A backlogged partition p drains at best alone on the subscribed member with the most usable
    capacity μ: T ≥ lag_p / (μ − λ_p) (a member's T = B / (μ − Λ) with B ≥ lag_p and Λ ≥ λ_p; a
    handover pause only adds backlog). When the current catch-up is within the minimum improvement
    of this floor, holding is physics, not a candidate the search missed (bench/closed_loop.py run
    B: "catch-up 147 s -> 144 s", floor 133 s). None without capacities or backlog.
    """
    caps = inputs.capacity
    if caps is None or not (spec.lag > 0).any():
        return None
    usable = usable_capacity(caps, thresholds.capacity_margin_in_force)
    best = None
    for part in np.flatnonzero(spec.lag > 0).tolist():
        members = spec.topic_subscribers[int(spec.topic_index[part])]
        if len(members) == 0:
            continue
        fastest = float(np.max(usable[members]))
        t = float(
            catch_up_time(
                np.array([float(spec.lag[part])]), np.array([inputs.rate[part]]), np.array([fastest])
            )[0]
        )
        if best is None or t > best[0]:
            topic, number = spec.partition_keys[part]
            best = (
                t,
                f"{topic}-{number}'s lag {int(spec.lag[part]):,} at {inputs.rate[part]:,.1f}/s drains at best "
                f"on the fastest member ({fastest:,.1f}/s usable)",
            )
    return best


#: the strategy name of the plan :func:`isolate_backlog` makes
ISOLATE_BACKLOG = "isolate_backlog"


def isolate_backlog(
    spec: GroupSpec, inputs: LoadInputs, thresholds: Thresholds, estimated: frozenset[str] = frozenset()
) -> tuple[np.ndarray, str] | None:
    """Leave the bottleneck member its most backlogged partition alone: its other partitions go, one by
    one (hottest first), to the member whose predicted catch-up stays the shortest with it (its lag
    plus a handover pause of production), while that stays below the bottleneck's current catch-up.

    The plan that reaches :func:`catch_up_floor` when the hot partition already sits on the fastest
    member; the strategies balance load and did not find it (bench/closed_loop.py, an earlier run B:
    the rule held a group above its target that this plan relieved, and a capacity probe then moved
    the hot partition off the fastest member). None without capacities, when the bottleneck has no
    backlog or one partition, or when nothing can move.

    Only measured members (not in ``estimated``) receive: an estimated capacity is a guess, or, for a
    member that just received a partition, raised to what its current load needs
    (:func:`optimistic_estimates`), so backlog sent there is predicted to fit when it may not (bench/drain.py medium-50-cap2x, 3 seeds: overloaded 6.1 % -> 12.5 % of the
    time when estimated members could receive, 6.1 % when they cannot). Testing an estimate is the
    probe's job.
    """
    caps = inputs.capacity
    if caps is None or spec.num_members < 2:
        return None
    usable = usable_capacity(caps, thresholds.capacity_margin_in_force)
    inflow, backlog = member_totals(spec, spec.owner, inputs.rate)
    back = backlog.astype(np.float64)
    t = catch_up_time(back, inflow, usable)
    worst = int(np.argmax(np.where(backlog > 0, t, -1.0)))
    held = np.flatnonzero(spec.owner == worst)
    if backlog[worst] <= 0 or len(held) < 2:
        return None
    hot = int(held[np.argmax(spec.lag[held])])
    if spec.lag[hot] <= 0:
        return None
    owners = spec.owner.copy()
    bound = float(t[worst])
    moved = 0
    for q in sorted((int(k) for k in held if k != hot), key=lambda k: -float(inputs.rate[k])):
        rate = float(inputs.rate[q])
        extra = float(spec.lag[q]) + rate * thresholds.handover_cost_s
        members = [
            int(m)
            for m in spec.topic_subscribers[int(spec.topic_index[q])]
            if m != worst and spec.member_ids[int(m)] not in estimated
        ]
        if not members:
            continue
        after = catch_up_time(back[members] + extra, inflow[members] + rate, usable[members])
        pick = int(np.argmin(after))
        if not (after[pick] < bound):
            continue
        m = members[pick]
        owners[q] = m
        back[m] += extra
        inflow[m] += rate
        back[worst] -= float(spec.lag[q])
        inflow[worst] -= rate
        moved += 1
    if not moved:
        return None
    topic, number = spec.partition_keys[hot]
    left = catch_up_time(back[worst : worst + 1], inflow[worst : worst + 1], usable[worst : worst + 1])[0]
    why = (
        f"{moved} partition(s) off {spec.member_ids[worst]} (predicted catch-up {seconds(bound)}), so that "
        f"{topic}-{number} (lag {int(spec.lag[hot]):,}, {inputs.rate[hot]:,.1f}/s) drains faster there "
        f"({seconds(float(left))})"
    )
    return owners, why


#: the strategy name of the plan :func:`capacity_probe` makes
CAPACITY_PROBE = "capacity_probe"


def capacity_probe(
    spec: GroupSpec, inputs: LoadInputs, thresholds: Thresholds, estimated: frozenset[str]
) -> tuple[np.ndarray, str] | None:
    """One handover that tests an estimated capacity, when no candidate improves a flagged group.

    The deadlock it breaks (bench/closed_loop.py run B): the member with the longest predicted
    catch-up holds a hot backlogged partition, and every member that could take it has a capacity
    that is only an estimate (the group median, or 1.2 x what it consumes), because it has never
    been saturated, so it is never measured. Every candidate then predicts an overload and the group
    stays stuck. The probe hands that member's most backlogged partition to the estimated member with
    the most estimated headroom. If that member is faster than its estimate it drains the backlog;
    if not, it is saturated with backlog, so the next snapshot measures it and the next plan uses
    the measured value (and may move the partition back: moving back to remove an overload is
    allowed). None when the bottleneck member's own capacity is an estimate (it is saturated now,
    so it is being measured), when it has no backlog, or when no other member is estimated.
    """
    caps = inputs.capacity
    if caps is None or not estimated or spec.num_members < 2:
        return None
    est = np.array([m in estimated for m in spec.member_ids])
    inflow, backlog = member_totals(spec, spec.owner, inputs.rate)
    usable = usable_capacity(caps, thresholds.capacity_margin_in_force)
    t = catch_up_time(backlog.astype(np.float64), inflow, usable)
    worst = int(np.argmax(np.where(backlog > 0, t, -1.0)))
    if backlog[worst] <= 0 or est[worst] or not (t[worst] > thresholds.target_catch_up_s):
        return None
    held = np.flatnonzero(spec.owner == worst)
    part = int(held[np.argmax(spec.lag[held])])
    if spec.lag[part] <= 0:
        return None
    headroom = np.where(est, usable - inflow, -np.inf)
    headroom[worst] = -np.inf
    subscribed = np.zeros(spec.num_members, dtype=bool)
    subscribed[spec.topic_subscribers[int(spec.topic_index[part])]] = True
    headroom = np.where(subscribed, headroom, -np.inf)
    target = int(np.argmax(headroom))
    if not np.isfinite(headroom[target]):
        return None
    owners = spec.owner.copy()
    owners[part] = target
    topic, number = spec.partition_keys[part]
    swap = ""
    if len(held) == 1:  # not leave it empty (a flag of its own): it takes the target's lightest partition
        theirs = np.flatnonzero((spec.owner == target) & subscribed_by(spec, worst))
        if len(theirs):
            light = int(theirs[np.argmin(inputs.rate[theirs])])
            owners[light] = worst
            swap = f", which gives {spec.member_ids[worst]} its lightest partition {spec.partition_keys[light][0]}-{spec.partition_keys[light][1]}"
    why = (
        f"{topic}-{number} (lag {int(spec.lag[part]):,}, {inputs.rate[part]:,.1f}/s) from "
        f"{spec.member_ids[worst]} (predicted catch-up {seconds(float(t[worst]))}) to "
        f"{spec.member_ids[target]}, whose capacity {caps[target]:,.1f}/s is an estimate (never "
        f"saturated, so not measured){swap}: it drains the backlog or gets measured"
    )
    return owners, why


def subscribed_by(spec: GroupSpec, member: int) -> np.ndarray:
    """Mask of the partitions whose topic ``member`` subscribes to."""
    return spec.class_topics[int(spec.member_class[member])][spec.topic_index]


def hold_back(
    advice: GroupAdvice, standing: StandingPlan, now: datetime, thresholds: Thresholds
) -> GroupAdvice:
    """A recommendation that ``standing`` (a concurrent run's committed plan) now holds back, or as is.

    The same cool-down rule :func:`decide` applies, re-checked when the run is written, against plans
    committed while it planned: the recommendation becomes a ``skipped`` plan with outcome
    ``held_by_cooldown``, which is what the rules would have decided had they seen that plan.
    """
    until = cooldown_until(standing, now, thresholds)
    if until is None or advice.plan is None or advice.plan.status != "recommended":
        return advice
    return dataclasses.replace(
        advice,
        outcome="held_by_cooldown",
        reason=f"{cooldown_reason(standing, until, advice.plan.strategy, concurrent=True)} (was: {advice.reason})",
        plan=dataclasses.replace(advice.plan, status="skipped"),
    )
