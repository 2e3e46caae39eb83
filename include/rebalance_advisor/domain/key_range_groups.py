"""Key-range groups in a snapshot: fold derived range groups into their parent (domain/assignors/key_range.py).

A member owning a key range of a partition commits under a derived group
(``<parent>.keyrange.<lo>-<hi>``, see the client package's ``key_ranges``). For lag and planning
the parent is one group: :func:`fold_range_groups` returns a snapshot in which the derived
groups are gone and the parent's committed offset of each shared partition is the partition's
progress (the least progress over the hash space, so the parent's lag = the max over its ranges);
:func:`range_lags` keeps the per-range view for reports. Pure: snapshot values in, values out.

The snapshot code (owned by the snapshot helper) decides where to call the fold: after collecting,
or when lag and the planner read a stored snapshot.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any, TypeVar

from rebalance_advisor_client.key_ranges import HashProgress, fold_range_commits, parse_range_group
from rebalance_advisor_client.key_ranges import range_lags as _range_lags

from rebalance_advisor.domain.snapshot_model import CommittedOffset, Group, Snapshot

#: spec_documents.SnapshotTables (not imported: spec_documents calls this module)
TablesT = TypeVar("TablesT")


@dataclass(frozen=True)
class RangeLag:
    """Lag of one key range of a partition (records below the log end its owner has not passed)."""

    parent: str
    topic: str
    partition: int
    hash_lo: int
    hash_hi: int
    committed: int
    lag: int | None  # None when the log end offset is unknown


def fold_range_groups(snapshot: Snapshot) -> Snapshot:
    """The snapshot with every derived range group folded into its parent group."""
    derived = {c.group_id for c in snapshot.committed if parse_range_group(c.group_id)}
    derived |= {g.group_id for g in snapshot.groups if parse_range_group(g.group_id)}
    if not derived:
        return snapshot
    by_group: dict[str, dict[tuple[str, int], int]] = {}
    kept: list[CommittedOffset] = []
    touched = {parse_range_group(g)[0] for g in derived}  # type: ignore[index]
    for c in snapshot.committed:
        if c.group_id in derived or c.group_id in touched:
            by_group.setdefault(c.group_id, {})[c.topic, c.partition] = c.offset
        else:
            kept.append(c)
    own = {(c.group_id, c.topic, c.partition): c for c in snapshot.committed if c.group_id in touched}
    for parent, offsets in fold_range_commits(by_group).items():
        for (topic, partition), offset in sorted(offsets.items()):
            old = own.get((parent, topic, partition))
            kept.append(
                old._replace(offset=offset)
                if old is not None
                else CommittedOffset(parent, topic, partition, offset)
            )
    groups = [g for g in snapshot.groups if g.group_id not in derived]
    present = {g.group_id for g in groups}
    for parent in sorted(touched - present):
        groups.append(Group(parent, "Empty", "simple", None, None, None))
    return dataclasses.replace(snapshot, groups=groups, committed=kept)


def fold_range_tables(tables: TablesT) -> TablesT:
    """:func:`fold_range_groups` for the planner's ``SnapshotTables`` (same rule, same result)."""
    t: Any = tables
    derived = {g for g in (*t.committed, *t.members) if parse_range_group(g)}
    if not derived:
        return tables
    parents = {parse_range_group(g)[0] for g in derived}  # type: ignore[index]
    members = {g: m for g, m in t.members.items() if g not in derived}
    for parent in parents:
        members.setdefault(parent, [])
    return dataclasses.replace(
        tables,
        committed=fold_range_commits(t.committed),
        members=members,
        time_lags={k: v for k, v in t.time_lags.items() if k[0] not in derived},
    )


def range_lags(snapshot: Snapshot) -> list[RangeLag]:
    """Per key range of every shared partition: its committed offset and lag (parent = max of these)."""
    ends = {(p.topic, p.partition): p.log_end_offset for p in snapshot.partitions}
    parents: dict[tuple[str, str, int], int] = {}
    ranges: dict[tuple[str, str, int], dict[tuple[int, int], int]] = {}
    for c in snapshot.committed:
        parsed = parse_range_group(c.group_id)
        if parsed is None:
            parents[c.group_id, c.topic, c.partition] = c.offset
        else:
            ranges.setdefault((parsed[0], c.topic, c.partition), {})[parsed[1], parsed[2]] = c.offset
    out = []
    for (parent, topic, partition), commits in sorted(ranges.items()):
        end = ends.get((topic, partition))
        lags = _range_lags(end, parents.get((parent, topic, partition)), commits) if end is not None else {}
        for (lo, hi), committed in sorted(commits.items()):
            out.append(RangeLag(parent, topic, partition, lo, hi, committed, lags.get((lo, hi))))
    return out


def range_progress(
    committed: dict[str, dict[tuple[str, int], int]],
) -> dict[tuple[str, str, int], HashProgress]:
    """Per (parent group, topic, partition) with derived range groups: its progress over the hash
    space from the parent's and the ranges' commits (before folding; ``key_ranges.HashProgress``)."""
    ranges: dict[tuple[str, str, int], dict[tuple[int, int], int]] = {}
    for group, offsets in committed.items():
        parsed = parse_range_group(group)
        if parsed is None:
            continue
        for (topic, partition), offset in offsets.items():
            ranges.setdefault((parsed[0], topic, partition), {})[parsed[1], parsed[2]] = offset
    return {
        (parent, topic, partition): HashProgress.from_commits(
            committed.get(parent, {}).get((topic, partition)), commits
        )
        for (parent, topic, partition), commits in ranges.items()
    }
