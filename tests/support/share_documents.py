"""A share group's snapshot as the share-group reader's document gives it (adapters/share_groups.py),
shared by the unit test of the tool's rows and the store test of the same rows."""

from __future__ import annotations

from datetime import UTC, datetime

from rebalance_advisor.adapters.share_groups import read_document
from rebalance_advisor.domain.snapshot_model import PartitionOffsets, Snapshot


def share_snapshot() -> Snapshot:
    """A share group ``s`` on t-0 (started: start offset 5, the broker's lag 3) and t-1 (not started),
    as the reader's document carries them: Java's Admin gives no offset info (null) for a partition
    without share-partition state."""
    document = {"groups": [{"group_id": "s", "state": "Stable", "members": [], "offsets": [
        {"topic": "t", "partition": 1, "start_offset": None, "leader_epoch": None, "lag": None},
        {"topic": "t", "partition": 0, "start_offset": 5, "leader_epoch": 0, "lag": 3}]}]}  # fmt: skip
    read = read_document(document, lambda _g: True, lambda _t: True)
    return Snapshot(
        taken_at=datetime.now(UTC), bootstrap_servers="127.0.0.1:9092", cluster_id="share-test",
        duration_s=0.0, groups=read.groups, committed=read.committed,
        partitions=[PartitionOffsets("t", 0, 0, 8, 1), PartitionOffsets("t", 1, 0, 4, 1)],
        share_lags=read.lags, share_unstarted=read.unstarted,
    )  # fmt: skip
