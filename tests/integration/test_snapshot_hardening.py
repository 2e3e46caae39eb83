"""Snapshot hardening (docs/concepts/snapshots.md) on the real broker and databases, against Kafka's own tool where it
prints the same numbers: long ids, committed offsets past the end, user topics named ``__*``, leader
elections, read_committed, database URLs, Ctrl-C, unreachable clusters, regexes."""

from __future__ import annotations

import json
import os
import re
import signal
import socket
import sqlite3
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest
import sqlalchemy as sa
from rebalance_advisor import store
from rebalance_advisor.adapters import kafka_snapshot
from rebalance_advisor.cli import main
from rebalance_advisor.devtools import local_kafka
from rebalance_advisor.domain.safe_regex import compile_safe_regex
from rebalance_advisor.errors import AdvisorError

from tests.support.kafka_offsets import admin as _admin
from tests.support.kafka_offsets import commit as _commit
from tests.support.kafka_offsets import dead_address as _dead_address
from tests.support.kafka_offsets import new_topic as _topic


def _reference(bootstrap: str, group: str) -> dict[tuple[str, str], dict[str, str]]:
    rows = local_kafka.parse_describe_output(
        local_kafka.run_consumer_groups(bootstrap, "--describe", "--group", group)
    )
    return {(r["TOPIC"], r["PARTITION"]): r for r in rows}


def _ours(capsys, url: str, group: str, fmt: str = "json") -> list[dict]:
    assert main(["lag", "--db", url, "--group", group, "--format", fmt]) == 0
    out = capsys.readouterr().out
    return json.loads(out) if fmt == "json" else local_kafka.parse_describe_output(out)


def _snapshot(capsys, bootstrap: str, url: str, regex: str, *extra: str) -> str:
    code = main(
        [
            "snapshot",
            "--bootstrap-servers",
            bootstrap,
            "--db",
            url,
            "--groups",
            regex,
            "--timeout",
            "20",
            *extra,
        ]
    )
    out, err = capsys.readouterr()
    assert code == 0, err
    return out


# ------------------------------------------------------------------------------------------ 1


@pytest.mark.kafka
@pytest.mark.postgres
def test_ids_longer_than_255_characters(kafka_bootstrap, db_url, capsys) -> None:
    """A 1,000-character group id, a 600-character client id and a 249-character instance id (so a
    286-character member id): stored on both databases, and `lag` prints what the tool prints."""
    from confluent_kafka import Consumer

    topic = _topic(kafka_bootstrap, 2, records=20)
    group = "long-" + uuid.uuid4().hex[:8] + "x" * 987
    instance = "i" * 249
    consumer = Consumer(
        {"bootstrap.servers": kafka_bootstrap, "group.id": group, "client.id": "c" * 600,
         "group.instance.id": instance, "enable.auto.commit": False, "session.timeout.ms": 45000}
    )  # fmt: skip
    try:
        consumer.subscribe([topic])
        deadline = time.monotonic() + 60
        while not consumer.assignment() and time.monotonic() < deadline:
            consumer.poll(0.2)
        assert consumer.assignment()
        from confluent_kafka import TopicPartition

        consumer.commit(
            offsets=[TopicPartition(topic, 0, 7), TopicPartition(topic, 1, 20)], asynchronous=False
        )
        store.upgrade(db_url)
        _snapshot(capsys, kafka_bootstrap, db_url, group[:13] + ".*")
        taken = store.load_snapshot(store.latest_snapshot_id(db_url), db_url)
        (g,) = taken.groups
        assert g.group_id == group and len(group) == 1000
        (member,) = g.members
        assert member.group_instance_id == instance and len(member.member_id) > 255
        ours = {(r["TOPIC"], r["PARTITION"]): r for r in _ours(capsys, db_url, group, "tool")}
        theirs = _reference(kafka_bootstrap, group)
        assert set(ours) == set(theirs) == {(topic, "0"), (topic, "1")}
        for key, row in theirs.items():
            for column in ("CURRENT-OFFSET", "LOG-END-OFFSET", "LAG", "CONSUMER-ID", "CLIENT-ID"):
                assert ours[key][column] == row[column], (key, column)
    finally:
        consumer.close()
        store.db.dispose(db_url)


# ------------------------------------------------------------------------------------------ 2


@pytest.mark.kafka
def test_committed_offset_above_log_end_is_flagged_and_shown_as_the_tool_does(
    kafka_bootstrap, sqlite_url, capsys
) -> None:
    topic = _topic(kafka_bootstrap, 2, records=100)
    group = f"above-{uuid.uuid4().hex[:8]}"
    _commit(kafka_bootstrap, group, topic, {0: 150, 1: 40})
    store.upgrade(sqlite_url)
    _snapshot(capsys, kafka_bootstrap, sqlite_url, group)
    rows = {r["PARTITION"]: r for r in _ours(capsys, sqlite_url, group)}
    theirs = _reference(kafka_bootstrap, group)
    assert theirs[(topic, "0")]["LAG"] == "-50"  # the tool's own number
    for p in (0, 1):
        for column in ("CURRENT-OFFSET", "LOG-END-OFFSET", "LAG"):
            assert str(rows[p][column]) == theirs[(topic, str(p))][column], (p, column)
    assert (rows[0]["ABOVE-LOG-END"], rows[0]["POLICY-LAG"]) == (True, 0)
    assert (rows[1]["ABOVE-LOG-END"], rows[1]["POLICY-LAG"]) == (False, 60)
    table = _ours(capsys, sqlite_url, group, "table")
    assert [r for r in table if r["PARTITION"] == "0"][0]["FLAGS"] == "above-log-end"
    store.db.dispose(sqlite_url)


# ------------------------------------------------------------------------------------------ 3


@pytest.mark.kafka
def test_user_topics_named_with_two_underscores_are_kept_internal_ones_dropped(kafka_bootstrap) -> None:
    from confluent_kafka import Consumer, TopicPartition

    user = _topic(kafka_bootstrap, 1, records=10, name=f"__user-{uuid.uuid4().hex[:8]}")
    group = f"uu-{uuid.uuid4().hex[:8]}"
    consumer = Consumer(
        {"bootstrap.servers": kafka_bootstrap, "group.id": group, "enable.auto.commit": False}
    )
    try:
        consumer.commit(
            offsets=[TopicPartition(user, 0, 3), TopicPartition("__consumer_offsets", 0, 0)],
            asynchronous=False,
        )
    finally:
        consumer.close()
    options = kafka_snapshot.SnapshotOptions(groups=kafka_snapshot.GroupFilter.parse(group), timeout_s=20)
    taken = kafka_snapshot.collect(kafka_bootstrap, options=options)
    assert [(c.topic, c.offset) for c in taken.committed] == [(user, 3)]
    assert {p.topic for p in taken.partitions} == {user}
    everything = kafka_snapshot.collect(
        kafka_bootstrap,
        options=kafka_snapshot.SnapshotOptions(
            groups=kafka_snapshot.GroupFilter.parse(group), timeout_s=20, include_internal_topics=True
        ),
    )
    assert {c.topic for c in everything.committed} == {user, "__consumer_offsets"}


# ------------------------------------------------------------------------------------------ 4


@pytest.mark.kafka
@pytest.mark.slow
def test_snapshot_right_after_creating_a_1200_partition_topic_waits_out_the_leader_elections(
    kafka_bootstrap, caplog
) -> None:
    """Created and snapshotted at once: leaders are still being elected, the snapshot retries within
    its bound and every log-end offset is there, equal to the reference tool's."""
    import logging

    caplog.set_level(logging.INFO, logger="rebalance_advisor.adapters.kafka_snapshot")
    from confluent_kafka.admin import NewTopic

    admin = _admin(kafka_bootstrap)
    # On a loaded machine the elections can all be over before the snapshot asks: each attempt checks
    # the values, and one of up to three must have met an election (else the case was not exercised).
    for _attempt in range(3):
        topic, group = f"elect-{uuid.uuid4().hex[:8]}", f"elect-{uuid.uuid4().hex[:8]}"
        caplog.clear()
        admin.create_topics([NewTopic(topic, num_partitions=1200, replication_factor=1)])[topic].result(60)
        _commit(kafka_bootstrap, group, topic, {0: 0})  # one committed partition: all 1,200 are snapshotted
        options = kafka_snapshot.SnapshotOptions(groups=kafka_snapshot.GroupFilter.parse(group), timeout_s=30)
        taken = kafka_snapshot.collect(kafka_bootstrap, options=options)
        retried = [r.getMessage() for r in caplog.records if "asking again" in r.getMessage()]
        assert taken.errors == [] and taken.status == "complete"
        assert len(taken.partitions) == 1200
        assert all(p.log_end_offset == 0 and p.log_start_offset == 0 for p in taken.partitions)
        theirs = _reference(kafka_bootstrap, group)
        assert theirs[(topic, "0")]["LOG-END-OFFSET"] == "0" == str(taken.partitions[0].log_end_offset)
        admin.delete_topics([topic])[topic].result(60)
        if retried:
            break
    assert retried, "the snapshot met no leader election in three attempts: the case was not exercised"


# ------------------------------------------------------------------------------------------ 5


@pytest.mark.kafka
def test_read_committed_lag_is_against_the_last_stable_offset(kafka_bootstrap, sqlite_url, capsys) -> None:
    """10 committed records then an open transaction of 5: HW 15, LSO 10. A read_committed consumer
    committed at 10 is caught up in a --read-committed snapshot (lag 0 against the LSO), and behind
    by 5 in a plain one (against the HW, as the tool prints it)."""
    from confluent_kafka import Producer

    topic = _topic(kafka_bootstrap, 1, records=10)
    group = f"rc-{uuid.uuid4().hex[:8]}"
    _commit(kafka_bootstrap, group, topic, {0: 10})
    producer = Producer({"bootstrap.servers": kafka_bootstrap, "transactional.id": f"tx-{group}"})
    producer.init_transactions(30)
    producer.begin_transaction()
    for _ in range(5):
        producer.produce(topic, b"t", partition=0)
    producer.flush(30)
    try:
        store.upgrade(sqlite_url)
        _snapshot(capsys, kafka_bootstrap, sqlite_url, group)
        (plain,) = _ours(capsys, sqlite_url, group)
        _snapshot(capsys, kafka_bootstrap, sqlite_url, group, "--read-committed")
        (stable,) = _ours(capsys, sqlite_url, group)
        theirs = _reference(kafka_bootstrap, group)[(topic, "0")]
    finally:
        producer.abort_transaction(30)
    assert (plain["LAG"], plain["POLICY-LAG"], plain["LAG-AGAINST"]) == (5, 5, "log_end")
    assert str(plain["LAG"]) == theirs["LAG"] and str(plain["LOG-END-OFFSET"]) == theirs["LOG-END-OFFSET"]
    assert (stable["LAG"], stable["POLICY-LAG"], stable["LAG-AGAINST"]) == (0, 0, "last_stable")
    assert (stable["LOG-END-OFFSET"], stable["LAST-STABLE-OFFSET"]) == (15, 10)
    assert stable["TIME-LAG-S"] == 0.0 and stable["TIME-LAG-BY"] == "caught_up"
    assert main(["lag", "--db", sqlite_url, "--group", group]) == 0
    assert "LAG is against the last stable offset" in capsys.readouterr().err
    store.db.dispose(sqlite_url)


# ------------------------------------------------------------------------------------------ 7


@pytest.mark.parametrize(
    ("url", "message"),
    [
        ("sqlite://", "in-memory SQLite database"),
        ("sqlite:///:memory:", "in-memory SQLite database"),
        ("sqlite:///file:x?mode=memory&uri=true", "in-memory SQLite database"),
        ("NOT_A_DB", "is not a SQLite database file"),
        ("UNDER_A_FILE", "cannot create the directory"),
    ],
)
def test_database_urls_that_cannot_keep_a_snapshot_are_one_line(capsys, tmp_path, url, message) -> None:
    not_a_db = tmp_path / "notes.txt"
    not_a_db.write_text("hello, this is not SQLite\n" * 100)
    url = {"NOT_A_DB": f"sqlite:///{not_a_db}", "UNDER_A_FILE": f"sqlite:///{not_a_db}/sub/advisor.db"}.get(
        url, url
    )
    for argv in (
        ["snapshot", "--bootstrap-servers", _dead_address(), "--db", url],
        ["db", "upgrade", "--db", url],
    ):
        code = main(argv)
        err = capsys.readouterr().err
        assert code == 1 and message in err and err.count("\n") == 1 and "Traceback" not in err, err
    assert not_a_db.read_text().startswith("hello")  # left as it was


# ------------------------------------------------------------------------------------------ 9


@pytest.mark.kafka
def test_ctrl_c_just_after_the_commit_reports_what_was_stored(
    kafka_bootstrap, sqlite_url, capsys, demo_groups
):
    """A real SIGINT, sent by the engine's commit event: Python raises KeyboardInterrupt right after
    the commit returns, inside the write. The command says which snapshot is stored."""
    store.upgrade(sqlite_url)
    engine = store.engine_for(sqlite_url)
    armed, fired = [], []

    def arm(_conn, _cursor, statement, *_args) -> None:
        armed.append("INSERT INTO snapshots" in statement)

    def interrupt(_dbapi_connection, _record) -> None:
        # checkin comes after the commit: the snapshot's rows are durable when the signal lands
        if any(armed) and not fired:
            fired.append(True)
            os.kill(os.getpid(), signal.SIGINT)

    sa.event.listen(engine, "before_cursor_execute", arm)
    sa.event.listen(engine.pool, "checkin", interrupt)
    try:
        code = main(
            [
                "snapshot",
                "--bootstrap-servers",
                kafka_bootstrap,
                "--db",
                sqlite_url,
                "--groups",
                "kip-example",
            ]
        )
    finally:
        sa.event.remove(engine, "before_cursor_execute", arm)
        sa.event.remove(engine.pool, "checkin", interrupt)
    out, err = capsys.readouterr()
    assert fired and code == 130
    stored = store.latest_snapshot_id(sqlite_url)
    assert stored is not None
    assert out.startswith(f"snapshot {stored} (complete) of {kafka_bootstrap}")
    assert f"interrupted after snapshot {stored} was stored" in err
    assert [g.group_id for g in store.load_snapshot(stored, sqlite_url).groups] == ["kip-example"]
    store.db.dispose(sqlite_url)


#: How soon an interrupted wait must end: a third of SQLite's own 30 s busy wait, which the old code
#: sat out, with room for a loaded machine's interpreter exit (2.0-2.1 s measured at load 12-20)
PROMPT_EXIT_S = 10.0


def _interrupted_while_locked(path: Path, lock: str, command: list[str]) -> tuple[int, float, str, str]:
    """Run the CLI ``command`` while another connection holds ``lock`` on ``path``; once it says it
    is waiting for the lock, and a second later, Ctrl-C it: (its exit code, seconds from the signal
    to its exit, stdout, stderr)."""
    holder = sqlite3.connect(path, isolation_level=None)
    holder.execute(f"BEGIN {lock}")
    try:
        full = [sys.executable, "-m", "rebalance_advisor.cli", *command]
        process = subprocess.Popen(full, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        first = process.stderr.readline()  # waiting for the lock (before the Kafka pass, or after it)
        assert first.startswith("waiting up to 30 s for another process to finish writing"), first
        time.sleep(1.0)
        assert process.poll() is None
        sent = time.monotonic()
        process.send_signal(signal.SIGINT)
        out, err = process.communicate(timeout=40)
        return process.returncode, time.monotonic() - sent, out, err
    finally:
        holder.execute("ROLLBACK")
        holder.close()


@pytest.mark.kafka
@pytest.mark.parametrize("lock", ["IMMEDIATE", "EXCLUSIVE"])
def test_ctrl_c_while_another_process_holds_the_sqlite_write_lock(
    kafka_bootstrap, tmp_path, demo_groups, lock
) -> None:
    """Another process holds the write lock (EXCLUSIVE: reads wait too); the snapshot command waits,
    and a Ctrl-C ends it promptly (SQLite's own busy wait would hold it for its whole 30 s
    timeout)."""
    path = tmp_path / "advisor.db"
    url = f"sqlite:///{path}"
    assert main(["db", "upgrade", "--db", url]) == 0
    command = ["snapshot", "--bootstrap-servers", kafka_bootstrap, "--db", url, "--groups", "kip-example"]
    code, waited, out, err = _interrupted_while_locked(path, lock, command)
    assert code == 130 and waited < PROMPT_EXIT_S, (waited, err)
    assert "interrupted before the snapshot was stored: nothing was stored" in err and out == ""
    assert "Traceback" not in err


def test_ctrl_c_of_a_read_while_another_process_holds_an_exclusive_lock(tmp_path) -> None:
    """``lag`` (any command that reads the store) waits for an EXCLUSIVE lock where Ctrl-C works:
    SQLite's busy wait would hold it for the driver's whole 30 s timeout."""
    path = tmp_path / "advisor.db"
    url = f"sqlite:///{path}"
    store.upgrade(url)
    store.db.dispose(url)
    code, waited, out, err = _interrupted_while_locked(path, "EXCLUSIVE", ["lag", "--db", url])
    assert code == 130 and waited < PROMPT_EXIT_S, (waited, err)
    assert "Traceback" not in err and out == "", err


def test_sqlite_lock_wait_is_bounded(tmp_path, monkeypatch) -> None:
    from rebalance_advisor.store import db

    path = tmp_path / "advisor.db"
    url = f"sqlite:///{path}"
    store.upgrade(url)
    holder = sqlite3.connect(path, isolation_level=None)
    holder.execute("BEGIN IMMEDIATE")
    try:
        started = time.monotonic()
        with pytest.raises(store.db.DatabaseUnavailable, match="locked by another writer for 1 s"):
            db.wait_for_sqlite_writer(url, bound_s=1.0)
        assert time.monotonic() - started < 5.0  # bounded: 1 s asked, SQLite alone would wait 30 s
    finally:
        holder.execute("ROLLBACK")
        holder.close()
    db.wait_for_sqlite_writer(url, bound_s=1.0)  # free now: returns at once
    store.db.dispose(url)


# ------------------------------------------------------------------------------------------ 10


def test_unreachable_cluster_says_refused_unknown_host_or_timed_out(capsys, sqlite_url) -> None:
    silent = socket.socket()  # accepts connections (the kernel's backlog) and never answers
    silent.bind(("127.0.0.1", 0))
    silent.listen(16)
    try:
        cases = {
            _dead_address(): "connection refused",
            "no-such-host.invalid:9092": "unknown host",
            f"127.0.0.1:{silent.getsockname()[1]}": "timed out",
        }
        for address, why in cases.items():
            code = main(["snapshot", "--bootstrap-servers", address, "--db", sqlite_url, "--timeout", "3"])
            err = capsys.readouterr().err
            assert code == 1 and f"aborted while listing groups: {why}" in err, (address, err)
            assert "Traceback" not in err
        # outside pytest (no logging configured) librdkafka's own connection lines stay out too: one line
        done = subprocess.run(
            [sys.executable, "-m", "rebalance_advisor.cli", "snapshot", "--bootstrap-servers", _dead_address(),
             "--db", sqlite_url, "--timeout", "2"],
            capture_output=True, text=True, timeout=60,
        )  # fmt: skip
        [line] = done.stderr.strip().splitlines()
        assert done.returncode == 1 and "aborted while listing groups: connection refused" in line, (
            done.stderr
        )
    finally:
        silent.close()


# ------------------------------------------------------------------------------------------ 8


def test_regexes_run_in_linear_time_and_refuse_what_re2_cannot_run() -> None:
    evil = compile_safe_regex("(x+)+y", "--groups")
    started = time.monotonic()
    assert not evil.fullmatch("x" * 100_000)
    assert time.monotonic() - started < 0.5  # Python's re: exponential (never returns at this size)
    for bad, why in (
        ("(a)\\1", "invalid escape sequence"),
        ("(?=a)b", "invalid perl operator"),
        ("a(", "missing )"),
    ):
        with pytest.raises(AdvisorError, match=f"invalid --groups regex .*{re.escape(why)}"):
            compile_safe_regex(bad, "--groups")
    with pytest.raises(AdvisorError, match="at most 2000"):
        compile_safe_regex("a" * 2001, "--groups")


@pytest.mark.kafka
def test_a_regex_matching_no_group_stores_nothing_and_says_so(
    kafka_bootstrap, demo_groups, sqlite_url, capsys
):
    store.upgrade(sqlite_url)
    _snapshot(capsys, kafka_bootstrap, sqlite_url, "kip-example")
    latest = store.latest_snapshot_id(sqlite_url)
    _commit(kafka_bootstrap, "x" * 3000, _topic(kafka_bootstrap, 1, records=1), {0: 1})  # (x+)+y's worst case
    for argv in (["--groups", "(x+)+y"], ["--groups", "kip-example", "--exclude-groups", "kip-.*"]):
        started = time.monotonic()
        code = main(["snapshot", "--bootstrap-servers", kafka_bootstrap, "--db", sqlite_url, *argv])
        err = capsys.readouterr().err
        assert code == 1 and "no consumer group matches" in err and "nothing was stored" in err, err
        assert time.monotonic() - started < 15
    assert store.latest_snapshot_id(sqlite_url) == latest
    store.db.dispose(sqlite_url)


def test_ctrl_c_inside_a_large_sqlite_insert_leaves_the_database_readable_at_once(tmp_path) -> None:
    """Ctrl-C while a bulk insert runs inside SQLite: the write is rolled back and its lock released
    at once, so the command's next read (was anything stored?) answers "nothing" instead of waiting
    out the 30 s busy timeout and failing with "database is locked"."""
    url = f"sqlite:///{tmp_path / 'advisor.db'}"
    store.upgrade(url)
    store.db.dispose(url)
    for _attempt in range(3):  # the interrupt must land inside the insert; a fast machine may finish first
        child = subprocess.run(
            [sys.executable, "-m", "tests.support.interrupted_sqlite_write", url],
            capture_output=True, text=True, timeout=300, cwd=Path(__file__).parents[2],
        )  # fmt: skip
        assert child.returncode == 0, child.stderr[-2000:]
        report = json.loads(child.stdout)
        if report.get("landed_in") in ("executemany", "do_executemany"):
            break
    assert report.get("landed_in") in ("executemany", "do_executemany"), report
    assert "error" not in report and report["stored"] is None, report
    assert store.latest_snapshot_id(url) is None  # nothing half-written
    store.db.dispose(url)
