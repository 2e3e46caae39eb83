"""The one capacity rule (domain/estimates.py): what a snapshot and the simulator both call. Expected values
are worked out by hand in each test."""

from __future__ import annotations

import math

import pytest
from rebalance_advisor.domain.estimates import (
    CapacityPolicy,
    RateParameters,
    busy_capacity_sample,
    fell_behind,
    fill_capacities,
    next_capacity,
    peer_capacity,
)
from rebalance_advisor.errors import AdvisorError


def test_one_backlogged_partition_is_enough_to_measure():
    # backlog 500 -> 300 on the first partition, the second caught up at both ends (served in full):
    # the member was busy, its capacity sample is 40 + 10 = 50 msg/s
    assert busy_capacity_sample([500, 0], [300, 0], [40.0, 10.0]) == 50.0


def test_no_sample_without_backlog_at_both_ends_or_without_consumption():
    assert busy_capacity_sample([500, 0], [0, 0], [40.0, 10.0]) is None  # drained during the interval
    assert busy_capacity_sample([0, 0], [10, 0], [40.0, 10.0]) is None  # backlog only at the end
    assert busy_capacity_sample([0, 7], [3, 0], [40.0, 10.0]) is None  # never on the same partition twice
    assert busy_capacity_sample([500], [700], [0.0]) is None  # stalled: says nothing about capacity


def test_next_capacity_smooths_carries_and_forgets():
    params = RateParameters(time_constant_s=300.0, capacity_max_age_s=3600.0)
    # first sample taken as is; a busy sample is not counted (its EWMA is short), a report is
    assert next_capacity(80.0, None, 0.0, 60.0, params) == (80.0, True, None)
    assert next_capacity(80.0, None, 0.0, 60.0, params, reported=True) == (80.0, True, 1)
    # a settled value (no count) and a new sample after 300 s: alpha = 1 - e^-1 = 0.632...;
    # 100 + 0.632 x (200 - 100) = 163.2
    value, fresh, count = next_capacity(200.0, 100.0, 300.0, 300.0, params)
    assert fresh and value == pytest.approx(100 + (1 - math.exp(-1)) * 100) and count is None
    # no sample: carried while at most an hour old (its count with it), then unknown
    assert next_capacity(None, 100.0, 3600.0, 60.0, params, sample_count=3) == (100.0, False, 3)
    assert next_capacity(None, 100.0, 3601.0, 60.0, params) is None
    # a sample after the carried one aged out starts afresh
    assert next_capacity(70.0, 100.0, 3601.0, 60.0, params, reported=True, sample_count=5) == (70.0, True, 1)
    # a busy sample smooths with the EWMA whatever the count: 100 + (1 - e^-0.2) x 100 = 118.1
    value, _, count = next_capacity(200.0, 100.0, 60.0, 60.0, params, sample_count=1)
    assert value == pytest.approx(100 + (1 - math.exp(-0.2)) * 100) and count is None


def test_first_samples_are_averaged_with_equal_weight():
    """A consumer's first telemetry reading 132/s, then 113/s every 30 s (the closed loop's c0, whose
    true capacity is 111/s): reports and telemetry smooth with tau = 600 s, alpha = 1 - e^-0.05 =
    0.0488 per 30 s. The second reading weighs 1/2, the third 1/3: 132 -> 122.5 -> 119.33."""
    params = RateParameters()
    assert params.capacity_report_time_constant_s == 600.0
    value, _, count = next_capacity(113.0, 132.0, 30.0, 30.0, params, reported=True, sample_count=1)
    assert (value, count) == (122.5, 2)
    value, _, count = next_capacity(113.0, value, 30.0, 30.0, params, reported=True, sample_count=count)
    assert value == pytest.approx(119.0 + 1 / 3) and count == 3
    # after ten readings the plain mean (132 + 9 x 113) / 10 = 114.9; the EWMA alone kept
    # 113 + 19 x e^(-9 x 0.05) = 125.1
    for _ in range(7):
        value, _, count = next_capacity(113.0, value, 30.0, 30.0, params, reported=True, sample_count=count)
    assert value == pytest.approx(114.9) and count == 10
    # the mean hands over to the EWMA once 1 / (n + 1) <= alpha: 1/20 = 0.05 > 0.0488 still
    # averages (count 20); 1/21 = 0.0476 does not, and the value is settled (count None)
    _, _, count = next_capacity(113.0, 113.0, 30.0, 30.0, params, reported=True, sample_count=19)
    assert count == 20
    value, _, count = next_capacity(133.0, 113.0, 30.0, 30.0, params, reported=True, sample_count=20)
    assert count is None and value == pytest.approx(113.0 + 20.0 * (1 - math.exp(-0.05)))


def test_fill_capacities_median_own_rate_configured_equal():
    # measured 45 and 55 (one class: 55 <= 1.3 x 45 = 58.5) -> median 50. The unmeasured ones:
    # consume 10/s -> 1.2 x 10 = 12 < 50 -> group_median 50; consume 100/s -> 120 > 50 -> own_rate
    # 120; consume unknown -> median 50.
    filled = fill_capacities([45.0, None, 55.0, None, None], [30.0, 10.0, 55.0, 100.0, None], 999.0)
    assert filled == [
        (45.0, "measured"),
        (50.0, "group_median"),
        (55.0, "measured"),
        (pytest.approx(120.0), "own_rate"),
        (50.0, "group_median"),
    ]
    # none measured: the configured value for every member, whatever its rate; else unknown
    assert fill_capacities([None, None], [100.0, 5.0], 40.0) == [(40.0, "configured"), (40.0, "configured")]
    assert fill_capacities([None], [100.0]) == [(None, "equal")]
    # the factor is a parameter: 2 x 100 = 200
    assert fill_capacities([50.0, None], [None, 100.0], factor=2.0)[1] == (200.0, "own_rate")


def test_an_unmeasured_member_is_estimated_from_the_slowest_class_that_covers_what_it_did():
    # measured 40, 50 (one class: 50 <= 1.3 x 40 = 52) and 100, 110 (110 <= 130): medians 45 and 105;
    # the median of all four, 75, is neither. Consumes 10/s: the slow class, 45 (not 75, 1.7 x
    # its class). Consumes 30/s but proved 60/s: faster than the slow class's fastest (50), so
    # the fast class, 105. Consumes 40/s, proved 48/s: within the slow class (<= 50), 45, but
    # never under what it proved: 48. Consumes 48/s: the slow class, but above its median, so
    # (as with one class) its own rate, 1.2 x 48 = 57.6. Consumes 120/s, faster than every
    # class: 1.2 x 120 = 144.
    filled = fill_capacities(
        [40.0, 50.0, 100.0, 110.0, None, None, None, None, None],
        [None, None, None, None, 10.0, 30.0, 40.0, 48.0, 120.0],
        proven=[None, None, None, None, None, 60.0, 48.0, None, None],
    )
    assert filled[4:] == [
        (45.0, "group_median"),
        (105.0, "group_median"),
        (48.0, "group_median"),
        (pytest.approx(57.6), "own_rate"),
        (pytest.approx(144.0), "own_rate"),
    ]


@pytest.mark.parametrize(
    ("measured", "shown", "expected"),
    [
        ([100.0], 10.0, 100.0),  # one measured: its value
        ([100.0, 120.0, 129.0], 500.0, 120.0),  # one class (129 <= 130): its median, even when beaten
        ([100.0, 131.0], 90.0, 100.0),  # 131 > 130: two classes, the slow one covers 90
        ([100.0, 131.0], 101.0, 131.0),  # ... but not 101
        ([200.0, 100.0, 210.0, 95.0], 0.0, 97.5),  # unsorted in: classes {95, 100} and {200, 210}
    ],
)
def test_peer_capacity_classes(measured, shown, expected):
    assert peer_capacity(measured, shown, 1.3) == pytest.approx(expected)


def test_a_long_interval_also_measures_a_member_whose_lag_grew_past_the_floor():
    # lag 0 -> 3,000 with a floor of 1,000 (100/s x 10 s): backlogged only at the end. A 1-minute
    # interval waits for a second backlogged snapshot; a 5-minute one takes it (growth 3,000 > 1,000)
    assert busy_capacity_sample([0], [3000], [90.0], [1000.0]) is None
    assert busy_capacity_sample([0], [3000], [90.0], [1000.0], growth=True) == 90.0
    # grew by 700 only (500 -> 1,200): in-flight records could explain that, no sample either way
    assert busy_capacity_sample([500], [1200], [90.0], [1000.0], growth=True) is None
    # ends below the floor: not busy however it grew
    assert busy_capacity_sample([0], [900], [90.0], [1000.0], growth=True) is None
    assert RateParameters().growth_sample_min_interval_s == 120.0


def test_one_partitions_growth_measures_its_member_only_when_the_members_lag_grew_too():
    # floors 1,000 each. p0 grew 0 -> 3,000 (past its floor, as above), p1 drained 3,000 -> 0: the
    # member's lag did not grow, it kept up (p0 stepped up just before the snapshot): no sample
    assert busy_capacity_sample([0, 3000], [3000, 0], [90.0, 10.0], [1000.0] * 2, growth=True) is None
    # p1 steady at 0: the member's lag grew by 3,000 > 0.25 x 2,000: saturated, 90 + 10
    assert busy_capacity_sample([0, 0], [3000, 0], [90.0, 10.0], [1000.0] * 2, growth=True) == 100.0
    # p0 0 -> 1,100, p1 700 -> 0: grew by 400 < 500 (a quarter of the floors); with no share asked, 400 > 0
    assert busy_capacity_sample([0, 700], [1100, 0], [90.0, 10.0], [1000.0] * 2, growth=True) is None
    assert busy_capacity_sample([0, 700], [1100, 0], [90.0, 10.0], [1000.0] * 2, True, 0.0) == 100.0
    # backlog at both ends needs no growth at all
    assert busy_capacity_sample([2000, 5000], [1500, 1500], [90.0, 10.0], [1000.0] * 2, growth=True) == 100.0
    assert RateParameters().growth_sample_member_share == 0.25


def test_a_member_that_fell_behind_is_estimated_at_its_own_rate_not_above_it():
    # floors 16 x 600 = 9,600 (in flight); a quarter is 2,400. Lag grew by 2,978 over the interval
    # though no partition was backlogged at both ends: it fell behind. Grew by 2,000, or drained: it
    # kept up. Unknown growth (an offset missing): no claim.
    assert fell_behind(2978.0, 9600.0)
    assert not fell_behind(2000.0, 9600.0)
    assert not fell_behind(-500.0, 9600.0)
    assert not fell_behind(None, 9600.0)
    assert fell_behind(2000.0, 9600.0, member_share=0.2)
    # measured 960 and 940 (median 950); two unmeasured members consume 965/s. The one that kept up
    # gets 1.2 x 965 = 1,158; the one that fell behind did what it could: 965, not above it
    filled = fill_capacities(
        [960.0, 940.0, None, None], [960.0, 940.0, 965.0, 965.0], behind=[False, False, False, True]
    )
    assert filled[2] == (pytest.approx(1158.0), "own_rate")
    assert filled[3] == (pytest.approx(965.0), "own_rate")
    # one that fell behind below the median keeps the median; a proven rate still bounds it below
    below, proved = fill_capacities(
        [960.0, None, None],
        [None, 500.0, 1000.0],
        proven=[None, None, 1100.0],
        behind=[False, True, True],
    )[1:]
    assert below == (960.0, "group_median")
    assert proved == (1100.0, "own_rate")


def test_a_member_that_showed_a_hair_more_than_its_class_is_still_of_that_class():
    # measured 960, 960, 960 and 1,918: classes {960} and {1,918}. An unmeasured member consuming
    # 806/s proved 960.5/s (it once consumed at its full rate without being measured): its class is
    # picked at 960.5 / 1.15 = 835, the slow class's 960, raised to what it proved; not 1,918, twice
    # its capacity. One that proved 1,200/s (1,043 > 960) is of the fast class; one that consumes
    # 961/s now is too (what it does now is not discounted).
    filled = fill_capacities(
        [960.0, 960.0, 960.0, 1918.0, None, None, None],
        [None, None, None, None, 806.0, 806.0, 961.0],
        proven=[None, None, None, None, 960.5, 1200.0, None],
    )
    assert filled[4:] == [(960.5, "group_median"), (1918.0, "group_median"), (1918.0, "group_median")]
    assert RateParameters().capacity_noise_ratio == 1.15


def test_a_capacity_configured_for_a_member_comes_before_every_estimate():
    # measured 45 and 55 (median 50). Member 1 consumes 10/s, member 3 100/s: without configuration
    # they get the median 50 and 1.2 x 100 = 120 (as above). Configured 30 and 75 for them: those.
    # Member 0 is measured, so its configured 999 is not used; member 4 has none: the median.
    filled = fill_capacities(
        [45.0, None, 55.0, None, None],
        [30.0, 10.0, 55.0, 100.0, None],
        configured_members=[999.0, 30.0, None, 75.0, None],
    )
    assert filled == [
        (45.0, "measured"),
        (30.0, "configured"),
        (55.0, "measured"),
        (75.0, "configured"),
        (50.0, "group_median"),
    ]
    # none measured: a member's own value beats the group's configured one, and the others get that
    assert fill_capacities([None, None], [1.0, 2.0], 40.0, configured_members=[80.0, None]) == [
        (80.0, "configured"),
        (40.0, "configured"),
    ]


def test_capacity_policy_for_members_and_groups():
    policy = CapacityPolicy.parse("big-.*@orders-.*=2000, orders-.*=500, .*@audit=50")
    assert policy.for_group("orders-eu") == 500.0
    assert policy.for_group("audit") is None  # only a member rule names it
    assert policy.for_member("orders-eu", "big-3") == 2000.0
    assert policy.for_member("orders-eu", "small-3") is None
    assert policy.for_member("xorders-eu", "big-3") is None  # full matches only
    assert policy.for_member("audit", "anyone") == 50.0
    assert CapacityPolicy.parse(None).for_member("g", "m") is None


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ("@orders=5", "expected GROUP_REGEX=RECORDS_PER_SECOND or MEMBER_REGEX@GROUP_REGEX"),
        ("big@=5", "expected GROUP_REGEX=RECORDS_PER_SECOND or MEMBER_REGEX@GROUP_REGEX"),
        ("big@orders=0", "records/s must be a number > 0"),
        ("big@orders=fast", "records/s must be a number > 0"),
        ("(a)\\1@orders=5", "bad regex"),  # a back-reference: RE2 (linear time) refuses it
        ("big@orders(=5", "bad regex"),
    ],
)
def test_bad_member_capacity_rules_are_refused_in_one_line(spec, message):
    with pytest.raises(AdvisorError) as caught:
        CapacityPolicy.parse(spec)
    assert message in str(caught.value) and "\n" not in str(caught.value)
