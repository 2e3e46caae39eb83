"""A hand-made snapshot of one group for the carried-state tests (domain/estimates.py and the store):
group b on topic t, m1 (static instance i1) holding t-0 and t-1, m2 holding t-2."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from rebalance_advisor.domain.snapshot_model import (
    CommittedOffset,
    Group,
    GroupMemberSnapshot,
    PartitionOffsets,
    Snapshot,
)

T0 = datetime(2030, 1, 1, tzinfo=UTC)
BOOTSTRAP = "hand-made:9092"


def group_b_snapshot(
    seconds: float, ends: dict[int, int], committed: dict[int, int], cluster: str = "c1"
) -> Snapshot:
    """Group b at ``T0 + seconds``: log ends and committed offsets per partition of t."""
    members = (
        GroupMemberSnapshot("m1", "client", "/h", "i1", None, ("t",), (("t", 0), ("t", 1)), 0),
        GroupMemberSnapshot("m2", "client", "/h", None, None, ("t",), (("t", 2),), 1),
    )
    return Snapshot(
        taken_at=T0 + timedelta(seconds=seconds),
        bootstrap_servers=BOOTSTRAP,
        cluster_id=cluster,
        duration_s=0.1,
        groups=[Group("b", "stable", "classic", "range", 1, "h:1", members)],
        committed=[CommittedOffset("b", "t", p, o) for p, o in committed.items()],
        partitions=[PartitionOffsets("t", p, 0, e, 1) for p, e in ends.items()],
    )
