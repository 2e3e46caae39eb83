"""Share groups (KIP-932, docs/concepts/snapshots.md) on the real broker: snapshotted with their lag as
``kafka-share-groups --describe`` prints it, shown as their own type, never planned."""

from __future__ import annotations

import json
import subprocess
import time
import uuid
from datetime import UTC, datetime, timedelta

import pytest
from rebalance_advisor.adapters import kafka_jars
from rebalance_advisor.cli import main
from rebalance_advisor.domain.group_planning import plan_group
from rebalance_advisor.domain.parameters import Thresholds
from rebalance_advisor.domain.spec_documents import build_docs_from_tables
from rebalance_advisor.store import latest_snapshot_id
from rebalance_advisor.store.snapshot_reader import read_snapshot_tables

from tests.support.kafka_offsets import admin as _admin
from tests.support.kafka_offsets import new_topic as _topic

RECORDS = 40


def _share_tool(bootstrap: str, group: str) -> dict[tuple[str, int], tuple[str, str]]:
    """(topic, partition) -> (START-OFFSET, LAG) as Kafka's share-group tool prints them."""
    command = kafka_jars.java_command(
        "org.apache.kafka.tools.consumer.group.ShareGroupCommand",
        "--bootstrap-server", bootstrap, "--describe", "--group", group,
    )  # fmt: skip
    out = subprocess.run(command, capture_output=True, text=True, timeout=120, check=True).stdout
    rows = {}
    header = None
    for line in out.splitlines():
        tokens = line.split()
        if tokens[:1] == ["GROUP"]:
            header = tokens
        elif header and len(tokens) == len(header) and tokens[0] == group:
            row = dict(zip(header, tokens, strict=True))
            rows[(row["TOPIC"], int(row["PARTITION"]))] = (row["START-OFFSET"], row["LAG"])
    return rows


def _earliest(bootstrap: str, group: str) -> None:
    """The share group starts at the earliest offset (the default is the latest)."""
    from confluent_kafka.admin import AlterConfigOpType, ConfigEntry, ConfigResource, ResourceType

    entry = ConfigEntry("share.auto.offset.reset", "earliest", incremental_operation=AlterConfigOpType.SET)
    client = _admin(bootstrap)
    for future in client.incremental_alter_configs(
        [ConfigResource(ResourceType.GROUP, group, incremental_configs=[entry])]
    ).values():
        future.result(60)


@pytest.mark.kafka
def test_share_group_lag_equals_the_share_tool_and_is_not_planned(
    kafka_bootstrap, sqlite_url, capsys
) -> None:
    from confluent_kafka import AcknowledgeType, ShareConsumer

    topic = _topic(kafka_bootstrap, 2, records=RECORDS)
    group = f"share-{uuid.uuid4().hex[:8]}"
    _earliest(kafka_bootstrap, group)
    consumer = ShareConsumer(
        {"bootstrap.servers": kafka_bootstrap, "group.id": group, "share.acknowledgement.mode": "explicit"}
    )
    try:
        consumer.subscribe([topic])
        seen: set[tuple[int, int]] = set()
        deadline = time.monotonic() + 90
        while len(seen) < 2 * RECORDS and time.monotonic() < deadline:
            for message in consumer.poll(1.0):
                if message.error():
                    continue
                key = (message.partition(), message.offset())
                seen.add(key)
                # partition 0: all accepted; partition 1: the first 10 accepted, the rest released
                keep = message.partition() == 0 or message.offset() < 10
                consumer.acknowledge(message, AcknowledgeType.ACCEPT if keep else AcknowledgeType.RELEASE)
        assert len(seen) == 2 * RECORDS, f"the share consumer got {len(seen)} of {2 * RECORDS} records"
        consumer.commit_sync()

        # By hand: partition 0 fully accepted -> lag 0; partition 1: 30 released, not yet accepted.
        # The broker persists share state asynchronously: wait until its tool says so. (Its
        # START-OFFSET is the persisted start, which may lag the acknowledgements: compared, not derived.)
        hand = {(topic, 0): "0", (topic, 1): "30"}
        deadline = time.monotonic() + 60
        while True:
            expected = _share_tool(kafka_bootstrap, group)
            if {k: lag for k, (_, lag) in expected.items()} == hand or time.monotonic() > deadline:
                break
            time.sleep(1)
        assert {k: lag for k, (_, lag) in expected.items()} == hand

        code = main(
            ["snapshot", "--bootstrap-servers", kafka_bootstrap, "--db", sqlite_url, "--timeout", "20",
             "--groups", group]
        )  # fmt: skip
        out, err = capsys.readouterr()
        assert code == 0, err
        assert "(complete)" in out, out

        assert main(["lag", "--db", sqlite_url, "--group", group, "--format", "json"]) == 0
        captured = capsys.readouterr()
        rows = json.loads(captured.out)
        ours = {(r["TOPIC"], r["PARTITION"]): (str(r["CURRENT-OFFSET"]), str(r["LAG"])) for r in rows}
        assert ours == expected
        assert {r["LAG-AGAINST"] for r in rows} == {"share_broker_lag"}
        assert all(r["CONSUMER-ID"] is None for r in rows)  # any member may fetch any partition

        assert main(["lag", "--db", sqlite_url, "--group", group, "--format", "tool"]) == 0
        captured = capsys.readouterr()
        assert "share groups (KIP-932; the broker assigns them, not planned): " + group in captured.err

        snapshot_id = latest_snapshot_id(sqlite_url)
        tables = read_snapshot_tables(snapshot_id, sqlite_url)
        assert group in tables.share_groups
        [doc] = [d for d in build_docs_from_tables(tables) if d["group_id"] == group]
        advice = plan_group(doc, Thresholds(), datetime.now(UTC))
        assert advice.outcome == "broker_assigned"
        assert "the broker assigns share groups" in advice.reason
        assert advice.total_lag == 30
    finally:
        consumer.close()

    # the group type and its live member, as stored
    from rebalance_advisor.store import load_snapshot

    stored = load_snapshot(snapshot_id, sqlite_url).group(group)
    assert stored is not None and stored.group_type == "share"
    assert len(stored.members) == 1
    assert stored.members[0].assignment == ((topic, 0), (topic, 1))


@pytest.mark.kafka
def test_share_groups_can_be_left_out(kafka_bootstrap, sqlite_url, capsys) -> None:
    """--no-share-groups skips the Java reader: no share group is stored, and nothing is partial."""
    from confluent_kafka import ShareConsumer

    topic = _topic(kafka_bootstrap, 1, records=3)
    group = f"share-{uuid.uuid4().hex[:8]}"
    _earliest(kafka_bootstrap, group)
    consumer = ShareConsumer({"bootstrap.servers": kafka_bootstrap, "group.id": group})
    try:
        consumer.subscribe([topic])
        deadline = time.monotonic() + 60
        got = 0
        while got < 3 and time.monotonic() < deadline:
            got += len(consumer.poll(1.0))
        consumer.commit_sync()
        code = main(
            ["snapshot", "--bootstrap-servers", kafka_bootstrap, "--db", sqlite_url, "--no-share-groups"]
        )
        out, err = capsys.readouterr()
        assert code == 0, err
        assert main(["lag", "--db", sqlite_url, "--group", group]) == 1
        assert f"group {group!r} is not in snapshot" in capsys.readouterr().err
    finally:
        consumer.close()


@pytest.mark.postgres
def test_share_partitions_not_started_store_and_show_as_dashes(url, capsys) -> None:
    """A share group's partition without share-partition state is stored (SQLite and PostgreSQL)
    and `lag` gives it the tool's row: no start offset, no lag."""
    from rebalance_advisor import store

    from tests.support.share_documents import share_snapshot

    snapshot_id = store.write_snapshot(share_snapshot(), url)
    assert store.load_snapshot(snapshot_id, url).share_unstarted == [("s", "t", 1)]
    assert main(["lag", "--db", url, "--group", "s", "--format", "json"]) == 0
    rows = json.loads(capsys.readouterr().out)
    assert [(r["PARTITION"], r["CURRENT-OFFSET"], r["LAG"]) for r in rows] == [(0, 5, 3), (1, None, None)]
    store.prune(timedelta(0), url, keep_latest=0)  # the new table's rows go with their snapshot
    with store.engine_for(url).connect() as conn:
        assert conn.exec_driver_sql("SELECT count(*) FROM share_unstarted_partitions").scalar() == 0


@pytest.mark.kafka
def test_share_partitions_not_started_match_the_share_tools_dash_rows(
    kafka_bootstrap, sqlite_url, capsys
) -> None:
    """A share group on an empty topic (default reset: latest) has its partitions but no start
    offset yet: kafka-share-groups prints '-' rows for them, and so does `lag` (they were left out)."""
    from confluent_kafka import ShareConsumer

    topic = _topic(kafka_bootstrap, 2)
    group = f"share-{uuid.uuid4().hex[:8]}"
    consumer = ShareConsumer({"bootstrap.servers": kafka_bootstrap, "group.id": group})
    try:
        consumer.subscribe([topic])
        deadline = time.monotonic() + 60
        expected: dict = {}
        while len(expected) < 2 and time.monotonic() < deadline:
            consumer.poll(1.0)
            expected = _share_tool(kafka_bootstrap, group)
    finally:
        consumer.close()
    assert expected == {(topic, 0): ("-", "-"), (topic, 1): ("-", "-")}, expected
    code = main(["snapshot", "--bootstrap-servers", kafka_bootstrap, "--db", sqlite_url, "--groups", group])
    assert code == 0, capsys.readouterr().err
    capsys.readouterr()
    assert main(["lag", "--db", sqlite_url, "--group", group, "--format", "json"]) == 0
    rows = json.loads(capsys.readouterr().out)
    dash = {None: "-"}
    ours = {(r["TOPIC"], r["PARTITION"]): (dash.get(r["CURRENT-OFFSET"]), dash.get(r["LAG"])) for r in rows}
    assert ours == expected
