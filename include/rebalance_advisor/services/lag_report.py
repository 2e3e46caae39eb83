"""The reference tool's view of a snapshot: ``kafka-consumer-groups --describe`` rows and layout.

Rows follow ConsumerGroupCommand: per group (sorted by id), members holding partitions, the larger
assignment first, each member's partitions by (topic, partition); then committed partitions no
member holds (consumer columns ``-``); a member with no partitions gets one row of ``-``. LAG is
``-`` where no offset is committed, as the tool prints it. Extra columns for json/csv carry our own
numbers: log-start, the lag under the reset policy, and the below-log-start flag.
"""

from __future__ import annotations

import csv
import io
import json
from dataclasses import dataclass

from rebalance_advisor.domain.lag_rules import ResetPolicy, partition_lag
from rebalance_advisor.domain.snapshot_model import Snapshot

COLUMNS = (
    "GROUP",
    "TOPIC",
    "PARTITION",
    "CURRENT-OFFSET",
    "LOG-END-OFFSET",
    "LAG",
    "CONSUMER-ID",
    "HOST",
    "CLIENT-ID",
)
EXTRA_COLUMNS = ("LOG-START-OFFSET", "POLICY-LAG", "RESET", "BELOW-LOG-START")
MISSING = "-"


@dataclass(frozen=True)
class Row:
    group: str
    topic: str | None
    partition: int | None
    current_offset: int | None
    log_end_offset: int | None
    lag: int | None
    consumer_id: str | None
    host: str | None
    client_id: str | None
    log_start_offset: int | None = None
    policy_lag: int | None = None
    reset: str | None = None
    below_log_start: bool | None = None

    def tool_values(self) -> list[str]:
        """The nine columns as the tool prints them (``-`` where missing)."""
        values = (self.group, self.topic, self.partition, self.current_offset, self.log_end_offset,
                  self.lag, self.consumer_id, self.host, self.client_id)  # fmt: skip
        return [MISSING if v is None else str(v) for v in values]

    def as_dict(self) -> dict:
        values = (self.group, self.topic, self.partition, self.current_offset, self.log_end_offset, self.lag,
                  self.consumer_id, self.host, self.client_id, self.log_start_offset, self.policy_lag,
                  self.reset, self.below_log_start)  # fmt: skip
        return dict(zip(COLUMNS + EXTRA_COLUMNS, values, strict=True))


def rows(
    snapshot: Snapshot, group: str | None = None, policy: ResetPolicy | None = None
) -> dict[str, list[Row]]:
    """group id -> its rows, in the tool's order. Groups with nothing to show map to []."""
    policy = policy or ResetPolicy()
    ends = snapshot.partition_map()
    committed = snapshot.committed_map(group)
    # Each group's committed partitions, indexed once: scanning all of them per group is quadratic.
    committed_of: dict[str, list[tuple[str, int]]] = {}
    for group_id, topic, partition in committed:
        committed_of.setdefault(group_id, []).append((topic, partition))
    out: dict[str, list[Row]] = {}
    for g in sorted(snapshot.groups, key=lambda x: x.group_id):
        if group is not None and g.group_id != group:
            continue
        reset = policy.for_group(g.group_id)

        def row(topic: str, partition: int, member_id=None, host=None, client_id=None, _g=g, _r=reset) -> Row:
            c = committed.get((_g.group_id, topic, partition))
            offsets = ends.get((topic, partition))
            end = offsets.log_end_offset if offsets else None
            start = offsets.log_start_offset if offsets else None
            value = c.offset if c else None
            return Row(
                _g.group_id, topic, partition, value, end,
                None if value is None or end is None else max(end - value, 0),
                member_id, host, client_id, start, partition_lag(value, start, end, _r), _r,
                None if value is None or start is None else value < start,
            )  # fmt: skip

        group_rows: list[Row] = []
        held: set[tuple[str, int]] = set()
        members = sorted(g.members, key=lambda m: (-len(m.assignment), m.position))
        for m in members:
            if not m.assignment:
                continue
            for topic, partition in sorted(m.assignment):
                held.add((topic, partition))
                group_rows.append(row(topic, partition, m.member_id, m.host, m.client_id))
        for topic, partition in sorted(committed_of.get(g.group_id, ())):
            if (topic, partition) not in held:
                group_rows.append(row(topic, partition))
        out[g.group_id] = group_rows
    return out


def format_table(grouped: dict[str, list[Row]]) -> str:
    """The tool's layout: per group a blank line, a header and rows, widths from the rows (min 15)."""
    lines: list[str] = []
    for group_rows in grouped.values():
        if not group_rows:
            continue
        values = [r.tool_values() for r in group_rows]
        group_w = max(15, *(len(v[0]) for v in values))
        topic_w = max(15, *(len(v[1]) for v in values))
        consumer_w = max(15, *(len(v[6]) for v in values))
        host_w = max(15, *(len(v[7]) for v in values))
        widths = (group_w, topic_w, 10, 15, 15, 15, consumer_w, host_w)

        def line(cells: list[str] | tuple[str, ...], _w=widths) -> str:
            return " ".join(c.ljust(w) for c, w in zip(cells[:-1], _w, strict=True)) + " " + cells[-1]

        lines.append("")
        lines.append(line(COLUMNS))
        lines.extend(line(v) for v in values)
    return "\n".join(lines) + ("\n" if lines else "")


def format_json(grouped: dict[str, list[Row]]) -> str:
    return json.dumps([r.as_dict() for rs in grouped.values() for r in rs], indent=2)


def format_csv(grouped: dict[str, list[Row]]) -> str:
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    writer.writerow(COLUMNS + EXTRA_COLUMNS)
    for rs in grouped.values():
        for r in rs:
            extra = [r.log_start_offset, r.policy_lag, r.reset, r.below_log_start]
            writer.writerow(
                r.tool_values()
                + [MISSING if v is None else str(v).lower() if isinstance(v, bool) else v for v in extra]
            )
    return buffer.getvalue()
