"""What-if simulator: one consumer group over time, as a fluid model. Pure (no I/O, no clock).

Why: the advisor's rules are judged by what they do to a group over hours (drift, a hot
partition, a member leaving), not by one plan at one instant. This engine replays a typed
:class:`Scenario` under a pluggable planner and reports the lag, time lag, overload and moves.

Model, per step of ``step_s`` seconds (default 5 s):

- Every partition p has a true produce rate r_p(t) = base_p x drift_p(t) x swing(t) x jumps_p(t):
  base rates follow a Zipf law per topic (rank k gets 1/k^s of the topic's total, ranks shuffled
  by the seed), drift is a mean-reverting random walk of log r_p (Ornstein-Uhlenbeck, ``drift_sigma``
  per sqrt(hour), reverting over ``drift_reversion_hours``), the daily swing multiplies every rate
  by 1 + a sin(2 pi (t/1 d + phase)), and rate-jump events multiply chosen partitions by k.
- Each present member m has a capacity mu_m (messages/s). It shares mu_m dt max-min fairly among
  the partitions it owns that have messages to read (backlog + what arrives in the step), as
  librdkafka fetches round-robin across partitions with data: a partition that needs less than
  the fair level is served in full, the rest split what is left equally.
- A partition that changes owner pauses for ``handover_s`` (the new owner fetches its committed
  offset and warms up); unowned partitions (a member left and nobody took them yet) are not read.
- Conservation: starting lag + produced = processed + lag, exactly per step (a partition is never
  served more than it has); the tests check it on random scenarios.

Every ``replan_interval_s`` the planner gets an :class:`Observation`: what a snapshot would show
(integer lags, owners, produce and consume rates from log-end and committed offsets between
snapshots, smoothed as a snapshot smooths them (``lag_rules.smooth_rate``, EWMA with time constant
``rate_time_constant_s``), capacities as a snapshot estimates them — the same functions of
``lag_rules``: measured as a member's consume rate over a snapshot interval in which it held the
same partitions at both ends, with backlog (lag above ``busy_backlog_s`` of the partition's
produce rate) on at least one of them at both ends (``busy_capacity_sample``), smoothed, never
below what it consumed and carried up to ``capacity_max_age_s`` (``next_capacity``); with
``capacity_reports``, a member not measured so that processed records over the interval reports its
capacity, as the client helper does (x 1 +- ``capacity_report_error``), smoothed the same way; unmeasured
members get their ``configured_capacity`` when the scenario declares one, else the group median, or
1.2 x their own consume rate when that is above it (``fill_capacities``) — or the true ones when
``capacities_known``, and the recent moves). The
planner gets them as production's planner does (``advise_group`` with the members whose capacity is
an estimate, ``snapshot_model.estimated_capacity_members``). Only the oracle also gets the
:class:`Truth` (true rates and capacities). Its answer becomes the new ownership at once
(auto-approve, publish static assignments).

Summary measures (see :class:`Summary`): a step is *overloaded* when some present member's true
inflow (sum of its partitions' rates) is >= its capacity, or a partition with inflow has no owner;
*time lag* of a partition is the age of its oldest unread message (exact in the fluid model: the
time at which the cumulative produced count reached the cumulative processed count); the p99 is
over every (sample, partition) pair, sampled every ``sample_s`` (30 s); a *flap* is a move of a partition to a member that lost that
same partition through a move less than ``flap_window_s`` (30 min) earlier.
"""

from __future__ import annotations

import dataclasses
import math
from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any, Literal, Protocol

import numpy as np
from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from rebalance_advisor.domain.advice import GroupObservation, RecentMove, StandingPlan
from rebalance_advisor.domain.assignors import ASSIGNORS, get_assignor
from rebalance_advisor.domain.assignors.rate_aware_sticky import fill_level, pool_repack
from rebalance_advisor.domain.decisions import Thresholds
from rebalance_advisor.domain.group_planning import advise_group
from rebalance_advisor.domain.group_spec import GroupSpec, Member
from rebalance_advisor.domain.lag_rules import (
    RateParameters,
    busy_capacity_sample,
    capacity_sample,
    fill_capacities,
    next_capacity,
    rate_interval_problem,
    smooth_rate,
    smoothing_weight,
)
from rebalance_advisor.domain.snapshot_model import estimated_capacity_members, own_rate_capacity_members
from rebalance_advisor.errors import AdvisorError

#: planners the simulator knows besides the plain assignors (see :func:`make_planner`); a name here
#: wins over an assignor of the same name (``rate_aware`` is the advisor's rule, not the bare assignor).
RULE_PLANNERS: tuple[str, ...] = ("current_rule", "rate_aware", "oracle")
#: every strategy name a scenario or ``simulate --strategy`` accepts.
SIM_STRATEGIES: tuple[str, ...] = (*dict.fromkeys((*ASSIGNORS, *RULE_PLANNERS)),)
#: the advisor's rule before the load model: lag-only candidates, a 30-minute cool-down, no hysteresis.
LAG_STRATEGIES: tuple[str, ...] = ("range", "roundrobin", "sticky", "lag_aware", "lag_aware_sticky")
CURRENT_RULE = Thresholds(cooldown_minutes=30.0, strategies=LAG_STRATEGIES, hysteresis_window_s=0.0)
#: the rate-aware advisor: its strategies under the rule in time (other knobs at their defaults).
RATE_AWARE_STRATEGIES: tuple[str, ...] = ("rate_aware", "rate_aware_sticky")
#: a partition moved back to a member that lost it within this window counts as a flap.
FLAP_WINDOW_S = 1800.0
#: the oracle balances rate + backlog / horizon (seconds) against the true capacity.
ORACLE_HORIZON_S = 300.0
#: arbitrary wall-clock origin for planners that take datetimes (the current rule's cool-down).
EPOCH = datetime(2025, 1, 1, tzinfo=UTC)
#: how capacities are measured and filled: the snapshot's own parameters (lag_rules)
RATE_PARAMETERS = RateParameters()
#: most steps one run may take (memory: the history is steps x partitions floats).
MAX_STEPS = 200_000


# ---- the scenario (typed input; JSON-loadable) ------------------------------------------------


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)


class TopicScenario(_Model):
    """One topic: its partitions' produce rates (explicit or Zipf over a total) and starting lags."""

    name: str = Field(min_length=1)
    partitions: int = Field(ge=1, le=1_000_000)
    total_rate: float = Field(0.0, ge=0, description="messages/s over the whole topic, before the swing")
    zipf: float = Field(0.0, ge=0, le=10, description="Zipf exponent of the rates; 0 = equal rates")
    rates: tuple[float, ...] | None = Field(None, description="explicit per-partition rates (msg/s)")
    lags: tuple[float, ...] | None = Field(None, description="explicit per-partition starting lags")
    start_lag: float = Field(0.0, ge=0, description="starting lag of every partition (without lags)")

    @model_validator(mode="after")
    def _lengths(self) -> TopicScenario:
        for key in ("rates", "lags"):
            values = getattr(self, key)
            if values is None:
                continue
            if len(values) != self.partitions:
                raise ValueError(f"{key} has {len(values)} values for {self.partitions} partitions")
            bad = next((i for i, v in enumerate(values) if not v >= 0), None)
            if bad is not None:
                raise ValueError(f"{key}[{bad}] must be >= 0, got {values[bad]}")
        return self


class MemberScenario(_Model):
    """One consumer: its capacity (messages/s it can process) and subscription (None = all topics)."""

    id: str = Field(min_length=1)
    capacity: float = Field(gt=0)
    topics: tuple[str, ...] | None = None
    configured_capacity: float | None = Field(
        None,
        gt=0,
        description="what the operator declared (--member-capacity MEMBER@GROUP=N): the planner's "
        "capacity for the member while it is not measured (capacity stays the truth)",
    )


class EventScenario(_Model):
    """Something that happens at ``at_s``: a rate jump x factor, or a member leaving / (re)joining.

    A member whose first event is ``member_join`` is absent until then.
    """

    at_s: float = Field(ge=0)
    kind: Literal["rate_jump", "member_leave", "member_join"]
    factor: float | None = Field(None, gt=0)
    topic: str | None = None
    partition: int | None = Field(None, ge=0)
    member: str | None = None

    @model_validator(mode="after")
    def _fields(self) -> EventScenario:
        if self.kind == "rate_jump" and self.factor is None:
            raise ValueError("a rate_jump needs factor")
        if self.kind != "rate_jump" and self.member is None:
            raise ValueError(f"a {self.kind} needs member")
        if self.partition is not None and self.topic is None:
            raise ValueError("partition needs topic")
        return self


class Scenario(_Model):
    """A group, its traffic and the planner under test. Times in seconds unless named otherwise."""

    name: str = "scenario"
    topics: tuple[TopicScenario, ...] = Field(min_length=1)
    members: tuple[MemberScenario, ...] = Field(min_length=1)
    drift_sigma: float = Field(0.0, ge=0, le=10, description="log-rate random walk per sqrt(hour)")
    drift_reversion_hours: float = Field(2.0, gt=0)
    daily_swing: float = Field(0.0, ge=0, lt=1, description="amplitude a of 1 + a sin(...)")
    swing_phase_hours: float = 0.0
    events: tuple[EventScenario, ...] = ()
    replan_interval_s: float = Field(60.0, gt=0)
    handover_s: float = Field(5.0, ge=0)
    step_s: float = Field(5.0, gt=0)
    hours: float = Field(6.0, gt=0)
    strategy: str = "current_rule"
    initial_strategy: str = "range"
    capacities_known: bool = False
    capacity_reports: bool = Field(
        False,
        description="members run through the client helper, which reports its records per busy "
        "second in its commits' marks (rebalance_advisor_client.capacity_report); the planner takes "
        "them as a snapshot does (lag_rules.reported_capacities)",
    )
    capacity_report_error: float = Field(
        0.0, ge=0, lt=1, description="each report is the true capacity x (1 + e), e uniform in +-this"
    )
    rate_time_constant_s: float = Field(
        RATE_PARAMETERS.time_constant_s,
        gt=0,
        description="EWMA time constant of the observed rates (lag_rules.RateParameters.time_constant_s)",
    )
    backlog_age_s: float = Field(0.0, ge=0, description="starting lag was produced over this long before 0")
    sample_s: float = Field(30.0, gt=0, description="time lag is sampled this often (a multiple of step_s)")
    seed: int = 0

    @model_validator(mode="after")
    def _consistent(self) -> Scenario:
        names = [t.name for t in self.topics]
        if len(set(names)) != len(names):
            raise ValueError("topics: topic names must be unique")
        ids = [m.id for m in self.members]
        if len(set(ids)) != len(ids):
            raise ValueError("members: member ids must be unique")
        for i, m in enumerate(self.members):
            for t in m.topics or ():
                if t not in names:
                    raise ValueError(f"members[{i}].topics: {m.id} subscribes to unknown topic {t!r}")
            if m.topics is not None and not m.topics:
                raise ValueError(f"members[{i}].topics: {m.id} subscribes to no topics")
        sizes = {t.name: t.partitions for t in self.topics}
        for i, e in enumerate(self.events):
            if e.member is not None and e.member not in ids:
                raise ValueError(f"events[{i}].member: unknown member {e.member!r}")
            if e.topic is not None and e.topic not in sizes:
                raise ValueError(f"events[{i}].topic: unknown topic {e.topic!r}")
            if e.partition is not None and e.partition >= sizes[e.topic or ""]:
                raise ValueError(f"events[{i}].partition: topic {e.topic} has no partition {e.partition}")
        if self.strategy not in SIM_STRATEGIES:
            raise ValueError(f"strategy: unknown {self.strategy!r} (known: {', '.join(SIM_STRATEGIES)})")
        if self.initial_strategy not in ASSIGNORS:
            raise ValueError(
                f"initial_strategy: unknown {self.initial_strategy!r} (known: {', '.join(ASSIGNORS)})"
            )
        if self.replan_interval_s < self.step_s:
            raise ValueError("replan_interval_s: must be >= step_s")
        if self.hours * 3600 / self.step_s > MAX_STEPS:
            raise ValueError(f"hours: more than {MAX_STEPS} steps of step_s; use a longer step_s")
        return self


def _location(loc: tuple[Any, ...]) -> str:
    out = ""
    for part in loc:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out


def parse_scenario(data: Any, **overrides: Any) -> Scenario:
    """Validate a scenario (a JSON object); the first problem raises AdvisorError naming its field."""
    if not isinstance(data, dict):
        raise AdvisorError("scenario must be a JSON object with topics and members")
    data = {**data, **{k: v for k, v in overrides.items() if v is not None}}
    try:
        return Scenario.model_validate(data)
    except ValidationError as error:
        first = error.errors()[0]
        where = _location(tuple(first.get("loc", ())))
        message = str(first.get("msg", "invalid")).removeprefix("Value error, ")
        if not where:  # a check across fields: its message starts with the field it names
            raise AdvisorError(f"scenario field {message}") from None
        value = first.get("input")
        shown = f" (got {value!r})" if isinstance(value, int | float | str) else ""
        raise AdvisorError(f"scenario field {where}: {message}{shown}") from None


# ---- what a planner sees --------------------------------------------------------------------


@dataclass(frozen=True)
class Observation:
    """What the advisor would read from its snapshots at ``time_s`` (no true rates or capacities).

    Members are the present ones, in scenario order; ``owner`` indexes into them (-1 = nobody).
    ``produce_rate``/``consume_rate`` are NaN until two snapshots exist, ``capacity`` NaN when
    unknown; ``capacity_source`` says where each capacity came from.
    """

    time_s: float
    member_ids: tuple[str, ...]
    member_topics: tuple[tuple[str, ...], ...]
    partition_topic: tuple[str, ...]
    partition_number: np.ndarray
    lag: np.ndarray  # int64 [P]
    owner: np.ndarray  # int32 [P]
    produce_rate: np.ndarray  # float [P], NaN unknown
    consume_rate: np.ndarray  # float [P], NaN unknown
    capacity: np.ndarray  # float [M], NaN unknown (no member measured yet: source "equal")
    capacity_source: tuple[str, ...]
    recent_moves: tuple[RecentMove, ...]  # moves from an owner within the flap window, oldest first
    snapshots_seen: int
    #: seconds since the previous snapshot, when the rates come from that interval (None: no rates)
    rate_interval_s: float | None = None


@dataclass(frozen=True)
class Truth:
    """What only the oracle may read: the true rates now and the present members' capacities."""

    produce_rate: np.ndarray  # [P]
    capacity: np.ndarray  # [M], aligned with Observation.member_ids


class Planner(Protocol):
    """Re-plans a group from an observation; returns new owners (index into member_ids) or None."""

    name: str

    def plan(self, obs: Observation, truth: Truth) -> np.ndarray | None: ...


# ---- planners -------------------------------------------------------------------------------


def observed_spec(obs: Observation, group_id: str = "sim", *, with_load: bool = True) -> GroupSpec:
    """The observation as the GroupSpec an assignor takes: lags, owners as owned and, with
    ``with_load``, the estimated produce rates and capacities (unknown ones left for the load
    model to fill)."""
    owned: list[list[tuple[str, int]]] = [[] for _ in obs.member_ids]
    numbers = obs.partition_number.tolist()
    for k, m in enumerate(obs.owner.tolist()):
        if m >= 0:
            owned[m].append((obs.partition_topic[k], numbers[k]))
    capacity = obs.capacity.tolist() if with_load else [math.nan] * len(obs.member_ids)
    members = [
        Member(
            member_id=mid,
            topics=topics,
            owned=tuple(owned[i]),
            generation=1,
            capacity=None if math.isnan(capacity[i]) else capacity[i],
        )
        for i, (mid, topics) in enumerate(zip(obs.member_ids, obs.member_topics, strict=True))
    ]
    known_rates = with_load and not np.isnan(obs.produce_rate).all()
    return GroupSpec.build(
        group_id,
        members,
        topic=obs.partition_topic,
        partition=obs.partition_number,
        lag=obs.lag,
        produce_rate=obs.produce_rate if known_rates else None,
    )


def spec_owners_to_obs(spec: GroupSpec, owners: np.ndarray, obs: Observation) -> np.ndarray:
    """Owners indexed by the spec's (Kafka-ordered) members and partitions -> the observation's."""
    index = {mid: i for i, mid in enumerate(obs.member_ids)}
    to_obs = np.array([index[m] for m in spec.member_ids], dtype=np.int32)
    positions = spec.partition_positions(obs.partition_topic, obs.partition_number.tolist(), what="observed")
    spec_owner = owners[positions]
    return np.where(spec_owner >= 0, to_obs[np.maximum(spec_owner, 0)], -1).astype(np.int32)


@dataclass
class AssignorPlanner:
    """A plain assignor run on every re-planning tick (how a Kafka group would use it)."""

    name: str

    def plan(self, obs: Observation, truth: Truth) -> np.ndarray | None:
        if not obs.member_ids:
            return None
        spec = observed_spec(obs)
        return spec_owners_to_obs(spec, get_assignor(self.name).owners(spec), obs)


@dataclass
class AdvisorPlanner:
    """The advisor's one pure function, ``advise_group``, under ``thresholds``.

    A recommended plan is applied at once (auto-approve, publish static); it then is the standing
    plan (for a cool-down, when the thresholds have one). ``with_load`` feeds the estimated rates
    and capacities; without them the rule sees lags only.
    """

    name: str
    thresholds: Thresholds
    with_load: bool = True
    _standing: StandingPlan | None = None

    def plan(self, obs: Observation, truth: Truth) -> np.ndarray | None:
        if not obs.member_ids:
            return None
        spec = observed_spec(obs, with_load=self.with_load)
        observation = GroupObservation(
            spec.group_id,
            spec,
            int(spec.lag.sum()),
            standing=self._standing,
            recent_moves=obs.recent_moves,
            # as the spec document's capacity_sources: the capacity probe and optimistic estimates
            # act on the same members as in production (only when the rule sees the capacities)
            estimated_capacity=estimated_capacity_members(
                zip(obs.member_ids, obs.capacity_source, strict=True)
            )
            if self.with_load
            else frozenset(),
            own_rate_capacity=own_rate_capacity_members(zip(obs.member_ids, obs.capacity_source, strict=True))
            if self.with_load
            else frozenset(),
            rate_interval_s=obs.rate_interval_s,
        )
        now = EPOCH + timedelta(seconds=obs.time_s)
        advice = advise_group(observation, self.thresholds, now)
        if advice.outcome != "recommended" or advice.plan is None:
            return None
        self._standing = StandingPlan((self._standing.plan_id + 1) if self._standing else 1, "published", now)
        return owners_from_rows(advice.plan.assignments, spec, obs)


def owners_from_rows(
    rows: Sequence[tuple[str, str, int, int]], spec: GroupSpec, obs: Observation
) -> np.ndarray:
    """A plan's (member, topic, partition, lag) rows -> owners indexed like the observation."""
    assignment: dict[str, list[tuple[str, int]]] = {m: [] for m in spec.member_ids}
    for member_id, topic, number, _lag in rows:
        assignment[member_id].append((topic, number))
    return spec_owners_to_obs(spec, spec.owners_from_assignment(assignment), obs)


@dataclass
class OraclePlanner:
    """Reference that knows the true rates and capacities: sticky greedy bin packing.

    Weight of a partition w = true rate + lag / horizon; a member's load is the sum over what it
    owns; its fill target is the group's utilisation (sum w / sum capacity) plus half the remaining
    headroom, at most 95 % of its capacity. Nothing moves while every partition has an owner and
    every load stays below the midpoint between the fill target and the capacity (drift between
    two runs must not tip a member over). Otherwise unowned partitions go, heaviest first, to the
    subscribed member with the most room under its target; then each member above its target,
    fullest first, hands partitions to the subscribed member with the most room: the lightest
    partition that alone brings it under its target and fits there, else its lightest partition
    that fits somewhere, else (one level of ejection chain) its lightest partition after the peer
    with most room moved its own lightest partitions to third members, until it is under target
    or nothing fits. A member still above the trigger then (large-500: two hot partitions that
    together exceed a capacity while every peer is too full to take either) is re-packed with its
    8 least-utilised peers (``rate_aware_sticky.pool_repack``: partitions stay while their owner is
    under the fill target, the rest go to the emptiest pool member), kept only if the whole pool
    ends under the trigger.
    """

    horizon_s: float = ORACLE_HORIZON_S
    name: str = "oracle"

    def plan(self, obs: Observation, truth: Truth) -> np.ndarray | None:
        num_members = len(obs.member_ids)
        if not num_members:
            return None
        weight = truth.produce_rate + obs.lag / self.horizon_s
        owner = obs.owner.copy()
        eligible = _eligibility(obs)  # [P, M] bool
        owner[(owner >= 0) & ~eligible[np.arange(len(owner)), np.maximum(owner, 0)]] = -1
        cap = truth.capacity
        held = owner >= 0
        load = np.bincount(owner[held], weights=weight[held], minlength=num_members)
        assignable = eligible.any(axis=1)
        fill = min(0.95, fill_level(weight[assignable], cap, 1.0))
        target = cap * fill
        orphans = np.flatnonzero((owner < 0) & assignable)
        if not (load > cap * (1.0 + fill) / 2).any() and not orphans.size:
            return None
        for k in orphans[np.argsort(-weight[orphans], kind="stable")].tolist():
            m = int(np.argmax(np.where(eligible[k], target - load, -np.inf)))
            owner[k] = m
            load[m] += weight[k]
        for m in np.argsort(-(load / target), kind="stable").tolist():
            if load[m] <= target[m]:
                break
            while load[m] > target[m]:
                mine = np.flatnonzero(owner == m)
                if mine.size <= 1:
                    break
                room = np.where(eligible[mine], target - load, -np.inf)
                room[:, m] = -np.inf
                dest = np.argmax(room, axis=1)
                fits = room[np.arange(mine.size), dest] >= weight[mine]
                if not fits.any():
                    # one level of ejection chain: clear room for m's lightest partition on the
                    # peer with most room by moving that peer's lightest partitions elsewhere
                    k = int(mine[np.argmin(weight[mine])])
                    if not self._make_room(
                        k, int(dest[np.argmin(weight[mine])]), m, owner, load, target, weight, eligible
                    ):
                        break
                    continue
                order = np.argsort(weight[mine], kind="stable")
                order = order[fits[order]]
                enough = order[weight[mine][order] >= load[m] - target[m]]
                pick = int(enough[0]) if enough.size else int(order[0])
                k, to = int(mine[pick]), int(dest[pick])
                owner[k] = to
                load[m] -= weight[k]
                load[to] += weight[k]
        trigger = (1.0 + fill) / 2
        for m in np.argsort(-(load / cap), kind="stable").tolist():
            if load[m] <= cap[m] * trigger:
                break
            pool_repack(owner, load, weight, cap, trigger, m, len(owner), eligible, level=fill)
        return owner

    @staticmethod
    def _make_room(
        k: int,
        to: int,
        source: int,
        owner: np.ndarray,
        load: np.ndarray,
        target: np.ndarray,
        weight: np.ndarray,
        eligible: np.ndarray,
    ) -> bool:
        """Move ``to``'s lightest partitions to third members until ``k`` fits on ``to``; then move ``k``."""
        if load[to] - weight[owner == to].sum() + weight[k] > target[to]:
            return False  # even empty, ``to`` could not take k
        moved: list[tuple[int, int]] = []
        theirs = np.flatnonzero(owner == to)
        for j in theirs[np.argsort(weight[theirs], kind="stable")].tolist():
            if target[to] - load[to] >= weight[k]:
                break
            room = np.where(eligible[j], target - load, -np.inf)
            room[[to, source]] = -np.inf
            dest = int(np.argmax(room))
            if room[dest] < weight[j]:
                continue
            owner[j] = dest
            load[to] -= weight[j]
            load[dest] += weight[j]
            moved.append((j, dest))
        if target[to] - load[to] < weight[k]:
            for j, dest in moved:  # undo: no room was made
                owner[j] = to
                load[to] += weight[j]
                load[dest] -= weight[j]
            return False
        load[owner[k]] -= weight[k]
        owner[k] = to
        load[to] += weight[k]
        return True


def _eligibility(obs: Observation) -> np.ndarray:
    """[P, M] bool: member m subscribes to partition k's topic."""
    topics = sorted(set(obs.partition_topic))
    pos = {t: i for i, t in enumerate(topics)}
    sub = np.zeros((len(obs.member_ids), len(topics)), dtype=bool)
    for m, member_topics in enumerate(obs.member_topics):
        sub[m, [pos[t] for t in member_topics]] = True
    tix = np.fromiter((pos[t] for t in obs.partition_topic), dtype=np.int64, count=len(obs.partition_topic))
    return sub[:, tix].T


def make_planner(name: str, scenario: Scenario) -> Planner:
    """A fresh planner (planners keep state such as the standing plan) for one run."""
    if name == "current_rule":
        return AdvisorPlanner(name, CURRENT_RULE, with_load=False)
    if name == "rate_aware":
        rule = Thresholds(strategies=RATE_AWARE_STRATEGIES, handover_cost_s=scenario.handover_s)
        return AdvisorPlanner(name, rule)
    if name == "oracle":
        return OraclePlanner()
    if name in ASSIGNORS:
        return AssignorPlanner(name)
    raise AdvisorError(f"unknown strategy {name!r} (known: {', '.join(SIM_STRATEGIES)})")


# ---- the fluid engine -----------------------------------------------------------------------


def fair_share(demand: np.ndarray, owner: np.ndarray, budget: np.ndarray) -> np.ndarray:
    """Max-min fair split of each member's ``budget`` over the ``demand`` of the partitions it owns.

    Water filling per member, vectorised over all members: with a member's demands sorted
    ascending d_1 <= ... <= d_n, partition i is served in full iff d_1 + ... + d_i + (n - i) d_i
    fits the budget (a prefix); the others share what is left equally. Never more than demanded.
    """
    alloc = np.zeros_like(demand, dtype=float)
    held = owner >= 0
    total = np.bincount(owner[held], weights=demand[held], minlength=len(budget))
    fits = np.zeros(len(owner), dtype=bool)
    fits[held] = total[owner[held]] <= budget[owner[held]]
    alloc[fits] = demand[fits]  # members that can serve everything: no sort needed
    idx = np.flatnonzero(held & ~fits & (demand > 0))
    if not idx.size:
        return alloc
    own = owner[idx]
    dem = demand[idx]
    order = np.lexsort((dem, own))
    own_s, d_s = own[order], dem[order]
    starts = np.flatnonzero(np.r_[True, own_s[1:] != own_s[:-1]])
    counts = np.diff(np.r_[starts, len(own_s)])
    grp = np.repeat(np.arange(len(starts)), counts)
    pos = np.arange(len(own_s)) - starts[grp]
    within = np.cumsum(d_s) - np.r_[0.0, np.cumsum(d_s)][starts][grp]
    cap_g = budget[own_s[starts]]
    full = within + (counts[grp] - 1 - pos) * d_s <= cap_g[grp]
    served = np.bincount(grp, weights=np.where(full, d_s, 0.0), minlength=len(starts))
    rest = counts - np.bincount(grp, weights=full.astype(float), minlength=len(starts))
    level = np.maximum(cap_g - served, 0.0) / np.maximum(rest, 1)
    alloc[idx[order]] = np.where(full, d_s, np.minimum(level[grp], d_s))
    return alloc


@dataclass(frozen=True)
class Summary:
    """The numbers a run is judged by (module docstring defines them)."""

    strategy: str
    hours: float
    avg_max_member_lag: float
    peak_max_member_lag: float
    p50_time_lag_s: float
    p99_time_lag_s: float
    max_time_lag_s: float
    moves: int
    moves_per_hour: float
    flaps: int
    overloaded_share: float
    #: the same after the first hour (a cold start from no rates and no capacities is in the first)
    overloaded_share_after_1h: float
    #: the first time the group's total lag is at most what steady production leaves
    #: (:func:`steady_lag`: 10 s of the total produce rate); 0 when it starts so; None: never
    time_to_drain_s: float | None
    #: p99 time lag over the samples after the first drain (:func:`steady_lag`; None: never drained):
    #: the steady part, apart from a starting backlog's drain, which no rule can make fast
    #: (bench/drain.py); equal to the all-time p99 when the run starts drained
    p99_time_lag_after_drain_s: float | None
    starting_lag: float
    produced: float
    processed: float
    final_lag: float

    def to_dict(self) -> dict[str, Any]:
        return {k: getattr(self, k) for k in self.__dataclass_fields__}


@dataclass(frozen=True)
class SimulationResult:
    """Per-step series (index i = state at time_s[i], after step i) and the summary."""

    scenario: Scenario
    time_s: np.ndarray
    max_member_lag: np.ndarray
    total_lag: np.ndarray
    overloaded_members: np.ndarray  # int: members with inflow >= capacity (+ 1 when orphans have inflow)
    moves: np.ndarray  # int: moves made at that step's start
    produced: np.ndarray  # messages produced during the step
    processed: np.ndarray  # messages processed during the step
    sample_time_s: np.ndarray  # times of the time-lag samples
    time_lag: np.ndarray  # float32 [samples, P] seconds behind, per partition (empty unless kept)
    final_lag: np.ndarray  # [P]
    partition_names: tuple[str, ...]
    summary: Summary

    def series_dict(self) -> dict[str, Any]:
        """The time series as JSON-able lists (time lag per partition by name)."""
        return {
            "time_s": self.time_s.tolist(),
            "max_member_lag": np.round(self.max_member_lag, 3).tolist(),
            "total_lag": np.round(self.total_lag, 3).tolist(),
            "overloaded_members": self.overloaded_members.tolist(),
            "moves": self.moves.tolist(),
            "sample_time_s": self.sample_time_s.tolist(),
            "time_lag_s": {
                name: np.round(self.time_lag[:, k].astype(float), 2).tolist()
                for k, name in enumerate(self.partition_names)
            },
        }


class _Layout:
    """Static per-run arrays: partitions, base rates, subscriptions, starting lags."""

    def __init__(self, sc: Scenario, rng: np.random.Generator) -> None:
        topic_of, number, base, lag0 = [], [], [], []
        for t in sc.topics:
            if t.rates is not None:
                rates = np.asarray(t.rates, dtype=float)
            else:
                weights = 1.0 / np.arange(1, t.partitions + 1, dtype=float) ** t.zipf
                rates = t.total_rate * weights / weights.sum()
                rates = rates[rng.permutation(t.partitions)]
            base.append(rates)
            lag0.append(
                np.asarray(t.lags, dtype=float) if t.lags is not None else np.full(t.partitions, t.start_lag)
            )
            topic_of.extend([t.name] * t.partitions)
            number.extend(range(t.partitions))
        self.topic_of = tuple(topic_of)
        self.number = np.asarray(number, dtype=np.int64)
        self.base_rate = np.concatenate(base)
        self.lag0 = np.concatenate(lag0)
        self.names = tuple(f"{t}-{p}" for t, p in zip(self.topic_of, number, strict=True))
        all_topics = tuple(t.name for t in sc.topics)
        self.member_ids = tuple(m.id for m in sc.members)
        self.member_topics = tuple(m.topics if m.topics is not None else all_topics for m in sc.members)
        self.capacity = np.asarray([m.capacity for m in sc.members], dtype=float)
        self.configured = [m.configured_capacity for m in sc.members]
        tpos = {t: i for i, t in enumerate(all_topics)}
        tix = np.asarray([tpos[t] for t in self.topic_of], dtype=np.int64)
        sub = np.zeros((len(sc.members), len(all_topics)), dtype=bool)
        for m, topics in enumerate(self.member_topics):
            sub[m, [tpos[t] for t in topics]] = True
        self.eligible = sub[:, tix].T  # [P, M]
        self.topic_index = tix


def simulate(
    scenario: Scenario, planner: Planner | None = None, *, keep_time_lag: bool = True
) -> SimulationResult:
    """Run ``scenario`` under ``planner`` (default: the scenario's strategy) and summarise it."""
    sc = scenario
    rng = np.random.default_rng(sc.seed)
    lay = _Layout(sc, rng)
    planner = planner or make_planner(sc.strategy, sc)
    num_p, num_m = len(lay.base_rate), len(lay.member_ids)
    dt = sc.step_s
    steps = max(1, round(sc.hours * 3600 / dt))
    replan_every = max(1, round(sc.replan_interval_s / dt))
    handover_steps = math.ceil(sc.handover_s / dt - 1e-9)

    # membership: absent until a first event that is a join
    present = np.ones(num_m, dtype=bool)
    first_kind: dict[str, str] = {}
    for e in sorted(sc.events, key=lambda e: e.at_s):
        if e.member is not None:
            first_kind.setdefault(e.member, e.kind)
    for m, mid in enumerate(lay.member_ids):
        if first_kind.get(mid) == "member_join":
            present[m] = False
    events = sorted(sc.events, key=lambda e: e.at_s)
    next_event = 0

    jump = np.ones(num_p)
    log_drift = np.zeros(num_p)
    theta = 1.0 / (sc.drift_reversion_hours * 3600.0)
    sigma = sc.drift_sigma / math.sqrt(3600.0)
    decay = math.exp(-theta * dt)
    drift_sd = sigma * math.sqrt((1 - decay**2) / (2 * theta))

    # cumulative produced history (rows at hist_t); row 0 = before the starting backlog
    hist = np.empty((steps + 2, num_p))
    hist_t = np.empty(steps + 2)
    hist[0] = 0.0
    hist_t[0] = -sc.backlog_age_s
    hist[1] = lay.lag0
    hist_t[1] = 0.0
    processed_cum = np.zeros(num_p)
    lag = lay.lag0.copy()
    pause_until = np.zeros(num_p, dtype=np.int64)  # step index from which the partition is read
    left_at = np.full((num_p, num_m), -np.inf)

    # initial ownership: the initial strategy over the present members, no pause, no move counted
    owner = np.full(num_p, -1, dtype=np.int32)
    snaps: deque[tuple[float, np.ndarray, np.ndarray, np.ndarray]] = deque()
    rate_params = dataclasses.replace(RATE_PARAMETERS, time_constant_s=sc.rate_time_constant_s)
    rates = [np.full(num_p, np.nan), np.full(num_p, np.nan)]  # smoothed produce, consume (NaN: unknown)
    cap_est = np.full(num_m, np.nan)  # measured capacity (NaN: not measured or too old)
    cap_at = np.zeros(num_m)  # when it was last measured
    cap_src = ["measured"] * num_m  # how (lag_rules.MEASURED_CAPACITY_SOURCES)
    # reports draw from their own stream: a scenario without them sees the same rates as before
    report_rng = np.random.default_rng([sc.seed, 1])
    member_changed = np.zeros(num_m)  # last time its partition set changed
    moves_log: deque[tuple[float, RecentMove]] = deque()

    def observe(t: float, truth_rate: np.ndarray) -> tuple[Observation, Truth, np.ndarray]:
        idx = np.flatnonzero(present)
        log_end = np.floor(produced_now[0])
        committed = np.minimum(np.floor(processed_cum), log_end)  # float sums may pass the end by 1e-13
        lag_obs = (log_end - committed).astype(np.int64)
        snaps.append((t, log_end, committed, owner.copy()))
        while len(snaps) > 2:
            snaps.popleft()
        # the snapshot's rates (lag_rules.derive_rates): interval samples smoothed by the same EWMA
        problem = rate_interval_problem(t - snaps[0][0], rate_params) if len(snaps) >= 2 else "first"
        if problem is None:
            t0, e0, c0, _ = snaps[0]
            alpha = smoothing_weight(t - t0, rate_params)
            consumed = (committed - c0) / (t - t0)
            rates[0] = smooth_rate((log_end - e0) / (t - t0), rates[0], alpha)
            rates[1] = smooth_rate(consumed, rates[1], alpha)
            _estimate_capacity(t, consumed, rates[0])
        produce, consume = rates[0].copy(), rates[1].copy()
        while moves_log and moves_log[0][0] < t - FLAP_WINDOW_S:
            moves_log.popleft()
        to_obs = np.full(num_m, -1, dtype=np.int32)
        to_obs[idx] = np.arange(len(idx), dtype=np.int32)
        obs_owner = np.where(owner >= 0, to_obs[np.maximum(owner, 0)], -1).astype(np.int32)
        if sc.capacities_known:
            capacity = lay.capacity[idx]
            sources = ("given",) * len(idx)
        else:  # the snapshot's rule (lag_rules.fill_capacities); "equal" ones stay NaN (unknown)
            own_rate: list[float | None] = [None] * len(idx)
            if not np.isnan(consume).all():
                held = owner >= 0
                rate_of = np.bincount(owner[held], weights=np.nan_to_num(consume[held]), minlength=num_m)
                own_rate = rate_of[idx].tolist()
            measured = [None if np.isnan(cap_est[m]) else float(cap_est[m]) for m in idx]
            filled = fill_capacities(
                measured,
                own_rate,
                factor=rate_params.unmeasured_capacity_factor,
                configured_members=[lay.configured[m] for m in idx],
                measured_sources=[cap_src[m] for m in idx],
            )
            capacity = np.asarray([math.nan if v is None else v for v, _ in filled], dtype=np.float64)
            sources = tuple(source for _, source in filled)
        obs = Observation(
            time_s=t,
            member_ids=tuple(lay.member_ids[m] for m in idx),
            member_topics=tuple(lay.member_topics[m] for m in idx),
            partition_topic=lay.topic_of,
            partition_number=lay.number,
            lag=lag_obs,
            owner=obs_owner,
            produce_rate=produce,
            consume_rate=consume,
            capacity=capacity,
            capacity_source=sources,
            recent_moves=tuple(move for _, move in moves_log),
            snapshots_seen=snapshot_count[0],
            rate_interval_s=t - snaps[0][0] if problem is None else None,
        )
        return obs, Truth(truth_rate.copy(), lay.capacity[idx].copy()), idx

    def _estimate_capacity(t: float, consumed: np.ndarray, produce: np.ndarray) -> None:
        """The snapshot's capacity rule (lag_rules.busy_capacity_sample, next_capacity, as
        ``_capacities`` calls them) over the last interval, for members that held the same
        partitions at both ends (as a snapshot checks): ``consumed`` the interval's consume rates,
        ``produce`` the smoothed produce rates (the backlog floor)."""
        (tp, _ep, cp, owner_p), (tc, _ec, cc, owner_c) = snaps[-2], snaps[-1]
        lag_prev = _ep - cp
        lag_cur = snaps[-1][1] - cc
        floor = np.nan_to_num(produce) * rate_params.busy_backlog_s
        for m in np.flatnonzero(present).tolist():
            mine = owner_c == m
            sample = total = None
            if mine.any() and member_changed[m] <= tp and not (owner_p[mine] != m).any():
                growth = tc - tp >= rate_params.growth_sample_min_interval_s
                sample = busy_capacity_sample(
                    lag_prev[mine], lag_cur[mine], consumed[mine], floor[mine], growth
                )
                total = float(consumed[mine].sum())
            report = None
            if sample is None and sc.capacity_reports and consumed[mine].sum() > 0:
                # the helper's report: it processed records over the interval, so its busy time
                # gives its speed (drawn only when no busy sample would win over it)
                error = report_rng.uniform(-1.0, 1.0) * sc.capacity_report_error
                report = float(lay.capacity[m] * (1.0 + error))
            sample, fresh_source = capacity_sample(sample, report)
            if fresh_source is not None:
                cap_src[m] = fresh_source
            carried = None if np.isnan(cap_est[m]) else float(cap_est[m])
            value = next_capacity(
                sample, carried, tc - cap_at[m], tc - tp, rate_params, total, cap_src[m] == "reported"
            )
            cap_est[m] = math.nan if value is None else value[0]
            if value is not None and value[1]:
                cap_at[m] = tc

    snapshot_count = [0]
    produced_now = [lay.lag0.copy()]  # cumulative produced incl. starting backlog, at the step start

    time_s = np.arange(1, steps + 1) * dt
    out_max = np.zeros(steps)
    out_total = np.zeros(steps)
    out_over = np.zeros(steps, dtype=np.int64)
    out_moves = np.zeros(steps, dtype=np.int64)
    out_prod = np.zeros(steps)
    out_proc = np.zeros(steps)
    sample_every = max(1, round(sc.sample_s / dt))
    sample_steps = np.arange(sample_every - 1, steps, sample_every)
    time_lag = np.zeros((len(sample_steps), num_p), dtype=np.float32)
    lag_floor = np.zeros(num_p, dtype=np.int64)  # history row no later than the oldest unread message
    assignable = lay.eligible.any(axis=1)
    flaps = 0
    total_moves = 0
    drained_at: float | None = None

    def apply_events(t: float) -> None:
        nonlocal next_event
        while next_event < len(events) and events[next_event].at_s <= t + 1e-9:
            e = events[next_event]
            next_event += 1
            if e.kind == "rate_jump":
                mask = np.ones(num_p, dtype=bool)
                if e.topic is not None:
                    mask &= np.asarray([tn == e.topic for tn in lay.topic_of])
                if e.partition is not None:
                    mask &= lay.number == e.partition
                jump[mask] *= e.factor
            else:
                m = lay.member_ids.index(e.member)
                if e.kind == "member_leave" and present[m]:
                    present[m] = False
                    owner[owner == m] = -1
                    member_changed[m] = t
                elif e.kind == "member_join" and not present[m]:
                    present[m] = True
                    member_changed[m] = t
                    cap_est[m] = np.nan

    def true_rate(t: float) -> np.ndarray:
        swing = 1.0 + sc.daily_swing * math.sin(2 * math.pi * (t / 86400.0 + sc.swing_phase_hours / 24.0))
        return lay.base_rate * np.exp(log_drift) * swing * jump

    apply_events(0.0)
    rate = true_rate(0.0)
    if lay.lag0.sum() <= steady_lag(float(rate.sum())):
        drained_at = 0.0
    obs0, truth0, idx0 = observe(0.0, rate)
    snaps.clear()  # the initial assignment's observation is not a snapshot the rates may use
    if idx0.size:
        spec0 = observed_spec(obs0)
        init = spec_owners_to_obs(spec0, get_assignor(sc.initial_strategy).owners(spec0), obs0)
        owner[:] = np.where(init >= 0, idx0[np.maximum(init, 0)], -1)

    for i in range(steps):
        t = i * dt
        apply_events(t)
        rate = true_rate(t)
        if i % replan_every == 0:
            snapshot_count[0] += 1
            obs, truth, idx = observe(t, rate)
            new = planner.plan(obs, truth)
            if new is not None:
                new = np.asarray(new, dtype=np.int64)
                if new.shape != (num_p,) or (new >= len(idx)).any():
                    raise AdvisorError(f"planner {planner.name} returned owners of the wrong shape")
                new_global = np.where(new >= 0, idx[np.maximum(new, 0)], -1).astype(np.int32)
                valid = new_global < 0
                valid |= lay.eligible[np.arange(num_p), np.maximum(new_global, 0)]
                new_global[~valid] = -1
                moved = np.flatnonzero((new_global != owner) & (new_global >= 0))
                if moved.size:
                    src, dst = owner[moved], new_global[moved]
                    flaps += int((t - left_at[moved, dst] <= FLAP_WINDOW_S).sum())
                    had = src >= 0
                    left_at[moved[had], src[had]] = t
                    pause_until[moved] = i + handover_steps
                    member_changed[np.unique(np.r_[src[had], dst])] = t
                    at = EPOCH + timedelta(seconds=t)
                    for k, s_m, d_m in zip(
                        moved[had].tolist(), src[had].tolist(), dst[had].tolist(), strict=True
                    ):
                        move = RecentMove(
                            lay.topic_of[k], int(lay.number[k]), lay.member_ids[s_m], lay.member_ids[d_m], at
                        )
                        moves_log.append((t, move))
                    out_moves[i] = moved.size
                    total_moves += moved.size
                owner[(new_global != owner) & (new_global < 0)] = -1
                owner[moved] = new_global[moved]
        # one step of production and fair consumption
        arrived = rate * dt
        demand = lag + arrived
        active = (owner >= 0) & (pause_until <= i)
        got = fair_share(np.where(active, demand, 0.0), np.where(active, owner, -1), lay.capacity * dt)
        got = np.minimum(got, demand)
        lag = demand - got
        processed_cum += got
        produced_now[0] = produced_now[0] + arrived
        hist[i + 2] = produced_now[0]
        hist_t[i + 2] = t + dt
        out_prod[i] = arrived.sum()
        out_proc[i] = got.sum()
        held = owner >= 0
        member_lag = np.bincount(owner[held], weights=lag[held], minlength=num_m)
        out_max[i] = member_lag.max() if num_m else 0.0
        out_total[i] = lag.sum()
        inflow = np.bincount(owner[held], weights=rate[held], minlength=num_m)
        over = int(((inflow >= lay.capacity) & present & (inflow > 0)).sum())
        over += int(((~held) & (rate > 0) & assignable).any())
        out_over[i] = over
        if (i + 1) % sample_every == 0:
            time_lag[(i + 1) // sample_every - 1] = _time_lag(
                hist, hist_t, i + 2, processed_cum, lag, t + dt, lag_floor
            )
        if drained_at is None and lag.sum() <= steady_lag(float(rate.sum())):
            drained_at = t + dt
        # drift for the next step
        if sigma > 0:
            log_drift = log_drift * decay + drift_sd * rng.standard_normal(num_p)

    all_samples = time_lag.ravel()
    after_drain = None
    if drained_at is not None:
        steady = time_lag[(sample_steps + 1) * dt > drained_at + 1e-9]
        after_drain = float(np.percentile(steady, 99)) if steady.size else None
    start = float(lay.lag0.sum())
    summary = Summary(
        strategy=planner.name,
        hours=steps * dt / 3600.0,
        avg_max_member_lag=float(out_max.mean()),
        peak_max_member_lag=float(out_max.max()),
        p50_time_lag_s=float(np.percentile(all_samples, 50)),
        p99_time_lag_s=float(np.percentile(all_samples, 99)),
        max_time_lag_s=float(all_samples.max()),
        moves=total_moves,
        moves_per_hour=total_moves / (steps * dt / 3600.0),
        flaps=flaps,
        overloaded_share=float((out_over > 0).mean()),
        overloaded_share_after_1h=float((out_over[time_s > 3600] > 0).mean())
        if (time_s > 3600).any()
        else 0.0,
        time_to_drain_s=drained_at,
        p99_time_lag_after_drain_s=after_drain,
        starting_lag=start,
        produced=float(out_prod.sum()),
        processed=float(out_proc.sum()),
        final_lag=float(lag.sum()),
    )
    return SimulationResult(
        scenario=sc,
        time_s=time_s,
        max_member_lag=out_max,
        total_lag=out_total,
        overloaded_members=out_over,
        moves=out_moves,
        produced=out_prod,
        processed=out_proc,
        sample_time_s=(sample_steps + 1) * dt,
        time_lag=time_lag if keep_time_lag else np.zeros((0, num_p), dtype=np.float32),
        final_lag=lag,
        partition_names=lay.names,
        summary=summary,
    )


def steady_lag(produce_rate: float) -> float:
    """The total lag a group that keeps up still shows, for a total produce rate (msg/s): what
    ``RateParameters.busy_backlog_s`` of production is (fetched, not yet committed; the capacity
    rule does not count it as backlog), at least one message (float noise). A group is *drained*
    (``Summary.time_to_drain_s``) at the first step whose total lag is at most this."""
    return max(1.0, RATE_PARAMETERS.busy_backlog_s * produce_rate)


def _time_lag(
    hist: np.ndarray,
    hist_t: np.ndarray,
    rows: int,
    processed: np.ndarray,
    lag: np.ndarray,
    now: float,
    floor: np.ndarray,
) -> np.ndarray:
    """Age of the oldest unread message per partition: now - the time produced reached processed.

    Vectorised bisection over the history rows [0, rows) of cumulative produced counts, then a
    linear interpolation inside the step (rates are constant within a step). ``floor`` holds each
    partition's row from the last call (processed counts only grow) and is advanced in place.
    """
    out = np.zeros(len(lag))
    cols = np.flatnonzero(lag > 1e-6)
    if not cols.size:
        return out
    target = processed[cols]
    lo = floor[cols]
    hi = np.full(cols.size, rows - 1, dtype=np.int64)  # hist[hi] = produced now > processed
    while True:
        gap = hi - lo > 1
        if not gap.any():
            break
        mid = (lo + hi) // 2
        go = hist[mid, cols] <= target
        lo = np.where(gap & go, mid, lo)
        hi = np.where(gap & ~go, mid, hi)
    floor[cols] = lo
    a, b = hist[lo, cols], hist[hi, cols]
    ta, tb = hist_t[lo], hist_t[hi]
    frac = np.where(b > a, (target - a) / np.where(b > a, b - a, 1.0), 0.0)
    out[cols] = np.clip(now - (ta + frac * (tb - ta)), 0.0, None)  # float noise near caught up
    return out


def summarize_table(summaries: Sequence[Summary]) -> list[list[str]]:
    """Rows of the summary table the CLI and the benchmark print."""
    rows = [
        [
            "strategy",
            "avg max lag",
            "peak max lag",
            "p99 time lag s",
            "moves/h",
            "flaps",
            "overloaded",
            "drain s",
        ]
    ]
    for s in summaries:
        rows.append(
            [
                s.strategy,
                f"{s.avg_max_member_lag:,.0f}",
                f"{s.peak_max_member_lag:,.0f}",
                f"{s.p99_time_lag_s:,.1f}",
                f"{s.moves_per_hour:,.1f}",
                str(s.flaps),
                f"{s.overloaded_share:.1%}",
                "never" if s.time_to_drain_s is None else f"{s.time_to_drain_s:,.0f}",
            ]
        )
    return rows
