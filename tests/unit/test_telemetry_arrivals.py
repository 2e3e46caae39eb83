"""Telemetry of records at a steady spacing: the second correction model and the evidence that picks
it per group (members measured at saturation, else members' readings at two loads); the capacity rule reading a group's telemetry with
it is tested in test_telemetry_capacity.py. Expected values are worked out by hand; the last test
runs the simulator's steady world."""

from __future__ import annotations

import math

import pytest
from hypothesis import assume, given
from hypothesis import strategies as st
from rebalance_advisor.domain import estimates
from rebalance_advisor.domain.simulation import parse_scenario, simulate
from rebalance_advisor.domain.telemetry import (
    RANDOM,
    STEADY,
    TelemetryReadings,
    TelemetryReference,
    arrivals_evidence,
    consistency_evidence,
    correct_busy,
    java_reported_busy_regular,
    steady_arrivals,
)

from tests.support.scripts import load_bench


def test_the_steady_model_inverts_javas_sensor_at_a_steady_spacing() -> None:
    # records one every tau, half of it spent processing: each poll waits tau / 2 and the previous
    # started tau before, so idle = 0.5 / 1.5 and Java reports busy 2/3; read as steady: 0.5
    assert java_reported_busy_regular(0.5) == pytest.approx(2 / 3)
    assert correct_busy("java", 2 / 3, STEADY) == pytest.approx(0.5)
    # the random-arrival model reads the same 2/3 as less busy: the capacity it gives is higher
    assert correct_busy("java", 2 / 3, RANDOM) < 0.45
    # librdkafka's per-cycle average is the true share at a steady spacing: read as it is
    assert correct_busy("librdkafka", 0.3, STEADY) == pytest.approx(0.3)
    assert correct_busy("librdkafka", 0.3, RANDOM) < 0.3


def test_arrivals_evidence_is_how_much_closer_the_steady_model_reads() -> None:
    # measured 100: random reads 150 (off log 1.5 = 0.4055), steady 105 (log 1.05 = 0.0488);
    # measured 200: random 260 (log 1.3 = 0.2624), steady 190 (|log 0.95| = 0.0513);
    # medians of two: (0.4055 + 0.2624) / 2 = 0.3339 and (0.0488 + 0.0513) / 2 = 0.0500
    pairs = [(100.0, TelemetryReadings(150.0, 105.0)), (200.0, TelemetryReadings(260.0, 190.0))]
    assert arrivals_evidence(pairs) == pytest.approx(0.3339 - 0.0500, abs=1e-3)
    # random arrivals read as random: measured 100, random 98, steady 70 -> 0.0202 - 0.3567
    assert arrivals_evidence([(100.0, TelemetryReadings(98.0, 70.0))]) == pytest.approx(
        abs(math.log(0.98)) - abs(math.log(0.7))
    )
    # a reading refused under either model is no pair
    assert arrivals_evidence([(100.0, TelemetryReadings(None, 105.0))]) is None
    assert arrivals_evidence([]) is None


def test_a_reference_is_compared_once_the_load_moved_by_a_quarter_either_way() -> None:
    then = TelemetryReference(100.0, TelemetryReadings(200.0, 150.0))
    assert then.moved(TelemetryReference(125.0, then.readings), 1.25)
    assert then.moved(TelemetryReference(80.0, then.readings), 1.25)
    assert not then.moved(TelemetryReference(124.0, then.readings), 1.25)
    assert not then.moved(TelemetryReference(81.0, then.readings), 1.25)


def test_consistency_evidence_is_the_drift_of_the_models_mean_against_load() -> None:
    # records at a steady spacing, capacity 100: at 50/s the random model reads 163, the steady one
    # 100; at 70/s 132 and 100. Load up, mean capacity down: -log(sqrt(132 x 100 / (163 x 100))) =
    # 0.1055, steady. The same pair the other way (load down, mean up) says the same
    low, high = (
        TelemetryReference(50.0, TelemetryReadings(163.0, 100.0)),
        TelemetryReference(70.0, TelemetryReadings(132.0, 100.0)),
    )
    assert consistency_evidence([(low, high)]) == pytest.approx(0.1055, abs=1e-4)
    assert consistency_evidence([(high, low)]) == pytest.approx(0.1055, abs=1e-4)
    # records at random: random reads 100 at both loads, steady 73.7 then 87.0: load up, mean up:
    # -log(sqrt(87.0 / 73.7)) = -0.0830, random
    calm = (
        TelemetryReference(50.0, TelemetryReadings(100.0, 73.7)),
        TelemetryReference(70.0, TelemetryReadings(100.0, 87.0)),
    )
    assert consistency_evidence([calm]) == pytest.approx(-0.0830, abs=1e-4)
    # the median over pairs: of 0.1055, 0.1055 and -0.0830
    assert consistency_evidence([(low, high), (high, low), calm]) == pytest.approx(0.1055, abs=1e-4)
    # a reading refused under either model is no pair
    refused = TelemetryReference(70.0, TelemetryReadings(None, 100.0))
    assert consistency_evidence([(low, refused)]) is None and consistency_evidence([]) is None


def test_only_positive_evidence_reads_a_group_as_steady() -> None:
    assert steady_arrivals(None) is None and steady_arrivals(0.0) is None and steady_arrivals(-0.3) is None
    reason = steady_arrivals(0.2)  # e^0.2 - 1 = 22 %
    assert reason is not None and "steady spacing" in reason and "22% better" in reason


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_the_simulators_steady_world_is_read_as_steady(monkeypatch: pytest.MonkeyPatch, seed: int) -> None:
    """bench/drain.py cap2x-z1.5-telemetry-regular pushes Java's idle ratio for records at a steady
    spacing (busy shares off by up to 20 % each): within two simulated hours some member is measured
    at saturation and the group's averaged evidence turns positive, and it ends positive."""
    seen: list[float] = []
    real = estimates.steady_arrivals

    def record(evidence: float | None) -> str | None:
        if evidence is not None:
            seen.append(evidence)
        return real(evidence)

    monkeypatch.setattr(estimates, "steady_arrivals", record)
    name = "cap2x-z1.5-telemetry-regular"
    defn = load_bench("drain").scenario_defs()[name]
    data = {k: v for k, v in defn.items() if not k.startswith("_")}
    simulate(
        parse_scenario({**data, "name": name}, strategy="rate_aware", seed=seed, hours=2), keep_time_lag=False
    )
    assert seen and seen[-1] > 0


def test_the_accuracy_bench_pairs_each_clients_levels_into_drifts() -> None:
    """bench/telemetry_accuracy.py: the readings at 50 and 70 % busy of the worked example above
    (0.1055, steady); a saturated row, a row refused under a model, a row under the 20 % busy gate
    and another client's are no pair."""
    bench = load_bench("telemetry_accuracy")
    keys = (
        "language",
        "mode",
        "level",
        "rate",
        "capacity",
        "steady_capacity",
        "corrected_busy",
        "steady_busy",
    )
    rows = [
        dict(zip(keys, values, strict=True))
        for values in [
            ("python", "inline", 0.5, 50.0, 163.0, 100.0, 0.31, 0.5),
            ("python", "inline", 0.7, 70.0, 132.0, 100.0, 0.53, 0.7),
            ("python", "inline", 0.2, 20.0, None, 90.0, None, 0.2),  # refused under the random model
            ("python", "inline", 0.3, 30.0, 300.0, 100.0, 0.1, 0.3),  # 10 % busy read at random: gated
            ("python", "saturated", None, 100.0, 100.0, 100.0, 1.0, 1.0),
            ("java", "inline", 0.9, 90.0, 101.0, 99.0, 0.9, 0.9),  # no other java level
        ]
    ]
    assert bench.load_drifts(rows) == [
        {"language": "python", "levels": [0.5, 0.7], "drift": pytest.approx(0.1055, abs=1e-3)}
    ]


_capacity = st.floats(min_value=1.0, max_value=1e5, allow_nan=False)
_rate = st.floats(min_value=0.1, max_value=1e5, allow_nan=False)


@given(_rate, _rate, _capacity, _capacity, _capacity, _capacity, st.floats(min_value=0.01, max_value=100.0))
def test_the_drift_is_the_same_either_way_and_in_any_unit(
    rate_a: float,
    rate_b: float,
    random_a: float,
    steady_a: float,
    random_b: float,
    steady_b: float,
    scale: float,
) -> None:
    """Which reading is the reference does not matter (a load that fell tells what one that rose
    does), nor the unit capacities are counted in; readings that do not move give no drift."""
    assume(rate_a != rate_b)
    a = TelemetryReference(rate_a, TelemetryReadings(random_a, steady_a))
    b = TelemetryReference(rate_b, TelemetryReadings(random_b, steady_b))
    drift = consistency_evidence([(a, b)])
    assert drift is not None
    assert consistency_evidence([(b, a)]) == pytest.approx(drift, abs=1e-9)
    scaled_a = TelemetryReference(rate_a, TelemetryReadings(random_a * scale, steady_a * scale))
    scaled_b = TelemetryReference(rate_b, TelemetryReadings(random_b * scale, steady_b * scale))
    assert consistency_evidence([(scaled_a, scaled_b)]) == pytest.approx(drift, abs=1e-9)
    still = TelemetryReference(rate_b, a.readings)
    assert consistency_evidence([(a, still)]) == pytest.approx(0.0, abs=1e-12)
