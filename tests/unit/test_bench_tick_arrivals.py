"""bench/telemetry_accuracy.py --arrivals ticks: every 20 ms the whole records that accrued."""

from __future__ import annotations

from tests.support.scripts import load_bench

accuracy = load_bench("telemetry_accuracy")


def test_ticks_send_what_accrued_and_carry_the_rest():
    # 56/s over 20 ms ticks: 1.12 a tick -> 1 record, 0.12 carried; after 50 ticks exactly 56
    carried, counts = 0.0, []
    for _ in range(50):
        count, carried = accuracy.tick_arrivals(carried, 56.0, 0.02)
        counts.append(count)
    assert sum(counts) == 56 or (sum(counts) == 55 and carried > 0.99)
    assert set(counts) <= {1, 2}
    assert accuracy.tick_arrivals(0.5, 125.0, 0.02) == (3, 0.0)  # 0.5 + 2.5
