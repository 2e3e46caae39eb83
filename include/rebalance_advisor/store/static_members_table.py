"""SQL of the ``static_members`` table (the manual-assign registry); the rules are in
:mod:`rebalance_advisor.services.static_members`.

Every function runs on the caller's connection, so a caller that checks and then writes does so
in one transaction.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from rebalance_advisor.domain.spec_documents import StaticMember
from rebalance_advisor.store.models import StaticMemberRow
from rebalance_advisor.store.planner_scope import GroupScope, scoped


def _one(group_id: str, member_id: str) -> sa.ColumnElement[bool]:
    return sa.and_(StaticMemberRow.group_id == group_id, StaticMemberRow.member_id == member_id)


def find_member_row(conn: Connection, group_id: str, member_id: str) -> Any | None:
    """The registry row of one member, or None."""
    return conn.execute(sa.select(StaticMemberRow).where(_one(group_id, member_id))).first()


def member_registered(conn: Connection, group_id: str, member_id: str) -> bool:
    found = conn.execute(sa.select(StaticMemberRow.member_id).where(_one(group_id, member_id))).first()
    return found is not None


def insert_member_row(
    conn: Connection,
    group_id: str,
    member_id: str,
    topics: Sequence[str],
    created_at: datetime,
    share_keys: bool,
) -> None:
    """Insert one member (``IntegrityError`` when a concurrent insert of the same member won)."""
    conn.execute(
        sa.insert(StaticMemberRow).values(
            group_id=group_id,
            member_id=member_id,
            topics=list(topics),
            created_at=created_at,
            share_keys=share_keys,
        )
    )


def delete_member_row(conn: Connection, group_id: str, member_id: str) -> None:
    conn.execute(sa.delete(StaticMemberRow).where(_one(group_id, member_id)))


def member_rows(conn: Connection, group_id: str | None = None) -> list[Any]:
    """Registry rows (of one group, or all), ordered by group and member."""
    query = sa.select(StaticMemberRow).order_by(StaticMemberRow.group_id, StaticMemberRow.member_id)
    if group_id is not None:
        query = query.where(StaticMemberRow.group_id == group_id)
    return list(conn.execute(query))


def member_ids(conn: Connection, group_id: str) -> list[str]:
    """Registered member ids of one group, ordered."""
    rows = conn.execute(
        sa.select(StaticMemberRow.member_id)
        .where(StaticMemberRow.group_id == group_id)
        .order_by(StaticMemberRow.member_id)
    )
    return list(rows.scalars())


def static_group_ids(conn: Connection) -> set[str]:
    """Ids of the groups with at least one registered member (the manual-assign groups)."""
    return set(conn.execute(sa.select(StaticMemberRow.group_id).distinct()).scalars())


def key_sharing_members(conn: Connection, group_id: str) -> frozenset[str]:
    """Member ids of one group that opted in to key-range sharing (``members add --share-keys``)."""
    rows = conn.execute(
        sa.select(StaticMemberRow.member_id).where(
            StaticMemberRow.group_id == group_id, StaticMemberRow.share_keys.is_(True)
        )
    )
    return frozenset(rows.scalars())


def key_sharing_members_by_group(conn: Connection) -> dict[str, frozenset[str]]:
    """group -> member ids that opted in to key-range sharing (one query for a whole advisor run)."""
    rows = conn.execute(
        sa.select(StaticMemberRow.group_id, StaticMemberRow.member_id).where(
            StaticMemberRow.share_keys.is_(True)
        )
    )
    out: dict[str, set[str]] = {}
    for group_id, member_id in rows:
        out.setdefault(group_id, set()).add(member_id)
    return {g: frozenset(m) for g, m in out.items()}


def static_member_specs(conn: Connection, scope: GroupScope | None = None) -> list[StaticMember]:
    """The manual-assign registry as the planner reads it: whole, or of ``scope``'s groups."""
    rows = conn.execute(
        scoped(
            sa.select(StaticMemberRow.group_id, StaticMemberRow.member_id, StaticMemberRow.topics),
            StaticMemberRow.group_id,
            scope,
        )
    )
    return [StaticMember(g, m, tuple(t or ())) for g, m, t in rows]
