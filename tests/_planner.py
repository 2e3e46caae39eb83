"""Planner test helpers: one shared local Spark session, and hand-made snapshots.

The session is shared by every planner test (start-up costs ~4 s on 2 cores). ``@task.pyspark``
stops the active session after its task, so :func:`live_spark` recreates it when that happened.
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime
from typing import Any

import pytest
from rebalance_advisor.domain.snapshot_model import (
    CommittedOffset,
    Group,
    GroupMemberSnapshot,
    PartitionOffsets,
    Snapshot,
)

_SESSION: list = []


def live_spark():
    """The shared ``local[2]`` session, started (again) when there is none alive."""
    from rebalance_advisor.adapters.spark_session import spark_session

    if _SESSION and _SESSION[0].sparkContext._jsc is not None:
        return _SESSION[0]
    _SESSION[:] = [spark_session("local[2]", "rebalance-advisor-tests")]
    return _SESSION[0]


@pytest.fixture
def spark() -> Iterator:
    yield live_spark()


def stop_spark() -> None:
    if _SESSION and _SESSION[0].sparkContext._jsc is not None:
        _SESSION[0].stop()
    _SESSION.clear()


def make_snapshot(groups: dict[str, dict], taken_at: datetime | None = None) -> Snapshot:
    """groups: id -> {"topics": {topic: [(log_end, committed or None), ...]},
    "members": [(member_id, instance_id, [(topic, partition), ...], subscribed_topics or None)]}.
    Log-start offsets are 0; a topic shared by groups must list the same log ends."""
    partitions: dict[tuple[str, int], PartitionOffsets] = {}
    committed: list[CommittedOffset] = []
    out_groups: list[Group] = []
    for group_id, g in groups.items():
        for topic, rows in g["topics"].items():
            for partition, (end, offset) in enumerate(rows):
                partitions[(topic, partition)] = PartitionOffsets(topic, partition, 0, end, 1)
                if offset is not None:
                    committed.append(CommittedOffset(group_id, topic, partition, offset))
        members = tuple(
            GroupMemberSnapshot(
                member_id=member_id,
                client_id=f"client-{member_id}",
                host="/127.0.0.1",
                group_instance_id=instance,
                subscribed_topics=tuple(
                    subscribed if subscribed is not None else sorted({t for t, _ in owned})
                ),
                assignment=tuple(sorted(owned)),
                position=i,
            )
            for i, (member_id, instance, owned, subscribed) in enumerate(g.get("members", []))
        )
        state = "Stable" if members else "Empty"
        out_groups.append(
            Group(group_id, state, "classic", "range" if members else None, 1, "127.0.0.1", members)
        )
    return Snapshot(
        taken_at=taken_at or datetime.now(UTC),
        bootstrap_servers="127.0.0.1:9092",
        cluster_id="test-cluster",
        duration_s=0.1,
        groups=out_groups,
        committed=committed,
        partitions=[partitions[k] for k in sorted(partitions)],
    )


#: The hand-checked groups most planner tests use.
KIP = {
    "topics": {"t0": [(100_000, 0), (60_000, 0), (50_000, 0)]},
    "members": [
        ("m-0", "C0", [("t0", 0), ("t0", 1)], None),  # range's choice: 160,000 on C0
        ("m-1", "C1", [("t0", 2)], None),
    ],
}
IDLE = {
    "topics": {"idle-topic": [(1_000, 1_000)] * 4},
    "members": [("i-0", None, [("idle-topic", 0), ("idle-topic", 1)], None),
                ("i-1", None, [("idle-topic", 2), ("idle-topic", 3)], None)],
}  # fmt: skip
BALANCED = {
    "topics": {"balanced-topic": [(5_000, 0)] * 4},
    "members": [("b-0", None, [("balanced-topic", 0), ("balanced-topic", 1)], None),
                ("b-1", None, [("balanced-topic", 2), ("balanced-topic", 3)], None)],
}  # fmt: skip
MANUAL = {"topics": {"manual-topic": [(30_000, 0), (2_000, 0), (2_000, 0), (1_500, 0)]}, "members": []}


def stored_run(url: str, volatile: set[str]) -> dict[str, dict[str, Any]]:
    """Per group of the newest advisor run: its outcome and its plan with assignments and transitions,
    leaving out the ``volatile`` fields (ids, times) that differ between two equal runs."""
    import dataclasses

    from rebalance_advisor.store import plans as store_plans

    out: dict[str, dict[str, Any]] = {}
    for outcome in store_plans.run_outcomes(None, url):
        row = {k: v for k, v in outcome.to_dict().items() if k not in volatile}
        if outcome.plan_id is not None:
            plan = store_plans.get_plan(outcome.plan_id, url)
            assert plan is not None
            row["plan"] = {
                k: v for k, v in dataclasses.asdict(plan).items() if k not in volatile | {"transitions"}
            }
            row["plan"]["transitions"] = [(t.from_status, t.to_status, t.note) for t in plan.transitions]
        out[outcome.group_id] = row
    return out
