"""The bench consumers' processing schedule (devtools/cost_consumers.Owed): overruns are paid back,
but no record is handled in no time (Java's idle ratio reads NaN for polls started in the same
millisecond: docs/benchmarks/telemetry-accuracy.md#nan)."""

from __future__ import annotations

import pytest
from rebalance_advisor.devtools import cost_consumers


class _Clock:
    """time.monotonic/time.sleep where every sleep overruns by ``overrun`` seconds."""

    def __init__(self, overrun: float) -> None:
        self.now, self.overrun = 0.0, overrun
        self.asked: list[float] = []

    def monotonic(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.asked.append(seconds)
        self.now += seconds + self.overrun


@pytest.fixture
def clock(monkeypatch) -> _Clock:
    fake = _Clock(overrun=0.0)
    monkeypatch.setattr(cost_consumers.time, "monotonic", fake.monotonic)
    monkeypatch.setattr(cost_consumers.time, "sleep", fake.sleep)
    return fake


def test_a_small_overrun_is_paid_back_by_the_next_record(clock) -> None:
    owed = cost_consumers.Owed(0.004)
    clock.overrun = 0.001
    owed.record()
    clock.overrun = 0.0
    owed.record()
    assert clock.asked == pytest.approx([0.004, 0.003])  # 4 ms, then 4 - 1 ms


def test_a_long_overrun_still_leaves_each_record_half_its_cost(clock) -> None:
    owed = cost_consumers.Owed(0.004)
    clock.overrun = 0.030  # a 30 ms stall of the machine
    owed.record()
    clock.overrun = 0.0
    for _ in range(3):
        owed.record()
    assert clock.asked[1:] == pytest.approx([0.002, 0.004, 0.004])
