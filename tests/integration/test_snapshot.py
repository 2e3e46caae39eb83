"""Snapshot collection against a real broker, checked against Kafka's own tool and the demo's known numbers."""

from __future__ import annotations

import csv
import io
import json
import re
import time
import uuid
from dataclasses import replace

import pytest
from rebalance_advisor import store
from rebalance_advisor.adapters import kafka_snapshot
from rebalance_advisor.cli import main
from rebalance_advisor.devtools import local_kafka
from rebalance_advisor.domain import lag
from rebalance_advisor.domain.snapshot_model import Snapshot
from rebalance_advisor.services import lag_report
from rebalance_advisor.store.snapshots import load_carried

from tests.support.kafka_offsets import admin as _admin
from tests.support.kafka_offsets import commit as _commit

DEMO_REGEX = "kip-example|zipf-multi|idle-group|balanced-group|partial-commit|manual-assign|kip848-group"

pytestmark = pytest.mark.kafka


@pytest.fixture(scope="module")
def demo_snapshot(kafka_bootstrap: str, demo_groups) -> Snapshot:
    options = kafka_snapshot.SnapshotOptions(
        groups=kafka_snapshot.GroupFilter.parse(DEMO_REGEX), timeout_s=10
    )
    return kafka_snapshot.collect(kafka_bootstrap, options=options)


@pytest.fixture(scope="module")
def reference_text(kafka_bootstrap: str, demo_snapshot) -> str:
    """The reference tool's output for the same (unchanging) broker state as ``demo_snapshot``."""
    return local_kafka.run_consumer_groups(kafka_bootstrap, "--describe", "--all-groups")


def _blocks(text: str) -> dict[str, list[str]]:
    """Group id -> its header and row lines, from the tool's (or our) table output."""
    blocks: dict[str, list[str]] = {}
    current: list[str] = []
    for line in text.splitlines():
        if line.startswith("GROUP "):
            current = [line]
        elif line.strip() and current:
            if len(current) == 1:
                blocks[line.split()[0]] = current
            current.append(line)
    return blocks


def _topic_with_records(bootstrap: str, counts: list[int]) -> str:
    from confluent_kafka import Producer
    from confluent_kafka.admin import NewTopic

    topic = f"snap-{uuid.uuid4().hex[:10]}"
    admin = _admin(bootstrap)  # keep a reference: a collected client cancels its futures
    futures = admin.create_topics([NewTopic(topic, num_partitions=len(counts), replication_factor=1)])
    futures[topic].result(30)
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5})
    for partition, count in enumerate(counts):
        for _ in range(count):
            producer.produce(topic, b"x", partition=partition)
    assert producer.flush(30) == 0
    return topic


def _collect(bootstrap: str, regex: str, **kwargs) -> Snapshot:
    options = kafka_snapshot.SnapshotOptions(groups=kafka_snapshot.GroupFilter.parse(regex), timeout_s=10)
    return kafka_snapshot.collect(bootstrap, options=options, **kwargs)


@pytest.mark.postgres
def test_every_demo_row_equals_the_reference_tool(demo_snapshot, reference_text, db_url, capsys) -> None:
    store.upgrade(db_url)
    store.write_snapshot(replace(demo_snapshot), db_url)
    assert main(["lag", "--db", db_url, "--format", "tool"]) == 0
    ours_text = capsys.readouterr().out
    demo = set(DEMO_REGEX.split("|"))
    theirs = {
        (r["GROUP"], r["TOPIC"], r["PARTITION"]): r
        for r in local_kafka.parse_describe_output(reference_text)
        if r["GROUP"] in demo
    }
    ours = {(r["GROUP"], r["TOPIC"], r["PARTITION"]): r for r in local_kafka.parse_describe_output(ours_text)}
    assert set(ours) == set(theirs) and len(ours) == 99
    for key, row in theirs.items():
        for column in ("CURRENT-OFFSET", "LOG-END-OFFSET", "LAG", "CONSUMER-ID", "HOST", "CLIENT-ID"):
            assert ours[key][column] == row[column], (key, column)
    # The layout too: each group's block (header, widths, row order) is the tool's, line for line.
    their_blocks = _blocks(reference_text)
    for group, lines in _blocks(ours_text).items():
        assert lines == their_blocks[group], group
    store.db.dispose(db_url)


KIP_LAGS = [100000, 60000, 50000]  # the demo's kip-example: t0 partitions 0..2


def _lag_rows(capsys, url: str, *argv: str) -> list[dict]:
    """``lag --group kip-example`` as JSON and as CSV, checked equal, returned as JSON rows."""
    assert main(["lag", "--db", url, "--group", "kip-example", *argv, "--format", "json"]) == 0
    rows = json.loads(capsys.readouterr().out)
    assert main(["lag", "--db", url, "--group", "kip-example", *argv, "--format", "csv"]) == 0
    table = list(csv.DictReader(io.StringIO(capsys.readouterr().out)))
    assert list(table[0]) == list(lag_report.COLUMNS + lag_report.EXTRA_COLUMNS)
    assert [{k: str(v).lower() if isinstance(v, bool) else str(v) for k, v in r.items()} for r in rows] == [
        {k: ("None" if v == "-" else v) for k, v in r.items()} for r in table
    ]
    return rows


@pytest.mark.postgres
def test_snapshot_command_and_lag_formats(
    kafka_bootstrap, demo_groups, demo_snapshot, db_url, capsys
) -> None:
    """A real ``snapshot`` run prints id, counts and duration; ``lag`` reads it back by group, format and id."""
    assert (
        main(["snapshot", "--bootstrap-servers", kafka_bootstrap, "--db", db_url, "--groups", DEMO_REGEX])
        == 0
    )
    out, err = capsys.readouterr()
    found = re.fullmatch(
        rf"snapshot (\d+) \(complete\) of {re.escape(kafka_bootstrap)} in (\d+\.\d\d) s: 7 groups, "
        r"(\d+) members, (\d+) partitions, (\d+) committed offsets, 0 errors\n",
        out,
    )
    assert found, out
    first = int(found[1])
    assert float(found[2]) > 0 and err == ""
    counts = [int(x) for x in found.groups()[2:]]
    assert counts == [demo_snapshot.member_count, len(demo_snapshot.partitions), len(demo_snapshot.committed)]
    assert store.latest_snapshot_id(db_url) == first

    # A later snapshot where kip-example committed 7 more on each partition: --snapshot picks the first.
    later = replace(
        demo_snapshot,
        committed=[
            c._replace(offset=c.offset + 7) if c.group_id == "kip-example" else c
            for c in demo_snapshot.committed
        ],
    )
    second = store.write_snapshot(later, db_url)
    assert second > first
    for argv, lags in (((), [x - 7 for x in KIP_LAGS]), (("--snapshot", str(first)), KIP_LAGS),
                       (("--snapshot", "latest"), [x - 7 for x in KIP_LAGS])):  # fmt: skip
        rows = _lag_rows(capsys, db_url, *argv)
        assert [(r["GROUP"], r["TOPIC"], r["PARTITION"]) for r in rows] == [
            ("kip-example", "t0", p) for p in range(3)
        ]
        assert [r["LAG"] for r in rows] == lags, argv
        assert [r["LOG-END-OFFSET"] for r in rows] == KIP_LAGS
        assert all(r["CONSUMER-ID"] and r["HOST"] and r["CLIENT-ID"] for r in rows)
    store.db.dispose(db_url)


def _group_on_internal_topic(bootstrap: str, prefix: str) -> str:
    """``{prefix}-in``: committed on a normal topic and on ``__consumer_offsets`` partition 0."""
    from confluent_kafka import Consumer, TopicPartition

    topic = _topic_with_records(bootstrap, [10])
    consumer = Consumer(
        {"bootstrap.servers": bootstrap, "group.id": f"{prefix}-in", "enable.auto.commit": False}
    )
    try:
        offsets = [TopicPartition(topic, 0, 4), TopicPartition("__consumer_offsets", 0, 0)]
        consumer.commit(offsets=offsets, asynchronous=False)
    finally:
        consumer.close()
    return topic


def test_internal_topics_and_exclude_groups_end_to_end(kafka_bootstrap, sqlite_url, capsys) -> None:
    """``snapshot`` drops ``__consumer_offsets`` unless --include-internal-topics; --exclude-groups skips groups."""
    prefix = f"snap-int-{uuid.uuid4().hex[:8]}"
    topic = _group_on_internal_topic(kafka_bootstrap, prefix)
    _commit(kafka_bootstrap, f"{prefix}-skip", topic, {0: 1})
    base = [
        "snapshot",
        "--bootstrap-servers",
        kafka_bootstrap,
        "--db",
        sqlite_url,
        "--groups",
        f"{prefix}-.*",
    ]
    taken = {}
    for flag in ((), ("--include-internal-topics",)):
        assert main([*base, "--exclude-groups", f"{prefix}-skip", *flag]) == 0
        capsys.readouterr()
        taken[flag] = store.load_snapshot(store.latest_snapshot_id(sqlite_url), sqlite_url)
    default, internal = taken[()], taken[("--include-internal-topics",)]
    for t in (default, internal):
        assert [g.group_id for g in t.groups] == [f"{prefix}-in"]  # -skip excluded
        assert not t.errors
    assert [(c.topic, c.partition, c.offset) for c in default.committed] == [(topic, 0, 4)]
    assert {p.topic for p in default.partitions} == {topic}
    assert sorted((c.topic, c.partition, c.offset) for c in internal.committed) == [
        ("__consumer_offsets", 0, 0),
        (topic, 0, 4),
    ]
    assert {p.topic for p in internal.partitions} == {topic, "__consumer_offsets"}
    assert len([p for p in internal.partitions if p.topic == "__consumer_offsets"]) > 1  # every partition


def test_read_committed_stores_the_last_stable_offset(
    kafka_bootstrap, demo_groups, sqlite_url, capsys
) -> None:
    """--read-committed stores each partition's LSO; the demo's topics are not transactional, so LSO == HW."""
    argv = [
        "snapshot",
        "--bootstrap-servers",
        kafka_bootstrap,
        "--db",
        sqlite_url,
        "--groups",
        "kip-example|zipf-multi",
    ]
    assert main(argv) == 0 and main([*argv, "--read-committed"]) == 0
    capsys.readouterr()
    plain = store.load_snapshot(store.latest_snapshot_id(sqlite_url) - 1, sqlite_url)
    stable = store.load_snapshot(store.latest_snapshot_id(sqlite_url), sqlite_url)
    assert (plain.isolation_level, stable.isolation_level) == ("read_uncommitted", "read_committed")
    assert all(p.last_stable_offset is None for p in plain.partitions)
    assert len(stable.partitions) == 3 + 3 * 24
    assert all(p.last_stable_offset == p.log_end_offset is not None for p in stable.partitions)
    ends = {(p.topic, p.partition): p.last_stable_offset for p in stable.partitions}
    assert [ends[("t0", p)] for p in range(3)] == KIP_LAGS  # kip-example committed 0


@pytest.mark.parametrize("stage", ["describe", "committed_offsets"])
def test_a_group_not_authorized_is_recorded_and_the_others_land(
    kafka_bootstrap, demo_groups, sqlite_url, monkeypatch, stage
) -> None:
    """Fault injection on one group's result only: no authorizer runs on the test broker, so the future
    the collector gets for kip-example's describe (or offset fetch) is swapped for one that fails with
    GROUP_AUTHORIZATION_FAILED. The broker, every other group and the write path are real."""
    import concurrent.futures

    from confluent_kafka import KafkaError, KafkaException

    method = "describe" if stage == "describe" else "offsets"
    original = getattr(kafka_snapshot._Collector, method)

    def one_group_denied(self, group_ids):
        futures = original(self, group_ids)
        denied: concurrent.futures.Future = concurrent.futures.Future()
        denied.set_exception(KafkaException(KafkaError(KafkaError.GROUP_AUTHORIZATION_FAILED)))
        futures["kip-example"] = denied
        return futures

    monkeypatch.setattr(kafka_snapshot._Collector, method, one_group_denied)
    regex = "kip-example|idle-group|balanced-group"
    assert (
        main(["snapshot", "--bootstrap-servers", kafka_bootstrap, "--db", sqlite_url, "--groups", regex]) == 0
    )
    taken = store.load_snapshot(store.latest_snapshot_id(sqlite_url), sqlite_url)
    assert taken.status == "partial"
    assert [g.group_id for g in taken.groups] == ["balanced-group", "idle-group"]
    assert {c.group_id for c in taken.committed} == {"balanced-group", "idle-group"}
    assert {p.topic for p in taken.partitions} == {"balanced-topic", "idle-topic"}
    (error,) = taken.errors
    assert (error.stage, error.group_id, error.error_code) == (
        stage,
        "kip-example",
        "GROUP_AUTHORIZATION_FAILED",
    )
    assert error.reason.startswith("GROUP_AUTHORIZATION_FAILED: ")
    with store.engine_for(sqlite_url).connect() as conn:
        import sqlalchemy as sa

        stored = conn.execute(sa.text("select status, error_count from snapshots")).one()
    assert tuple(stored) == ("partial", 1)


@pytest.mark.parametrize("raw_list_offsets", [True, False])
def test_chunked_spread_collection_equals_the_default(
    demo_snapshot, kafka_bootstrap: str, monkeypatch, raw_list_offsets: bool
) -> None:
    """Small ListOffsets chunks over 3 admin clients, through the C-level call and through the public
    per-partition futures, give the snapshot the default path gave (demo state does not change)."""
    monkeypatch.setattr(kafka_snapshot, "LIST_OFFSETS_CHUNK", 7)
    monkeypatch.setattr(kafka_snapshot, "RAW_LIST_OFFSETS", raw_list_offsets)
    options = kafka_snapshot.SnapshotOptions(
        groups=kafka_snapshot.GroupFilter.parse(DEMO_REGEX), timeout_s=10, connections=3
    )
    again = kafka_snapshot.collect(kafka_bootstrap, options=options)
    assert len(demo_snapshot.partitions) > 7 * 3
    assert again.partitions == demo_snapshot.partitions
    assert sorted(again.committed, key=repr) == sorted(demo_snapshot.committed, key=repr)
    assert [g.group_id for g in again.groups] == [g.group_id for g in demo_snapshot.groups]
    assert again.errors == demo_snapshot.errors == []


def test_collect_pauses_the_garbage_collector_only_during_the_pass(kafka_bootstrap: str, demo_groups) -> None:
    import gc

    seen: list[bool] = []
    assert gc.isenabled()
    _collect(kafka_bootstrap, "idle-group", on_stage=lambda _stage: seen.append(gc.isenabled()))
    assert seen and not any(seen)
    assert gc.isenabled()


def test_numbers_match_the_demo_workload(demo_snapshot, demo_groups) -> None:
    ends = demo_snapshot.partition_map()
    committed = demo_snapshot.committed_map()
    for group in demo_groups:
        for topic, counts in group.produced.items():
            for partition, end in enumerate(counts):
                assert ends[(topic, partition)].log_end_offset == end
                assert ends[(topic, partition)].log_start_offset == 0
                expected = group.committed[topic][partition]
                found = committed.get((group.group_id, topic, partition))
                assert (found.offset if found else None) == expected


def test_classic_consumer_protocol_and_memberless_groups(demo_snapshot, demo_groups) -> None:
    kinds = {g.group_id: g for g in demo_snapshot.groups}
    assert kinds["kip848-group"].group_type == "consumer" and kinds["kip848-group"].member_count == 2
    assert kinds["manual-assign"].group_type == "simple" and kinds["manual-assign"].member_count == 0
    assert kinds["manual-assign"].state == "empty"
    kip = kinds["kip-example"]
    assert kip.group_type == "classic" and kip.state == "stable" and kip.assignor == "range"
    assert sorted(m.group_instance_id for m in kip.members) == ["C0", "C1"]
    assert sorted(p for m in kip.members for _, p in m.assignment) == [0, 1, 2]
    for g in demo_groups:
        assert kinds[g.group_id].member_count == len(g.members)
        held = sorted(tp for m in kinds[g.group_id].members for tp in m.assignment)
        expected = sorted((t, p) for t, c in g.produced.items() for p in range(len(c))) if g.members else []
        assert held == expected
        assert kinds[g.group_id].coordinator_id is not None
    assert not demo_snapshot.errors and demo_snapshot.status == "complete"


@pytest.mark.parametrize("reset", ["latest", "earliest"])
def test_never_committed_partitions_follow_the_reset_policy(demo_snapshot, demo_groups, reset) -> None:
    policy = lag.ResetPolicy.parse(f"partial-commit={reset},manual-.*=earliest")
    rows = {(x.group_id, x.topic, x.partition): x for x in lag.partition_lags(demo_snapshot, policy)}
    group = next(g for g in demo_groups if g.group_id == "partial-commit")
    for partition in range(4):
        row = rows[("partial-commit", "never-committed", partition)]
        assert row.lag == group.expected_lag("never-committed", partition, reset)
        assert row.reset == reset and row.member_id is not None
    assert rows[("partial-commit", "never-committed", 3)].lag == (4000 if reset == "earliest" else 0)


def test_memberless_group_partly_committed(kafka_bootstrap: str) -> None:
    topic = _topic_with_records(kafka_bootstrap, [30, 40, 50])
    group = f"snap-g-{uuid.uuid4().hex[:8]}"
    _commit(kafka_bootstrap, group, topic, {0: 10})
    taken = _collect(kafka_bootstrap, group)
    assert [g.group_type for g in taken.groups] == ["simple"]
    assert sorted((p.partition, p.log_end_offset) for p in taken.partitions) == [(0, 30), (1, 40), (2, 50)]
    for reset, expected in (("latest", [20, 0, 0]), ("earliest", [20, 40, 50])):
        rows = lag.partition_lags(taken, lag.ResetPolicy(default=reset))
        lags = {(x.topic, x.partition): x.lag for x in rows if x.group_id == group}
        assert [lags[(topic, p)] for p in range(3)] == expected


def test_committed_offset_below_log_start(kafka_bootstrap: str) -> None:
    from confluent_kafka import TopicPartition

    topic = _topic_with_records(kafka_bootstrap, [100])
    group = f"snap-g-{uuid.uuid4().hex[:8]}"
    _commit(kafka_bootstrap, group, topic, {0: 10})
    admin = _admin(kafka_bootstrap)
    deleted = admin.delete_records([TopicPartition(topic, 0, 50)])
    for future in deleted.values():
        assert future.result(30).low_watermark == 50
    taken = _collect(kafka_bootstrap, group)
    (row,) = lag.partition_lags(taken)
    assert (row.log_start, row.log_end, row.committed) == (50, 100, 10)
    assert row.below_log_start and row.lag == 90
    reference = local_kafka.parse_describe_output(
        local_kafka.run_consumer_groups(kafka_bootstrap, "--describe", "--group", group)
    )
    (ours,) = lag_report.rows(taken)[group]
    assert ours.tool_values()[3:6] == [reference[0][c] for c in ("CURRENT-OFFSET", "LOG-END-OFFSET", "LAG")]


def test_rates_between_two_snapshots(kafka_bootstrap: str, sqlite_url: str) -> None:
    """The rates stored with the second of two real snapshots: Δ log end / Δt and Δ committed / Δt
    (a first sample is not smoothed; the minimum interval is lowered so the test need not wait 5 s)."""
    from confluent_kafka import Producer
    from rebalance_advisor.domain.estimates import RateParameters

    topic = _topic_with_records(kafka_bootstrap, [100])
    group = f"snap-g-{uuid.uuid4().hex[:8]}"
    _commit(kafka_bootstrap, group, topic, {0: 40})
    store.upgrade(sqlite_url)
    parameters = RateParameters(min_interval_s=0.1)
    first = _collect(kafka_bootstrap, group)
    store.write_snapshot(first, sqlite_url, rate_parameters=parameters)
    time.sleep(0.5)
    producer = Producer({"bootstrap.servers": kafka_bootstrap})
    for _ in range(60):
        producer.produce(topic, b"y", partition=0)
    assert producer.flush(30) == 0
    _commit(kafka_bootstrap, group, topic, {0: 70})
    second = _collect(kafka_bootstrap, group)
    store.write_snapshot(second, sqlite_url, rate_parameters=parameters)
    elapsed = (second.taken_at - first.taken_at).total_seconds()
    assert second.rates.interval_s == pytest.approx(elapsed)
    assert second.rates.produce[(topic, 0)].rate == pytest.approx(60 / elapsed)
    assert second.rates.consume[(group, topic, 0)].rate == pytest.approx(30 / elapsed)
    (row,) = lag.partition_lags(second)
    assert row.lag == 160 - 70
    store.db.dispose(sqlite_url)


def test_group_and_topic_deleted_mid_snapshot_are_recorded(kafka_bootstrap: str) -> None:
    keep_topic = _topic_with_records(kafka_bootstrap, [5])
    doomed_topic = _topic_with_records(kafka_bootstrap, [5, 5])
    prefix = f"snap-del-{uuid.uuid4().hex[:8]}"
    _commit(kafka_bootstrap, f"{prefix}-keep", keep_topic, {0: 1})
    _commit(kafka_bootstrap, f"{prefix}-gone", keep_topic, {0: 2})
    _commit(kafka_bootstrap, f"{prefix}-topic", doomed_topic, {0: 1, 1: 1})
    admin = _admin(kafka_bootstrap)

    def fault(stage: str) -> None:
        if stage == "listed":
            admin.delete_consumer_groups([f"{prefix}-gone"])[f"{prefix}-gone"].result(30)
        if stage == "committed":
            admin.delete_topics([doomed_topic])[doomed_topic].result(30)
            time.sleep(1.0)  # let the deletion reach the partition leader

    taken = _collect(kafka_bootstrap, f"{prefix}-.*", on_stage=fault)
    assert taken.status == "partial"
    assert {g.group_id for g in taken.groups} == {f"{prefix}-keep", f"{prefix}-topic"}
    assert any(e.group_id == f"{prefix}-gone" for e in taken.errors)
    assert {(e.topic, e.partition) for e in taken.errors if e.stage == "log_offsets"} == {
        (doomed_topic, 0),
        (doomed_topic, 1),
    }
    assert [(p.topic, p.log_end_offset) for p in taken.partitions if p.topic == keep_topic] == [
        (keep_topic, 5)
    ]


@pytest.mark.postgres
def test_store_round_trip_replace_and_prune(demo_snapshot, db_url) -> None:
    from dataclasses import replace
    from datetime import timedelta

    import sqlalchemy as sa

    store.upgrade(db_url)
    first = store.write_snapshot(replace(demo_snapshot), db_url)
    loaded = store.load_snapshot(first, db_url)
    assert loaded.groups == demo_snapshot.groups
    key = lambda x: (getattr(x, "group_id", ""), x.topic, x.partition)  # noqa: E731
    assert sorted(loaded.committed, key=key) == sorted(demo_snapshot.committed, key=key)
    assert sorted(loaded.partitions, key=key) == sorted(demo_snapshot.partitions, key=key)
    assert loaded.taken_at == demo_snapshot.taken_at

    # The same Airflow run twice: replaced, not duplicated.
    a = store.write_snapshot(replace(demo_snapshot), db_url, airflow_run_id="manual__1")
    b = store.write_snapshot(replace(demo_snapshot), db_url, airflow_run_id="manual__1")
    assert b != a and store.latest_snapshot_id(db_url) == b
    with store.engine_for(db_url).connect() as conn:
        count = conn.execute(sa.text("select count(*) from snapshots where airflow_run_id = 'manual__1'"))
        assert count.scalar_one() == 1
        orphans = conn.execute(sa.text(f"select count(*) from committed_offsets where snapshot_id = {a}"))
        assert orphans.scalar_one() == 0
    with store.db.connect(db_url) as conn:  # what the planner pairs b with (planner_inputs)
        previous = load_carried(conn, demo_snapshot.cluster_id, demo_snapshot.bootstrap_servers, before_id=b)
    assert previous.snapshot_id == first

    old = replace(demo_snapshot, taken_at=demo_snapshot.taken_at - timedelta(days=30))
    old_id = store.write_snapshot(old, db_url)
    assert store.prune(timedelta(days=7), db_url) == 1
    with store.engine_for(db_url).connect() as conn:
        ids = set(conn.execute(sa.text("select id from snapshots")).scalars())
        left = conn.execute(sa.text(f"select count(*) from partition_offsets where snapshot_id = {old_id}"))
        assert left.scalar_one() == 0
    assert ids == {first, b}
    store.db.dispose(db_url)


@pytest.mark.postgres
def test_a_failed_write_leaves_nothing(demo_snapshot, db_url) -> None:
    from dataclasses import replace

    import sqlalchemy as sa

    store.upgrade(db_url)
    broken = replace(demo_snapshot, committed=demo_snapshot.committed + demo_snapshot.committed[:1])
    with pytest.raises(sa.exc.IntegrityError):
        store.write_snapshot(broken, db_url)
    with store.engine_for(db_url).connect() as conn:
        for table in ("snapshots", "partition_offsets", "consumer_groups", "group_members",
                      "member_assignments", "committed_offsets", "snapshot_errors"):  # fmt: skip
            assert conn.execute(sa.text(f"select count(*) from {table}")).scalar_one() == 0, table
    store.db.dispose(db_url)
