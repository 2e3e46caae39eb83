"""SQL behind "how is a group's plan applied": the group as a snapshot saw it (protocol, assignor),
its members' identities, and the manual-assign registry. The rule is ``domain/apply_mode.py``."""

from __future__ import annotations

from collections.abc import Iterable

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from rebalance_advisor.domain.apply_mode import ApplyMode, apply_mode
from rebalance_advisor.store.models import ConsumerGroupRow, GroupMemberRow, StaticMemberRow
from rebalance_advisor.store.plan_models import Plan


def _static_groups(conn: Connection, group_ids: list[str]) -> set[str]:
    query = sa.select(StaticMemberRow.group_id).where(StaticMemberRow.group_id.in_(group_ids)).distinct()
    return set(conn.execute(query).scalars())


def apply_modes_in(conn: Connection, snapshot_id: int, group_ids: Iterable[str]) -> dict[str, ApplyMode]:
    """Each group's apply mode with the group as snapshot ``snapshot_id`` saw it and today's registry."""
    wanted = sorted(set(group_ids))
    modes: dict[str, ApplyMode] = {}
    for start in range(0, len(wanted), 500):  # bounded IN lists
        chunk = wanted[start : start + 500]
        static = _static_groups(conn, chunk)
        rows = conn.execute(
            sa.select(
                ConsumerGroupRow.group_id, ConsumerGroupRow.group_type, ConsumerGroupRow.assignor
            ).where(ConsumerGroupRow.snapshot_id == snapshot_id, ConsumerGroupRow.group_id.in_(chunk))
        )
        seen = {g: (t, a) for g, t, a in rows}
        for group in chunk:
            kind, assignor = seen.get(group, (None, None))
            modes[group] = apply_mode(group in static, kind, assignor)
    return modes


def current_apply_mode(conn: Connection, group_id: str) -> ApplyMode:
    """The group's apply mode now: today's registry and the newest snapshot that holds the group."""
    snapshot_id = conn.execute(  # the newest snapshot holding the group (store/snapshots.py has the
        # same query; importing it here would make a cycle: snapshots -> plans -> this module)
        sa.select(sa.func.max(ConsumerGroupRow.snapshot_id)).where(ConsumerGroupRow.group_id == group_id)
    ).scalar()
    if snapshot_id is None:
        return apply_mode(bool(_static_groups(conn, [group_id])), None, None)
    return apply_modes_in(conn, snapshot_id, [group_id])[group_id]


def member_identities(conn: Connection, snapshot_id: int, group_id: str) -> dict[str, tuple[str, str | None]]:
    """Plan member key (instance id when set, else member id) -> (member id, instance id), as the
    snapshot listed the group's members: what the broker plan record names each member by."""
    rows = conn.execute(
        sa.select(GroupMemberRow.member_id, GroupMemberRow.group_instance_id).where(
            GroupMemberRow.snapshot_id == snapshot_id, GroupMemberRow.group_id == group_id
        )
    )
    return {(instance or member): (member, instance) for member, instance in rows}


def member_identities_of_plan(conn: Connection, plan_id: int) -> dict[str, tuple[str, str | None]]:
    """:func:`member_identities` of the plan's group in the plan's own snapshot (its member keys)."""
    found = conn.execute(sa.select(Plan.snapshot_id, Plan.group_id).where(Plan.id == plan_id)).first()
    return member_identities(conn, found[0], found[1]) if found else {}
