"""The one limit on ids the store keeps: :data:`~rebalance_advisor.domain.parameters.STORED_ID_BYTES`.

Kafka takes group, member and instance ids up to 32,767 characters, but a PostgreSQL btree index
entry holds at most about 2,700 bytes, and the snapshot tables' keys hold a group id, a member id
and a topic name together. A group whose id (or one of whose member or instance ids) is longer
than the limit is therefore not stored, on either database (the same snapshot gives the same
rows everywhere): it is left out with a snapshot error naming the limit, and the rest lands.
"""

from __future__ import annotations

from rebalance_advisor.domain.parameters import STORED_ID_BYTES, oversized_id
from rebalance_advisor.domain.snapshot_model import Group, Snapshot, SnapshotError


def _too_long(group: Group) -> str | None:
    """Why ``group`` cannot be stored, or None."""
    if reason := oversized_id("group id", group.group_id):
        return reason
    for member in group.members:
        for what, value in (("member id", member.member_id), ("group instance id", member.group_instance_id)):
            if value and (reason := oversized_id(what, value)):
                return reason
    return None


def drop_unstorable_groups(snapshot: Snapshot) -> None:
    """Leave out (in place) every group with an id over :data:`STORED_ID_BYTES`, recording why."""
    refused = {}
    for group in snapshot.groups:
        if reason := _too_long(group):
            refused[group.group_id] = reason
    if not refused:
        return
    snapshot.groups = [g for g in snapshot.groups if g.group_id not in refused]
    snapshot.committed = [c for c in snapshot.committed if c.group_id not in refused]
    snapshot.record_timestamps = {k: v for k, v in snapshot.record_timestamps.items() if k[0] not in refused}
    snapshot.share_lags = {k: v for k, v in snapshot.share_lags.items() if k[0] not in refused}
    for group_id, reason in refused.items():
        # the error row keeps a readable prefix: the full id is what could not be stored
        shown = group_id[:200] + "..." if len(group_id) > 200 else group_id
        snapshot.errors.append(SnapshotError("store", f"group {shown!r} not stored: {reason}"))


__all__ = ["STORED_ID_BYTES", "drop_unstorable_groups"]
