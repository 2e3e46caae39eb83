"""The snapshot's batched route (adapters/batched_groups.py: Kafka's Java AdminClient, many groups per
request) against librdkafka's per-group route and the reference tool, on a real broker; and a
fleet-sized write interrupted half-way (docs/concepts/snapshots.md, "Fleet scale")."""

from __future__ import annotations

import dataclasses
import uuid
from datetime import UTC, datetime
from pathlib import Path

import pytest
import sqlalchemy as sa
from rebalance_advisor import store
from rebalance_advisor.adapters import kafka_snapshot
from rebalance_advisor.cli import main
from rebalance_advisor.devtools import local_kafka
from rebalance_advisor.domain.snapshot_model import CommittedOffset, Group, PartitionOffsets, Snapshot
from rebalance_advisor.store import snapshots

from tests.integration.test_snapshot import DEMO_REGEX
from tests.support.kafka_offsets import commit, new_topic

pytestmark = pytest.mark.kafka

#: __consumer_offsets partitions on the test broker (Kafka's default): each is a group coordinator
OFFSETS_TOPIC_PARTITIONS = 50
FLEET_GROUPS = 60


def _coordinator_partition(group_id: str) -> int:
    """Which __consumer_offsets partition coordinates ``group_id`` (Kafka: abs(String.hashCode) % n)."""
    h = 0
    for char in group_id:  # the test's ids are ASCII: one UTF-16 unit per character
        h = (31 * h + ord(char)) & 0xFFFFFFFF
    h = h - (1 << 32) if h >= 1 << 31 else h
    return (abs(h) if h != -(1 << 31) else 0) % OFFSETS_TOPIC_PARTITIONS


@pytest.fixture(scope="module")
def fleet(kafka_bootstrap: str) -> str:
    """FLEET_GROUPS memberless groups with 1-3 committed offsets each, over many coordinators; their prefix."""
    from confluent_kafka import ConsumerGroupTopicPartitions, TopicPartition
    from confluent_kafka.admin import AdminClient

    topic = new_topic(kafka_bootstrap, 3, records=20)
    prefix = f"fleet-{uuid.uuid4().hex[:6]}"
    admin = AdminClient({"bootstrap.servers": kafka_bootstrap})
    futures = []
    for g in range(FLEET_GROUPS):
        offsets = [TopicPartition(topic, p, (g * 7 + p) % 21) for p in range(1 + g % 3)]
        request = [ConsumerGroupTopicPartitions(f"{prefix}-{g:03d}", offsets)]
        futures.extend(admin.alter_consumer_group_offsets(request, request_timeout=60).values())
    for future in futures:
        future.result(90)
    return prefix


def _collect(bootstrap: str, regex: str, batched_from: int | None) -> Snapshot:
    options = kafka_snapshot.SnapshotOptions(
        groups=kafka_snapshot.GroupFilter.parse(regex),
        timeout_s=20,
        time_lag=False,
        share_groups=False,
        batched_min_groups=batched_from,
    )
    return kafka_snapshot.collect(bootstrap, options=options)


@pytest.fixture(scope="module")
def both_routes(kafka_bootstrap: str, demo_groups, fleet: str) -> tuple[Snapshot, Snapshot, str]:
    """Demo groups (classic with members, KIP-848, memberless, partly committed) and the fleet, read
    by the batched route and by the per-group route; and the reference tool's output meanwhile."""
    regex = f"{DEMO_REGEX}|{fleet}-.*"
    batched = _collect(kafka_bootstrap, regex, batched_from=0)
    reference_text = local_kafka.run_consumer_groups(kafka_bootstrap, "--describe", "--all-groups")
    per_group = _collect(kafka_bootstrap, regex, batched_from=None)
    return batched, per_group, reference_text


def test_batched_route_equals_the_per_group_route(both_routes, fleet: str) -> None:
    """Every group, member and offset equal on both routes, for groups spread over many coordinators."""
    spread = {_coordinator_partition(f"{fleet}-{g:03d}") for g in range(FLEET_GROUPS)}
    assert len(spread) >= 20  # the batched requests span many coordinators
    batched, per_group, _ = both_routes
    assert len(batched.groups) == FLEET_GROUPS + 7 and not batched.errors
    assert {g.group_type for g in batched.groups} == {"classic", "consumer", "simple"}
    assert batched.groups == per_group.groups
    assert sorted(batched.committed) == sorted(per_group.committed)
    assert batched.partitions == per_group.partitions


@pytest.mark.postgres
def test_batched_route_stored_equals_the_reference_tool_on_every_row(both_routes, db_url, capsys) -> None:
    """Stored from the batched route, every row of ``lag --format tool`` equals the reference tool's."""
    batched, _, reference_text = both_routes
    store.upgrade(db_url)
    store.write_snapshot(dataclasses.replace(batched), db_url)
    assert main(["lag", "--db", db_url, "--format", "tool"]) == 0
    ours_text = capsys.readouterr().out
    wanted = {g.group_id for g in batched.groups}
    key = lambda r: (r["GROUP"], r["TOPIC"], r["PARTITION"])  # noqa: E731
    theirs = {key(r): r for r in local_kafka.parse_describe_output(reference_text) if r["GROUP"] in wanted}
    ours = {key(r): r for r in local_kafka.parse_describe_output(ours_text)}
    assert set(ours) == set(theirs) and len(ours) > FLEET_GROUPS + 90
    for k, row in theirs.items():
        for column in ("CURRENT-OFFSET", "LOG-END-OFFSET", "LAG", "CONSUMER-ID", "HOST", "CLIENT-ID"):
            assert ours[k][column] == row[column], (k, column)
    store.db.dispose(db_url)


def test_a_group_deleted_before_the_batched_read_is_an_error_row(kafka_bootstrap, fleet) -> None:
    """A group listed and then deleted (the broker answers it Dead, with no offsets): an error row of
    its own, and every other group of the batched read lands with its offsets."""
    from confluent_kafka.admin import AdminClient

    admin = AdminClient({"bootstrap.servers": kafka_bootstrap})
    doomed = f"{fleet}-gone"
    keep = f"{fleet}-000"
    before = {(c.topic, c.partition, c.offset) for c in _collect(kafka_bootstrap, keep, None).committed}
    topic = next(iter(before))[0]
    commit(kafka_bootstrap, doomed, topic, {0: 3})

    def delete_after_listing(stage: str) -> None:
        if stage == "listed":
            admin.delete_consumer_groups([doomed])[doomed].result(30)

    options = kafka_snapshot.SnapshotOptions(
        groups=kafka_snapshot.GroupFilter.parse(f"{fleet}-.*"),
        timeout_s=20,
        time_lag=False,
        share_groups=False,
        batched_min_groups=0,
    )
    taken = kafka_snapshot.collect(kafka_bootstrap, options=options, on_stage=delete_after_listing)
    assert taken.status == "partial"
    [error] = taken.errors
    assert (error.stage, error.group_id) == ("describe", doomed)
    assert len(taken.groups) == FLEET_GROUPS and doomed not in {g.group_id for g in taken.groups}
    assert {(c.topic, c.partition, c.offset) for c in taken.committed if c.group_id == keep} == before


def test_without_java_the_batched_route_falls_back_to_per_group_calls(
    kafka_bootstrap, fleet, both_routes, monkeypatch, tmp_path, caplog
) -> None:
    """No Java on this machine (no JAVA_HOME, none on PATH): the pass says why in the log and reads
    the fleet per group, with the same result."""
    import logging
    import sys

    monkeypatch.setenv("JAVA_HOME", str(tmp_path / "no-java"))
    monkeypatch.setenv("PATH", str(Path(sys.executable).parent))
    caplog.set_level(logging.INFO, logger="rebalance_advisor.adapters.kafka_snapshot")
    taken = _collect(kafka_bootstrap, f"{fleet}-.*", batched_from=0)
    assert any("cannot run" in r.getMessage() and "Java" in r.getMessage() for r in caplog.records)
    _, per_group, _ = both_routes
    assert taken.groups == [g for g in per_group.groups if g.group_id.startswith(fleet)]
    assert not taken.errors


def _big_snapshot(groups: int, per_group: int) -> Snapshot:
    """A fleet-sized snapshot built in memory (groups x per_group committed offsets on one topic)."""
    committed = [
        CommittedOffset(f"big-{g:05d}", "big-topic", p, g % 97)
        for g in range(groups)
        for p in range(per_group)
    ]
    return Snapshot(
        taken_at=datetime.now(UTC),
        bootstrap_servers="127.0.0.1:1",
        cluster_id="big",
        duration_s=1.0,
        groups=[Group(f"big-{g:05d}", "empty", "simple", None, 1, "127.0.0.1:1") for g in range(groups)],
        committed=committed,
        partitions=[PartitionOffsets("big-topic", p, 0, 100, 1) for p in range(per_group)],
        errors=[],
    )


class _Interrupted(list):
    """Rows whose iteration is interrupted half-way, as Ctrl-C lands in the middle of a bulk insert."""

    def __iter__(self):
        for i, row in enumerate(list.__iter__(self)):
            if i == len(self) // 2:
                raise KeyboardInterrupt
            yield row


@pytest.mark.postgres
def test_a_write_interrupted_half_way_leaves_nothing(db_url, monkeypatch) -> None:
    """Ctrl-C in the middle of the committed offsets' bulk insert (COPY on PostgreSQL, executemany on
    SQLite) of a 20,000-group snapshot: no row of it stays, and no lock is left held (the next write
    does not wait: store/db.py rolls an interrupted SQLite statement back at once)."""
    store.upgrade(db_url)
    big = _big_snapshot(20_000, 3)
    original = snapshots._insert_tuples

    def interrupted(conn, model, columns, rows):
        if model.__tablename__ == "committed_offsets":
            rows = _Interrupted(rows)
        return original(conn, model, columns, rows)

    monkeypatch.setattr(snapshots, "_insert_tuples", interrupted)
    with pytest.raises(KeyboardInterrupt):
        store.write_snapshot(dataclasses.replace(big), db_url)
    tables = ("snapshots", "partition_offsets", "consumer_groups", "committed_offsets", "snapshot_errors")
    with store.engine_for(db_url).connect() as conn:
        for table in tables:
            assert conn.execute(sa.text(f"select count(*) from {table}")).scalar_one() == 0, table
    monkeypatch.setattr(snapshots, "_insert_tuples", original)
    small = _big_snapshot(10, 3)  # waits for no lock: the interrupted writer's connection is gone
    snapshot_id = store.write_snapshot(small, db_url)
    with store.engine_for(db_url).connect() as conn:
        assert conn.execute(sa.text("select count(*) from committed_offsets")).scalar_one() == 30
        assert conn.execute(sa.text("select max(id) from snapshots")).scalar_one() == snapshot_id
    store.db.dispose(db_url)
