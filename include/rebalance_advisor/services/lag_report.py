"""The reference tool's view of a snapshot: ``kafka-consumer-groups --describe`` rows and layout.

Rows follow ConsumerGroupCommand: per group (sorted by id), members holding partitions, the larger
assignment first, each member's partitions by (topic, partition); then committed partitions no
member holds (consumer columns ``-``); a member with no partitions gets one row of ``-``. LAG is
``-`` where no offset is committed and negative when the committed offset is past the end, as the
tool prints it. In a snapshot taken read_committed, LAG is against the last stable offset (what a
read_committed consumer can reach; LAG-AGAINST says which): json/csv keep LOG-END-OFFSET the high
watermark beside LAST-STABLE-OFFSET, the tool/table rows show the offset LAG is against, so that
LAG = LOG-END-OFFSET - CURRENT-OFFSET holds as in the tool's rows.

Share groups (KIP-932) get one row per partition of their topics, as ``kafka-share-groups
--describe`` prints them: CURRENT-OFFSET is the share-partition start offset, LAG the broker's own
figure (LAG-AGAINST ``share_broker_lag``), both ``-`` on a partition the group has not started on,
no consumer columns (every member may fetch from every partition).

``tool`` format: exactly the tool's nine columns. ``table`` adds the time lag (seconds, and
TIME-LAG-BY: record_timestamp, rate_estimate, caught_up or future_timestamp), the produce and consume
rates (records/s) and FLAGS (below-log-start, above-log-end, future-timestamp: the record at the
committed offset is stamped after the snapshot, clock skew). json/csv carry every column, also
log-start, the last stable offset, the lag under the reset policy (POLICY-LAG, never negative)
and the flags as booleans.
"""

from __future__ import annotations

import csv
import dataclasses
import io
import json
from dataclasses import dataclass

from rebalance_advisor_client.key_ranges import range_group

from rebalance_advisor.domain.key_range_groups import fold_range_groups, range_lags
from rebalance_advisor.domain.lag import ResetPolicy, lag_against, lag_row
from rebalance_advisor.domain.snapshot_model import (
    SHARE_GROUP_TYPE,
    Group,
    GroupMemberSnapshot,
    RateEstimate,
    Snapshot,
    SnapshotRates,
    TimeLag,
)

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
#: what ``table`` adds to the tool's columns
TABLE_COLUMNS = ("TIME-LAG-S", "TIME-LAG-BY", "PRODUCE-RATE", "CONSUME-RATE", "FLAGS")
EXTRA_COLUMNS = (
    "LOG-START-OFFSET",
    "POLICY-LAG",
    "RESET",
    "BELOW-LOG-START",
    "ABOVE-LOG-END",
    "LAST-STABLE-OFFSET",
    "LAG-AGAINST",
    "TIME-LAG-S",
    "TIME-LAG-BY",
    "PRODUCE-RATE",
    "CONSUME-RATE",
    "PRODUCE-RATE-UNKNOWN",
    "CONSUME-RATE-UNKNOWN",
)
MISSING = "-"
#: LAG-AGAINST of a share group's rows: LAG is the broker's own count (``kafka-share-groups
#: --describe``), CURRENT-OFFSET the share-partition start offset, no consumer columns
SHARE_LAG_AGAINST = "share_broker_lag"


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
    above_log_end: bool | None = None
    last_stable_offset: int | None = None
    lag_against: str | None = None
    time_lag_s: float | None = None
    time_lag_by: str | None = None
    produce_rate: float | None = None
    consume_rate: float | None = None
    produce_rate_unknown: str | None = None
    consume_rate_unknown: str | None = None

    def tool_values(self) -> list[str]:
        """The nine columns as the tool prints them (``-`` where missing)."""
        end = self.log_end_offset
        if self.lag_against == "last_stable" and self.lag is not None and self.current_offset is not None:
            end = self.current_offset + self.lag  # the end LAG is against, so that LAG = END - CURRENT
        values = (self.group, self.topic, self.partition, self.current_offset, end,
                  self.lag, self.consumer_id, self.host, self.client_id)  # fmt: skip
        return [MISSING if v is None else str(v) for v in values]

    def table_values(self) -> list[str]:
        """The columns ``table`` adds (:data:`TABLE_COLUMNS`)."""
        flags = [n for n, on in (("below-log-start", self.below_log_start),
                                 ("above-log-end", self.above_log_end),
                                 ("future-timestamp", self.time_lag_by == "future_timestamp")) if on]  # fmt: skip
        return [
            MISSING if self.time_lag_s is None else f"{self.time_lag_s:.1f}",
            self.time_lag_by or MISSING,
            MISSING if self.produce_rate is None else f"{self.produce_rate:.2f}",
            MISSING if self.consume_rate is None else f"{self.consume_rate:.2f}",
            ",".join(flags) or MISSING,
        ]

    def as_dict(self) -> dict:
        values = (self.group, self.topic, self.partition, self.current_offset, self.log_end_offset, self.lag,
                  self.consumer_id, self.host, self.client_id, self.log_start_offset, self.policy_lag,
                  self.reset, self.below_log_start, self.above_log_end, self.last_stable_offset,
                  self.lag_against, self.time_lag_s, self.time_lag_by, self.produce_rate, self.consume_rate,
                  self.produce_rate_unknown, self.consume_rate_unknown)  # fmt: skip
        return dict(zip(COLUMNS + EXTRA_COLUMNS, values, strict=True))


def rows(
    snapshot: Snapshot, group: str | None = None, policy: ResetPolicy | None = None
) -> dict[str, list[Row]]:
    """group id -> its rows, in the tool's order. Groups with nothing to show map to [].

    Key-range groups (domain/key_range_groups.py) are folded into their parent (its lag of a shared partition = the
    max over the partition's ranges), then each range gets a row after the parent's rows, GROUP
    naming the range's derived group (``<parent>.keyrange.<lo>-<hi>``) and CURRENT-OFFSET its
    range's progress.
    """
    out = _rows(fold_range_groups(snapshot), group, policy)
    for r in range_lags(snapshot):
        if r.parent in out:
            end = snapshot.partition_map().get((r.topic, r.partition))
            out[r.parent].append(
                Row(range_group(r.parent, r.hash_lo, r.hash_hi), r.topic, r.partition,
                    None if r.lag is None or end is None else end.log_end_offset - r.lag,
                    end.log_end_offset if end else None, r.lag, None, None, None)
            )  # fmt: skip
    return out


def _rows(
    snapshot: Snapshot, group: str | None = None, policy: ResetPolicy | None = None
) -> dict[str, list[Row]]:
    """group id -> its rows (module docstring), from the folded snapshot."""
    policy = policy or ResetPolicy()
    rows_of = _GroupRows(snapshot, group)
    out: dict[str, list[Row]] = {}
    for g in sorted(snapshot.groups, key=lambda x: x.group_id):
        if group is not None and g.group_id != group:
            continue
        reset = policy.for_group(g.group_id)
        out[g.group_id] = (
            rows_of.share(g, reset) if g.group_type == SHARE_GROUP_TYPE else rows_of.consumer(g, reset)
        )
    return out


_NO_RATE, _NO_TIME_LAG = RateEstimate(None, None), TimeLag(None, None)


class _GroupRows:
    """The rows of one snapshot's groups: the lag rows (``lag.lag_row``) with the snapshot's rates
    and time lags, in the tool's order."""

    def __init__(self, snapshot: Snapshot, group: str | None) -> None:
        self.snapshot = snapshot
        self.ends = snapshot.partition_map()
        self.committed = snapshot.committed_map(group)
        self.against = lag_against(snapshot.isolation_level)
        self.rates = snapshot.rates or SnapshotRates()
        # Each group's committed partitions, indexed once: scanning all of them per group is quadratic.
        self.committed_of: dict[str, list[tuple[str, int]]] = {}
        for group_id, topic, partition in self.committed:
            self.committed_of.setdefault(group_id, []).append((topic, partition))
        self.unstarted_of: dict[str, list[tuple[str, int]]] = {}
        for group_id, topic, partition in snapshot.share_unstarted:
            self.unstarted_of.setdefault(group_id, []).append((topic, partition))

    def consumer(self, g: Group, reset: str) -> list[Row]:
        """Members holding partitions, the larger assignment first, each member's partitions by
        (topic, partition); then the committed partitions no member holds."""
        rows: list[Row] = []
        held: set[tuple[str, int]] = set()
        for m in sorted(g.members, key=lambda m: (-len(m.assignment), m.position)):
            for topic, partition in sorted(m.assignment):
                held.add((topic, partition))
                rows.append(self.row(g.group_id, reset, topic, partition, m))
        for topic, partition in sorted(self.committed_of.get(g.group_id, ())):
            if (topic, partition) not in held:
                rows.append(self.row(g.group_id, reset, topic, partition))
        return rows

    def share(self, g: Group, reset: str) -> list[Row]:
        """A share group: the broker's lag, one row per partition; "-" where it has not started."""
        rows = []
        started = self.committed_of.get(g.group_id, [])
        for topic, partition in sorted(started + self.unstarted_of.get(g.group_id, [])):
            share_lag = self.snapshot.share_lags.get((g.group_id, topic, partition))
            no_time_lag = {} if (topic, partition) in started else {"time_lag_s": None, "time_lag_by": None}
            rows.append(
                dataclasses.replace(
                    self.row(g.group_id, reset, topic, partition), lag=share_lag,
                    policy_lag=share_lag, reset=None, below_log_start=None, above_log_end=None,
                    lag_against=SHARE_LAG_AGAINST, **no_time_lag,
                )
            )  # fmt: skip
        return rows

    def row(
        self, group_id: str, reset: str, topic: str, partition: int, member: GroupMemberSnapshot | None = None
    ) -> Row:
        """The lag row of one partition with its rates and time lag, as the report shows it."""
        key = (group_id, topic, partition)
        c = self.committed.get(key)
        x = lag_row(*key, self.ends.get((topic, partition)), self.snapshot.isolation_level,
                    c.offset if c else None, reset)  # fmt: skip
        produce = self.rates.produce.get((topic, partition), _NO_RATE)
        consume = self.rates.consume.get(key, _NO_RATE)
        time_lag = self.rates.time_lag.get(key, _NO_TIME_LAG)
        if time_lag.method is None and x.committed is None and x.lag == 0 and x.log_end is not None:
            time_lag = TimeLag(0.0, "caught_up")  # nothing committed, reset latest: starts at the end
        return Row(
            group_id, topic, partition, x.committed, x.log_end_offset, x.offset_lag,
            member.member_id if member else None, member.host if member else None,
            member.client_id if member else None, x.log_start, x.lag, reset, x.below_log_start,
            x.above_log_end, x.last_stable_offset, self.against, time_lag.seconds, time_lag.method,
            produce.rate, consume.rate, produce.unknown_reason, consume.unknown_reason,
        )  # fmt: skip


def format_lag_table(grouped: dict[str, list[Row]]) -> str:
    """The tool's layout plus :data:`TABLE_COLUMNS`."""
    return _layout(grouped, extra=True)


#: group states in which kafka-consumer-groups warns that a group is rebalancing, as the snapshot
#: stores them: confluent-kafka's ConsumerGroupState names in lower case (``preparing_rebalancing``,
#: not Kafka's ``PreparingRebalance``), and the consumer protocol's ``assigning``/``reconciling``
REBALANCING_STATES = frozenset(
    {"preparing_rebalancing", "completing_rebalancing", "assigning", "reconciling"}
)


def tool_notes(snapshot: Snapshot, grouped: dict[str, list[Row]]) -> list[str]:
    """The lines kafka-consumer-groups --describe prints to stderr before a group's rows: no active
    members (state Empty, or nothing to show), or a rebalance in progress."""
    groups = {g.group_id: g for g in snapshot.groups}
    notes = []
    for group_id, group_rows in grouped.items():
        group = groups.get(group_id)
        state = group.state.lower() if group else ""
        kind = "Share" if group and group.group_type == SHARE_GROUP_TYPE else "Consumer"
        if not group_rows or state == "empty":
            notes.append(f"{kind} group '{group_id}' has no active members.")
        elif state in REBALANCING_STATES:
            notes.append(f"Warning: Consumer group '{group_id}' is rebalancing.")
    return notes


def format_tool(grouped: dict[str, list[Row]]) -> str:
    """Exactly the tool's layout: per group a blank line, a header and rows, widths from the rows (min 15)."""
    return _layout(grouped, extra=False)


def java_length(text: str) -> int:
    """``String.length()`` in Java: UTF-16 code units, so a character outside the BMP counts 2.
    The tool's widths and ``%-Ns`` padding count these, not code points."""
    return len(text.encode("utf-16-le", "surrogatepass")) // 2


def _java_ljust(text: str, width: int) -> str:
    return text + " " * max(0, width - java_length(text))


def _layout(grouped: dict[str, list[Row]], extra: bool) -> str:
    lines: list[str] = []
    for group_rows in grouped.values():
        if not group_rows:
            continue
        values = [r.tool_values() for r in group_rows]
        group_w = max(15, *(java_length(v[0]) for v in values))
        topic_w = max(15, *(java_length(v[1]) for v in values))
        consumer_w = max(15, *(java_length(v[6]) for v in values))
        host_w = max(15, *(java_length(v[7]) for v in values))
        widths = (group_w, topic_w, 10, 15, 15, 15, consumer_w, host_w)

        if extra:
            client_w = max(15, *(java_length(v[8]) for v in values))
            values = [v + r.table_values() for v, r in zip(values, group_rows, strict=True)]
            widths = (*widths, client_w, 10, 16, 12, 12)
            header = COLUMNS + TABLE_COLUMNS
        else:
            header = COLUMNS

        def line(cells: list[str] | tuple[str, ...], _w=widths) -> str:
            return " ".join(_java_ljust(c, w) for c, w in zip(cells[:-1], _w, strict=True)) + " " + cells[-1]

        lines.append("")
        lines.append(line(header))
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
            extra = list(r.as_dict().values())[len(COLUMNS) :]
            writer.writerow(
                r.tool_values()
                + [MISSING if v is None else str(v).lower() if isinstance(v, bool) else v for v in extra]
            )
    return buffer.getvalue()
