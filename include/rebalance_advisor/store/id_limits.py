"""The one limit on ids the store keeps: :data:`~rebalance_advisor.domain.parameters.STORED_ID_BYTES`.

Kafka takes group, member and instance ids up to 32,767 characters, but a PostgreSQL btree index
entry holds at most about 2,700 bytes, and the snapshot tables' keys hold a group id, a member id
and a topic name together (docs/concepts/snapshots.md, "Id limit").

- A member id over the limit is stored under a key of its own (:func:`member_storage_key`: a
  readable prefix and a SHA-256 of the whole id), the whole id beside it in
  ``group_members.member_id_full``: the broker makes member ids (a classic member's is its
  ``client.id``, ``-`` and a UUID), so a long ``client.id`` must not cost the group.
- A group whose id, or one of whose group instance ids, is over the limit is left out (the user
  chose those ids, and a group id keys every table, plans included) with a snapshot error naming
  the limit; the rest lands. The same snapshot gives the same rows on SQLite and PostgreSQL.
- So is a group whose id, or one of whose member's ids, names or hosts, holds a NUL character
  (legal in Java): PostgreSQL text cannot hold it, and librdkafka cuts ids there, so the snapshot
  could not even describe such a group by its id (adapters/kafka_snapshot.py refuses those).
"""

from __future__ import annotations

import hashlib

from rebalance_advisor.domain.parameters import STORED_ID_BYTES, id_with_nul, oversized_id
from rebalance_advisor.domain.snapshot_model import Group, Snapshot, SnapshotError

#: bytes of a long member id kept readable in its key: with ``...sha256:`` and 64 hex digits the key
#: stays under :data:`STORED_ID_BYTES`
KEPT_PREFIX_BYTES = 1000


def member_storage_key(member_id: str) -> str:
    """How the snapshot tables key ``member_id``: the id itself up to :data:`STORED_ID_BYTES` bytes,
    else its first :data:`KEPT_PREFIX_BYTES` bytes (a character cut there dropped) and the SHA-256
    of the whole id, unique within a group as the ids are."""
    raw = member_id.encode("utf-8", "surrogatepass")
    if len(raw) <= STORED_ID_BYTES:
        return member_id
    prefix = raw[:KEPT_PREFIX_BYTES].decode("utf-8", "ignore")
    return f"{prefix}...sha256:{hashlib.sha256(raw).hexdigest()}"


def _unstorable(group: Group) -> str | None:
    """Why ``group`` cannot be stored, or None."""
    if reason := oversized_id("group id", group.group_id) or id_with_nul("group id", group.group_id):
        return reason
    for member in group.members:
        instance = member.group_instance_id
        if instance and (reason := oversized_id("group instance id", instance)):
            return reason
        named = (("member id", member.member_id), ("group instance id", instance),
                 ("client id", member.client_id), ("host", member.host), ("rack", member.rack))  # fmt: skip
        for what, value in named:
            if value and (reason := id_with_nul(what, value)):
                return reason
    return None


def refused(group_id: str, reason: str) -> SnapshotError:
    """The snapshot error of a group not stored; its id only in the reason, as a readable prefix
    (the whole id is what could not be stored; ``repr`` shows a NUL as ``\\x00``)."""
    shown = group_id[:200] + "..." if len(group_id) > 200 else group_id
    return SnapshotError("store", f"group {shown!r} not stored: {reason}")


def drop_unstorable_groups(snapshot: Snapshot) -> None:
    """Leave out (in place) every group the store cannot keep (module docstring), recording why."""
    refusals = {}
    for group in snapshot.groups:
        if reason := _unstorable(group):
            refusals[group.group_id] = reason
    if not refusals:
        return
    snapshot.groups = [g for g in snapshot.groups if g.group_id not in refusals]
    snapshot.committed = [c for c in snapshot.committed if c.group_id not in refusals]
    snapshot.record_timestamps = {k: v for k, v in snapshot.record_timestamps.items() if k[0] not in refusals}
    snapshot.share_lags = {k: v for k, v in snapshot.share_lags.items() if k[0] not in refusals}
    snapshot.share_unstarted = [k for k in snapshot.share_unstarted if k[0] not in refusals]
    snapshot.errors.extend(refused(group_id, reason) for group_id, reason in refusals.items())


__all__ = ["STORED_ID_BYTES", "drop_unstorable_groups", "member_storage_key", "refused"]
