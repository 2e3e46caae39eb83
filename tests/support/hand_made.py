"""A hand-made snapshot of one group for the carried-state tests (domain/estimates.py and the store):
group b on topic t, m1 (static instance i1) holding t-0 and t-1, m2 holding t-2."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
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


def hand_made_snapshot(
    taken_at: datetime,
    ends: dict[tuple[str, int], int],
    committed: dict[tuple[str, str, int], int],
    members: Iterable[tuple[str, str, str | None, Sequence[tuple[str, int]]]] = (),
    cluster: str = "c1",
) -> Snapshot:
    """A snapshot at ``taken_at``: ends {(topic, partition): log end}, committed {(group, topic,
    partition): offset}, members [(group, member id, static instance id, [(topic, partition)...])]."""
    groups: dict[str, list[GroupMemberSnapshot]] = {g: [] for g, _, _ in committed}
    for group, member_id, instance, assignment in members:
        groups.setdefault(group, []).append(
            GroupMemberSnapshot(
                member_id, "client", "/127.0.0.1", instance, None, tuple(sorted({t for t, _ in assignment})),
                tuple(sorted(assignment)), len(groups[group]),
            )
        )  # fmt: skip
    return Snapshot(
        taken_at=taken_at,
        bootstrap_servers=BOOTSTRAP,
        cluster_id=cluster,
        duration_s=0.1,
        groups=[
            Group(g, "stable", "classic", "range", 1, "h:1", tuple(ms)) for g, ms in sorted(groups.items())
        ],
        committed=[CommittedOffset(g, t, p, o) for (g, t, p), o in committed.items()],
        partitions=[PartitionOffsets(t, p, 0, e, 1) for (t, p), e in sorted(ends.items())],
    )


def group_b_snapshot(
    seconds: float, ends: dict[int, int], committed: dict[int, int], cluster: str = "c1"
) -> Snapshot:
    """Group b at ``T0 + seconds``: log ends and committed offsets per partition of t."""
    return hand_made_snapshot(
        T0 + timedelta(seconds=seconds),
        {("t", p): e for p, e in ends.items()},
        {("b", "t", p): o for p, o in committed.items()},
        [("b", "m1", "i1", [("t", 0), ("t", 1)]), ("b", "m2", None, [("t", 2)])],
        cluster,
    )
