"""Advise one group: observed state -> every requested strategy -> metrics -> decision -> advice.

:func:`advise_group` is the one pure function the Spark planner (inside ``applyInPandas``), the
``plan`` CLI, the benchmarks and the simulator call; it only calls the assignors, metrics and the
decision rules of :mod:`rebalance_advisor.domain.decisions`. Its steps: the group as it stands
(:func:`_current`), every requested strategy's owners (:func:`_strategy_owners`), each measured the
same way (:class:`_Candidates`), one :func:`decide` that also tries the registered rescues of
:mod:`rebalance_advisor.domain.rescues` in their order (:func:`_rescues`), the plan to store
(:func:`_chosen_plan`). :func:`plan_group` is the same for a
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
import functools
from collections.abc import Callable
from dataclasses import dataclass
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
from rebalance_advisor.domain.assignors import get_assignor, rate_aware
from rebalance_advisor.domain.assignors._common import SMALL_PARTITIONS
from rebalance_advisor.domain.decisions import (
    Decision,
    GroupState,
    Rescue,
    Thresholds,
    cooldown_reason,
    cooldown_until,
    decide,
    is_flagged,
)
from rebalance_advisor.domain.estimates import RateParameters
from rebalance_advisor.domain.group_spec import (
    GroupSpec,
    parse_group_spec,
    parse_rate_interval,
    parse_recent_moves,
)
from rebalance_advisor.domain.interval_evidence import IntervalObservation
from rebalance_advisor.domain.key_range_advice import (
    KeySharingInputs,
    RangedCandidate,
    current_range_view,
    current_ranges_from_doc,
    range_rows,
    ranged_candidate,
)
from rebalance_advisor.domain.load_model import (
    LoadInputs,
    MemberLoad,
    load_inputs,
    load_summary,
    member_totals,
    summarize,
    usable_capacity,
    with_interval_evidence,
)
from rebalance_advisor.domain.metrics import (
    GroupMetrics,
    compute_metrics,
    lower_bound_max_lag,
    max_lag_and_imbalance,
)
from rebalance_advisor.domain.rescues import RESCUES, Rescuer
from rebalance_advisor.domain.rescues import catch_up_floor as catch_up_floor  # re-exported
from rebalance_advisor.domain.snapshot_model import estimated_capacity_members, own_rate_capacity_members
from rebalance_advisor.domain.timestamps import as_utc
from rebalance_advisor.errors import AdvisorError

NO_MEMBERS = "no members and no registered static members"


def strategy_options(
    strategy: str, thresholds: Thresholds, settle: bool = False, returns: np.ndarray | None = None
) -> dict[str, Any]:
    """Options a strategy gets from the run's thresholds (budget and horizon where they apply);
    ``settle``: rate_aware_sticky stops balancing at the fill level (no capacity is an own-rate guess);
    ``returns``: the (partition, member) pairs that would be moves back (:func:`return_pairs`), which
    rate_aware and rate_aware_sticky avoid (docs/concepts/decision-rules.md, "Hysteresis in the strategies")."""
    if strategy == "lag_aware_sticky":
        return {"move_budget": thresholds.move_budget}
    if strategy == "rate_aware":
        return {"horizon_s": thresholds.horizon_s, "returns": returns}
    if strategy == "rate_aware_sticky":
        return {
            "move_budget": thresholds.move_budget,
            "horizon_s": thresholds.horizon_s,
            "margin": thresholds.capacity_margin_in_force,
            "settle": settle,
            "returns": returns,
        }
    return {}


def candidate_owners(
    spec: GroupSpec, thresholds: Thresholds, settle: bool = False, returns: np.ndarray | None = None
) -> dict[str, np.ndarray]:
    """Every requested strategy's owners array for the spec (the exact assignor calls, but where
    :func:`sole_member_owners` knows the answer)."""
    owners = {}
    for name in thresholds.strategies:
        options = strategy_options(name, thresholds, settle, returns)
        known = sole_member_owners(spec, name, options)
        owners[name] = known if known is not None else get_assignor(name).owners(spec, **options)
    return owners


#: strategies that give a group's only member every partition it subscribes to, whatever the numbers
#: (each deals every partition of a subscribed topic to a subscriber: range, roundrobin, lag_aware;
#: sticky keeps or deals them within one quota of all; lag_aware_sticky starts from sticky and moves
#: between members only)
SOLE_MEMBER_STRATEGIES = frozenset({"range", "roundrobin", "sticky", "lag_aware", "lag_aware_sticky"})
#: strategies that do the same when their placement scores are finite (rate_aware.place's plain path)
SOLE_MEMBER_RATE_STRATEGIES = frozenset({"rate_aware", "rate_aware_sticky"})


def sole_member_owners(spec: GroupSpec, strategy: str, options: dict[str, Any]) -> np.ndarray | None:
    """The owners ``strategy`` gives a group of one member, without calling it (None: call it): every
    assignable partition to that member, the others to nobody. A third of a fleet's groups have one
    member, and seven assignor calls were a third of planning one (bench/pipeline.py);
    tests/unit/test_planning_shortcuts.py plans a corpus both ways."""
    if spec.num_members != 1:
        return None
    if strategy not in SOLE_MEMBER_STRATEGIES:
        if strategy not in SOLE_MEMBER_RATE_STRATEGIES:
            return None
        weights, caps = rate_aware.partition_weights(spec, options.get("horizon_s"))
        if not rate_aware.finite_positive(caps, weights):
            return None  # a score may be infinite: the assignor decides what stays unassigned
    return np.where(spec.assignable, 0, -1).astype(np.int32)


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
    "interval",
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
        "interval": IntervalObservation.from_doc(doc.get("interval")),
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
    if spec.identical_subscriptions and len(owners) <= SMALL_PARTITIONS:  # counted in plain Python
        held = [0] * spec.num_members
        for m in owners.tolist():
            if m >= 0:
                held[m] += 1
        return held.count(0) if max(held, default=0) >= 2 else 0
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
    """Partitions ``owners`` hands back to a member they left within ``window_s`` before ``now``;
    not one that has no valid owner now (its owner left the group): hysteresis never holds an orphan."""
    pairs = return_pairs(spec, recent, now, window_s)
    if not len(pairs):
        return 0
    back = owners[pairs[:, 0]] == pairs[:, 1]
    return len(np.unique(pairs[back, 0]))


def return_pairs(
    spec: GroupSpec, recent: tuple[RecentMove, ...], now: datetime, window_s: float
) -> np.ndarray:
    """(partition, member) index pairs [n, 2]: a partition and a member it left within ``window_s``
    before ``now`` and that does not hold it now; giving it back would be a move back. None for a
    partition with no valid owner now (its owner left): it must go somewhere, and is never held."""
    if not recent or window_s <= 0:
        return np.zeros((0, 2), dtype=np.int64)
    index = {m: i for i, m in enumerate(spec.member_ids)}
    topic_pos = {t: i for i, t in enumerate(spec.topics)}
    found: set[tuple[int, int]] = set()
    for move in recent:
        age = (as_utc(now) - as_utc(move.at)).total_seconds()
        left = index.get(move.from_member)
        if age > window_s or left is None or move.topic not in topic_pos:
            continue
        lo, hi = spec.topic_start[topic_pos[move.topic]], spec.topic_start[topic_pos[move.topic] + 1]
        k = lo + int(np.searchsorted(spec.partition[lo:hi], move.partition))
        if k < hi and spec.partition[k] == move.partition and spec.owner[k] != left and spec.owner_valid[k]:
            found.add((k, left))
    return np.array(sorted(found), dtype=np.int64).reshape(-1, 2)


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
        partitions=len(spec.owner),
    )
    return state, members


def advise_group(observation: GroupObservation, thresholds: Thresholds, now: datetime) -> GroupAdvice:
    """One group's outcome, numbers and (when a plan is stored) the chosen assignment: the group as it
    stands, every requested strategy's plan measured, one decision (rescues included), the plan."""
    spec = observation.spec
    if spec is None:
        outcome = "broker_assigned" if observation.broker_assigned else "no_members"
        return GroupAdvice(
            observation.group_id, outcome, observation.note or NO_MEMBERS, observation.total_lag
        )
    thresholds = thresholds.for_rate_interval(observation.rate_interval_s)  # the auto margin, resolved
    try:
        current = _current(observation, thresholds)
        owners, ranged = _strategy_owners(current, observation, thresholds, now)
    except AdvisorError as error:
        return GroupAdvice(observation.group_id, "error", f"invalid group spec: {error}", int(spec.lag.sum()))
    measured = _Candidates(current, ranged, observation, thresholds, now)
    for name, o in owners.items():
        measured.add(name, o)
    rescues = _rescues(current, measured, observation.estimated_capacity, thresholds)
    decision = decide(
        current.state, measured.plans, thresholds, forced_handovers=current.forced,
        standing=observation.standing, now=now, rescues=rescues,
    )  # fmt: skip
    plan, reason = _chosen_plan(decision, measured, observation.weight, thresholds)
    return GroupAdvice(
        group_id=observation.group_id,
        outcome=decision.outcome,
        reason=reason,
        total_lag=int(spec.lag.sum()),
        current=current.metrics,
        unowned_lag=current.unowned_lag,
        current_load=current.state.load,
        current_members=current.members,
        candidates=tuple(measured.plans),
        best=decision.best,
        plan=plan,
        unknown_capacities=sum(m.capacity is None for m in spec.members),
    )


@dataclass(frozen=True)
class _Current:
    """The group as it stands: its spec and load inputs, and the current assignment measured in the
    view the rules judge it in (``view``: the published key ranges' view when one is in force,
    domain/key_range_advice.py; else the spec itself)."""

    spec: GroupSpec
    inputs: LoadInputs
    bound: int  # lower_bound_max_lag of the spec
    view: GroupSpec
    state: GroupState
    members: MemberLoad
    metrics: GroupMetrics
    unowned_lag: int
    #: the spec the strategies plan on: ``spec`` with the last interval's evidence taken in
    planning: GroupSpec

    @property
    def forced(self) -> int:
        """Handovers no plan can avoid: assignable partitions no valid member owns."""
        return int(np.count_nonzero(self.view.assignable & ~self.view.owner_valid))


def _current(observation: GroupObservation, thresholds: Thresholds) -> _Current:
    spec = observation.spec
    assert spec is not None
    receivers = observation.estimated_capacity & recent_receivers(observation)
    raised = optimistic_estimates(spec, load_inputs(spec), thresholds, receivers)
    estimated = no_faster_than_measured(
        spec, raised, observation.own_rate_capacity, observation.estimated_capacity
    )
    # the last interval's evidence last: what the member did beats what it is estimated to do
    inputs = with_interval_evidence(
        spec, estimated, observation.interval, thresholds.interval_departure, thresholds.growth_floor_s
    )
    bound = lower_bound_max_lag(spec)
    view = spec
    if observation.current_ranges:
        sharing = observation.key_sharing
        samples = sharing.samples if sharing is not None else None
        view = current_range_view(spec, observation.current_ranges, samples) or spec
    state, members = group_state(view, inputs if view is spec else load_inputs(view), thresholds)
    metrics = _rounded(
        compute_metrics(view, view.owner, bound if view is spec else lower_bound_max_lag(view))
    )
    unowned_lag = int(view.lag[view.owner < 0].sum())
    planning = spec if inputs is raised else evidence_spec(spec, inputs)
    return _Current(spec, inputs, bound, view, state, members, metrics, unowned_lag, planning)


def evidence_spec(spec: GroupSpec, inputs: LoadInputs) -> GroupSpec:
    """``spec`` with the rates and capacities of ``inputs``: what the strategies plan on once the
    last interval's evidence changed them (the assignors read rates and capacities from the spec)."""
    caps = inputs.capacity
    members = spec.members
    if caps is not None:
        members = tuple(dataclasses.replace(m, capacity=float(c)) for m, c in zip(members, caps, strict=True))
    return dataclasses.replace(spec, members=members, produce_rate=inputs.rate)


def _strategy_owners(
    current: _Current, observation: GroupObservation, thresholds: Thresholds, now: datetime
) -> tuple[dict[str, np.ndarray], RangedCandidate | None]:
    """Every requested strategy's owners, for a flagged group (idle and balanced groups need none:
    skipping them is most of a quiet cluster's work); key_range with the run's key samples."""
    if not is_flagged(current.state, thresholds):
        return {}, None
    returns = return_pairs(current.spec, observation.recent_moves, now, thresholds.hysteresis_window_s)
    owners = candidate_owners(current.planning, thresholds, not observation.own_rate_capacity, returns)
    sharing = observation.key_sharing
    if "key_range" not in owners or sharing is None:
        return owners, None
    ranged = ranged_candidate(current.spec, thresholds, sharing, current.inputs, observation.current_ranges)
    owners["key_range"] = ranged.plan.owners
    return owners, ranged


class _Candidates:
    """Every plan measured the same way, a strategy's or a rescue's: its metrics, load and moves.
    Strategies often agree (range, sticky and the current owners); the numbers depend on the owners
    alone, so equal owners are measured once. A ranged key_range plan is measured in its range view.
    A plan is judged on the capacities of :func:`untested_capacities` and
    :func:`no_gain_between_peers`: no estimate relied on for a partition no measured member can
    hold, and no gain counted from putting a partition no member can hold, or one alone, on a peer
    measured higher."""

    def __init__(
        self,
        current: _Current,
        ranged: RangedCandidate | None,
        observation: GroupObservation,
        thresholds: Thresholds,
        now: datetime,
    ) -> None:
        self.current, self.ranged = current, ranged
        self.recent_moves, self.thresholds, self.now = observation.recent_moves, thresholds, now
        self.estimated = observation.estimated_capacity
        self.owners: dict[str, np.ndarray] = {}
        #: each plan's full metrics, computed when asked for (only the chosen plan's are stored)
        self.metrics: dict[str, Callable[[], GroupMetrics]] = {}
        self.plans: list[CandidatePlan] = []
        self._seen: dict[bytes, tuple[Callable[[], GroupMetrics], CandidatePlan]] = _measured_already(current)

    def is_ranged(self, name: str) -> bool:
        return name == "key_range" and self.ranged is not None and bool(self.ranged.plan.ranges)

    def add(self, name: str, owners: np.ndarray) -> CandidatePlan:
        """Measure strategy ``name``'s ``owners``; the candidate is also kept in :attr:`plans`."""
        self.owners[name] = owners
        key: bytes | None = _owners_key(owners)
        if self.is_ranged(name):
            key = None  # measured in its range view: never shared with whole-partition plans
        if key is not None and key in self._seen:
            metrics, same = self._seen[key]
            plan = dataclasses.replace(same, strategy=name)
        else:
            metrics, plan = self._measure(name, owners)
            if key is not None:
                self._seen[key] = (metrics, plan)
        self.metrics[name] = metrics
        self.plans.append(plan)
        return plan

    def _measure(self, name: str, owners: np.ndarray) -> tuple[Callable[[], GroupMetrics], CandidatePlan]:
        s, so, inputs, bound = self.current.spec, owners, self.current.inputs, self.current.bound
        if self.is_ranged(name):
            assert self.ranged is not None
            s, so = self.ranged.view, self.ranged.view_owners
            inputs, bound = load_inputs(s), lower_bound_max_lag(s)
        t = self.thresholds
        if s is self.current.spec:
            inputs = untested_capacities(s, so, inputs, self.estimated, t.capacity_margin_in_force)
            inputs = no_gain_between_peers(s, so, inputs, t.capacity_margin_in_force)
        handovers = int(np.count_nonzero((so >= 0) & (so != s.owner)))
        max_lag, imbalance, metrics = candidate_numbers(s, so, bound, handovers)
        load = load_summary(s, so, inputs, t.horizon_s, t.handover_cost_s, t.capacity_margin_in_force)
        back = moves_back(s, so, self.recent_moves, self.now, t.hysteresis_window_s)
        return metrics, CandidatePlan(name, max_lag, handovers, imbalance, load, back, empty_members(s, so))


def candidate_numbers(
    spec: GroupSpec, owners: np.ndarray, bound: int, handovers: int
) -> tuple[int, float, Callable[[], GroupMetrics]]:
    """A candidate's max member lag and imbalance (as :func:`_rounded` stores them), and its full
    metrics when asked for: the rules compare only those two, and only the chosen plan's metrics are
    stored, so the rest (count spreads, lag cv, gap) is computed once per group, not per candidate
    (tests/unit/test_planning_shortcuts.py plans a corpus both ways)."""
    max_lag, imbalance = max_lag_and_imbalance(spec, owners)
    full = functools.partial(_candidate_metrics, spec, owners, bound, handovers)
    return max_lag, round(float(imbalance), 6), functools.cache(full)


def _candidate_metrics(spec: GroupSpec, owners: np.ndarray, bound: int, handovers: int) -> GroupMetrics:
    """Every metric of a candidate plan, rounded as stored."""
    return _rounded(compute_metrics(spec, owners, bound, moved=handovers))


def _owners_key(owners: np.ndarray) -> bytes:
    """Equal owners, equal key (whatever their integer type): equal owners are measured once."""
    return owners.astype(np.int64, copy=False).tobytes()


def _measured_already(current: _Current) -> dict[bytes, tuple[Callable[[], GroupMetrics], CandidatePlan]]:
    """The current owners measured as a candidate (``_Candidates._measure`` of them), from the numbers
    :func:`_current` already has (none while key ranges are in force: it measured their view): a
    plan that keeps every owner moves nothing, so its handover pause adds nothing, it hands nothing
    back and leaves the same members empty; its metrics are the current ones (``moves`` 0 either
    way) and its load the current state's. Strategies often keep the current owners (range of a
    range-assigned group, sticky of a balanced one): measuring them again was a third of a small
    group's measuring (bench/pipeline.py)."""
    if current.view is not current.spec:
        return {}
    m, state = current.metrics, current.state
    plan = CandidatePlan("", m.max_member_lag, 0, m.imbalance, state.load, 0, state.empty_members)
    return {_owners_key(current.spec.owner): (lambda: m, plan)}


def _rescues(
    current: _Current, measured: _Candidates, estimated: frozenset[str], thresholds: Thresholds
) -> tuple[Rescue, ...]:
    """The registered rescues (domain/rescues.py, in its order) for this group: each makes its plan only
    when :func:`decide` tries it, measured like a strategy's. None while key ranges are in force: they
    plan whole partitions."""
    if current.view is not current.spec:
        return ()
    args = (current.spec, current.inputs, thresholds)

    def attempt(rescuer: Rescuer) -> tuple[CandidatePlan, str] | None:
        made = rescuer.plan(*args, estimated)
        return None if made is None else (measured.add(rescuer.name, made[0]), made[1])

    return tuple(
        Rescue(r.name, functools.partial(attempt, r), r.trial, functools.partial(r.explain, *args))
        for r in RESCUES
    )


def _chosen_plan(
    decision: Decision, measured: _Candidates, weight: str, thresholds: Thresholds
) -> tuple[ChosenPlan | None, str]:
    """The plan to store (None when the outcome stores none) and the outcome's reason (a ranged plan
    adds its hot keys)."""
    if decision.chosen is None or decision.plan_status is None:
        return None, decision.reason
    name = decision.chosen.strategy
    owners = measured.owners[name]
    spec = measured.current.spec
    member_ids, keys, lags = spec.member_ids, spec.partition_keys, spec.lag.tolist()
    plan = ChosenPlan(
        strategy=name,
        status=decision.plan_status,
        weight=weight,
        metrics=measured.metrics[name](),
        equivalent_strategies=tuple(
            sorted(
                other for other, o in measured.owners.items() if other != name and np.array_equal(o, owners)
            )
        ),
        assignments=tuple(
            (member_ids[m], keys[k][0], keys[k][1], lags[k]) for k, m in enumerate(owners.tolist()) if m >= 0
        ),
        members=summarize(spec, owners, measured.current.inputs, thresholds.horizon_s)[1],
    )
    ranged = measured.ranged
    if not measured.is_ranged(name) or ranged is None:
        return plan, decision.reason
    # whole partitions as above, plus one row per key range; hot keys in the reason
    view_members = summarize(ranged.view, ranged.view_owners, load_inputs(ranged.view), thresholds.horizon_s)[
        1
    ]
    plan = dataclasses.replace(plan, key_ranges=range_rows(ranged), members=view_members)
    return plan, f"{decision.reason}; key_range: {ranged.plan.reason}"


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
    could be measured (bench/closed_loop.py, the advisor loop's run: the hot partition went back and
    forth).
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


def no_faster_than_measured(
    spec: GroupSpec, inputs: LoadInputs, own_rate: frozenset[str], estimated: frozenset[str]
) -> LoadInputs:
    """Each ``own_rate`` member's capacity at most the fastest measured member's, unless it already
    consumes more than that (its estimate over ``RateParameters.unmeasured_capacity_factor``).

    An own-rate estimate is a factor over what the member consumes, so it follows the member's load
    up: the member always looks 1 / factor utilised, receives partitions, consumes more, looks as
    utilised again, until it passes its true capacity, slowly, and stays overloaded for the minutes
    its backlog takes to measure it: 83-91 % of the overloaded time after the first minutes in
    bench/drain.py medium-50-cap2x (capacities x2 apart; docs/benchmarks/drain.md). A measured peer
    bounds the guess: nothing says an unmeasured member is faster than the fastest one seen
    saturated until it consumes more than that.
    """
    caps, given = inputs.capacity, spec.capacity
    if caps is None or given is None or not own_rate:
        return inputs
    ids = spec.member_ids
    measured = np.fromiter((m not in estimated for m in ids), bool, len(ids)) & ~np.isnan(given)
    own = np.fromiter((m in own_rate for m in ids), bool, len(ids))
    if not measured.any() or not own.any():
        return inputs
    fastest = float(caps[measured].max())
    consumes = given / RateParameters.unmeasured_capacity_factor
    bounded = own & (consumes < fastest) & (caps > fastest)
    if not bounded.any():
        return inputs
    capped = np.where(bounded, fastest, caps)
    capped.setflags(write=False)
    return dataclasses.replace(inputs, capacity=capped)


def beyond_every_subscriber(
    spec: GroupSpec, rate: np.ndarray, caps: np.ndarray, margin: float, among: np.ndarray | None = None
) -> tuple[np.ndarray, np.ndarray]:
    """Per partition, the fastest capacity among the members (``among``: a [M] mask, None: all)
    subscribed to its topic (-inf: none), and whether its rate is at or above that member's usable
    capacity: no such member can hold it, even alone."""
    subscribed = spec.class_topics[spec.member_class]  # [M, T]
    if among is not None:
        subscribed = subscribed & among[:, None]
    fastest = np.max(np.where(subscribed, caps[:, None], -np.inf), axis=0)[spec.topic_index]  # [P]
    return fastest, np.isfinite(fastest) & (rate >= usable_capacity(fastest, margin))


def untested_capacities(
    spec: GroupSpec, owners: np.ndarray, inputs: LoadInputs, estimated: frozenset[str], margin: float
) -> LoadInputs:
    """The capacities a plan is judged on: an estimated member that the plan hands a partition no
    measured member can hold (its rate at or above every measured subscriber's usable capacity) is
    credited with no more than the fastest of them, so the plan does not count on it holding it.

    Such a partition overloads whoever holds it unless an estimate is right, and an estimate (the
    group median, or 1.2 x what the member consumes) says nothing about that: full repacks
    "relieved" a partition stepped above every member's capacity by placing it on an estimated
    member, which saturated, was measured, and the next repack moved it on (bench/drain.py
    large-50x500-steps, docs/benchmarks/drain.md). Testing an estimate is the capacity probe's one
    handover (domain/rescues.py). A partition that stays with its owner is judged as before, and
    nothing changes while no subscriber of its topic is measured.
    """
    caps = inputs.capacity
    if caps is None or not estimated or not spec.num_partitions:
        return inputs
    est = np.fromiter((m in estimated for m in spec.member_ids), bool, spec.num_members)
    received = (owners >= 0) & (owners != spec.owner)
    received[received] = est[owners[received]]
    if est.all() or not received.any():
        return inputs
    fastest, beyond = beyond_every_subscriber(spec, inputs.rate, caps, margin, ~est)  # measured ones
    unholdable = received & beyond
    if not unholdable.any():
        return inputs
    capped = caps.copy()
    np.minimum.at(capped, owners[unholdable], fastest[unholdable])
    capped.setflags(write=False)
    return dataclasses.replace(inputs, capacity=capped)


def no_gain_between_peers(
    spec: GroupSpec, owners: np.ndarray, inputs: LoadInputs, margin: float
) -> LoadInputs:
    """The capacities a plan is judged on, after :func:`untested_capacities`: a member that the
    plan hands a partition from a peer it is alike to (its capacity under
    ``RateParameters.capacity_noise_ratio`` times the peer's) is credited with no more than that
    peer's capacity when the partition is one no member can hold (its rate at or above every
    subscriber's usable capacity) or the only one the plan leaves it.

    Between alike members the one with the higher capacity is the one whose measurement came out
    higher, by noise (a consumer's commit interval shifts an interval's consume rate by up to 8 %
    at 5-s commits and 60-s snapshots), and a partition that fills a member alone goes wherever that
    noise points. Full repacks chased it: 470-490 handovers each to put one such partition on the
    member measured highest, which saturated, measured lower, and the next repack moved it on
    (bench/drain.py large-50x500-steps --commit-interval 5, docs/benchmarks/drain.md). A member
    faster than that is credited in full: there the gain is real. One whose capacity is a guess is not
    (the group median, or 1.2 x what it consumes): a guess is no reason to move a partition that
    fills a member; testing it is the capacity probe's one handover (domain/rescues.py).
    """
    caps = inputs.capacity
    if caps is None or not spec.num_partitions:
        return inputs
    received = (owners >= 0) & (spec.owner >= 0) & (owners != spec.owner)
    if not received.any():
        return inputs
    held = np.bincount(owners[owners >= 0], minlength=spec.num_members)
    noisy = received & (held[np.maximum(owners, 0)] == 1)  # the only partition the plan leaves it
    if (inputs.rate[received] >= usable_capacity(caps, margin).max()).any():  # else none is beyond all
        noisy |= received & beyond_every_subscriber(spec, inputs.rate, caps, margin)[1]
    giver, taker = spec.owner[noisy], owners[noisy]
    alike = caps[taker] < RateParameters.capacity_noise_ratio * caps[giver]
    if not alike.any():
        return inputs
    capped = caps.copy()
    np.minimum.at(capped, taker[alike], caps[giver[alike]])
    capped.setflags(write=False)
    return dataclasses.replace(inputs, capacity=capped)


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
