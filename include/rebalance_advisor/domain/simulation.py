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

Every ``replan_interval_s`` the simulator takes a snapshot of the model (log ends, committed
offsets, owners, the present members) and advances what the advisor carries between snapshots by
production's own step (``estimates.step``, holding one ``estimates.Carried``): smoothed produce and
consume rates (EWMA, time constant ``rate_time_constant_s``), capacities measured, reported,
carried and filled as a stored snapshot gets them, recent moves. With ``capacity_reports``, a member
that processed records over the interval reports its capacity, as the client helper does
(x 1 +- ``capacity_report_error``). A plan is applied at the snapshot's instant, and the carried state
learns its moves (``Carried.after_plan``; the owners stay the snapshot's, so neither the old owner nor
the new one of a moved partition is measured over the next interval, as in production). The
planner gets an :class:`Observation` of that snapshot (integer lags, owners, those rates and
capacities, or the true capacities with ``capacities_known``, and the recent moves) as production's
planner does (``advise_group`` with the members whose capacity is an
estimate, ``snapshot_model.estimated_capacity_members``). Only the oracle also gets the
:class:`Truth` (true rates and capacities). Its answer becomes the new ownership at once
(auto-approve, publish static assignments). A snapshot that gives no rates (the first) is followed
by a second one ``rate_pass_s`` later, and the planner runs on that one only, as the snapshot service
takes a second pass (``estimates.wants_rate_pass``).

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
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any, Literal, Protocol

import numpy as np
from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from rebalance_advisor.domain.advice import GroupObservation, RecentMove, StandingPlan
from rebalance_advisor.domain.assignors import ASSIGNORS, get_assignor
from rebalance_advisor.domain.assignors.rate_aware_sticky import fill_level, pool_repack
from rebalance_advisor.domain.decisions import Thresholds
from rebalance_advisor.domain.estimates import (
    Carried,
    Observed,
    ObservedMember,
    RateParameters,
    step,
    wants_capacity_pass,
    wants_rate_pass,
)
from rebalance_advisor.domain.group_planning import advise_group
from rebalance_advisor.domain.group_spec import GroupSpec, Member
from rebalance_advisor.domain.interval_evidence import IntervalObservation, interval_observations
from rebalance_advisor.domain.snapshot_model import (
    RateEstimate,
    SnapshotRates,
    estimated_capacity_members,
    own_rate_capacity_members,
)
from rebalance_advisor.domain.telemetry import TelemetrySample, java_reported_busy_regular, reported_busy
from rebalance_advisor.errors import AdvisorError

#: planners the simulator knows besides the plain assignors (see :func:`make_planner`); a name here
#: wins over an assignor of the same name (``rate_aware`` is the advisor's rule, not the bare assignor).
RULE_PLANNERS: tuple[str, ...] = ("current_rule", "rate_aware", "oracle", "oracle_late")
#: every strategy name a scenario or ``simulate --strategy`` accepts.
SIM_STRATEGIES: tuple[str, ...] = (*dict.fromkeys((*ASSIGNORS, *RULE_PLANNERS)),)
#: the advisor's rule before the load model: lag-only candidates, a 30-minute cool-down, no hysteresis.
LAG_STRATEGIES: tuple[str, ...] = ("range", "roundrobin", "sticky", "lag_aware", "lag_aware_sticky")
CURRENT_RULE = Thresholds(cooldown_minutes=30.0, strategies=LAG_STRATEGIES, hysteresis_window_s=0.0)
#: the rate-aware advisor: its strategies under the rule in time (other knobs at their defaults).
RATE_AWARE_STRATEGIES: tuple[str, ...] = ("rate_aware", "rate_aware_sticky")
#: a partition moved back to a member that lost it within this window counts as a flap.
FLAP_WINDOW_S = 1800.0
#: a partition more than this many seconds behind counts in :attr:`Summary.behind_share`.
BEHIND_S = 30.0
#: the oracle balances rate + backlog / horizon (seconds) against the true capacity.
ORACLE_HORIZON_S = 300.0
#: arbitrary wall-clock origin for planners that take datetimes (the current rule's cool-down).
EPOCH = datetime(2025, 1, 1, tzinfo=UTC)
#: how rates and capacities are estimated: the snapshot's own parameters (domain/estimates.py)
RATE_PARAMETERS = RateParameters()
#: the simulated group's id (and its cluster's, in the carried state)
GROUP = "sim"
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
        "them as a snapshot does (estimates.reported_capacities)",
    )
    capacity_report_error: float = Field(
        0.0, ge=0, lt=1, description="each report is the true capacity x (1 + e), e uniform in +-this"
    )
    telemetry: bool = Field(
        False,
        description="members push KIP-714 client telemetry (an idle ratio, as Java's), read by the "
        "capacity rule's telemetry source (domain/telemetry.py) with its gates",
    )
    telemetry_busy_error: float = Field(
        0.0,
        ge=0,
        lt=1,
        description="each pushed busy share is the true one x (1 + e), e uniform in +-this "
        "(docs/benchmarks/telemetry-accuracy.md)",
    )
    telemetry_arrivals: Literal["random", "regular"] = Field(
        "random",
        description="how records reach the members whose telemetry is pushed: random (Poisson, the "
        "correction's own model, read back exactly) or regular (a steady spacing: Java's sensor then "
        "reads telemetry.java_reported_busy_regular, which the correction reads as less busy)",
    )
    rate_time_constant_s: float = Field(
        RATE_PARAMETERS.time_constant_s,
        gt=0,
        description="EWMA time constant of the observed rates (estimates.RateParameters.time_constant_s)",
    )
    rate_pass_s: float = Field(
        RATE_PARAMETERS.rate_pass_s,
        ge=0,
        description="a snapshot without rates (the first) is followed by a second pass this many seconds "
        "later, and the planner runs on that one, as the snapshot service does "
        "(estimates.RateParameters.rate_pass_s); 0, or not before the next snapshot: none, the planner runs "
        "on the first",
    )
    capacity_pass_s: float = Field(
        RATE_PARAMETERS.capacity_pass_s,
        ge=0,
        description="a plan that moved partitions while some member's capacity was unknown is followed by "
        "two more snapshots and plans, as the advisor DAG triggers them: one "
        "estimates.RateParameters.capacity_pass_settle_s after it and one this many seconds after that "
        "(estimates.RateParameters.capacity_pass_s); 0: none; each only before the next snapshot",
    )
    backlog_age_s: float = Field(0.0, ge=0, description="starting lag was produced over this long before 0")
    commit_interval_s: float = Field(
        0.0,
        ge=0,
        le=3600,
        description="consumers commit every this many seconds: a snapshot reads each committed offset up "
        "to that many seconds of production behind what was processed (uniform, never backwards); "
        "0 = committed as processed. The lag noise a real caught-up consumer shows",
    )
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
    #: the last interval's own evidence, as production's planner reader gives it (domain/interval_evidence.py)
    interval: IntervalObservation | None = None


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
            interval=obs.interval if self.with_load else None,
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


@dataclass
class LateOraclePlanner:
    """The oracle on the true rates of the previous snapshot: what a snapshot-driven advisor could do
    at best, since a snapshot shows what happened over the interval before it (bench/drain.py judges
    the rule against it). Owners, lags and members are the current snapshot's; capacities true."""

    name: str = "oracle_late"
    oracle: OraclePlanner = dataclasses.field(default_factory=lambda: OraclePlanner(name="oracle_late"))
    _previous: np.ndarray | None = None

    def plan(self, obs: Observation, truth: Truth) -> np.ndarray | None:
        late = truth.produce_rate if self._previous is None else self._previous
        self._previous = truth.produce_rate.copy()
        return self.oracle.plan(obs, Truth(late, truth.capacity))


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
    if name == "oracle_late":
        return LateOraclePlanner()
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
    #: share of time-lag samples in which some partition is more than :data:`BEHIND_S` behind: the
    #: pooled p99 hides one partition left behind for an hour among hundreds that are not
    behind_share: float
    #: the two above over feasible partitions only: at a sample, a partition whose true rate exceeds
    #: the capacity of every present member it may go to is infeasible (no plan keeps it caught up)
    max_time_lag_feasible_s: float
    behind_share_feasible: float
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
        #: partitions as a snapshot names them: (topic, partition) and (group, topic, partition)
        self.keys = tuple(zip(self.topic_of, (int(n) for n in number), strict=True))
        self.group_keys = tuple((GROUP, t, p) for t, p in self.keys)
        self.member_index = {m: i for i, m in enumerate(self.member_ids)}


def simulate(
    scenario: Scenario, planner: Planner | None = None, *, keep_time_lag: bool = True
) -> SimulationResult:
    """Run ``scenario`` under ``planner`` (default: the scenario's strategy) and summarise it."""
    run = _Run(scenario, planner or make_planner(scenario.strategy, scenario))
    run.start()
    for i in range(run.steps):
        t = i * run.dt
        run.apply_events(t)
        rate = run.true_rate(t)
        if i % run.replan_every == 0 or i == run.rate_pass_at or i in run.capacity_pass_at:
            run.replan(i, t, rate)
        run.advance(i, t, rate)
    return run.result(keep_time_lag)


class _SimulatedReports:
    """The members' own capacity reports (``Scenario.capacity_reports``), as a snapshot would find
    them in their commits' marks: a member that processed records over the interval reports its
    true capacity x (1 + e), e uniform in +-``capacity_report_error``, drawn when asked (the step
    asks only for members without a busy sample)."""

    def __init__(self, run: _Run, processed: np.ndarray) -> None:
        self.run = run
        self.processed = processed  # [M] bool: committed something since the previous snapshot

    def get(self, key: tuple[str, str], /) -> float | None:
        run = self.run
        m = run.lay.member_index[key[1]]
        if not run.sc.capacity_reports or not self.processed[m]:
            return None
        error = run.report_rng.uniform(-1.0, 1.0) * run.sc.capacity_report_error
        return float(run.lay.capacity[m] * (1.0 + error))


class _Run:
    """One run's state: the fluid model's world (rates, lags, owners, members present), what the
    advisor carries between its snapshots (:class:`~rebalance_advisor.domain.estimates.Carried`,
    advanced by the production :func:`~rebalance_advisor.domain.estimates.step`), and the series."""

    def __init__(self, sc: Scenario, planner: Planner) -> None:
        self.sc, self.planner = sc, planner
        self.rng = np.random.default_rng(sc.seed)
        self.lay = lay = _Layout(sc, self.rng)
        self.num_p, self.num_m = len(lay.base_rate), len(lay.member_ids)
        self.dt = sc.step_s
        self.steps = max(1, round(sc.hours * 3600 / self.dt))
        self.replan_every = max(1, round(sc.replan_interval_s / self.dt))
        self.handover_steps = math.ceil(sc.handover_s / self.dt - 1e-9)
        # a second pass no sooner than the next scheduled snapshot is none
        passing = 0 < sc.rate_pass_s < sc.replan_interval_s
        self.rate_pass_steps = max(1, round(sc.rate_pass_s / self.dt)) if passing else 0
        self.rate_pass_at = -1  # the step of a second pass under way (Scenario.rate_pass_s)
        self.rates_missing = False  # the last snapshot gave no rates (estimates.wants_rate_pass)
        settle = RATE_PARAMETERS.capacity_pass_settle_s
        self.capacity_pass_steps = (
            tuple(max(1, round(s / self.dt)) for s in (settle, settle + sc.capacity_pass_s))
            if sc.capacity_pass_s > 0
            else ()
        )
        #: the steps of the capacity passes under way (Scenario.capacity_pass_s)
        self.capacity_pass_at: frozenset[int] = frozenset()
        self.rate_params = dataclasses.replace(
            RATE_PARAMETERS, time_constant_s=sc.rate_time_constant_s, recent_moves_s=FLAP_WINDOW_S
        )
        # reports draw from their own stream: a scenario without them sees the same rates as before
        self.report_rng = np.random.default_rng([sc.seed, 1])
        # commit noise draws from its own stream too (Scenario.commit_interval_s)
        self.commit_rng = np.random.default_rng([sc.seed, 2])
        self.carried: Carried | None = None
        self.snapshots = 0
        self._membership()
        self._drift()
        self._world()
        self._series()

    def _membership(self) -> None:
        """Members are present from the start unless their first event is a join."""
        self.events = sorted(self.sc.events, key=lambda e: e.at_s)
        self.next_event = 0
        first_kind: dict[str, str] = {}
        for e in self.events:
            if e.member is not None:
                first_kind.setdefault(e.member, e.kind)
        self.present = np.asarray(
            [first_kind.get(m) != "member_join" for m in self.lay.member_ids], dtype=bool
        )

    def _drift(self) -> None:
        """Rate jumps and the Ornstein-Uhlenbeck drift of log rates (module docstring)."""
        sc = self.sc
        self.jump = np.ones(self.num_p)
        self.log_drift = np.zeros(self.num_p)
        theta = 1.0 / (sc.drift_reversion_hours * 3600.0)
        self.sigma = sc.drift_sigma / math.sqrt(3600.0)
        self.decay = math.exp(-theta * self.dt)
        self.drift_sd = self.sigma * math.sqrt((1 - self.decay**2) / (2 * theta))

    def _world(self) -> None:
        """Lags, owners, handover pauses and the cumulative produced history (rows at ``hist_t``;
        row 0 = before the starting backlog), from which time lags are read."""
        num_p, lay = self.num_p, self.lay
        self.hist = np.empty((self.steps + 2, num_p))
        self.hist_t = np.empty(self.steps + 2)
        self.hist[0], self.hist_t[0] = 0.0, -self.sc.backlog_age_s
        self.hist[1], self.hist_t[1] = lay.lag0, 0.0
        self.produced_now = lay.lag0.copy()  # cumulative produced incl. starting backlog, at the step start
        self.processed_cum = np.zeros(num_p)
        self.lag = lay.lag0.copy()
        self.pause_until = np.zeros(num_p, dtype=np.int64)  # step index from which the partition is read
        self.left_at = np.full((num_p, self.num_m), -np.inf)
        self.owner = np.full(num_p, -1, dtype=np.int32)
        self.assignable = lay.eligible.any(axis=1)

    def _series(self) -> None:
        steps = self.steps
        self.time_s = np.arange(1, steps + 1) * self.dt
        self.out_max, self.out_total = np.zeros(steps), np.zeros(steps)
        self.out_over = np.zeros(steps, dtype=np.int64)
        self.out_moves = np.zeros(steps, dtype=np.int64)
        self.out_prod, self.out_proc = np.zeros(steps), np.zeros(steps)
        self.sample_every = max(1, round(self.sc.sample_s / self.dt))
        self.sample_steps = np.arange(self.sample_every - 1, steps, self.sample_every)
        self.time_lag = np.zeros((len(self.sample_steps), self.num_p), dtype=np.float32)
        self.feasible = np.ones((len(self.sample_steps), self.num_p), dtype=bool)
        self.lag_floor = np.zeros(self.num_p, dtype=np.int64)  # history row no later than the oldest unread
        self.flaps = self.total_moves = 0
        self.drained_at: float | None = None

    def start(self) -> None:
        """Events at 0, then the initial assignment: the initial strategy over the present members, no
        pause, no move counted; its observation is not a snapshot the rates may use."""
        self.apply_events(0.0)
        rate = self.true_rate(0.0)
        if self.lay.lag0.sum() <= steady_lag(float(rate.sum())):
            self.drained_at = 0.0
        obs, _truth, idx = self.observe(0.0, rate)
        self.carried = None
        if idx.size:
            spec = observed_spec(obs)
            init = spec_owners_to_obs(spec, get_assignor(self.sc.initial_strategy).owners(spec), obs)
            self.owner[:] = np.where(init >= 0, idx[np.maximum(init, 0)], -1)

    def apply_events(self, t: float) -> None:
        while self.next_event < len(self.events) and self.events[self.next_event].at_s <= t + 1e-9:
            e = self.events[self.next_event]
            self.next_event += 1
            if e.kind == "rate_jump":
                mask = np.ones(self.num_p, dtype=bool)
                if e.topic is not None:
                    mask &= np.asarray([tn == e.topic for tn in self.lay.topic_of])
                if e.partition is not None:
                    mask &= self.lay.number == e.partition
                self.jump[mask] *= e.factor
                continue
            m = self.lay.member_ids.index(e.member)
            if e.kind == "member_leave" and self.present[m]:
                self.present[m] = False
                self.owner[self.owner == m] = -1
            elif e.kind == "member_join":
                self.present[m] = True

    def true_rate(self, t: float) -> np.ndarray:
        sc = self.sc
        swing = 1.0 + sc.daily_swing * math.sin(2 * math.pi * (t / 86400.0 + sc.swing_phase_hours / 24.0))
        return self.lay.base_rate * np.exp(self.log_drift) * swing * self.jump

    def observe(self, t: float, truth_rate: np.ndarray) -> tuple[Observation, Truth, np.ndarray]:
        """A snapshot at ``t``: what the advisor reads, and the step that advances what it carries."""
        idx = np.flatnonzero(self.present)
        log_end = np.floor(self.produced_now)
        committed = np.minimum(np.floor(self.processed_cum), log_end)  # float sums may pass the end by 1e-13
        committed = self._commit_noise(committed, truth_rate)
        observed = self._observed(t, idx, log_end, committed)
        interval = self._interval(observed)
        rates, self.carried = step(self.carried, observed, self.rate_params)
        self.rates_missing = wants_rate_pass(rates)
        lay = self.lay
        to_obs = np.full(self.num_m, -1, dtype=np.int32)
        to_obs[idx] = np.arange(len(idx), dtype=np.int32)
        capacity, sources = self._capacities(rates, idx)
        obs = Observation(
            time_s=t,
            member_ids=tuple(lay.member_ids[m] for m in idx),
            member_topics=tuple(lay.member_topics[m] for m in idx),
            partition_topic=lay.topic_of,
            partition_number=lay.number,
            lag=(log_end - committed).astype(np.int64),
            owner=np.where(self.owner >= 0, to_obs[np.maximum(self.owner, 0)], -1).astype(np.int32),
            produce_rate=_rate_array(rates.produce, lay.keys),
            consume_rate=_rate_array(rates.consume, lay.group_keys),
            capacity=capacity,
            capacity_source=sources,
            recent_moves=self.carried.recent_moves.get(GROUP, ()),
            snapshots_seen=self.snapshots,
            rate_interval_s=rates.interval_s,
            interval=interval,
        )
        return obs, Truth(truth_rate.copy(), lay.capacity[idx].copy()), idx

    def _observed(self, t: float, idx: np.ndarray, log_end: np.ndarray, committed: np.ndarray) -> Observed:
        """The fluid model as a snapshot shows it (:class:`~rebalance_advisor.domain.estimates.Observed`)."""
        lay = self.lay
        ends = dict(zip(lay.keys, log_end.astype(np.int64).tolist(), strict=True))
        offsets = dict(zip(lay.group_keys, committed.astype(np.int64).tolist(), strict=True))
        order = np.argsort(self.owner, kind="stable")  # each member's partitions in index order
        bounds = np.searchsorted(self.owner[order], np.arange(self.num_m + 1))
        members = tuple(
            ObservedMember(
                GROUP, lay.member_ids[m], lay.member_ids[m],
                tuple(lay.keys[k] for k in order[bounds[m] : bounds[m + 1]].tolist()), lay.configured[m],
            )
            for m in idx.tolist()
        )  # fmt: skip
        return Observed(
            cluster=GROUP,
            taken_at=EPOCH + timedelta(seconds=t),
            log_ends=ends,
            lag_ends=ends,
            committed=offsets,
            members=members,
            reports=_SimulatedReports(self, self._processed(committed)),
            telemetry=self._telemetry(t, idx, committed),
        )

    def _telemetry(self, t: float, idx: np.ndarray, committed: np.ndarray) -> dict:
        """Each present member's newest telemetry (``Scenario.telemetry``): the busy share it had over
        the interval (records processed / what its capacity could), x (1 + e), pushed as Java's idle
        ratio through the calibration's own points (``telemetry.reported_busy``), so the telemetry
        source reads back that busy share exactly: the error is ``telemetry_busy_error`` alone; with
        ``telemetry_arrivals`` "regular", as Java's sensor reads it then (an over-read capacity)."""
        if not self.sc.telemetry or self.carried is None:
            return {}
        elapsed = t - (self.carried.taken_at - EPOCH).total_seconds()
        if elapsed <= 0:
            return {}
        before = np.fromiter((self.carried.committed[k] for k in self.lay.group_keys), float, self.num_p)
        held = self.owner >= 0
        done = np.bincount(self.owner[held], weights=(committed - before)[held], minlength=self.num_m)
        found, at = {}, (EPOCH + timedelta(seconds=t)).timestamp()
        regular = self.sc.telemetry_arrivals == "regular"
        for m in idx.tolist():
            error = self.report_rng.uniform(-1.0, 1.0) * self.sc.telemetry_busy_error
            busy = min(max(done[m] / (self.lay.capacity[m] * elapsed), 0.0) * (1.0 + error), 1.0)
            member = self.lay.member_ids[m]
            pushed = java_reported_busy_regular(busy) if regular else reported_busy("java", busy)
            found[(GROUP, member)] = TelemetrySample(
                GROUP, member, member, member, "apache-kafka-java", "sim", 1.0 - pushed, at,
                None, 0.0, 0.0, False, self.sc.replan_interval_s, at,
            )  # fmt: skip
        return found

    def _commit_noise(self, committed: np.ndarray, rate: np.ndarray) -> np.ndarray:
        """Committed offsets as consumers that commit every ``commit_interval_s`` leave them: up to
        that much production behind what they processed, never below the previous snapshot's."""
        if self.sc.commit_interval_s <= 0:
            return committed
        behind = self.commit_rng.uniform(0.0, self.sc.commit_interval_s, self.num_p) * rate
        noisy = np.minimum(committed, np.floor(np.maximum(self.processed_cum - behind, 0.0)))
        if self.carried is not None:
            before = np.fromiter((self.carried.committed[k] for k in self.lay.group_keys), float, self.num_p)
            noisy = np.maximum(noisy, np.minimum(before, committed))
        return noisy

    def _interval(self, observed: Observed) -> IntervalObservation | None:
        """The last interval's evidence (domain/interval_evidence.py) from the carried state, before
        the step advances it: what production's planner reader computes from the stored snapshots."""
        committed = {GROUP: {(t, p): c for (_, t, p), c in observed.committed.items()}}
        members = {GROUP: [(m.key, m.partitions) for m in observed.members]}
        found = interval_observations(
            self.carried, observed.taken_at, observed.lag_ends, committed, members, self.rate_params
        )
        return found.get(GROUP)

    def _processed(self, committed: np.ndarray) -> np.ndarray:
        """[M] bool: the member committed more on a partition it holds now than at the previous snapshot."""
        if self.carried is None:
            return np.zeros(self.num_m, dtype=bool)
        before = np.fromiter((self.carried.committed[k] for k in self.lay.group_keys), float, self.num_p)
        held = self.owner >= 0
        grew = np.bincount(self.owner[held], weights=(committed > before)[held], minlength=self.num_m)
        return grew > 0

    def _capacities(self, rates: SnapshotRates, idx: np.ndarray) -> tuple[np.ndarray, tuple[str, ...]]:
        """The present members' capacities as the planner gets them (NaN: unknown) and their
        sources; the true ones with ``capacities_known``."""
        if self.sc.capacities_known:
            return self.lay.capacity[idx], ("given",) * len(idx)
        found = [rates.capacity[(GROUP, self.lay.member_ids[m])] for m in idx.tolist()]
        capacity = np.asarray(
            [math.nan if c.capacity is None else c.capacity for c in found], dtype=np.float64
        )
        return capacity, tuple(c.source for c in found)

    def replan(self, i: int, t: float, rate: np.ndarray) -> None:
        """A snapshot, the planner's answer, and the plan applied at once (auto-approve, publish). A
        snapshot without rates, not itself a second pass, only schedules one (``Scenario.rate_pass_s``):
        the snapshot service takes it, and the advisor runs on that."""
        self.snapshots += 1
        obs, truth, idx = self.observe(t, rate)
        if self.rate_pass_steps and i != self.rate_pass_at and self.rates_missing:
            self.rate_pass_at = i + self.rate_pass_steps
            return
        new = self.planner.plan(obs, truth)
        if new is None:
            return
        new = np.asarray(new, dtype=np.int64)
        if new.shape != (self.num_p,) or (new >= len(idx)).any():
            raise AdvisorError(f"planner {self.planner.name} returned owners of the wrong shape")
        new_global = np.where(new >= 0, idx[np.maximum(new, 0)], -1).astype(np.int32)
        valid = new_global < 0
        valid |= self.lay.eligible[np.arange(self.num_p), np.maximum(new_global, 0)]
        new_global[~valid] = -1
        moved = self._apply(i, t, new_global)
        self._schedule_capacity_pass(i, int(np.isnan(obs.capacity).sum()), moved)

    def _schedule_capacity_pass(self, i: int, unknown_capacities: int, moved: int) -> None:
        """The capacity pass's two snapshots and plans after a plan that moved partitions on unknown
        capacities (``estimates.wants_capacity_pass``), as the advisor DAG triggers them: each one
        that comes before the next scheduled snapshot, beside any still under way."""
        if not wants_capacity_pass(unknown_capacities, moved):
            return
        scheduled = (i // self.replan_every + 1) * self.replan_every
        ahead = {at for at in self.capacity_pass_at if at > i}
        self.capacity_pass_at = frozenset(
            ahead | {i + s for s in self.capacity_pass_steps if i + s < scheduled}
        )

    def _apply(self, i: int, t: float, new: np.ndarray) -> int:
        """New owners from step ``i`` on: moved partitions pause for the handover; moves and flaps
        are counted; the carried state learns the plan (``Carried.after_plan``). Returns the moves."""
        lay, owner = self.lay, self.owner
        moved = np.flatnonzero((new != owner) & (new >= 0))
        moves: list[RecentMove] = []
        if moved.size:
            src, dst = owner[moved], new[moved]
            self.flaps += int((t - self.left_at[moved, dst] <= FLAP_WINDOW_S).sum())
            had = src >= 0
            self.left_at[moved[had], src[had]] = t
            self.pause_until[moved] = i + self.handover_steps
            at = EPOCH + timedelta(seconds=t)
            for k, s_m, d_m in zip(moved[had].tolist(), src[had].tolist(), dst[had].tolist(), strict=True):
                moves.append(
                    RecentMove(
                        lay.topic_of[k], int(lay.number[k]), lay.member_ids[s_m], lay.member_ids[d_m], at
                    )
                )
            self.out_moves[i] = moved.size
            self.total_moves += moved.size
        owner[(new != owner) & (new < 0)] = -1
        owner[moved] = new[moved]
        assert self.carried is not None
        self.carried = self.carried.after_plan(GROUP, moves)
        return int(moved.size)

    def advance(self, i: int, t: float, rate: np.ndarray) -> None:
        """One step of production and fair consumption, its measures, and the drift for the next."""
        dt, owner = self.dt, self.owner
        arrived = rate * dt
        demand = self.lag + arrived
        active = (owner >= 0) & (self.pause_until <= i)
        got = fair_share(np.where(active, demand, 0.0), np.where(active, owner, -1), self.lay.capacity * dt)
        got = np.minimum(got, demand)
        self.lag = demand - got
        self.processed_cum += got
        self.produced_now = self.produced_now + arrived
        self.hist[i + 2] = self.produced_now
        self.hist_t[i + 2] = t + dt
        self.out_prod[i] = arrived.sum()
        self.out_proc[i] = got.sum()
        self._measure(i, t, rate)
        if self.sigma > 0:
            self.log_drift = self.log_drift * self.decay + self.drift_sd * self.rng.standard_normal(
                self.num_p
            )

    def _measure(self, i: int, t: float, rate: np.ndarray) -> None:
        """Max member lag, total lag, overload, the time-lag sample and the first drain after step ``i``."""
        owner, lag, dt = self.owner, self.lag, self.dt
        held = owner >= 0
        member_lag = np.bincount(owner[held], weights=lag[held], minlength=self.num_m)
        self.out_max[i] = member_lag.max() if self.num_m else 0.0
        self.out_total[i] = lag.sum()
        inflow = np.bincount(owner[held], weights=rate[held], minlength=self.num_m)
        over = int(((inflow >= self.lay.capacity) & self.present & (inflow > 0)).sum())
        over += int(((~held) & (rate > 0) & self.assignable).any())
        self.out_over[i] = over
        if (i + 1) % self.sample_every == 0:
            self.time_lag[(i + 1) // self.sample_every - 1] = _time_lag(
                self.hist, self.hist_t, i + 2, self.processed_cum, lag, t + dt, self.lag_floor
            )
            room = np.where(self.lay.eligible & self.present[None, :], self.lay.capacity[None, :], 0.0)
            self.feasible[(i + 1) // self.sample_every - 1] = rate <= room.max(axis=1, initial=0.0)
        if self.drained_at is None and lag.sum() <= steady_lag(float(rate.sum())):
            self.drained_at = t + dt

    def result(self, keep_time_lag: bool) -> SimulationResult:
        return SimulationResult(
            scenario=self.sc,
            time_s=self.time_s,
            max_member_lag=self.out_max,
            total_lag=self.out_total,
            overloaded_members=self.out_over,
            moves=self.out_moves,
            produced=self.out_prod,
            processed=self.out_proc,
            sample_time_s=(self.sample_steps + 1) * self.dt,
            time_lag=self.time_lag if keep_time_lag else np.zeros((0, self.num_p), dtype=np.float32),
            final_lag=self.lag,
            partition_names=self.lay.names,
            summary=self._summary(),
        )

    def _summary(self) -> Summary:
        hours = self.steps * self.dt / 3600.0
        all_samples = self.time_lag.ravel()
        after_drain = None
        if self.drained_at is not None:
            steady = self.time_lag[(self.sample_steps + 1) * self.dt > self.drained_at + 1e-9]
            after_drain = float(np.percentile(steady, 99)) if steady.size else None
        later = self.time_s > 3600
        feasible_lag = np.where(self.feasible, self.time_lag, 0.0)
        return Summary(
            strategy=self.planner.name,
            hours=hours,
            avg_max_member_lag=float(self.out_max.mean()),
            peak_max_member_lag=float(self.out_max.max()),
            p50_time_lag_s=float(np.percentile(all_samples, 50)),
            p99_time_lag_s=float(np.percentile(all_samples, 99)),
            max_time_lag_s=float(all_samples.max()),
            behind_share=float((self.time_lag.max(axis=1) > BEHIND_S).mean()) if len(self.time_lag) else 0.0,
            max_time_lag_feasible_s=float(feasible_lag.max()) if feasible_lag.size else 0.0,
            behind_share_feasible=float((feasible_lag.max(axis=1) > BEHIND_S).mean())
            if len(feasible_lag)
            else 0.0,
            moves=self.total_moves,
            moves_per_hour=self.total_moves / hours,
            flaps=self.flaps,
            overloaded_share=float((self.out_over > 0).mean()),
            overloaded_share_after_1h=float((self.out_over[later] > 0).mean()) if later.any() else 0.0,
            time_to_drain_s=self.drained_at,
            p99_time_lag_after_drain_s=after_drain,
            starting_lag=float(self.lay.lag0.sum()),
            produced=float(self.out_prod.sum()),
            processed=float(self.out_proc.sum()),
            final_lag=float(self.lag.sum()),
        )


def _rate_array(rates: Mapping[Any, RateEstimate], keys: Sequence[Any]) -> np.ndarray:
    """Rates in ``keys`` order, NaN where unknown."""
    return np.fromiter(
        (math.nan if (r := rates[k].rate) is None else r for k in keys), dtype=np.float64, count=len(keys)
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
