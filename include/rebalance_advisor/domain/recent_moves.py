"""Recent moves from the owners a group had over time: what the hysteresis rule reads in production
(docs/architecture.md, "Imbalance and decisions"). Pure, no I/O.

The simulator learns each move as it applies a plan (``estimates.Carried.after_plan``). Production
learns them from the store: every published plan of a group (its assignment against the one
published before it), and, for groups the broker lists with members, every owner change between two
consecutive snapshots. A move is (topic, partition, from, to, at): the partition left ``from`` for
``to`` at ``at``; the rule holds a plan that gives it back to ``from`` within the hysteresis window.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from datetime import datetime

from rebalance_advisor.domain.group_spec import RecentMove
from rebalance_advisor.domain.timestamps import as_utc

#: (group, topic, partition) -> the member that holds it (as plans name it)
Owners = Mapping[tuple[str, str, int], str]


def owner_changes(before: Owners, after: Owners, at: datetime) -> dict[str, list[RecentMove]]:
    """group -> the partitions owned at both times by different members, as moves at ``at``."""
    out: dict[str, list[RecentMove]] = {}
    for key in sorted(after.keys() & before.keys()):
        old, new = before[key], after[key]
        if old != new:
            group, topic, partition = key
            out.setdefault(group, []).append(RecentMove(topic, partition, old, new, at))
    return out


def recent_moves(
    histories: Iterable[Sequence[tuple[datetime, Owners]]], now: datetime, window_s: float
) -> dict[str, tuple[RecentMove, ...]]:
    """group -> its moves within ``window_s`` before ``now``, oldest first, from each history (owners
    over time, oldest first: the published plans, the observed snapshots). A move both histories saw
    counts once (the later time)."""
    seen: dict[tuple[str, str, int, str, str], RecentMove] = {}
    for history in histories:
        for (_, before), (at, after) in zip(history, history[1:], strict=False):
            if not 0 <= (as_utc(now) - as_utc(at)).total_seconds() <= window_s:
                continue
            for group, moves in owner_changes(before, after, at).items():
                for m in moves:
                    key = (group, m.topic, m.partition, m.from_member, m.to_member)
                    if key not in seen or as_utc(seen[key].at) < as_utc(m.at):
                        seen[key] = m
    out: dict[str, list[RecentMove]] = {}
    for (group, *_), move in sorted(seen.items(), key=lambda item: (as_utc(item[1].at), item[0])):
        out.setdefault(group, []).append(move)
    return {group: tuple(moves) for group, moves in out.items()}


def moves_document(moves: Iterable[RecentMove]) -> list[dict[str, object]]:
    """The planning document's ``recent_moves`` (``group_spec.parse_recent_moves`` reads it back)."""
    return [
        {
            "topic": m.topic,
            "partition": m.partition,
            "from": m.from_member,
            "to": m.to_member,
            "at": as_utc(m.at).isoformat(),
        }
        for m in moves
    ]
