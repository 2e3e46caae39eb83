"""The closed-loop deadlock (bench/closed_loop.py, the advisor loop's run): an idle member's capacity
"measured" as its inflow, because a caught-up consumer always shows the lag of records it fetched
but has not committed yet. Every member then looks saturated and no plan improves the group.

Numbers worked out by hand. Group g, topic t, snapshots 60 s apart, members listed by the broker:
- ``slow`` (true capacity 100/s) owns p0: produced 90/s, consumed 100/s, lag 21,000 falling by 600
  per interval: busy, so measured at 100/s;
- ``fast`` (true capacity 250/s, measured at 250 before this hour) owns p1 at 60/s and p2 at 20/s,
  caught up: their lags stay 60 and 20 (one second of production in flight), consumed 80/s.
"""

from __future__ import annotations

import math
from datetime import UTC, datetime, timedelta

import pytest
from rebalance_advisor.domain.decisions import Thresholds
from rebalance_advisor.domain.estimates import (
    Carried,
    CarriedCapacity,
    RateParameters,
    observe_snapshot,
    step,
)
from rebalance_advisor.domain.group_planning import (
    catch_up_floor,
    plan_group,
)
from rebalance_advisor.domain.group_spec import parse_group_spec
from rebalance_advisor.domain.load_model import load_inputs
from rebalance_advisor.domain.snapshot_model import (
    CommittedOffset,
    Group,
    GroupMemberSnapshot,
    PartitionOffsets,
    Snapshot,
)

T0 = datetime(2026, 1, 1, 12, 0, tzinfo=UTC)
INTERVAL_S = 60.0
RATES = {0: 90, 1: 60, 2: 20}  # produced per second
CONSUMED = {0: 100, 1: 60, 2: 20}  # committed per second
LAG0 = {0: 21_000, 1: 60, 2: 20}
OWNERS = {0: "slow", 1: "fast", 2: "fast"}


def _snapshot(k: int) -> Snapshot:
    """The k-th snapshot: log end and committed offsets after k intervals."""
    ends = {p: 100_000 + RATES[p] * INTERVAL_S * k for p in RATES}
    committed = {p: ends[p] - LAG0[p] - (RATES[p] - CONSUMED[p]) * INTERVAL_S * k for p in RATES}
    members = tuple(
        GroupMemberSnapshot(m, m, "h", assignment=tuple(("t", p) for p in RATES if OWNERS[p] == m))
        for m in ("slow", "fast")
    )
    return Snapshot(
        taken_at=T0 + timedelta(seconds=INTERVAL_S * k),
        bootstrap_servers="b",
        cluster_id="c",
        duration_s=0.1,
        groups=[Group("g", "Stable", "classic", "range", 1, "h", members)],
        committed=[CommittedOffset("g", "t", p, int(c)) for p, c in committed.items()],
        partitions=[PartitionOffsets("t", p, 0, int(e)) for p, e in ends.items()],
    )


def derive_rates(snap: Snapshot, carried: Carried | None, params: RateParameters):
    """The snapshot's rates and capacities (what the store computes when it writes it)."""
    return step(carried, observe_snapshot(snap, carried, params), params)[0]


def _previous(snap: Snapshot, rates, carried) -> Carried:
    ends = {(p.topic, p.partition): p.log_end_offset for p in snap.partitions}
    return Carried(
        cluster="id:c",
        snapshot_id=1,
        taken_at=snap.taken_at,
        log_ends=ends,
        lag_ends=ends,
        produce={k: v.rate for k, v in rates.produce.items()} if rates else {},
        committed={(c.group_id, c.topic, c.partition): c.offset for c in snap.committed},
        consume={k: v.rate for k, v in rates.consume.items()} if rates else {},
        owners={("g", "t", p): m for p, m in OWNERS.items()},
        capacities={k: CarriedCapacity(value, at) for k, (value, at) in carried.items()},
    )


def _capacities_after(intervals: int, params: RateParameters) -> dict[str, tuple[float, str]]:
    """Run the snapshot rule over ``intervals``; fast starts measured at 250/s (an hour before)."""
    carried = {("g", "fast"): (250.0, T0 - timedelta(hours=1))}
    snap, rates = _snapshot(0), None
    for k in range(1, intervals + 1):
        previous = _previous(snap, rates, carried)
        snap = _snapshot(k)
        rates = derive_rates(snap, previous, params)
        carried = {
            ("g", m): (c.capacity, c.measured_at)
            for (_, m), c in rates.capacity.items()
            if c.source == "measured"
        }
    return {m: (c.capacity, c.source) for (_, m), c in rates.capacity.items()}


def test_in_flight_lag_is_not_backlog_so_an_idle_member_keeps_its_measured_capacity():
    # old rule (no floor): fast counts as busy (lags 60 and 20 > 0 at both ends), each interval's
    # sample is its consumption 80/s, smoothed in with alpha = 1 - e^(-60/300): after 20 intervals
    # 80 + (250 - 80) e^(-20 * 0.2) = 80 + 170 e^-4 = 83.11/s
    old = _capacities_after(20, RateParameters(time_constant_s=300.0, busy_backlog_s=0.0))
    assert old["fast"] == (pytest.approx(80 + 170 * math.exp(-4)), "measured")
    assert old["slow"] == (pytest.approx(100.0), "measured")
    # the rule: backlog = lag above 10 s of production (600 and 200 here), so fast is not busy and
    # keeps 250/s; slow (lag 9,000+ > 900) is still measured at 100/s
    new = _capacities_after(20, RateParameters())
    assert new["fast"] == (pytest.approx(250.0), "measured")
    assert new["slow"] == (pytest.approx(100.0), "measured")


def test_a_measured_capacity_is_never_below_what_the_member_consumed():
    # fast carried at 50/s but it consumed 80/s over the interval: it can do at least 80
    carried = {("g", "fast"): (50.0, T0 - timedelta(minutes=5))}
    rates = derive_rates(_snapshot(1), _previous(_snapshot(0), None, carried), RateParameters())
    fast = rates.capacity[("g", "fast")]
    assert (fast.capacity, fast.source) == (pytest.approx(80.0), "measured")
    assert fast.measured_at == T0 + timedelta(seconds=INTERVAL_S)


def _doc(fast_capacity: float) -> dict:
    # after the 20 intervals: slow's p0 lag is 21,000 - 20 x 600 = 9,000
    return {
        "group_id": "g",
        "members": [
            {"member_id": "slow", "topics": ["t"], "owned": [["t", 0]], "capacity": 100.0},
            {"member_id": "fast", "topics": ["t"], "owned": [["t", 1], ["t", 2]], "capacity": fast_capacity},
        ],
        "partitions": [
            {"topic": "t", "partition": 0, "lag": 9_000, "produce_rate": 90.0},
            {"topic": "t", "partition": 1, "lag": 60, "produce_rate": 60.0},
            {"topic": "t", "partition": 2, "lag": 20, "produce_rate": 20.0},
        ],
    }


def test_the_deadlock_and_its_end():
    now = T0 + timedelta(seconds=20 * INTERVAL_S)
    # capacities as the old rule left them: fast 83.1/s (x 0.98 margin = 81.4) with inflow 80 is
    # overloaded (80 >= 98 % of 83.1); slow: 90 in, 9,000 backlog, T = 9,000 / (98 - 90) = 1,125 s.
    # p0 to fast: 90 (or 170) >= 81.4, overloaded; p2 to slow: 110 >= 98, overloaded. No plan.
    stuck = plan_group(_doc(80 + 170 * math.exp(-4)), Thresholds(), now)
    assert stuck.outcome == "no_better_plan", stuck.reason
    # fast at 250/s: p0 to fast takes 90 + 80 = 170 < 245 and drains 9,000 at 75/s (120 s), or the
    # swap drains it at 155/s (58 s): either is far below the 300 s target, so a plan is recommended
    fixed = plan_group(_doc(250.0), Thresholds(), now)
    assert fixed.outcome == "recommended", fixed.reason
    owners = {member for member, _t, p, _lag in fixed.plan.assignments if p == 0}
    assert owners == {"fast"}


# ---- the deadlock with unmeasured members: the capacity probe --------------------------------


def _probe_doc(sources: dict[str, str] | None) -> dict:
    """What bench/closed_loop.py's advisor loop showed: b (measured 166/s) holds the hot partition p0, 142/s with
    15,000 lag; u1 and u2 were never saturated, so their capacity is the group's median, 138/s."""
    d = {
        "group_id": "g",
        "members": [
            {"member_id": "b", "topics": ["t"], "owned": [["t", 0]], "capacity": 166.0},
            {"member_id": "u1", "topics": ["t"], "owned": [["t", 1]], "capacity": 138.0},
            {"member_id": "u2", "topics": ["t"], "owned": [["t", 2]], "capacity": 138.0},
        ],
        "partitions": [
            {"topic": "t", "partition": 0, "lag": 15_000, "produce_rate": 142.0},
            {"topic": "t", "partition": 1, "lag": 50, "produce_rate": 112.0},
            {"topic": "t", "partition": 2, "lag": 40, "produce_rate": 100.0},
        ],
    }
    if sources is not None:
        d["capacity_sources"] = sources
    return d


def test_no_candidate_improves_when_the_fast_members_capacity_is_unknown():
    # 2 % margin: b can use 162.68/s, T = 15,000 / (162.68 - 142) = 725 s > 300 s. Moving p0 to u1 or
    # u2 gives it >= 142 >= 0.98 x 138 = 135.24: overloaded, whatever else moves. No plan improves.
    stuck = plan_group(_probe_doc(None), Thresholds(), T0)
    assert stuck.outcome == "no_better_plan", stuck.reason
    assert "725 s" in stuck.reason


def test_the_probe_hands_the_hot_partition_to_the_estimated_member_with_most_headroom():
    sources = {"b": "measured", "u1": "group_median", "u2": "group_median"}
    probe = plan_group(_probe_doc(sources), Thresholds(), T0)
    assert probe.outcome == "recommended", probe.reason
    assert probe.plan.strategy == "capacity_probe"
    # headroom 135.24 - 112 = 23.24 (u1) < 135.24 - 100 = 35.24 (u2): p0 goes to u2, and b, which
    # would own nothing, takes u2's p2 (100/s, well within its 166/s): a swap, two handovers
    owners = {p: m for m, _t, p, _lag in probe.plan.assignments}
    assert owners == {0: "u2", 1: "u1", 2: "b"}
    assert probe.plan.metrics.moves == 2
    assert probe.best is not None and "t-0 (lag 15,000, 142.0/s) from b" in probe.reason


def test_no_probe_when_the_bottleneck_is_itself_estimated_or_nobody_else_is():
    # b's own capacity is an estimate and b has just received p0: taken as what its load needs,
    # (142 + 15,000 / 300) / 0.98 x 1.01 = 197.9/s (optimistic_estimates), so nothing is flagged; if b
    # is slower it saturates and the next snapshot measures it
    doc = _probe_doc({"b": "group_median", "u1": "group_median", "u2": "measured"})
    doc["recent_moves"] = [
        {"topic": "t", "partition": 0, "from": "u1", "to": "b", "at": "2026-01-01T00:00:00"}
    ]
    both = plan_group(doc, Thresholds(), T0)
    assert both.outcome == "balanced", both.reason
    # held for longer than the hysteresis window, b is judged on its estimate (166/s): catch-up
    # 15,000 / (0.98 x 166 - 142) = 725 s > 300 s; p0 would overload u1 or u2 (142 >= 0.98 x 138), and
    # b's own capacity is the estimate, so no probe either: nothing improves
    doc.pop("recent_moves")
    judged = plan_group(doc, Thresholds(), T0)
    assert judged.outcome == "no_better_plan" and "catch-up 725 s" in judged.reason, judged.reason
    assert "capacity_probe" not in judged.reason
    measured = plan_group(_probe_doc({"b": "measured", "u1": "measured", "u2": "measured"}), Thresholds(), T0)
    assert measured.outcome == "no_better_plan", measured.reason


def test_the_probe_does_not_leave_the_bottleneck_empty():
    # u2 also holds p3 (5/s): headroom u1 23.24, u2 135.24 - 105 = 30.24, so p0 -> u2; b, which
    # would own nothing, takes u2's partitions lightest first while within its usable 162.68/s:
    # p3 (5/s), then p2 (105/s in all), so p0 is alone on u2 (the probe isolates it: below)
    d = _probe_doc({"b": "measured", "u1": "group_median", "u2": "group_median"})
    d["members"][2]["owned"].append(["t", 3])
    d["partitions"].append({"topic": "t", "partition": 3, "lag": 5, "produce_rate": 5.0})
    probe = plan_group(d, Thresholds(), T0)
    assert probe.outcome == "recommended" and probe.plan.strategy == "capacity_probe", probe.reason
    owners = {p: m for m, _t, p, _lag in probe.plan.assignments}
    assert owners == {0: "u2", 1: "u1", 2: "b", 3: "b"}
    assert "which gives b its 2 lightest partitions" in probe.reason


def _loaded_doc() -> dict:
    """A probe's target with load of its own (bench/drain.py steps-10, scaled): every capacity 100/s,
    b measured, u1 and u2 estimated at the group median (right, as it happens)."""
    owned = {"b": [0], "u1": [1, 2], "u2": [3, 4, 5]}
    rates = {0: 80.0, 1: 60.0, 2: 10.0, 3: 50.0, 4: 5.0, 5: 5.0}
    return {
        "group_id": "g",
        "members": [
            {"member_id": m, "topics": ["t"], "owned": [["t", p] for p in parts], "capacity": 100.0}
            for m, parts in owned.items()
        ],
        "partitions": [
            {"topic": "t", "partition": p, "lag": 20_000 if p == 0 else 0, "produce_rate": r}
            for p, r in rates.items()
        ],
        "capacity_sources": {"b": "measured", "u1": "group_median", "u2": "group_median"},
    }


def test_the_probe_isolates_the_hot_partition_on_a_loaded_target():
    # b holds p0 alone: 80/s with 20,000 lag, usable 98/s, catch-up 20,000 / 18 = 1,111 s > 300 s.
    # No strategy shortens it (p0 alone on any member of 100/s drains as slowly) and isolate_backlog
    # has nothing to move off b: the probe. Headroom u1 98 - 70 = 28, u2 98 - 60 = 38: p0 -> u2.
    # Until now u2 gave b only its lightest partition (p4) and kept p3 and p5: 135/s on 98 usable,
    # 138 % (every partition of u2 behind if the estimate is right). Now b, with 98/s of room once p0
    # is gone, takes p4 (5), p5 (5) and p3 (50): 60/s; u2 holds p0 alone, 80 of its 98/s.
    probe = plan_group(_loaded_doc(), Thresholds(), T0)
    assert probe.outcome == "recommended" and probe.plan.strategy == "capacity_probe", probe.reason
    owners = {p: m for m, _t, p, _lag in probe.plan.assignments}
    assert owners == {0: "u2", 1: "u1", 2: "u1", 3: "b", 4: "b", 5: "b"}
    assert "which gives b its 3 lightest partitions" in probe.reason


def test_an_estimated_member_is_not_relieved_on_its_estimate():
    # u1 got 150/s (estimate 138/s: 150 >= 0.98 x 138, overloaded on paper) and 3,000 lag; b is idle.
    d = {
        "group_id": "g",
        "members": [
            {"member_id": "b", "topics": ["t"], "owned": [["t", 1]], "capacity": 166.0},
            {"member_id": "u1", "topics": ["t"], "owned": [["t", 0]], "capacity": 138.0},
        ],
        "partitions": [
            {"topic": "t", "partition": 0, "lag": 3_000, "produce_rate": 150.0},
            {"topic": "t", "partition": 1, "lag": 10, "produce_rate": 10.0},
        ],
    }
    measured = plan_group({**d, "capacity_sources": {"b": "measured", "u1": "measured"}}, Thresholds(), T0)
    assert measured.outcome == "recommended" and "1 member(s) overloaded" in measured.reason, measured.reason
    # estimated, and u1 has just received p0: taken as (150 + 3,000 / 300) / 0.98 x 1.01 = 164.9/s,
    # catch-up 3,000 / (0.98 x 164.9 - 150) = 3,000 / 11.6 = 259 s <= 300 s: nothing to do until a
    # snapshot measures it
    got = [{"topic": "t", "partition": 0, "from": "b", "to": "u1", "at": "2026-01-01T00:00:00"}]
    estimated = plan_group(
        {**d, "capacity_sources": {"b": "measured", "u1": "group_median"}, "recent_moves": got},
        Thresholds(),
        T0,
    )
    assert estimated.outcome == "balanced", estimated.reason
    # not a recent receiver: its estimate stands, and it is relieved as a measured member would be
    settled = plan_group({**d, "capacity_sources": {"b": "measured", "u1": "group_median"}}, Thresholds(), T0)
    assert settled.outcome == "recommended" and "1 member(s) overloaded" in settled.reason, settled.reason


# ---- the held case above target: physics, said in the reason ----------------------------------


def _held_doc() -> dict:
    """bench/closed_loop.py's advisor loop, later (rounded): the hot p0 already sits on the fastest member c
    with only a light p1 beside it; d is caught up."""
    return {
        "group_id": "g",
        "members": [
            {"member_id": "c", "topics": ["t"], "owned": [["t", 0], ["t", 1]], "capacity": 280.0},
            {"member_id": "d", "topics": ["t"], "owned": [["t", 2]], "capacity": 200.0},
        ],
        "partitions": [
            {"topic": "t", "partition": 0, "lag": 9_000, "produce_rate": 200.0},
            {"topic": "t", "partition": 1, "lag": 50, "produce_rate": 3.0},
            {"topic": "t", "partition": 2, "lag": 0, "produce_rate": 100.0},
        ],
    }


def test_a_hold_above_target_says_how_fast_any_plan_could_catch_up():
    # c can use 0.98 x 280 = 274.4/s: now T = 9,050 / (274.4 - 203) = 126.8 s > the 60 s target. The
    # best any plan can do is p0 alone on c: 9,000 / (274.4 - 200) = 121.0 s, 4.6 % better: under the
    # 10 % minimum improvement, so the group is held, and the reason says that is the floor.
    held = plan_group(_held_doc(), Thresholds(target_catch_up_s=60.0), T0)
    assert held.outcome == "no_better_plan", held.reason
    assert "catch-up 127 s" in held.reason
    assert "on these capacities no plan catches up in under 121 s: t-0's lag 9,000 at 200.0/s" in held.reason
    assert "(274.4/s usable)" in held.reason


def test_the_floor_is_infinite_for_a_partition_hotter_than_every_member():
    # p0 at 280/s >= 274.4/s usable on the fastest member: no plan ever drains it
    doc = _held_doc()
    doc["partitions"][0]["produce_rate"] = 280.0
    spec = parse_group_spec(doc)
    floor = catch_up_floor(spec, load_inputs(spec), Thresholds())
    assert floor is not None and math.isinf(floor[0]) and floor[1].startswith("t-0's lag 9,000 at 280.0/s")


# ---- the plan the strategies missed: the hot partition left alone on its member ------------------

#: bench/closed_loop.py's advisor loop (run B), as the planner saw it once: partition -> (lag,
#: produce rate); member -> (capacity, owned partitions). c3 (measured 272.3/s) holds the hot p10.
RUN_B_PARTITIONS = {
    0: (71, 5.0), 1: (142, 9.2), 2: (2, 4.1), 3: (73, 5.8), 4: (127, 4.7), 5: (3, 6.9), 6: (305, 20.4),
    7: (5, 10.2), 8: (114, 10.5), 9: (6, 14.3), 10: (6553, 145.2), 11: (264, 15.5), 12: (24, 62.7),
    13: (3, 5.0), 14: (306, 6.4), 15: (339, 8.3), 16: (114, 4.4), 17: (121, 7.4), 18: (3, 6.9),
    19: (806, 30.1), 20: (551, 12.7), 21: (1237, 42.2), 22: (192, 5.0), 23: (706, 25.8),
}  # fmt: skip
RUN_B_MEMBERS = {
    "c0": (112.4, [0, 1, 3, 6, 8, 11, 17]),
    "c1": (163.4, [4, 16, 19, 21, 23]),
    "c2": (163.4, [2, 5, 7, 9, 12, 13, 18]),
    "c3": (272.3, [10, 14, 15, 20, 22]),
}


def _run_b_doc() -> dict:
    return {
        "group_id": "g",
        "members": [
            {"member_id": m, "topics": ["t"], "owned": [["t", p] for p in owned], "capacity": cap}
            for m, (cap, owned) in RUN_B_MEMBERS.items()
        ],
        "partitions": [
            {"topic": "t", "partition": p, "lag": lag, "produce_rate": rate}
            for p, (lag, rate) in RUN_B_PARTITIONS.items()
        ],
        "capacity_sources": {"c0": "measured", "c1": "measured", "c2": "group_median", "c3": "measured"},
    }


def test_the_hot_partitions_member_sheds_its_other_partitions_to_measured_members():
    # Usable = 0.98 x capacity. c3: 266.854/s, inflow 145.2 + 6.4 + 8.3 + 12.7 + 5.0 = 177.6, backlog
    # 6,553 + 306 + 339 + 551 + 192 = 7,941: T = 7,941 / 89.254 = 88.97 s > 60 s. The strategies' best
    # was 81 s (under the 10 % minimum); the probe then took p10 off c3. Shedding, hottest first, to the
    # measured member whose T stays shortest (lag + 5 s of production; c2 is an estimate: never),
    # while that stays under 88.97 s. c0: 110.152 usable, 73.8 in, 1,090 behind; c1: 160.132, 107.2, 2,990.
    # - p20 (12.7/s, 551 + 63.5): c0 1,704.5 / 23.652 = 72.1 s, c1 3,604.5 / 40.232 = 89.6 s -> c0
    # - p15 (8.3/s, 339 + 41.5): c0 2,085 / 15.352 = 135.8 s, c1 3,370.5 / 44.632 = 75.5 s -> c1
    # - p14 (6.4/s): c0 118.4 s, c1 3,708.5 / 38.232 = 97.0 s; p22 (5/s): c0 103.0 s, c1 90.5 s: both stay
    # c3 then: 7,051 / (266.854 - 156.6) = 64.0 s; the group's catch-up is c1's 75.5 s: 76 s, -15.1 %.
    advice = plan_group(_run_b_doc(), Thresholds(target_catch_up_s=60.0), T0)
    assert advice.outcome == "recommended", advice.reason
    assert advice.plan.strategy == "isolate_backlog", advice.reason
    owners = {p: m for m, _t, p, _lag in advice.plan.assignments}
    assert sorted(p for p, m in owners.items() if m == "c3") == [10, 14, 22]
    assert (owners[20], owners[15]) == ("c0", "c1")
    assert advice.plan.metrics.moves == 2
    assert (
        "predicted catch-up 89 s -> 76 s" in advice.reason
        or "predicted catch-up 89 s -> 75 s" in advice.reason
    )
    assert "so that t-10 (lag 6,553, 145.2/s) drains faster there (64 s)" in advice.reason
    # a move budget of 2 handovers: the probe's own and one more, the lightest (which b needs anyway)
    budgeted = plan_group(_loaded_doc(), Thresholds(move_budget=2), T0)
    assert budgeted.outcome == "recommended" and budgeted.plan.strategy == "capacity_probe", budgeted.reason
    owners = {p: m for m, _t, p, _lag in budgeted.plan.assignments}
    assert owners == {0: "u2", 1: "u1", 2: "u1", 3: "u2", 4: "b", 5: "u2"}
