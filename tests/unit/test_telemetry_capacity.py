"""The ``telemetry`` capacity source: the rule's gates and the reader of the plugin's topic.
Expected values are worked out by hand from the numbers in each test."""

from __future__ import annotations

import json
import math
import random
from dataclasses import replace
from datetime import UTC, datetime, timedelta

import pytest
from rebalance_advisor.adapters.client_telemetry import TelemetryRead, apply_record, decode_sample
from rebalance_advisor.domain import telemetry
from rebalance_advisor.domain.estimates import CarriedCapacity
from rebalance_advisor.domain.telemetry import (
    TelemetryParameters,
    TelemetryReadings,
    TelemetryReference,
    TelemetrySample,
    correct_busy,
    telemetry_capacity,
)

NOW = 1_000_000.0
#: the carried snapshot's time in the step tests (``_step_with``)
_T0 = datetime(2026, 1, 1, 12, 0, tzinfo=UTC)


def sample(
    idle: float | None,
    *,
    age: float = 1.0,
    software: str = "confluent-kafka-python",
    recent: tuple[tuple[float, float], ...] = (),
    between_ms: float | None = None,
) -> TelemetrySample:
    return TelemetrySample(
        group="g",
        member_id="m",
        instance_id="",
        client_id="c",
        software_name=software,
        software_version="2.16.1",
        idle_ratio=idle,
        idle_time=NOW - age,
        records_consumed=None,
        records_start=0.0,
        records_time=0.0,
        records_delta=False,
        push_interval_s=5.0,
        received=NOW - age,
        time_between_poll_ms=between_ms,
        recent_idle=recent,
    )


@pytest.fixture
def identity(monkeypatch: pytest.MonkeyPatch) -> None:
    """The gates alone, without a client's correction."""
    monkeypatch.setattr(telemetry, "CALIBRATION", {})


def test_capacity_is_the_rate_over_the_busy_share(identity: None) -> None:
    # 120 records/s while idle 40 % of the time: busy 60 %, so it could do 120 / 0.6 = 200/s
    verdict = telemetry_capacity(sample(0.4), 120.0, lag_growth=0, now=NOW)
    assert verdict.capacity == pytest.approx(200.0)
    assert verdict.busy == pytest.approx(0.6)


def test_a_member_busy_under_a_fifth_gives_no_sample(identity: None) -> None:
    # idle 85 %: busy 15 % < 20 %
    verdict = telemetry_capacity(sample(0.85), 30.0, lag_growth=0, now=NOW)
    assert verdict.capacity is None and "too idle" in verdict.reason
    # idle 79 %: busy 21 %, used: 42 / 0.21 = 200
    assert telemetry_capacity(sample(0.79), 42.0, 0, NOW).capacity == pytest.approx(200.0)


def test_a_sample_older_than_two_push_intervals_is_ignored(identity: None) -> None:
    # pushes every 5 s: 10 s old is still the newest push (one in flight), 10.5 s is not
    assert telemetry_capacity(sample(0.5, age=10.0), 100.0, 0, NOW).capacity == pytest.approx(200.0)
    stale = telemetry_capacity(sample(0.5, age=10.5), 100.0, 0, NOW)
    assert stale.capacity is None and "old" in stale.reason


def test_idle_while_lag_grows_is_distrusted(identity: None) -> None:
    # idle 70 % at 100/s, but its lag grew by 1,500 records (15 s of its rate > 10 s): the work is done
    # elsewhere (a worker pool), so 100 / 0.3 = 333/s would be a lie
    verdict = telemetry_capacity(sample(0.7), 100.0, lag_growth=1500, now=NOW)
    assert verdict.capacity is None
    assert verdict.reason.startswith("distrusted") and "off the poll thread" in verdict.reason
    # lag grew by only 900 (< 10 s of 100/s): trusted
    assert telemetry_capacity(sample(0.7), 100.0, lag_growth=900, now=NOW).capacity == pytest.approx(
        333.33, 0.001
    )
    # busy 85 % (>= 80 %) with growing lag: a saturated poll-thread consumer, its rate is its capacity
    assert telemetry_capacity(sample(0.15), 170.0, lag_growth=5000, now=NOW).capacity == pytest.approx(200.0)


def test_no_rate_or_no_idle_ratio_gives_no_sample(identity: None) -> None:
    assert telemetry_capacity(sample(0.5), 0.0, 0, NOW).capacity is None
    assert telemetry_capacity(sample(0.5), None, 0, NOW).capacity is None
    assert telemetry_capacity(sample(None), 100.0, 0, NOW).reason == "no idle ratio in the telemetry"
    assert telemetry_capacity(None, 100.0, 0, NOW).reason == "no telemetry"


@pytest.mark.parametrize("bad", [float("nan"), -0.1, 1.2, float("inf")])
def test_absurd_idle_ratios_are_no_sample(identity: None, bad: float) -> None:
    assert telemetry_capacity(sample(bad), 100.0, 0, NOW).capacity is None


def test_correction_is_piecewise_linear_through_the_points(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(telemetry, "CALIBRATION", {"java": ((0.0, 0.0), (0.5, 0.2), (1.0, 1.0))})
    assert correct_busy("java", 0.25) == pytest.approx(0.1)
    assert correct_busy("java", 0.75) == pytest.approx(0.6)
    assert correct_busy("java", 1.0) == pytest.approx(1.0)
    assert correct_busy("librdkafka", 0.3) == pytest.approx(0.3), "no points: as reported"
    assert sample(0.5, software="apache-kafka-java").family == "java"


def test_librdkafka_per_cycle_idle_ratio_is_inverted_through_its_queueing_model() -> None:
    """Half busy, one record per poll, Poisson arrivals: half the cycles find a record waiting (idle
    0), the others idle W / (W + c) with W ~ Exp(l), l c = 0.5, mean 1 - 0.5 e^0.5 E1(0.5) =
    1 - 0.5 x 1.6487213 x 0.5597736 = 0.5385449 (E1 from tables); reported idle 0.2692725."""
    assert telemetry.exponential_integral(0.5) == pytest.approx(0.5597736, abs=1e-7)
    assert telemetry.librdkafka_reported_busy(0.5) == pytest.approx(1 - 0.2692725, abs=1e-6)
    assert correct_busy("librdkafka", 1 - 0.2692725) == pytest.approx(0.5, abs=0.002)
    # a consumer that only waits reads idle, one that never waits reads busy
    assert correct_busy("librdkafka", 0.0) == 0.0 and correct_busy("librdkafka", 1.0) == 1.0
    # at 20 % busy librdkafka reads 43.9 % (E1(0.2) = 1.2226505): the capacity is not halved
    assert correct_busy("librdkafka", 1 - 0.8 * (1 - 0.2 * 1.2214028 * 1.2226505)) == pytest.approx(
        0.2, abs=0.002
    )


def simulated_java_sensor(true_busy: float, polls: int, seed: int) -> float:
    """Java's poll-idle sensor, simulated poll by poll (independent of the model under test)."""
    return simulated_java_polls(true_busy, polls, seed)[0]


def simulated_java_polls(true_busy: float, polls: int, seed: int) -> tuple[float, float]:
    """Records arrive at random, each poll returns every record waiting (or waits for the next one),
    each record costs 1 s, and the sensor averages wait / (wait + time since the previous poll's
    start): (the busy share the sensor reports, the mean records a poll returned)."""
    rng = random.Random(seed)
    now, next_arrival, waiting, previous_start, total = 0.0, rng.expovariate(true_busy), 0, None, 0.0
    returned = 0
    for _ in range(polls):
        start = now
        while next_arrival <= now:
            waiting, next_arrival = waiting + 1, next_arrival + rng.expovariate(true_busy)
        wait = 0.0
        if not waiting:
            wait, waiting = next_arrival - now, 1
            next_arrival += rng.expovariate(true_busy)
        if previous_start is not None:
            total += wait / (wait + start - previous_start)
        returned += waiting
        previous_start, now, waiting = start, start + wait + waiting, 0
    return 1.0 - total / (polls - 1), returned / polls


@pytest.mark.parametrize("true_busy", [0.2, 0.5, 0.9])
def test_java_sensor_model_matches_a_simulated_sensor_and_inverts(true_busy: float) -> None:
    simulated = simulated_java_sensor(true_busy, polls=60_000, seed=7)
    assert telemetry.java_reported_busy(true_busy) == pytest.approx(simulated, abs=0.006)
    assert correct_busy("java", simulated) == pytest.approx(true_busy, rel=0.04)


def test_java_reading_at_a_fifth_busy_is_not_read_as_a_tenth() -> None:
    """A consumer that only waits reads idle 0.5 (busy 0); at 20 % busy Java reads idle 0.389
    (simulated above), which busy = 1 - 2 x idle took for 22 % busy. 40 records/s at 20 % busy is a
    200/s consumer; idle 0.45 is about 9 % busy, too idle to say."""
    java = "apache-kafka-java"
    assert telemetry_capacity(sample(0.5, software=java), 20.0, 0, NOW).busy == 0.0
    assert telemetry_capacity(sample(0.389, software=java), 40.0, 0, NOW).capacity == pytest.approx(
        200.0, rel=0.03
    )
    assert telemetry_capacity(sample(0.45, software=java), 20.0, 0, NOW).capacity is None


def test_scaled_exponential_integral_against_tables() -> None:
    """e^x E1(x) from tabulated E1: E1(1) = 0.21938393, E1(2) = 0.04890051, E1(5) = 0.001148296."""
    assert telemetry.scaled_exponential_integral(1.0) == pytest.approx(2.7182818 * 0.21938393, rel=1e-6)
    assert telemetry.scaled_exponential_integral(2.0) == pytest.approx(7.3890561 * 0.04890051, rel=1e-6)
    assert telemetry.scaled_exponential_integral(5.0) == pytest.approx(148.41316 * 0.001148296, rel=1e-5)
    assert telemetry.scaled_exponential_integral(1.0001) == pytest.approx(2.7185537 * 0.21934, rel=1e-4)


def test_gate_parameters_are_one_place() -> None:
    params = TelemetryParameters(min_busy=0.5)
    assert telemetry_capacity(sample(0.6), 40.0, 0, NOW, params).capacity is None


def _value(**overrides: object) -> bytes:
    value = {
        "version": 1,
        "group": "g",
        "member_id": "m",
        "instance_id": "i",
        "client_id": "c",
        "software_name": "apache-kafka-java",
        "software_version": "4.3.1",
        "idle_ratio": 0.25,
        "idle_time_ms": 5000,
        "records_consumed": 700.0,
        "records_start_ms": 0,
        "records_time_ms": 5000,
        "records_delta": True,
        "push_interval_ms": 5000,
        "received_ms": 5100,
        "broker": "1",
    }
    value.update(overrides)
    return json.dumps(value).encode()


KEY = json.dumps({"group": "g", "member_id": "m"}).encode()


def test_reader_keeps_the_newest_sample_and_drops_a_tombstoned_member() -> None:
    read = TelemetryRead()
    apply_record(read, KEY, _value(idle_ratio=0.5))
    apply_record(read, KEY, _value(idle_ratio=0.25))
    got = read.samples[("g", "m")]
    assert (got.idle_ratio, got.idle_time, got.push_interval_s, got.received) == (0.25, 5.0, 5.0, 5.1)
    assert got.records_delta and got.records_consumed == 700.0
    apply_record(read, KEY, None)
    assert read.samples == {}


def test_reader_skips_and_counts_what_it_cannot_use() -> None:
    read = TelemetryRead()
    apply_record(read, b"not json", _value())
    apply_record(read, KEY, b"{broken")
    apply_record(read, KEY, _value(version=2))
    apply_record(read, KEY, _value(push_interval_ms=0))
    apply_record(read, None, _value())
    assert read.skipped == 5 and read.samples == {}
    apply_record(read, json.dumps({"broker": "1"}).encode(), json.dumps({"pushes": 3}).encode())
    assert read.broker_counters == {"1": {"pushes": 3}}


def test_reader_takes_null_or_text_numbers_as_absent() -> None:
    got = decode_sample(json.loads(_value(idle_ratio=None, records_consumed="12")))
    assert got is not None and got.idle_ratio is None and got.records_consumed is None


# ---- the source inside the one capacity rule (domain/estimates.step) ----------------------------


def _pushed_at(member: str, idle: float, taken: float) -> TelemetrySample:
    """Member ``member`` of g pushed ``idle`` 5 s before the snapshot at ``taken`` (confluent-kafka)."""
    return TelemetrySample(
        "g", member, "", "c", "confluent-kafka-python", "2.16.1", idle, taken - 5, None, 0, 0, False, 5.0,
        taken - 4,
    )  # fmt: skip


def _step_with(
    idle: float,
    committed_after: dict[int, int],
    reports: dict | None = None,
    capacities: dict | None = None,
    idle_b: float | None = None,
    evidence: dict | None = None,
    elapsed_s: float = 60.0,
    references: dict | None = None,
):
    """Group g: a holds t-0, b holds t-1, both caught up at 1,000 at T0. 60 s later t-0 and t-1 have
    appended 600 each; a pushed ``idle`` 5 s before the snapshot (confluent-kafka), and b
    ``idle_b`` when given. ``evidence``: the carried arrivals evidence by group; ``elapsed_s``: the
    interval (60 s); ``references``: the carried telemetry references."""
    from rebalance_advisor.domain.estimates import Carried, Observed, ObservedMember, step

    carried = Carried(
        cluster="id:c",
        taken_at=_T0,
        log_ends={("t", 0): 1000, ("t", 1): 1000},
        lag_ends={("t", 0): 1000, ("t", 1): 1000},
        produce={("t", 0): 10.0, ("t", 1): 10.0},
        committed={("g", "t", 0): 1000, ("g", "t", 1): 1000},
        consume={("g", "t", 0): 10.0, ("g", "t", 1): 10.0},
        owners={("g", "t", 0): "a", ("g", "t", 1): "b"},
        capacities=capacities or {},
        arrivals_evidence=evidence or {},
        telemetry_references=references or {},
    )
    taken = _T0 + timedelta(seconds=elapsed_s)
    pushed = {"a": idle} | ({} if idle_b is None else {"b": idle_b})
    heard = {("g", member): _pushed_at(member, ratio, taken.timestamp()) for member, ratio in pushed.items()}
    observed = Observed(
        cluster="id:c",
        taken_at=taken,
        log_ends={("t", 0): 1600, ("t", 1): 1600},
        lag_ends={("t", 0): 1600, ("t", 1): 1600},
        committed={("g", "t", p): c for p, c in committed_after.items()},
        members=(ObservedMember("g", "a", "a", (("t", 0),)), ObservedMember("g", "b", "b", (("t", 1),))),
        reports=reports or {},
        telemetry=heard,
    )
    return step(carried, observed)


def test_step_takes_telemetry_when_nothing_better_is_known(identity: None) -> None:
    # a consumed 600 in 60 s (10/s, caught up: no busy sample) at idle 50 %: 10 / 0.5 = 20/s;
    # b has no telemetry: the group median of measured members, 20 (1.2 x its 10/s = 12 is less)
    rates, carried = _step_with(0.5, {0: 1600, 1: 1600})
    a, b = rates.capacity[("g", "a")], rates.capacity[("g", "b")]
    assert (a.capacity, a.source) == (pytest.approx(20.0), "telemetry")
    assert (b.capacity, b.source) == (pytest.approx(20.0), "group_median")
    assert carried.capacities[("g", "a")].source == "telemetry"


def test_step_prefers_the_helpers_report_over_telemetry(identity: None) -> None:
    rates, _ = _step_with(0.5, {0: 1600, 1: 1600}, reports={("g", "a"): 33.0})
    assert (rates.capacity[("g", "a")].capacity, rates.capacity[("g", "a")].source) == (33.0, "reported")


def test_a_capacity_measured_at_saturation_outranks_later_telemetry(identity: None) -> None:
    """a was measured at 14/s while saturated 30 min before; now caught up at 10/s its telemetry says
    idle 50 %: 10 / 0.5 = 20/s. Saturation showed 14: telemetry is not used (a steady arrival
    spacing reads that way, bench/drain.py cap2x-z1.5-telemetry-regular). Once the measurement is
    older than a day (``capacity_max_age_s``) telemetry speaks again."""
    recent = {("g", "a"): CarriedCapacity(14.0, _T0 - timedelta(minutes=30), "measured")}
    rates, carried = _step_with(0.5, {0: 1600, 1: 1600}, capacities=recent)
    a = rates.capacity[("g", "a")]
    assert (a.capacity, a.source) == (pytest.approx(14.0), "measured")
    assert a.note is not None and a.note.startswith("telemetry not used: 14.0/s measured")
    assert carried.capacities[("g", "a")] == recent[("g", "a")]
    stale = {("g", "a"): CarriedCapacity(14.0, _T0 - timedelta(hours=25), "measured")}
    rates, _ = _step_with(0.5, {0: 1600, 1: 1600}, capacities=stale)
    assert (rates.capacity[("g", "a")].capacity, rates.capacity[("g", "a")].source) == (
        pytest.approx(20.0),
        "telemetry",
    )


@pytest.fixture
def halving(monkeypatch: pytest.MonkeyPatch) -> None:
    """A librdkafka random-arrival correction through (0, 0), (0.5, 0.25), (1, 1); its steady one
    stays the identity."""
    monkeypatch.setattr(telemetry, "CALIBRATION", {"librdkafka": ((0.0, 0.0), (0.5, 0.25), (1.0, 1.0))})


def test_a_member_measured_at_saturation_makes_its_group_read_as_steady(halving: None) -> None:
    """a was measured at 14/s at saturation; now 10/s at reported busy 0.7. Random: 0.7 -> 0.25 +
    0.2 / 0.5 x 0.75 = 0.55, 10 / 0.55 = 18.18/s (off log(18.18 / 14) = 0.2614); steady: 10 / 0.7
    = 14.29/s (off 0.0206). Evidence 0.2408 > 0: b's telemetry (busy 0.5, 10/s) is read as steady,
    10 / 0.5 = 20/s, where the random model gives 10 / 0.25 = 40/s."""
    measured = {("g", "a"): CarriedCapacity(14.0, _T0 - timedelta(minutes=30), "measured")}
    rates, carried = _step_steady(measured)
    assert rates.arrivals_evidence == {"g": pytest.approx(0.2408, abs=1e-3)}
    assert carried.arrivals_evidence == rates.arrivals_evidence
    b = rates.capacity[("g", "b")]
    assert (b.capacity, b.source) == (pytest.approx(20.0), "telemetry")
    assert b.note is not None and "steady spacing" in b.note
    assert rates.capacity[("g", "a")].capacity == pytest.approx(14.0)  # saturation still outranks
    # no member measured at saturation: nothing to go by, read as random arrivals
    rates, carried = _step_steady({})
    assert rates.capacity[("g", "b")].capacity == pytest.approx(40.0)
    assert rates.arrivals_evidence == {} and carried.arrivals_evidence == {}


def test_the_evidence_is_averaged_over_time_and_carried_without_pairs(halving: None) -> None:
    """Carried evidence -0.5 (read as random), a new sample 0.2408 over 60 s at tau 1,800 s:
    alpha = 1 - e^(-60 / 1800) = 0.03278, -0.5 + 0.03278 x 0.7408 = -0.4757: still random."""
    measured = {("g", "a"): CarriedCapacity(14.0, _T0 - timedelta(minutes=30), "measured")}
    rates, _ = _step_steady(measured, {"g": -0.5})
    assert rates.arrivals_evidence["g"] == pytest.approx(-0.5 + (1 - math.exp(-60 / 1800)) * 0.7408, abs=1e-3)
    assert rates.capacity[("g", "b")].capacity == pytest.approx(40.0)
    # no member measured at saturation now: the carried evidence stays, and decides (steady)
    rates, _ = _step_steady({}, {"g": 0.3})
    assert rates.arrivals_evidence == {"g": 0.3}
    assert rates.capacity[("g", "b")].capacity == pytest.approx(20.0)


@pytest.mark.parametrize("elapsed_s", [-30 * 86400.0, 2.0, 7200.0])
def test_an_interval_without_rates_keeps_the_carried_evidence(halving: None, elapsed_s: float) -> None:
    """A snapshot older than the carried one, or too close to it or too far from it, gives no rates:
    the evidence stays as carried (a snapshot stored 30 days back once raised on exp(+1440))."""
    measured = {("g", "a"): CarriedCapacity(14.0, _T0 - timedelta(minutes=30), "measured")}
    rates, carried = _step_steady(measured, {"g": -0.5, "gone": 0.4}, elapsed_s)
    assert rates.arrivals_evidence == {"g": -0.5} and carried.arrivals_evidence == {"g": -0.5}


def test_a_members_readings_at_two_loads_make_its_group_read_as_steady(halving: None) -> None:
    """No member measured at saturation. a's reference: 5/s read as 28.57/s at random and 14.29/s
    steady (a steady world of capacity 14.29: busy 0.35, the halving model's random busy 0.175). Now
    a consumes 10/s at reported busy 0.7: random 10 / 0.55 = 18.18/s, steady 14.29/s. Its load rose
    x2 while the two models' mean capacity fell: drift -1 x log(sqrt(18.18 x 14.29 / (28.57 x
    14.29))) = +0.2260, averaged from 0 with alpha 0.03278: 0.00741 > 0. So b (busy 0.5, 10/s) is
    read as steady, 20/s, and a's reference becomes its readings now."""
    then = TelemetryReference(5.0, TelemetryReadings(10 / 0.35, 10 / 0.7))
    rates, carried = _step_steady({}, references={("g", "a"): then})
    alpha = 1 - math.exp(-60 / 1800)
    assert rates.arrivals_evidence == {"g": pytest.approx(alpha * 0.2260, abs=1e-4)}
    b = rates.capacity[("g", "b")]
    assert (b.capacity, b.source) == (pytest.approx(20.0), "telemetry")
    assert b.note is not None and "steady spacing" in b.note
    now_a = carried.telemetry_references[("g", "a")]
    assert now_a.consumed == pytest.approx(10.0)
    assert (now_a.readings.random, now_a.readings.steady) == (
        pytest.approx(18.18, abs=0.01),
        pytest.approx(14.29, abs=0.01),
    )
    assert rates.capacity[("g", "a")].telemetry_reference == now_a  # stored beside its capacity
    # b had no reference: it starts one (10/s; random 10 / 0.25 = 40, steady 20), and gives no pair
    assert carried.telemetry_references[("g", "b")] == TelemetryReference(10.0, TelemetryReadings(40.0, 20.0))


def test_readings_at_nearly_the_same_load_keep_the_reference(halving: None) -> None:
    """a's reference was read at 9/s; now 10/s is under the 1.25 x change: no pair, no evidence,
    the reference stays; b is read at random, 40/s."""
    then = TelemetryReference(9.0, TelemetryReadings(30.0, 12.0))
    rates, carried = _step_steady({}, references={("g", "a"): then, ("g", "gone"): then})
    assert rates.arrivals_evidence == {}
    assert rates.capacity[("g", "b")].capacity == pytest.approx(40.0)
    assert carried.telemetry_references[("g", "a")] == then
    assert ("g", "gone") not in carried.telemetry_references  # a member that left is dropped


def test_a_saturation_pair_outranks_the_readings_at_two_loads(halving: None) -> None:
    """a measured at 14/s and a reference that would read random (its steady reading moved, its
    random one did not): the saturation pair decides, 0.2408 as taken alone."""
    measured = {("g", "a"): CarriedCapacity(14.0, _T0 - timedelta(minutes=30), "measured")}
    then = TelemetryReference(5.0, TelemetryReadings(10 / 0.55, 5.0))
    rates, _ = _step_steady(measured, references={("g", "a"): then})
    assert rates.arrivals_evidence == {"g": pytest.approx(0.2408, abs=1e-3)}


def _step_steady(
    capacities: dict, evidence: dict | None = None, elapsed_s: float = 60.0, references: dict | None = None
):
    """a and b consumed 600 in 60 s (10/s), caught up; a pushed idle 0.3 (reported busy 0.7), b 0.5."""
    return _step_with(
        0.3,
        {0: 1600, 1: 1600},
        capacities=capacities,
        idle_b=0.5,
        evidence=evidence,
        elapsed_s=elapsed_s,
        references=references,
    )


def test_step_notes_why_telemetry_was_distrusted(identity: None) -> None:
    # a committed only 300 (5/s) while 600 arrived: its lag grew by 300 = 60 s of its rate, yet its
    # telemetry says idle 60 %: processing elsewhere; no sample, the note says why
    rates, carried = _step_with(0.6, {0: 1300, 1: 1600})
    a = rates.capacity[("g", "a")]
    assert a.source != "telemetry" and a.note is not None and a.note.startswith("distrusted")
    assert ("g", "a") not in carried.capacities


# the last five pushes (client time, idle ratio), the newest an odd one: busy 0.18 where the others
# read 0.50, 0.48, 0.52, 0.50
ODD_NEWEST = ((NOW - 21, 0.5), (NOW - 16, 0.52), (NOW - 11, 0.48), (NOW - 6, 0.5), (NOW - 1, 0.82))


def test_the_median_of_recent_pushes_outvotes_one_odd_push(identity: None) -> None:
    odd = sample(0.82, recent=ODD_NEWEST)
    # newest alone: busy 0.18 < 0.2, gated
    newest = telemetry_capacity(odd, 50.0, 0, NOW, TelemetryParameters(summary="newest"), window_s=30)
    assert newest.capacity is None and "too idle" in newest.reason
    # median of 0.50, 0.48, 0.52, 0.50, 0.18 = 0.50: 50/s is a 100/s consumer
    median = telemetry_capacity(odd, 50.0, 0, NOW, window_s=30)
    assert median.busy == pytest.approx(0.5) and median.capacity == pytest.approx(100.0)
    # mean (0.50 + 0.48 + 0.52 + 0.50 + 0.18) / 5 = 0.436: 50 / 0.436 = 114.7
    mean = telemetry_capacity(odd, 50.0, 0, NOW, TelemetryParameters(summary="mean"), window_s=30)
    assert mean.capacity == pytest.approx(114.68, abs=0.01)


def test_only_pushes_within_the_snapshot_interval_are_summarised(identity: None) -> None:
    # 12 s interval: the pushes 11, 6 and 1 s ago (busy 0.52, 0.50, 0.18): median 0.50
    assert telemetry.summary_busy(sample(0.82, recent=ODD_NEWEST), NOW, 12, "median") == pytest.approx(0.5)
    # 7 s interval: 6 and 1 s ago: median of 0.50 and 0.18 = 0.34
    assert telemetry.summary_busy(sample(0.82, recent=ODD_NEWEST), NOW, 7, "median") == pytest.approx(0.34)
    # none recent (an old plugin writes none): the newest push alone
    assert telemetry.summary_busy(sample(0.6), NOW, 30, "median") == pytest.approx(0.4)
    # the median push is the median capacity: the correction is monotonic
    java = sample(
        0.3, software="apache-kafka-java", recent=((NOW - 6, 0.25), (NOW - 1, 0.35), (NOW - 3, 0.3))
    )
    assert telemetry.summary_busy(java, NOW, 30, "median") == pytest.approx(correct_busy("java", 0.7))


@pytest.mark.parametrize("true_busy", [0.2, 0.5, 0.9])
def test_java_records_per_poll_model_matches_a_simulated_consumer(true_busy: float) -> None:
    simulated = simulated_java_polls(true_busy, polls=60_000, seed=11)[1]
    assert telemetry.java_records_per_poll(true_busy) == pytest.approx(simulated, rel=0.03)


def test_a_starved_java_consumer_is_distrusted(identity: None) -> None:
    """Half busy, Poisson arrivals: a Java poll returns 1.15 records on average (the simulation
    above), so at most 3 x 1.15 = 3.45 are believed. 100/s with 20 ms between polls is 2 records a
    poll: trusted, 100 / 0.5 = 200/s. With 40 ms between polls it is 4 a poll: distrusted."""
    java = "apache-kafka-java"
    trusted = telemetry_capacity(sample(0.5, software=java, between_ms=20.0), 100.0, 0, NOW)
    assert trusted.capacity == pytest.approx(200.0)
    starved = telemetry_capacity(sample(0.5, software=java, between_ms=40.0), 100.0, 0, NOW)
    assert starved.capacity is None and "4.0 records per poll" in starved.reason
    assert "starved" in starved.reason
    # librdkafka sends no time between polls; a stray one is not read through Java's model
    other = telemetry_capacity(sample(0.5, between_ms=40.0), 100.0, 0, NOW)
    assert other.capacity == pytest.approx(200.0)


def test_reader_takes_recent_pushes_and_time_between_polls() -> None:
    recent = [[1000, 0.5], [6000, 0.25], ["x", 0.1], [7000], [8000, None]]
    got = decode_sample(json.loads(_value(recent_idle=recent, time_between_poll_ms=12.5)))
    assert got.recent_idle == ((1.0, 0.5), (6.0, 0.25)) and got.time_between_poll_ms == 12.5
    old = decode_sample(json.loads(_value()))
    assert old.recent_idle == () and old.time_between_poll_ms is None


def _step_after_a_move(prior: float | None, recent: tuple = (), moved_at_s: float | None = None):
    """Group g: at T0 a holds t-0 and b holds t-1 and t-2, all caught up at 1,000; then t-1 moves to
    a (at ``moved_at_s`` into the interval, as the carried recent moves say; unknown when None). 60 s
    later each partition has appended and had consumed 600 (10/s): the partitions a holds now, t-0
    and t-1, consumed 20/s. a pushed idle 0.5 (confluent-kafka; ``recent``: its last pushes, seconds
    into the interval and idle ratio) and carries ``prior`` (telemetry, one reading so far)."""
    from rebalance_advisor.domain.estimates import Carried, Observed, ObservedMember, step
    from rebalance_advisor.domain.group_spec import RecentMove

    parts = [("t", p) for p in range(3)]
    moves = () if moved_at_s is None else (RecentMove("t", 1, "b", "a", _T0 + timedelta(seconds=moved_at_s)),)
    carried = Carried(
        cluster="id:c",
        taken_at=_T0,
        log_ends=dict.fromkeys(parts, 1000),
        lag_ends=dict.fromkeys(parts, 1000),
        produce=dict.fromkeys(parts, 10.0),
        committed={("g", *tp): 1000 for tp in parts},
        consume={("g", *tp): 10.0 for tp in parts},
        owners={("g", "t", 0): "a", ("g", "t", 1): "b", ("g", "t", 2): "b"},
        capacities={} if prior is None else {("g", "a"): CarriedCapacity(prior, _T0, "telemetry", 1)},
        recent_moves={"g": moves},
    )
    taken = _T0 + timedelta(seconds=60)
    pushes = tuple((_T0.timestamp() + at, idle) for at, idle in recent)
    heard = {("g", "a"): replace(_pushed_at("a", 0.5, taken.timestamp()), recent_idle=pushes)}
    observed = Observed(
        cluster="id:c",
        taken_at=taken,
        log_ends=dict.fromkeys(parts, 1600),
        lag_ends=dict.fromkeys(parts, 1600),
        committed={("g", *tp): 1600 for tp in parts},
        members=(
            ObservedMember("g", "a", "a", (("t", 0), ("t", 1))),
            ObservedMember("g", "b", "b", (("t", 2),)),
        ),
        telemetry=heard,
    )
    return step(carried, observed)[0].capacity[("g", "a")]


def test_telemetry_over_a_moved_interval_lowers_a_capacity_read_too_high(identity: None) -> None:
    # a gained t-1: no busy sample, but its telemetry is read against what t-0 and t-1 consumed,
    # 20/s at busy 0.5: 40/s; 40 x 1.15 = 46 < the carried 60, so it is taken: the mean of the
    # two readings, (60 + 40) / 2 = 50. Before, the 60 stayed for as long as its partitions moved.
    a = _step_after_a_move(60.0)
    assert (a.capacity, a.source) == (pytest.approx(50.0), "telemetry")


def test_telemetry_over_a_moved_interval_does_not_raise_or_nudge_a_capacity(identity: None) -> None:
    # 40/s is within noise of 45 (40 x 1.15 = 46 >= 45), and above 30: both stay, and the note
    # says why; with nothing carried, 40/s is the first reading
    for prior in (45.0, 30.0):
        a = _step_after_a_move(prior)
        assert (a.capacity, a.source) == (pytest.approx(prior), "telemetry")
        assert a.note is not None and "over an interval it gained or lost partitions in read 40.0/s" in a.note
    assert _step_after_a_move(None).capacity == pytest.approx(40.0)


def test_telemetry_over_a_moved_interval_is_read_from_the_pushes_since_the_move(identity: None) -> None:
    # pushes at 10 s and 25 s (idle 0.8: busy 0.2, its load before it gained t-1) and at 55 s
    # (busy 0.5). Over the whole interval their median is 0.2: 20 / 0.2 = 100/s, a raise, not
    # taken. Since the move at 40 s only the push at 55 s counts: 40/s lowers the carried 60 to 50.
    pushes = ((10.0, 0.8), (25.0, 0.8), (55.0, 0.5))
    assert _step_after_a_move(60.0, pushes).capacity == pytest.approx(60.0)
    assert _step_after_a_move(60.0, pushes, moved_at_s=40.0).capacity == pytest.approx(50.0)
