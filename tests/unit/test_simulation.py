"""The what-if simulator: drain times computed by hand, conservation, fair sharing, observations,
flaps, the oracle, and bad scenarios refused with the field named."""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from rebalance_advisor.domain.simulation import (
    Observation,
    Truth,
    fair_share,
    parse_scenario,
    simulate,
)
from rebalance_advisor.errors import AdvisorError

#: the KAFKA-5337 worked example (seeds 000/002): two consumers, one topic, no production; the
#: planner runs on the first snapshot (no second pass: ``rate_pass_s`` 0, as one snapshot command).
WORKED = {
    "topics": [{"name": "t0", "partitions": 3, "lags": [100_000, 60_000, 50_000]}],
    "members": [{"id": "C0", "capacity": 1000}, {"id": "C1", "capacity": 1000}],
    "hours": 0.1,
    "rate_pass_s": 0,
}


def test_worked_example_drain_under_range():
    # range: C0 holds t0p0 + t0p1 (160,000), C1 holds t0p2 (50,000). A member reads 1,000 msg/s in
    # total whatever it holds while it has backlog, so C0 drains in 160,000 / 1,000 = 160 s and C1
    # in 50 s; the group is drained at max(160, 50) = 160 s. No production: processed = 210,000.
    result = simulate(parse_scenario(WORKED, strategy="range"))
    assert result.summary.time_to_drain_s == pytest.approx(160.0)
    assert result.summary.moves == 0
    assert result.summary.processed == pytest.approx(210_000)


def test_worked_example_drain_under_the_current_rule():
    # Start from range (C0: 160,000, C1: 50,000). At t = 0 the current rule sees imbalance
    # 160,000 / 105,000 = 1.52 >= 1.25 and recommends the seed's lag-aware plan (C0: t0p0 = 100,000;
    # C1: t0p1 + t0p2 = 110,000): one move, t0p1 to C1, which pauses it 5 s. C1 reads t0p2 alone
    # meanwhile, so it is busy from 0 s on: 110,000 / 1,000 = 110 s; C0 needs 100 s. Drain: 110 s.
    result = simulate(parse_scenario(WORKED, strategy="current_rule"))
    assert result.summary.time_to_drain_s == pytest.approx(110.0)
    assert result.summary.moves == 1
    assert result.moves[0] == 1


def test_worked_example_unequal_capacities_fair_share():
    # lag_aware from the start and only one re-planning tick (interval > run): C0 (1,000 msg/s)
    # holds t0p0 (100,000) -> 100 s. C1 (500 msg/s) holds t0p1 (60,000) and t0p2 (50,000) and
    # splits 250/250 msg/s: t0p2 is empty after 50,000 / 250 = 200 s, t0p1 then has
    # 60,000 - 50,000 = 10,000 left at 500 msg/s -> 20 s more. Drain: 220 s.
    data = {
        **WORKED,
        "members": [{"id": "C0", "capacity": 1000}, {"id": "C1", "capacity": 500}],
        "initial_strategy": "lag_aware",
        "replan_interval_s": 3600,
    }
    result = simulate(parse_scenario(data, strategy="lag_aware"))
    assert result.summary.time_to_drain_s == pytest.approx(220.0)
    assert result.summary.moves == 0
    # t0p2's last message is read at 200 s; all backlog was born at 0, so its time lag is the clock.
    names = result.partition_names
    at = {float(t): i for i, t in enumerate(result.sample_time_s)}
    assert result.time_lag[at[180.0], names.index("t0-2")] == pytest.approx(180.0)
    assert result.time_lag[at[210.0], names.index("t0-2")] == 0.0
    assert result.time_lag[at[210.0], names.index("t0-1")] == pytest.approx(210.0)


def test_fair_share_by_hand():
    # member 0, budget 10: demands 1, 4, 20 -> level (10 - 1) / 2 = 4.5 >= 4, so 1 and 4 in full and
    # 20 gets the remaining 5. Member 1, budget 9: demands 6, 6 -> 4.5 each. Member 2 fits: all.
    demand = np.array([20.0, 1.0, 4.0, 6.0, 6.0, 3.0, 0.0])
    owner = np.array([0, 0, 0, 1, 1, 2, -1])
    got = fair_share(demand, owner, np.array([10.0, 9.0, 50.0]))
    assert got.tolist() == [5.0, 1.0, 4.0, 4.5, 4.5, 3.0, 0.0]


def test_production_without_drift_matches_the_rate_integral():
    # 2 topics, 300 + 100 msg/s, no drift/swing: produced = 400 x 7,200 s = 2,880,000 exactly.
    data = {
        "topics": [
            {"name": "a", "partitions": 4, "total_rate": 300, "zipf": 1.5},
            {"name": "b", "partitions": 2, "total_rate": 100},
        ],
        "members": [{"id": "m0", "capacity": 250}, {"id": "m1", "capacity": 250}],
        "hours": 2,
        "strategy": "sticky",
    }
    s = simulate(parse_scenario(data)).summary
    assert s.produced == pytest.approx(2_880_000, rel=1e-12)
    assert s.starting_lag + s.produced == pytest.approx(s.processed + s.final_lag, rel=1e-12)


def test_daily_swing_integral():
    # rate 100 x (1 + 0.5 sin(2 pi t / 1 d)) over 6 h: integral = 100 (T + 0.5 D/(2 pi) (1 - cos(2 pi T/D)))
    # with T = 21,600 s, D = 86,400 s: cos(pi/2) = 0 -> 100 (21,600 + 43,200/(2 pi)) = 2,847,549.
    data = {
        "topics": [{"name": "a", "partitions": 1, "total_rate": 100}],
        "members": [{"id": "m0", "capacity": 1000}],
        "daily_swing": 0.5,
        "strategy": "range",
    }
    expected = 100 * (21_600 + 0.5 * 86_400 / (2 * math.pi))
    assert simulate(parse_scenario(data)).summary.produced == pytest.approx(expected, rel=1e-3)


SCENARIO_STRATEGIES = ("range", "sticky", "lag_aware", "lag_aware_sticky", "current_rule", "oracle")


@st.composite
def scenarios(draw):
    num_topics = draw(st.integers(1, 3))
    topics = [
        {
            "name": f"t{i}",
            "partitions": draw(st.integers(1, 6)),
            "total_rate": draw(st.floats(0, 500)),
            "zipf": draw(st.sampled_from([0.0, 1.1, 1.5])),
            "start_lag": draw(st.floats(0, 20_000)),
        }
        for i in range(num_topics)
    ]
    names = [t["name"] for t in topics]
    members = []
    for j in range(draw(st.integers(1, 4))):
        subs = draw(st.one_of(st.none(), st.lists(st.sampled_from(names), min_size=1, unique=True)))
        members.append({"id": f"m{j}", "capacity": draw(st.floats(1, 400)), "topics": subs})
    events = []
    if draw(st.booleans()):
        events.append({"at_s": draw(st.floats(0, 900)), "kind": "member_leave", "member": "m0"})
        events.append({"at_s": draw(st.floats(900, 1800)), "kind": "member_join", "member": "m0"})
    if draw(st.booleans()):
        events.append({"at_s": draw(st.floats(0, 1800)), "kind": "rate_jump", "factor": 3.0, "topic": "t0"})
    return {
        "topics": topics,
        "members": members,
        "events": events,
        "drift_sigma": draw(st.sampled_from([0.0, 0.5])),
        "daily_swing": draw(st.sampled_from([0.0, 0.3])),
        "replan_interval_s": draw(st.sampled_from([60, 300])),
        "handover_s": draw(st.sampled_from([0, 5, 30])),
        "hours": 0.5,
        "strategy": draw(st.sampled_from(SCENARIO_STRATEGIES)),
        "seed": draw(st.integers(0, 1000)),
    }


@settings(
    max_examples=max(1, settings.default.max_examples // 5),
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)
@given(scenarios())
def test_conservation_and_bounds(data):
    result = simulate(parse_scenario(data))
    s = result.summary
    # produced = processed + lag (plus the starting lag), as totals and step by step
    assert s.starting_lag + s.produced == pytest.approx(s.processed + s.final_lag, rel=1e-9, abs=1e-6)
    running = s.starting_lag + np.cumsum(result.produced) - np.cumsum(result.processed)
    np.testing.assert_allclose(result.total_lag, running, rtol=1e-9, atol=1e-6)
    assert (result.final_lag >= 0).all() and (result.total_lag >= 0).all()
    # nobody reads more than the whole group's capacity in a step
    capacity = sum(m["capacity"] for m in data["members"]) * 5.0
    assert (result.processed <= capacity * (1 + 1e-12)).all()
    assert (result.time_lag >= 0).all()


@dataclass
class Recorder:
    """A planner that changes nothing and keeps every observation (to check what the advisor sees)."""

    name: str = "recorder"
    seen: list[tuple[Observation, Truth]] = field(default_factory=list)

    def plan(self, obs, truth):
        self.seen.append((obs, truth))
        return None


def test_observation_rates_and_capacity_estimates():
    # Both members are overloaded (inflow 500 and 300 msg/s > capacity 200), so every snapshot
    # interval has backlog on every partition: the estimate is the true capacity. Rates come from
    # log-end offsets over the window: 250, 250 and 300 msg/s (floors of offsets cost < 1/60 msg/s).
    data = {
        "topics": [{"name": "t", "partitions": 3, "rates": [250, 250, 300], "start_lag": 1000}],
        "members": [{"id": "a", "capacity": 200}, {"id": "b", "capacity": 200}],
        "hours": 0.2,
        "rate_pass_s": 0,
    }
    rec = Recorder()
    simulate(parse_scenario(data), rec)
    first, _ = rec.seen[0]
    assert np.isnan(first.produce_rate).all() and np.isnan(first.capacity).all()
    assert first.capacity_source == ("equal", "equal")
    obs, truth = rec.seen[3]
    np.testing.assert_allclose(obs.produce_rate, [250, 250, 300], atol=1 / 60)
    np.testing.assert_allclose(obs.capacity, [200, 200], atol=1 / 60)
    assert obs.capacity_source == ("measured", "measured")
    assert truth.capacity.tolist() == [200.0, 200.0] and truth.produce_rate.tolist() == [250, 250, 300]
    # the lag a snapshot shows: 1,000 + (inflow - capacity) x t per member, split by fair share
    assert obs.lag.sum() == pytest.approx(3000 + (800 - 400) * obs.time_s, abs=3)


def test_an_unmeasured_member_gets_at_least_1_2_times_its_own_consume_rate():
    # a keeps up (t-0, 100 msg/s, capacity 1,000): never backlogged, never measured.
    # Range gives a t-0 and b (capacity 50) t-1: b (80 msg/s > 50) is overloaded and measured at 50. a then gets max(median 50, 1.2 x its consume rate 100) = 120
    # (source own_rate), not the median 50, which would call it overloaded (100 >= 50).
    data = {
        "topics": [{"name": "t", "partitions": 2, "rates": [100, 80], "start_lag": 0}],
        "members": [{"id": "a", "capacity": 1000}, {"id": "b", "capacity": 50}],
        "hours": 0.1,
    }
    rec = Recorder()
    simulate(parse_scenario(data), rec)
    obs, _ = rec.seen[-1]
    assert obs.owner.tolist() == [0, 1]
    assert obs.capacity_source == ("own_rate", "measured")
    assert obs.capacity[0] == pytest.approx(120, abs=0.05) and obs.capacity[1] == pytest.approx(
        50, abs=1 / 60
    )


def test_an_unmeasured_member_below_the_median_gets_the_median():
    # three members; b and c overloaded (80 and 90 msg/s on capacities 45 and 55) are measured at
    # 45 and 55; a reads 10 msg/s: 1.2 x 10 = 12 < median(45, 55) = 50, so a gets 50 (group_median).
    data = {
        "topics": [{"name": "t", "partitions": 3, "rates": [10, 80, 90]}],
        "members": [{"id": "a", "capacity": 500}, {"id": "b", "capacity": 45}, {"id": "c", "capacity": 55}],
        "hours": 0.1,
    }
    rec = Recorder()
    simulate(parse_scenario(data), rec)
    obs, _ = rec.seen[-1]
    assert obs.owner.tolist() == [0, 1, 2]
    assert obs.capacity_source == ("group_median", "measured", "measured")
    np.testing.assert_allclose(obs.capacity, [50, 45, 55], atol=0.05)


def test_a_configured_capacity_is_what_the_planner_sees_until_the_member_is_measured():
    # As above, but a declares 400 msg/s: the planner sees 400 (configured), not the median 50;
    # b and c are measured (overloaded) and their declared values are not used. The truth (500)
    # still decides the simulation.
    data = {
        "topics": [{"name": "t", "partitions": 3, "rates": [10, 80, 90]}],
        "members": [
            {"id": "a", "capacity": 500, "configured_capacity": 400},
            {"id": "b", "capacity": 40, "configured_capacity": 1000},
            {"id": "c", "capacity": 60},
        ],
        "hours": 0.1,
    }
    rec = Recorder()
    simulate(parse_scenario(data), rec)
    obs, truth = rec.seen[-1]
    assert obs.owner.tolist() == [0, 1, 2]
    assert obs.capacity_source == ("configured", "measured", "measured")
    np.testing.assert_allclose(obs.capacity, [400, 40, 60], atol=0.05)
    assert truth.capacity.tolist() == [500.0, 40.0, 60.0]


@dataclass
class Flipper:
    """Moves partition 0 to the other member on every tick."""

    name: str = "flipper"

    def plan(self, obs, truth):
        owner = obs.owner.copy()
        owner[0] = 1 - owner[0]
        return owner


def test_moves_and_flaps_counted():
    # 10 minutes, a tick every 60 s: 10 moves. The first (t = 0, a -> b) returns the partition to
    # nobody who lost it; each later one hands it back to the member that lost it 60 s before: 9 flaps.
    data = {
        "topics": [{"name": "t", "partitions": 2, "rates": [10, 10]}],
        "members": [{"id": "a", "capacity": 100}, {"id": "b", "capacity": 100}],
        "hours": 10 / 60,
        "capacity_pass_s": 0,  # no snapshots but the ticks
    }
    s = simulate(parse_scenario(data), Flipper()).summary
    assert s.moves == 10 and s.flaps == 9
    assert s.moves_per_hour == pytest.approx(60.0)


def test_oracle_fixes_overload_with_capacities_two_apart():
    # range puts t-0 (120 msg/s) and t-1 (60) on a (capacity 100): overloaded. The oracle evicts a's
    # heaviest partition, t-0, and gives it to the member with most spare capacity: b (200 - 30).
    # Then a: 60/100, b: 150/200 -> no overload at any step (the move is made before step 0).
    data = {
        "topics": [{"name": "t", "partitions": 3, "rates": [120, 60, 30]}],
        "members": [{"id": "a", "capacity": 100}, {"id": "b", "capacity": 200}],
        "hours": 0.5,
        "strategy": "oracle",
        "rate_pass_s": 0,
    }
    result = simulate(parse_scenario(data))
    assert result.summary.moves == 1 and result.summary.overloaded_share == 0.0
    # range alone keeps a overloaded the whole time, and its lag grows at 180 - 100 = 80 msg/s
    ranged = simulate(parse_scenario(data, strategy="range"))
    assert ranged.summary.overloaded_share == 1.0
    assert ranged.summary.final_lag == pytest.approx(80 * 1800)


def test_member_leaving_orphans_its_partitions_until_the_next_tick():
    # b leaves at 30 s; range re-plans only at 60 s, so b's partition t-1 (100 msg/s) is unread for
    # 30 s -> 3,000 messages, and the step counts as overloaded (inflow with no owner).
    data = {
        "topics": [{"name": "t", "partitions": 2, "rates": [100, 100]}],
        "members": [{"id": "a", "capacity": 1000}, {"id": "b", "capacity": 1000}],
        "events": [{"at_s": 30, "kind": "member_leave", "member": "b"}],
        "handover_s": 0,
        "hours": 90 / 3600,
        "strategy": "range",
        "rate_pass_s": 0,
    }
    result = simulate(parse_scenario(data))
    at = {float(t): i for i, t in enumerate(result.time_s)}
    assert result.total_lag[at[60.0]] == pytest.approx(3000)
    assert result.overloaded_members[at[35.0]] == 1 and result.overloaded_members[at[65.0]] == 0
    assert result.moves[at[65.0]] == 1  # made at the start of the step from 60 s to 65 s
    assert result.total_lag[-1] == 0.0


@pytest.mark.parametrize(
    ("change", "field"),
    [
        ({"members": [{"id": "a", "capacity": -1}]}, "members[0].capacity"),
        ({"members": [{"id": "a", "capacity": float("nan")}]}, "members[0].capacity"),
        ({"members": [{"id": "a", "capacity": float("inf")}]}, "members[0].capacity"),
        ({"topics": [{"name": "t", "partitions": 2, "rates": [1, -5]}]}, "topics[0]"),
        ({"topics": [{"name": "t", "partitions": 2, "total_rate": float("nan")}]}, "topics[0].total_rate"),
        ({"topics": [{"name": "t", "partitions": 2, "total_rate": -3}]}, "topics[0].total_rate"),
        (
            {"members": [{"id": "a", "capacity": 5, "configured_capacity": 0}]},
            "members[0].configured_capacity",
        ),
        ({"strategy": "fastest"}, "strategy"),
        ({"colour": "red"}, "colour"),
    ],
)
def test_bad_scenarios_name_the_field(change, field):
    data = {
        "topics": [{"name": "t", "partitions": 2, "total_rate": 10}],
        "members": [{"id": "a", "capacity": 5}],
    }
    with pytest.raises(AdvisorError) as caught:
        parse_scenario({**data, **change})
    assert str(caught.value).startswith(f"scenario field {field}")
    assert "\n" not in str(caught.value)


def test_a_busy_member_whose_light_partition_is_caught_up_is_measured():
    # b (capacity 100) owns t-2 (150 msg/s) and t-3 (10 msg/s). Fair sharing serves t-3 in full
    # (10 < the fair level 50), so t-3 never has backlog; b is still measured at 100 msg/s, because
    # t-2 has backlog (the snapshot's rule: backlog on at least one owned partition). a (capacity
    # 1,000, 40 msg/s) is not measured: max(median 100, 1.2 x 40 = 48) = 100.
    data = {
        "topics": [{"name": "t", "partitions": 4, "rates": [20, 20, 150, 10]}],
        "members": [{"id": "a", "capacity": 1000}, {"id": "b", "capacity": 100}],
        "hours": 0.1,
    }
    rec = Recorder()
    simulate(parse_scenario(data), rec)
    obs, _ = rec.seen[-1]
    assert obs.owner.tolist() == [0, 0, 1, 1]  # range: a t-0, t-1; b t-2, t-3
    assert obs.capacity_source == ("group_median", "measured")
    np.testing.assert_allclose(obs.capacity, [100, 100], atol=1 / 60)


def test_capacity_rule_is_no_longer_a_scenario_field():
    with pytest.raises(AdvisorError, match="capacity_rule"):
        parse_scenario({**WORKED, "capacity_rule": "all"})


def test_snapshot_offsets_never_show_negative_lag():
    # Found by hypothesis: a starting lag of 256.99999999999994 is fully read; the float sum of what
    # was read can pass the produced count by ~1e-13, and floor() of both then gave lag -1.
    data = {
        "topics": [{"name": "t0", "partitions": 3, "start_lag": 256.99999999999994}],
        "members": [{"id": "m0", "capacity": 1.0}],
        "hours": 0.5,
        "handover_s": 0,
        "strategy": "range",
    }
    rec = Recorder()
    simulate(parse_scenario(data), rec)
    assert all((obs.lag >= 0).all() for obs, _ in rec.seen)
    # 3 x 257 messages at 1 msg/s are read by 771 s; the last tick (1,740 s) sees nothing left
    assert rec.seen[-1][0].time_s == 1740 and rec.seen[-1][0].lag.sum() == 0


def test_oracle_repacks_a_member_its_greedy_moves_and_chain_cannot_relieve():
    # The large-500 failure in small: capacities 100; A holds 60 + 55 (115), B 30 + 30 + 20 (80),
    # C 30 + 25 + 15 (70). Utilisation 265 / 300 = 0.883, fill target 0.883 + 0.117 / 2 = 0.942
    # (94.2), trigger (1 + 0.942) / 2 = 0.971. Neither of A's partitions fits under a peer's target
    # (room: C 24.2, B 14.2); the chain cannot empty C enough (its partitions fit nowhere: B's room
    # 14.2 < 15). The pool re-pack of A with C, then B (emptiest first), keeping partitions while
    # their owner stays under 94.2, heaviest first: p0 60 stays on A, p1 -> C (55, tie with B, C
    # first), p2 and p3 stay on B (60), p5 stays on C (85), p6 -> A (85, tie with B, A first), p4
    # stays on B (80), p7 -> B (95 < A's and C's 100). A 85, B 95, C 85: all under the trigger 97.1.
    from rebalance_advisor.domain.simulation import Observation, OraclePlanner, Truth

    rates = np.array([60, 55, 30, 30, 20, 30, 25, 15], dtype=float)
    obs = Observation(
        time_s=600.0,
        member_ids=("A", "B", "C"),
        member_topics=(("t",), ("t",), ("t",)),
        partition_topic=("t",) * 8,
        partition_number=np.arange(8),
        lag=np.zeros(8, dtype=np.int64),
        owner=np.array([0, 0, 1, 1, 1, 2, 2, 2], dtype=np.int32),
        produce_rate=rates,
        consume_rate=rates,
        capacity=np.full(3, np.nan),
        capacity_source=("equal",) * 3,
        recent_moves=(),
        snapshots_seen=3,
    )
    owners = OraclePlanner().plan(obs, Truth(rates, np.full(3, 100.0)))
    assert owners is not None
    assert owners.tolist() == [0, 2, 1, 1, 1, 2, 0, 1]


def test_advisor_planner_passes_estimated_capacities_as_production_does():
    # The simulator runs the production rule with the production inputs. A holds
    # p0 at 110 msg/s against a capacity of 100; B holds p1 + p2 (20 msg/s) at a measured 200. No lag.
    # Measured, A is overloaded (110 >= 98 % of 100) and the rule moves p0 to B (130 < 196).
    # Estimated (group median: A was never seen saturated) and A just received p0, the rule's
    # optimistic estimate raises A to what its current load needs, 110 / 0.98 x 1.01 = 113.4, so
    # nothing is overloaded, the group has no lag and the outcome is idle: no plan. Estimated but
    # holding p0 for longer than the hysteresis window, A is judged on its estimate: p0 moves.
    from datetime import timedelta

    from rebalance_advisor.domain.group_spec import RecentMove
    from rebalance_advisor.domain.simulation import EPOCH, AdvisorPlanner, make_planner

    received = (RecentMove("t", 0, "B", "A", EPOCH + timedelta(seconds=600)),)

    def observe(source: str, recent: tuple[RecentMove, ...] = received) -> Observation:
        rates = np.array([110.0, 10.0, 10.0])
        return Observation(
            time_s=900.0,
            member_ids=("A", "B"),
            member_topics=(("t",), ("t",)),
            partition_topic=("t",) * 3,
            partition_number=np.arange(3),
            lag=np.zeros(3, dtype=np.int64),
            owner=np.array([0, 1, 1], dtype=np.int32),
            produce_rate=rates,
            consume_rate=rates,
            capacity=np.array([100.0, 200.0]),
            capacity_source=(source, "measured"),
            recent_moves=recent,
            snapshots_seen=4,
        )

    scenario = parse_scenario(WORKED, strategy="rate_aware")
    truth = Truth(np.array([110.0, 10.0, 10.0]), np.array([100.0, 200.0]))
    planner = make_planner("rate_aware", scenario)
    assert isinstance(planner, AdvisorPlanner)
    measured = planner.plan(observe("measured"), truth)
    assert measured is not None and measured[0] == 1
    for source in ("group_median", "own_rate"):
        assert make_planner("rate_aware", scenario).plan(observe(source), truth) is None, source
        held = make_planner("rate_aware", scenario).plan(observe(source, recent=()), truth)
        assert held is not None and held[0] == 1, source


def test_drained_when_the_total_lag_is_what_steady_production_leaves():
    # One member at 100 msg/s, one partition produced at 50 msg/s with 10,000 behind: the backlog
    # shrinks by 100 - 50 = 50 msg/s. Steady production leaves 10 s x 50 = 500 messages (the
    # capacity rule's busy_backlog_s), reached after (10,000 - 500) / 50 = 190 s; a rule that waited
    # for an empty log would say 200 s. Before 190 s the oldest unread record grows older; after it
    # the partition is caught up (the fluid model serves all of its inflow), so the p99 after the
    # drain is 0 while the all-time p99 is not.
    data = {
        "topics": [{"name": "t", "partitions": 1, "rates": [50.0], "lags": [10_000.0]}],
        "members": [{"id": "m", "capacity": 100.0}],
        "hours": 0.25,
        "handover_s": 0,
        "strategy": "range",
    }
    summary = simulate(parse_scenario(data)).summary
    assert summary.time_to_drain_s == pytest.approx(190.0)
    assert summary.p99_time_lag_after_drain_s == pytest.approx(0.0, abs=1e-6)
    assert summary.p99_time_lag_s > 30.0
    # a run that starts caught up is drained at 0 and its two p99s are the same
    data["topics"][0]["lags"] = [0.0]
    calm = simulate(parse_scenario(data)).summary
    assert calm.time_to_drain_s == 0.0
    assert calm.p99_time_lag_after_drain_s == calm.p99_time_lag_s


def test_observed_rates_are_the_snapshot_ewma():
    # One partition at 100 msg/s, x3 at 300 s; snapshots every 300 s, EWMA time constant 300 s
    # (estimates.RateParameters). At 300 s the first interval's rate is taken as is: 100. At 600 s the
    # interval's rate is 300 and alpha = 1 - e^-1 = 0.6321: 100 + 0.6321 x 200 = 226.4 (a window over
    # the last interval would say 300). With a time constant of 60 s, alpha = 1 - e^-5 = 0.9933: 298.7.
    data = {
        "topics": [{"name": "t", "partitions": 1, "rates": [100.0]}],
        "members": [{"id": "m", "capacity": 1000.0}],
        "events": [{"at_s": 300, "kind": "rate_jump", "factor": 3.0}],
        "replan_interval_s": 300,
        "hours": 0.25,
        "rate_pass_s": 0,
    }
    for tau, expected in ((300.0, 100 + (1 - math.exp(-1)) * 200), (60.0, 100 + (1 - math.exp(-5)) * 200)):
        rec = Recorder()
        simulate(parse_scenario({**data, "rate_time_constant_s": tau}), rec)
        seen = {obs.time_s: obs for obs, _ in rec.seen}
        assert math.isnan(seen[0.0].produce_rate[0])
        assert seen[300.0].produce_rate[0] == pytest.approx(100.0)
        assert seen[600.0].produce_rate[0] == pytest.approx(expected, rel=1e-9)


def test_simulated_capacity_needs_backlog_above_the_snapshot_floor():
    # One member at 100 msg/s, one partition at 101 msg/s: the lag grows by 1 message a second, so a
    # snapshot at t seconds shows t behind. The snapshot rule counts a partition as backlogged only
    # above busy_backlog_s (10 s) of its produce rate = 1,010 messages, at both ends of an interval:
    # first at 1,020 -> 1,080 s (960 at 1,020 - 60 is below). Measured then at what it consumed,
    # 100 msg/s. Without the floor it would be measured at 120 s (60 and 120 behind).
    data = {
        "topics": [{"name": "t", "partitions": 1, "rates": [101.0]}],
        "members": [{"id": "m", "capacity": 100.0}],
        "replan_interval_s": 60,
        "hours": 0.35,
    }
    rec = Recorder()
    simulate(parse_scenario(data), rec)
    first = next(obs for obs, _ in rec.seen if obs.capacity_source[0] == "measured")
    assert first.time_s == 1080.0
    assert first.capacity[0] == pytest.approx(100.0)
    assert all(math.isnan(obs.capacity[0]) for obs, _ in rec.seen if obs.time_s < 1080.0)


def test_a_snapshot_without_rates_is_followed_by_a_second_pass():
    # Snapshots every 300 s; the first (0 s) gives no rates, so a second pass follows 30 s later and
    # the planner runs on that one only (as the snapshot service does: estimates.wants_rate_pass).
    # range puts t-0 (120 msg/s) and t-1 (60) on a (capacity 100): the oracle moves t-0 to b. With
    # the pass it plans at 30 s: until then a gets 180 msg/s and reads 100, so the group is
    # 80 x 30 = 2,400 behind at 30 s and overloaded for 30 s of the 1,800. Without the pass
    # (rate_pass_s 0) the oracle plans at 0 s: never overloaded. The planner's first observation is
    # the pass's: rates over its 30 s.
    data = {
        "topics": [{"name": "t", "partitions": 3, "rates": [120, 60, 30]}],
        "members": [{"id": "a", "capacity": 100}, {"id": "b", "capacity": 200}],
        "hours": 0.5,
        "replan_interval_s": 300,
        "strategy": "oracle",
    }
    result = simulate(parse_scenario(data))
    at = {float(t): i for i, t in enumerate(result.time_s)}
    assert result.summary.moves == 1 and result.moves[at[35.0]] == 1  # made as the step from 30 s starts
    assert result.summary.overloaded_share == pytest.approx(30 / 1800)
    assert result.total_lag[at[30.0]] == pytest.approx(80 * 30)
    rec = Recorder()
    simulate(parse_scenario({**data, "strategy": "range"}), rec)
    assert [obs.time_s for obs, _ in rec.seen] == [30.0, 300.0, 600.0, 900.0, 1200.0, 1500.0]
    assert rec.seen[0][0].rate_interval_s == pytest.approx(30.0)
    assert rec.seen[0][0].produce_rate == pytest.approx([120, 60, 30], rel=1e-3)
    blind = simulate(parse_scenario({**data, "rate_pass_s": 0}))
    assert blind.moves[0] == 1 and blind.summary.overloaded_share == 0.0
    # a second pass not before the next scheduled snapshot is none: the planner runs on the first
    rec = Recorder()
    simulate(parse_scenario({**data, "strategy": "range", "rate_pass_s": 300}), rec)
    assert rec.seen[0][0].time_s == 0.0


@dataclass
class _MovesOnce:
    """Moves every partition to the other member at its first call, then keeps them; records when
    it was asked and whether some capacity was unknown (NaN: no member saturated, none measured)."""

    name: str = "moves_once"
    asked: list[tuple[float, bool]] = field(default_factory=list)

    def plan(self, obs: Observation, truth: Truth) -> np.ndarray | None:
        self.asked.append((obs.time_s, bool(np.isnan(obs.capacity).any())))
        if len(self.asked) > 1:
            return None
        return np.where(obs.owner >= 0, 1 - obs.owner, 0).astype(np.int64)


#: two members, produce 50/s each partition, planned every 300 s; the rate pass at 30 s
PASSING = {
    "topics": [{"name": "t0", "partitions": 4, "total_rate": 200.0}],
    "members": [{"id": "C0", "capacity": 1000}, {"id": "C1", "capacity": 1000}],
    "hours": 0.25,
    "replan_interval_s": 300.0,
    "rate_pass_s": 30.0,
}


@pytest.mark.parametrize(
    ("changes", "asked"),
    [
        # the plan at 30 s (after the rate pass) moved partitions on unknown capacities: two more, at
        # 30 + 40 = 70 s (its handovers over) and 70 + 120 = 190 s (which measures the members loaded)
        ({}, [30.0, 70.0, 190.0, 300.0, 600.0]),
        # the pass off: none; each of the two only before the next scheduled plan (300 s)
        ({"capacity_pass_s": 0}, [30.0, 300.0, 600.0]),
        ({"capacity_pass_s": 230}, [30.0, 70.0, 300.0, 600.0]),
        ({"capacity_pass_s": 200}, [30.0, 70.0, 270.0, 300.0, 600.0]),
        # capacities known from the start: no member is unknown, no pass
        ({"capacities_known": True}, [30.0, 300.0, 600.0]),
    ],
)
def test_a_plan_on_unknown_capacities_is_followed_by_a_capacity_pass(changes, asked):
    planner = _MovesOnce()
    result = simulate(parse_scenario({**PASSING, **changes}, strategy="range"), planner)
    assert [t for t, _ in planner.asked] == asked
    assert planner.asked[0][1] == ("capacities_known" not in changes)  # unknown at the first plan
    assert result.summary.moves == 4


def test_no_capacity_pass_after_a_plan_that_moved_nothing():
    @dataclass
    class Keeps:
        name: str = "keeps"
        times: list[float] = field(default_factory=list)

        def plan(self, obs: Observation, truth: Truth) -> np.ndarray | None:
            self.times.append(obs.time_s)
            return obs.owner.astype(np.int64)  # the same owners: nothing moves

    planner = Keeps()
    simulate(parse_scenario(PASSING, strategy="range"), planner)
    assert planner.times == [30.0, 300.0, 600.0]
