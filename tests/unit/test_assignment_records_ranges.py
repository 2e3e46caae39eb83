"""Assignment record format 2: key ranges of split partitions (docs/concepts/key-ranges.md), and the publisher's checks."""

from __future__ import annotations

import json

import pytest
from rebalance_advisor.adapters.assignment_publisher import normalize_plan, plan_records
from rebalance_advisor.errors import AdvisorError
from rebalance_advisor_client.assignment_records import (
    AssignmentRecord,
    MalformedRecord,
    UnsupportedVersion,
    decode_record,
)
from rebalance_advisor_client.key_hash import HASH_SPACE

HALF = 1 << 30


def _value(**extra):
    base = {
        "version": 2, "group": "g", "member": "m", "epoch": 4, "plan_id": "9",
        "partitions": [{"topic": "cold", "partition": 0}],
        "ranges": [{"topic": "hot", "partition": 0, "hash_lo": 0, "hash_hi": HALF}],
        "published_at": "2026-01-01T00:00:00+00:00",
    }  # fmt: skip
    return json.dumps({**base, **extra}).encode()


def test_a_ranged_record_round_trips_as_version_2_and_a_whole_one_stays_version_1():
    ranged = AssignmentRecord("g", "m", 4, "9", (("cold", 0),), "t", (("hot", 0, 0, HALF),))
    value = json.loads(ranged.encode_value())
    assert value["version"] == 2
    assert value["ranges"] == [{"topic": "hot", "partition": 0, "hash_lo": 0, "hash_hi": HALF}]
    assert decode_record(ranged.key, ranged.encode_value()) == ranged
    whole = AssignmentRecord("g", "m", 4, "9", (("cold", 0),), "t")
    # version 1 without ranges: helpers that predate ranges keep following whole-partition plans;
    # they read up to version 1 and refuse 2 (UnsupportedVersion), so a range never reaches them whole
    assert json.loads(whole.encode_value())["version"] == 1 and "ranges" not in json.loads(
        whole.encode_value()
    )


@pytest.mark.parametrize(
    "extra, message",
    [
        ({"ranges": []}, "non-empty list"),
        ({"ranges": [{"topic": "hot", "partition": 0, "hash_lo": 5, "hash_hi": 5}]}, "hash_lo < hash_hi"),
        ({"ranges": [{"topic": "hot", "partition": 0, "hash_lo": 0, "hash_hi": HASH_SPACE + 1}]}, "hash_hi"),
        ({"ranges": [{"topic": "hot", "partition": 0, "hash_lo": 0}]}, "is not {topic"),
        ({"ranges": [{"topic": "cold", "partition": 0, "hash_lo": 0, "hash_hi": 9}]}, "both whole"),
        (
            {
                "ranges": [
                    {"topic": "hot", "partition": 0, "hash_lo": a, "hash_hi": b} for a, b in ((0, 9), (9, 20))
                ]
            },
            "two key ranges of one partition",
        ),
        ({"ranges": None}, "expected"),
    ],
)
def test_corrupt_range_records_are_refused_with_the_reason(extra, message):
    value = json.loads(_value(**extra))
    if extra.get("ranges") is None and "ranges" in extra:
        del value["ranges"]
    with pytest.raises(MalformedRecord, match=message):
        decode_record(b"g/m", json.dumps(value).encode())


def test_version_1_may_not_carry_ranges_and_version_3_is_refused():
    with pytest.raises(MalformedRecord, match="expected"):
        decode_record(b"g/m", _value(version=1))
    with pytest.raises(UnsupportedVersion):
        decode_record(b"g/m", _value(version=3))


def test_publisher_checks_that_ranges_tile_the_hash_space():
    good = {"a": [("hot", 0, 0, HALF), ("cold", 0)], "b": [("hot", 0, HALF, HASH_SPACE)]}
    plan = normalize_plan(good)
    assert plan == {"a": (("cold", 0), ("hot", 0, 0, HALF)), "b": (("hot", 0, HALF, HASH_SPACE),)}
    epoch, records, dropped, changed = plan_records("g", "7", plan, {}, (), "t")
    assert (epoch, dropped, changed) == (1, (), True)
    assert [(r.member, r.partitions, r.ranges) for r in records] == [
        ("a", (("cold", 0),), (("hot", 0, 0, HALF),)),
        ("b", (), (("hot", 0, HALF, HASH_SPACE),)),
    ]
    # the same plan again is a no-op (records compared with their ranges)
    existing = {r.member: r for r in records}
    assert plan_records("g", "7", plan, existing, (), "t2")[3] is False
    for bad, message in [
        ({"a": [("hot", 0, 0, HALF)], "b": [("hot", 0, HALF + 1, HASH_SPACE)]}, "gap"),
        ({"a": [("hot", 0, 0, HALF + 1)], "b": [("hot", 0, HALF, HASH_SPACE)]}, "overlap"),
        ({"a": [("hot", 0, 0, HASH_SPACE)], "b": [("hot", 0)]}, "both split"),
        ({"a": [("hot", 0, 0, HALF), ("hot", 0, HALF, HASH_SPACE)]}, "two key ranges"),
    ]:
        with pytest.raises(AdvisorError, match=message):
            normalize_plan(bad)
