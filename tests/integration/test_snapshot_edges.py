"""The snapshot's last edges (docs/concepts/snapshots.md) on the real broker, PostgreSQL and Kafka's
own tool: --timeout beyond librdkafka's socket range, a trailing comma in the bootstrap list,
snapshot ids past the id column, the tool's "no active members" line, future record timestamps
and read_committed rows."""

from __future__ import annotations

import json
import subprocess
import time
import uuid

import pytest
from rebalance_advisor import store
from rebalance_advisor.cli import main
from rebalance_advisor.devtools import local_kafka

from tests.support.kafka_offsets import commit as _commit
from tests.support.kafka_offsets import new_topic as _topic


def _lag(capsys, url: str, group: str, fmt: str) -> tuple[str, str]:
    assert main(["lag", "--db", url, "--group", group, "--format", fmt]) == 0
    return capsys.readouterr()


def _snapshot(capsys, bootstrap: str, url: str, group: str, *extra: str) -> str:
    code = main(["snapshot", "--bootstrap-servers", bootstrap, "--db", url, "--groups", group, *extra])
    out, err = capsys.readouterr()
    assert code == 0, err
    return err


@pytest.mark.kafka
def test_timeout_past_the_socket_range_and_a_trailing_comma_take_a_full_snapshot(
    kafka_bootstrap, sqlite_url, capsys
) -> None:
    """--timeout 600 is valid (up to 3600) though librdkafka's socket.timeout.ms stops at 300 s; a
    trailing comma must not cost the share groups (Java refuses an empty bootstrap entry)."""
    topic = _topic(kafka_bootstrap, 1, records=3)
    group = f"edge-{uuid.uuid4().hex[:8]}"
    _commit(kafka_bootstrap, group, topic, {0: 1})
    err = _snapshot(capsys, f"{kafka_bootstrap},", sqlite_url, group, "--timeout", "600")
    assert "invalid" not in err and "share" not in err, err
    (row,) = json.loads(_lag(capsys, sqlite_url, group, "json")[0])
    assert (row["CURRENT-OFFSET"], row["LAG"]) == (1, 2)
    store.db.dispose(sqlite_url)


@pytest.mark.postgres
def test_snapshot_ids_past_the_id_column_are_no_such_snapshot(url, capsys) -> None:
    for wanted in ("2147483648", "9223372036854775807"):
        code = main(["lag", "--db", url, "--snapshot", wanted])
        err = capsys.readouterr().err
        assert code == 1 and "does not exist" in err and err.count("\n") == 1, err


@pytest.mark.kafka
def test_a_group_with_no_members_gets_the_tools_line_and_its_rows(
    kafka_bootstrap, sqlite_url, capsys
) -> None:
    topic = _topic(kafka_bootstrap, 2, records=4)
    group = f"idle-{uuid.uuid4().hex[:8]}"
    _commit(kafka_bootstrap, group, topic, {0: 1, 1: 4})
    theirs = subprocess.run(local_kafka.consumer_groups_command(kafka_bootstrap, "--describe", "--group", group),
                            capture_output=True, text=True, timeout=300)  # fmt: skip
    assert theirs.returncode == 0, theirs.stderr
    _snapshot(capsys, kafka_bootstrap, sqlite_url, group, "--no-share-groups")
    out, err = _lag(capsys, sqlite_url, group, "tool")
    note = f"Consumer group '{group}' has no active members."
    assert note in theirs.stderr and note in err, (theirs.stderr, err)
    assert local_kafka.parse_describe_output(out) == local_kafka.parse_describe_output(theirs.stdout)
    store.db.dispose(sqlite_url)


@pytest.mark.kafka
def test_a_record_stamped_in_the_future_is_flagged(kafka_bootstrap, sqlite_url, capsys) -> None:
    from confluent_kafka import Producer

    topic = _topic(kafka_bootstrap, 1)
    producer = Producer({"bootstrap.servers": kafka_bootstrap})
    ahead_ms = int(time.time() * 1000) + 3_600_000  # a producer whose clock runs an hour ahead
    for _ in range(5):
        producer.produce(topic, b"x", partition=0, timestamp=ahead_ms)
    assert producer.flush(30) == 0
    group = f"skew-{uuid.uuid4().hex[:8]}"
    _commit(kafka_bootstrap, group, topic, {0: 2})
    _snapshot(capsys, kafka_bootstrap, sqlite_url, group, "--no-share-groups")
    (row,) = json.loads(_lag(capsys, sqlite_url, group, "json")[0])
    assert (row["LAG"], row["TIME-LAG-BY"]) == (3, "future_timestamp")
    table = local_kafka.parse_describe_output(_lag(capsys, sqlite_url, group, "table")[0])
    assert table[0]["FLAGS"] == "future-timestamp"
    store.db.dispose(sqlite_url)


@pytest.mark.kafka
def test_read_committed_tool_rows_are_consistent_and_never_negative(
    kafka_bootstrap, sqlite_url, capsys
) -> None:
    """HW 15, LSO 10 (an open transaction of 5): a read_committed group at 10 and a
    read_uncommitted one at the log end (15) are both caught up in a --read-committed snapshot, and
    every tool row keeps LAG = LOG-END-OFFSET - CURRENT-OFFSET."""
    from confluent_kafka import Producer

    topic = _topic(kafka_bootstrap, 1, records=10)
    stable, uncommitted = f"rcs-{uuid.uuid4().hex[:8]}", f"rcu-{uuid.uuid4().hex[:8]}"
    producer = Producer({"bootstrap.servers": kafka_bootstrap, "transactional.id": f"tx-{stable}"})
    producer.init_transactions(30)
    producer.begin_transaction()
    for _ in range(5):
        producer.produce(topic, b"t", partition=0)
    producer.flush(30)
    try:
        _commit(kafka_bootstrap, stable, topic, {0: 10})
        _commit(kafka_bootstrap, uncommitted, topic, {0: 15})
        _snapshot(capsys, kafka_bootstrap, sqlite_url, "rc[su]-.*", "--read-committed", "--no-share-groups")
    finally:
        producer.abort_transaction(30)
    for group in (stable, uncommitted):
        (row,) = local_kafka.parse_describe_output(_lag(capsys, sqlite_url, group, "tool")[0])
        assert int(row["LAG"]) == int(row["LOG-END-OFFSET"]) - int(row["CURRENT-OFFSET"]) == 0, row
        (table,) = local_kafka.parse_describe_output(_lag(capsys, sqlite_url, group, "table")[0])
        assert "above-log-end" not in table["FLAGS"], table
    store.db.dispose(sqlite_url)


@pytest.mark.kafka
def test_group_ids_holding_nul_are_refused_by_their_whole_id(kafka_bootstrap, sqlite_url, capsys) -> None:
    """Java takes a NUL inside a group id; librdkafka lists the id cut at the NUL, so the cut id
    was described as a group 'deleted during the snapshot' (or, when a group has the cut id, as
    that group twice). Each such group is refused by its whole id, the group with the cut id is
    stored once. (The refusal row on PostgreSQL: tests/integration/test_id_limits.py's fuzz test.)"""
    from tests.support.kafka_java import run_reference

    topic = _topic(kafka_bootstrap, 1, records=5)
    tag = uuid.uuid4().hex[:8]
    alone, shadow, real = f"a-{tag}\x00b", f"c-{tag}\x00d", f"c-{tag}"
    lines = [kafka_bootstrap, topic, *(f"{g.replace(chr(0), chr(92) + '0')} 0 2" for g in (alone, shadow))]
    assert run_reference("CommitOffsetsJava", "\n".join(lines) + "\n").strip() == "committed"
    _commit(kafka_bootstrap, real, topic, {0: 4})
    code = main(
        ["snapshot", "--bootstrap-servers", kafka_bootstrap, "--db", sqlite_url, "--groups", f"[ac]-{tag}.*"]
    )
    out, err = capsys.readouterr()
    assert code == 0 and "(partial)" in out, err
    assert "deleted during the snapshot" not in err, err
    for group in (alone, shadow):
        assert f"group {group!r} not stored: its group id holds a NUL character" in err, err
    taken = store.load_snapshot(store.latest_snapshot_id(sqlite_url), sqlite_url)
    assert [g.group_id for g in taken.groups] == [real]
    assert [(c.group_id, c.offset) for c in taken.committed] == [(real, 4)]
    assert sorted(e.reason.split(":")[0] for e in taken.errors) == sorted(
        f"group {group!r} not stored" for group in (alone, shadow)
    )
    store.db.dispose(sqlite_url)
