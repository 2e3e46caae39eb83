"""Key-range plans in the plan table (domain/assignors/key_range.py): ranges stored in plan_assignments
(key_hash_start/key_hash_end), shown by ``plan-status show``, and refused by publishing until
the ranged record format exists (as whole partitions they would reach several members)."""

from __future__ import annotations

import dataclasses
from datetime import UTC, datetime

from rebalance_advisor.cli import main
from rebalance_advisor.domain.assignors.key_range import KeySample, KeySharingPolicy, plan
from rebalance_advisor.domain.decisions import Thresholds
from rebalance_advisor.domain.group_planning import plan_group
from rebalance_advisor.domain.group_spec import GroupSpec, Member, PartitionLag
from rebalance_advisor.services import static_members
from rebalance_advisor.store import db
from rebalance_advisor.store.plans import get_plan, plan_assignment_map, write_run
from rebalance_advisor_client.key_hash import HASH_SPACE


def _ranged_plan_id(url: str) -> tuple[int, list[tuple[str, str, int, int, int, int]]]:
    members = ["w0", "w1", "w2"]
    for m in members:  # a manual-assign group whose members opted in to key sharing
        static_members.add("orders", m, ["hot"], url, share_keys=True)
    doc = {
        "group_id": "orders",
        "members": [{"member_id": m, "group_instance_id": None, "topics": ["hot"]} for m in members],
        "partitions": [
            {"topic": "hot", "partition": 0, "lag": 9000},
            {"topic": "hot", "partition": 1, "lag": 10},
        ],
        "weight": "lag",
        "note": None,
    }
    now = datetime.now(UTC)
    advice = plan_group(doc, Thresholds(cooldown_minutes=0, lag_floor=1), now)
    assert advice.plan is not None
    spec = GroupSpec.build(
        "orders",
        [Member(m, topics=("hot",)) for m in members],
        [PartitionLag("hot", 0, 9000), PartitionLag("hot", 1, 10)],
    )
    sample = KeySample.from_keys([f"k{i}".encode() for i in range(5000)])
    kr = plan(
        spec,
        sharing=KeySharingPolicy(True, frozenset({"hot"}), members=frozenset(members)),
        samples={("hot", 0): sample},
    )
    assert len(kr.ranges) == 2
    ranges = [(r.member_id, r.topic, r.partition, round(r.load), r.hash_lo, r.hash_hi) for r in kr.ranges]
    whole = [(m, t, p, 10) for m, parts in kr.member_ranges().items() for t, p, lo, _ in parts if lo is None]
    chosen = dataclasses.replace(
        advice.plan, strategy="key_range", assignments=tuple(whole), key_ranges=tuple(ranges)
    )
    with db.connect(url) as conn:
        _, ids, _ = write_run(
            conn, snapshot_id=1, results=[dataclasses.replace(advice, plan=chosen)], params={},
            started_at=now, airflow_run_id=None, created_by="tests",
        )  # fmt: skip
    return ids["orders"], ranges


def test_ranges_are_stored_shown_and_read_for_publishing(url: str, capsys) -> None:
    plan_id, ranges = _ranged_plan_id(url)
    stored = get_plan(plan_id, url)
    rows = sorted(
        (a.member_id, a.topic, a.partition, a.lag, a.key_hash_start, a.key_hash_end)
        for a in stored.assignments
        if a.key_hash_start is not None
    )
    assert rows == sorted(ranges)
    assert sorted((lo, hi) for *_, lo, hi in rows)[0][0] == 0 and max(hi for *_, hi in rows) == HASH_SPACE
    whole = [a for a in stored.assignments if a.key_hash_start is None]
    assert [(a.topic, a.partition) for a in whole] == [("hot", 1)]

    assert main(["plan-status", "show", str(plan_id), "--db", url]) == 0
    out = capsys.readouterr().out
    for member, topic, partition, lag, lo, hi in ranges:
        assert f"key range {topic}-{partition} [{lo}, {hi}) -> {member} (lag {lag})" in out

    # publishing reads the ranges as (topic, partition, hash_lo, hash_hi) holdings, whole ones as pairs
    held = plan_assignment_map(plan_id, url)
    assert sorted((m, *h) for m, hs in held.items() for h in hs if len(h) == 4) == sorted(
        (m, t, p, lo, hi) for m, t, p, _, lo, hi in ranges
    )
    assert [h for hs in held.values() for h in hs if len(h) == 2] == [("hot", 1)]
