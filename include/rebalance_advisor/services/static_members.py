"""The static-member registry: the consumer instances of manual-assign (``assign()``) groups.

Kafka cannot list these consumers (they never join the group), so the planner plans such a group
only with the members registered here (``planner.specs``), and the publisher sends every
registered member a record, an empty one when the plan gives it nothing. Registering a member
twice is refused rather than silently updating it: a typo in a group id should not go unnoticed;
change topics with ``remove`` then ``add``.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import asdict, dataclass
from datetime import UTC, datetime
from typing import Any

import sqlalchemy as sa

from rebalance_advisor.domain.parameters import oversized_id
from rebalance_advisor.domain.timestamps import assume_utc
from rebalance_advisor.errors import AdvisorError
from rebalance_advisor.store import db, static_members_table

#: Kafka's own limit on topic names; ids: the store's limit (domain.parameters.STORED_ID_BYTES)
MAX_TOPIC = 249
TOPIC_NAME = re.compile(rf"[A-Za-z0-9._-]{{1,{MAX_TOPIC}}}")


@dataclass(frozen=True)
class RegisteredMember:
    group_id: str
    member_id: str
    topics: tuple[str, ...]
    created_at: datetime
    share_keys: bool = False  # takes key ranges of split partitions (domain/assignors/key_range.py)

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["topics"] = list(self.topics)
        data["created_at"] = self.created_at.isoformat()
        return data


def _check_id(kind: str, value: object) -> str:
    if not isinstance(value, str) or not value.strip():
        raise AdvisorError(f"{kind} must be a non-empty string, got {value!r}")
    if value != value.strip():
        raise AdvisorError(f"{kind} {value!r} has leading or trailing whitespace")
    if reason := oversized_id(kind, value):
        raise AdvisorError(f"{kind} refused: {reason}")
    return value


def _check_topics(topics: Iterable[str]) -> list[str]:
    result: list[str] = []
    for topic in [topics] if isinstance(topics, str) else topics:
        if not isinstance(topic, str) or not TOPIC_NAME.fullmatch(topic):
            raise AdvisorError(
                f"topic {topic!r} is not a Kafka topic name (1-{MAX_TOPIC} of letters, digits, '.', '_', '-')"
            )
        if topic not in result:
            result.append(topic)
    if not result:
        raise AdvisorError("a static member needs at least one topic")
    return result


def _member(row: Any) -> RegisteredMember:
    return RegisteredMember(
        row.group_id, row.member_id, tuple(row.topics or ()), assume_utc(row.created_at), bool(row.share_keys)
    )


def add(
    group_id: str, member_id: str, topics: Iterable[str], url: str | None = None, share_keys: bool = False
) -> RegisteredMember:
    """Register one consumer instance; refused when it is registered already.

    ``share_keys``: the member opts in to taking key ranges of split partitions (key_range).
    """
    group_id, member_id = _check_id("group id", group_id), _check_id("member id", member_id)
    topic_list = _check_topics(topics)
    member = RegisteredMember(group_id, member_id, tuple(topic_list), datetime.now(UTC), share_keys)
    duplicate = AdvisorError(
        f"member {member_id!r} of group {group_id!r} is already registered; "
        "remove it first to change its topics"
    )
    try:
        with db.connect(url) as conn:
            if static_members_table.member_registered(conn, group_id, member_id):
                raise duplicate
            static_members_table.insert_member_row(
                conn, group_id, member_id, topic_list, member.created_at, share_keys
            )
    except sa.exc.IntegrityError as error:  # a concurrent add of the same member won
        raise duplicate from error
    return member


def list_members(group_id: str | None = None, url: str | None = None) -> list[RegisteredMember]:
    """Registered members (of one group, or all), ordered by group and member."""
    with db.connect(url) as conn:
        return [_member(row) for row in static_members_table.member_rows(conn, group_id)]


def remove(group_id: str, member_id: str, url: str | None = None) -> RegisteredMember:
    """Unregister one consumer instance; refused when it is not registered."""
    with db.connect(url) as conn:
        row = static_members_table.find_member_row(conn, group_id, member_id)
        if row is None:
            known = static_members_table.member_ids(conn, group_id)
            raise AdvisorError(
                f"member {member_id!r} of group {group_id!r} is not registered"
                + (f"; registered: {', '.join(known)}" if known else "; the group has no registered members")
            )
        static_members_table.delete_member_row(conn, group_id, member_id)
    return _member(row)
