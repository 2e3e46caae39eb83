"""``plan --strategy key_range``: the JSON extras (key_sharing, key_samples, capacity, key_ranges),
the output's ranges, and refusals of bad hand-written ranges, through the CLI entry point."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from rebalance_advisor.cli import main
from rebalance_advisor_client.key_hash import HASH_SPACE, positive_hashes

HALF = HASH_SPACE // 2


def _doc(**extra):
    doc = {
        "group_id": "g",
        "members": [{"member_id": f"w{i}", "topics": ["hot", "cold"]} for i in range(3)],
        "partitions": [
            {"topic": "hot", "partition": 0, "lag": 900},
            {"topic": "cold", "partition": 0, "lag": 10},
        ],
        "key_sharing": {"enabled": True, "topics": ["hot"], "members": ["w0", "w1", "w2"]},
        "key_samples": [
            {"topic": "hot", "partition": 0, "keys": [f"user-{i}" for i in range(3000)] + [None]}
        ],
    }
    doc.update(extra)
    return doc


def _run(tmp_path: Path, doc, capsys, *extra: str) -> tuple[int, str, str]:
    path = tmp_path / "g.json"
    path.write_text(json.dumps(doc))
    rc = main(["plan", "--input", str(path), "--strategy", "key_range", *extra])
    out, err = capsys.readouterr()
    return rc, out, err


def test_key_range_plan_splits_the_hot_partition(tmp_path, capsys):
    rc, out, _ = _run(tmp_path, _doc(), capsys)
    assert rc == 0
    plan = json.loads(out)
    # 2 partitions, 3 members: the hot one (900) splits in two; cold stays whole with the third member
    ranges = plan["key_ranges"]
    assert [(r["topic"], r["partition"]) for r in ranges] == [("hot", 0), ("hot", 0)]
    assert (
        ranges[0]["hash_lo"] == 0
        and ranges[0]["hash_hi"] == ranges[1]["hash_lo"]
        and ranges[1]["hash_hi"] == HASH_SPACE
    )
    # by hand: the cut splits the 3,001 sampled records (one null key = hash 0) about in half
    hashes = positive_hashes([f"user-{i}".encode() for i in range(3000)] + [None])
    below = int((hashes < ranges[0]["hash_hi"]).sum())
    assert abs(below - 1500) <= 1
    holders = {r["member_id"] for r in ranges}
    (cold_owner,) = set(plan["assignment"]) - holders
    assert plan["assignment"][cold_owner] == [["cold", 0]]
    for r in ranges:
        assert ["hot", 0, r["hash_lo"], r["hash_hi"]] in plan["assignment"][r["member_id"]]
    assert "split 1 partition(s) into 2 key ranges" in plan["reason"]
    rc, out, _ = _run(tmp_path, _doc(), capsys, "--format", "table")
    assert rc == 0 and f"hot-0[0,{ranges[0]['hash_hi']})" in out and "reason: split" in out


def test_hand_written_current_ranges_are_checked(tmp_path, capsys):
    good = [
        {"member_id": "w0", "topic": "hot", "partition": 0, "hash_lo": 0, "hash_hi": HALF},
        {"member_id": "w1", "topic": "hot", "partition": 0, "hash_lo": HALF, "hash_hi": HASH_SPACE},
    ]
    assert _run(tmp_path, _doc(key_ranges=good), capsys)[0] == 0
    bad = {
        "overlap": [good[0], {**good[1], "hash_lo": HALF - 5}],
        "gap: hashes": [good[0], {**good[1], "hash_lo": HALF + 5}],
        "has not opted in": [good[0], {**good[1], "member_id": "w2"}],
        "not allow-listed": [{**r, "topic": "cold"} for r in good],
        "hash_lo must be an integer": [good[0], {**good[1], "hash_lo": "x"}],
        "unknown key 'lo'": [{**good[0], "lo": 1}],
    }
    sharing = {"enabled": True, "topics": ["hot"], "members": ["w0", "w1"]}
    for message, ranges in bad.items():
        rc, out, err = _run(tmp_path, _doc(key_ranges=ranges, key_sharing=sharing), capsys)
        assert rc == 1 and out == "", message
        assert message in err and len(err.strip().splitlines()) == 1 and "Traceback" not in err, err
    rc, _, err = _run(tmp_path, _doc(key_ranges=good, key_sharing={**sharing, "enabled": False}), capsys)
    assert rc == 1 and "not enabled for this run" in err


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        ({"capacity": -1}, "capacity must be a number > 0"),
        ({"key_samples": [{"topic": "hot", "partition": 0}]}, "give either keys or hashes"),
        (
            {"key_samples": [{"topic": "hot", "partition": 0, "hashes": [HASH_SPACE]}]},
            "within [0, 2147483648)",
        ),
        ({"key_sharing": {"enabled": "yes"}}, "key_sharing.enabled must be true or false"),
        ({"key_sharing": {"enabled": True, "topic_pattern": "("}}, "is not a regular expression"),
        ({"bogus": 1}, "unknown key 'bogus'"),
    ],
)
def test_bad_key_range_input(tmp_path, capsys, extra, message):
    rc, out, err = _run(tmp_path, _doc(**extra), capsys)
    assert rc == 1 and out == "" and message in err


def test_key_range_takes_no_options(tmp_path, capsys):
    rc, _, err = _run(tmp_path, _doc(), capsys, "--option", "capacity=5")
    assert rc == 1 and "takes no --option" in err
