"""Java's sensor under regular arrivals (telemetry.java_reported_busy_regular), worked by hand.

Records every tau, a fixed cost per batch: each poll waits tau (1 - r) and the previous poll started
tau before, so each poll records idle = tau (1 - r) / (tau (1 - r) + tau) = (1 - r) / (2 - r).
"""

from __future__ import annotations

import pytest
from rebalance_advisor.domain import telemetry


@pytest.mark.parametrize(
    ("true_busy", "reported"),
    [
        (0.0, 0.5),  # an idle consumer reads half busy (KAFKA-17503's symptom)
        (0.5, 2.0 / 3.0),  # idle 0.5 / 1.5
        (0.8, 1.0 - 0.2 / 1.2),
        (1.0, 1.0),
    ],
)
def test_a_steady_spacing_reads_idle_one_minus_r_over_two_minus_r(true_busy: float, reported: float) -> None:
    assert telemetry.java_reported_busy_regular(true_busy) == pytest.approx(reported)


def test_the_poisson_correction_reads_regular_arrivals_as_less_busy_than_they_are() -> None:
    """The simulator's regular world over-reads capacities at half busy and hardly at 90 %, the
    direction measured on the broker (Java +33 to +41 %, librdkafka +67 % at half busy)."""
    half = telemetry.correct_busy("java", telemetry.java_reported_busy_regular(0.5))
    high = telemetry.correct_busy("java", telemetry.java_reported_busy_regular(0.9))
    assert 0.5 / half > 1.3
    assert 0.9 / high == pytest.approx(1.0, abs=0.05)
