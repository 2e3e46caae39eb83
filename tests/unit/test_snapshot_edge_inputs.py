"""Snapshot and lag inputs at their edges (docs/concepts/snapshots.md), without a broker: the client
config file's encoding and bytes, the socket timeout librdkafka accepts, bootstrap lists, argparse's
error lines, a missing SQLite file, the tool's UTF-16 padding, its state notes, future timestamps."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from rebalance_advisor.adapters import kafka_snapshot
from rebalance_advisor.cli import main
from rebalance_advisor.domain.lag import committed_lag_end, record_time_lag
from rebalance_advisor.domain.snapshot_model import Group, PartitionOffsets
from rebalance_advisor.errors import AdvisorError
from rebalance_advisor.services import lag_report

from tests.support.share_documents import share_snapshot


def test_a_latin1_properties_file_reads_as_java_reads_it(tmp_path: Path) -> None:
    path = tmp_path / "client.properties"
    path.write_bytes("# Passwort für den Broker\nsasl.password=p\u00e4ss\u00df\n".encode("iso-8859-1"))
    assert kafka_snapshot.read_client_config(path) == {"sasl.password": "p\u00e4ss\u00df"}
    path.write_bytes("\ufeffsasl.password=p\u00e4ss\n".encode())  # UTF-8, with the BOM editors add
    assert kafka_snapshot.read_client_config(path) == {"sasl.password": "p\u00e4ss"}


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(raw=st.binary(max_size=300))
def test_config_file_bytes_never_traceback(tmp_path: Path, raw: bytes, capsys) -> None:
    """Any bytes as --config: a dict, or one clear line and exit 1 (the in-memory --db stops the
    command before Kafka is touched)."""
    path = tmp_path / "fuzz.properties"
    path.write_bytes(raw)
    argv = ["snapshot", "--config", str(path), "--bootstrap-servers", "127.0.0.1:1", "--db", "sqlite://"]
    code = main(argv)
    err = capsys.readouterr().err
    assert code == 1 and err.count("\n") == 1 and err.startswith("rebalance-advisor: error:"), err


@pytest.mark.parametrize(("seconds", "expected"), [(3600, 300_000), (300.5, 300_000), (30, 30_000),
                                                    (0.01, 10), (0.001, 10)])  # fmt: skip
def test_socket_timeout_stays_in_librdkafkas_range(seconds: float, expected: int) -> None:
    """--timeout accepts (0, 3600]; librdkafka's socket.timeout.ms only 10..300000 (CONFIGURATION.md)."""
    from confluent_kafka.admin import AdminClient

    ms = kafka_snapshot.socket_timeout_ms(seconds)
    assert ms == expected
    AdminClient({"bootstrap.servers": "127.0.0.1:1", "socket.timeout.ms": ms})  # librdkafka accepts it


def test_bootstrap_lists_lose_empty_entries() -> None:
    assert kafka_snapshot.clean_bootstrap(" a:9092, b:9092 ,") == "a:9092,b:9092"
    with pytest.raises(AdvisorError, match="name no broker"):
        kafka_snapshot.clean_bootstrap(" , ,")


def test_argparse_errors_are_one_line_and_a_hint(capsys) -> None:
    with pytest.raises(SystemExit) as exit_info:
        main(["lag", "--format", "bogus"])
    err = capsys.readouterr().err
    assert exit_info.value.code == 2
    assert err.count("\n") == 1 and "usage:" not in err, err
    assert err.startswith("rebalance-advisor lag: error: argument --format: invalid choice: 'bogus'"), err
    assert err.rstrip().endswith("(see `rebalance-advisor lag --help`)"), err


def test_lag_on_a_missing_sqlite_file_does_not_create_it(tmp_path: Path, capsys) -> None:
    missing = tmp_path / "nowhere" / "missing.db"
    assert main(["lag", "--db", f"sqlite:///{missing}"]) == 1
    err = capsys.readouterr().err
    assert "does not exist" in err and err.count("\n") == 1, err
    assert not missing.exists() and not missing.parent.exists()


def _java_column(line: str, index: int) -> int:
    """Where ``line[index]`` starts in a Java terminal's reckoning: UTF-16 units before it."""
    return len(line[:index].encode("utf-16-le")) // 2


def test_tool_format_pads_by_utf16_units_like_java() -> None:
    group = "g-\U0001f600" * 6  # 18 code points, 24 UTF-16 units: wider than the minimum 15
    rows = [lag_report.Row(group, "t", p, 5, 9, 4, None, None, None) for p in (0, 1)]
    header, *lines = lag_report.format_tool({group: rows}).splitlines()[1:]
    topic_at = _java_column(header, header.index("TOPIC"))
    assert topic_at == 25  # 24 units of the widest GROUP, then one space
    for line in lines:
        assert _java_column(line, line.index(" t ") + 1) == topic_at


def test_tool_notes_say_what_the_tool_says_before_a_groups_rows() -> None:
    from confluent_kafka import ConsumerGroupState
    from rebalance_advisor.domain.snapshot_model import Snapshot

    rebalancing = ConsumerGroupState.PREPARING_REBALANCING.name.lower()  # as the snapshot stores it
    groups = [Group("idle", "empty", "classic", None, None, None), Group("busy", "stable", "classic", None, None, None),
              Group("moving", rebalancing, "classic", None, None, None)]  # fmt: skip
    snap = Snapshot(taken_at=None, bootstrap_servers="b", cluster_id=None, duration_s=0.0, groups=groups,
                    committed=[], partitions=[], errors=[])  # fmt: skip
    row = lag_report.Row("x", "t", 0, 1, 1, 0, None, None, None)
    notes = lag_report.tool_notes(snap, {"busy": [row], "idle": [row], "moving": [row]})
    assert notes == [
        "Consumer group 'idle' has no active members.",
        "Warning: Consumer group 'moving' is rebalancing.",
    ]


def test_a_record_stamped_after_the_snapshot_is_flagged_not_caught_up() -> None:
    assert record_time_lag(10_000, 4_000) == (6.0, "record_timestamp")
    future = record_time_lag(10_000, 3_610_000)
    assert future.method == "future_timestamp"
    row = lag_report.Row(
        "g", "t", 0, 1, 9, 8, None, None, None, time_lag_s=future.seconds, time_lag_by=future.method
    )
    assert "future-timestamp" in row.table_values()[-1]


def test_read_committed_rows_keep_lag_equal_to_end_minus_current() -> None:
    """HW 15, LSO 10: a read_committed group at 10 and a read_uncommitted one at 15 are both caught up;
    past the HW (17) is above the log end, as the tool has it."""
    offsets = PartitionOffsets("t", 0, 0, 15, 1, 10)
    assert [committed_lag_end(offsets, "read_committed", c) for c in (4, 10, 12, 15, 17)] == [
        10,
        10,
        12,
        15,
        15,
    ]
    assert committed_lag_end(offsets, "read_uncommitted", 12) == 15
    row = lag_report.Row(
        "g", "t", 0, 4, 15, 6, None, None, None, last_stable_offset=10, lag_against="last_stable"
    )
    values = row.tool_values()
    assert int(values[4]) - int(values[3]) == int(values[5]) == 6


def test_share_partitions_not_started_get_the_tools_dash_rows() -> None:
    """kafka-share-groups --describe prints a row for every partition the broker lists for the group,
    START-OFFSET and LAG '-' where it has no offset information (its printOffsets)."""
    from rebalance_advisor.devtools.local_kafka import parse_describe_output

    rows = parse_describe_output(lag_report.format_tool(lag_report.rows(share_snapshot())))
    assert [(r["PARTITION"], r["CURRENT-OFFSET"], r["LAG"]) for r in rows] == [
        ("0", "5", "3"),
        ("1", "-", "-"),
    ]
    [unstarted] = [r for r in lag_report.rows(share_snapshot())["s"] if r.partition == 1]
    assert (unstarted.time_lag_by, unstarted.policy_lag) == (None, None)  # nothing claimed as caught up
