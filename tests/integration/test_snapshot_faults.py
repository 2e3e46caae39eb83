"""Bad input gives one clear line and a non-zero exit; a broker that dies mid-snapshot stores nothing."""

from __future__ import annotations

import uuid
from pathlib import Path

import pytest
import sqlalchemy as sa
from rebalance_advisor import store
from rebalance_advisor.adapters import kafka_snapshot
from rebalance_advisor.cli import main
from rebalance_advisor.domain import lag
from rebalance_advisor.errors import AdvisorError

from tests.support.kafka_offsets import commit
from tests.support.kafka_offsets import dead_address as _dead_address


def _run(capsys, *argv: str) -> tuple[int, str]:
    code = main(list(argv))
    err = capsys.readouterr().err
    assert "Traceback" not in err
    return code, err


def _snapshot_rows(url: str) -> int:
    with sa.create_engine(url).connect() as conn:
        return conn.execute(sa.text("select count(*) from snapshots")).scalar_one()


def test_bad_regex_is_one_clear_line(capsys, sqlite_url) -> None:
    code, err = _run(
        capsys, "snapshot", "--bootstrap-servers", _dead_address(), "--db", sqlite_url, "--groups", "orders-("
    )
    assert code == 1 and "groups: " in err and "invalid group regex 'orders-(': missing )" in err
    assert err.count("\n") == 1


def test_bad_db_url_is_one_clear_line(capsys) -> None:
    code, err = _run(capsys, "snapshot", "--bootstrap-servers", _dead_address(), "--db", "nosuchdb://x/y")
    assert code == 1 and "bad database URL" in err and err.count("\n") == 1
    code, err = _run(capsys, "lag", "--db", "postgresql+psycopg://nobody:secret@127.0.0.1:1/none")
    assert code == 1 and "failed" in err and "secret" not in err


def test_bad_config_file_is_one_clear_line(capsys, sqlite_url, tmp_path: Path) -> None:
    code, err = _run(capsys, "snapshot", "--config", str(tmp_path / "missing.properties"), "--db", sqlite_url)
    assert code == 1 and "cannot read client config" in err
    bad = tmp_path / "bad.properties"
    bad.write_text("# comment\nsecurity.protocol=PLAINTEXT\nthis line has no equals sign\n")
    code, err = _run(
        capsys, "snapshot", "--config", str(bad), "--bootstrap-servers", _dead_address(), "--db", sqlite_url
    )
    assert code == 1 and "bad.properties:3: expected key=value" in err
    unknown = tmp_path / "unknown.properties"
    unknown.write_text("no.such.librdkafka.property=1\n")
    code, err = _run(
        capsys,
        "snapshot",
        "--config",
        str(unknown),
        "--bootstrap-servers",
        _dead_address(),
        "--db",
        sqlite_url,
    )
    assert code == 1 and "invalid Kafka client config" in err and "no.such.librdkafka.property" in err


@pytest.mark.postgres
def test_unreachable_broker_names_it_and_stores_nothing(capsys, db_url) -> None:
    address = _dead_address()
    code, err = _run(capsys, "snapshot", "--bootstrap-servers", address, "--db", db_url, "--timeout", "2")
    assert code == 1 and address in err and "Nothing was stored" in err
    assert _snapshot_rows(db_url) == 0
    store.db.dispose(db_url)


@pytest.mark.parametrize(
    "argv",
    [
        ("snapshot", "--timeout", "0"),
        ("snapshot", "--timeout", "-5"),
        ("snapshot", "--timeout", "nan"),
        ("db", "prune", "--retention-hours", "0"),
        ("db", "prune", "--retention-hours", "-1"),
        ("db", "prune", "--retention-hours", "a week"),
    ],
)
def test_non_positive_timeout_and_retention_are_refused(capsys, sqlite_url, argv) -> None:
    """argparse refuses them before anything runs, naming the flag and the value."""
    with pytest.raises(SystemExit) as exit_info:
        main([*argv, "--db", sqlite_url])
    err = capsys.readouterr().err
    assert exit_info.value.code == 2
    # the prune flags' own check (hours, bounded by ten years), or the parameter model's (--timeout)
    assert (
        f"argument {argv[-2]}: must be a number of hours > 0 and <= 87600, not {argv[-1]!r}" in err
        or f"argument {argv[-2]}: {argv[-1]!r}: Input should be" in err  # nan, a week
        or f"argument {argv[-2]}: {argv[-1]!r}: must be above 0 (you gave {argv[-1]})" in err  # 0, -1
        or f"argument {argv[-2]}: {argv[-1]!r}: must be at most 3,600 (you gave nan)" in err
    ), err
    assert not Path(sqlite_url.removeprefix("sqlite:///")).exists()  # nothing touched


@pytest.mark.parametrize("enabled", [True, False])
def test_collect_restores_the_garbage_collector_state(enabled: bool) -> None:
    """collect pauses Python's cyclic GC for the pass; a failed pass leaves it as the caller had it."""
    import gc

    was = gc.isenabled()
    (gc.enable if enabled else gc.disable)()
    try:
        with pytest.raises(AdvisorError, match="invalid Kafka client config"):
            kafka_snapshot.collect(_dead_address(), client_config={"no.such.librdkafka.property": "1"})
        assert gc.isenabled() is enabled
    finally:
        (gc.enable if was else gc.disable)()


@pytest.mark.postgres
def test_lag_without_snapshots_or_schema(capsys, db_url) -> None:
    code, err = _run(capsys, "lag", "--db", db_url)
    if db_url.startswith("sqlite:///"):  # a read never creates the file: it says it is missing
        assert code == 1 and "does not exist" in err and not Path(db_url.removeprefix("sqlite:///")).exists()
    else:
        assert code == 1 and "db upgrade" in err
    assert main(["db", "upgrade", "--db", db_url]) == 0
    code, err = _run(capsys, "lag", "--db", db_url)
    assert code == 1 and "no snapshot stored yet" in err
    code, err = _run(capsys, "lag", "--db", db_url, "--snapshot", "abc")
    assert code == 1 and "must be a number or 'latest'" in err
    code, err = _run(capsys, "lag", "--db", db_url, "--snapshot", "99")
    assert code == 1 and "snapshot 99 does not exist" in err
    huge = str(2**63)  # one past the largest id the column holds: refused, not an overflow traceback
    code, err = _run(capsys, "lag", "--db", db_url, "--snapshot", huge)
    assert code == 1 and f"snapshot {huge} does not exist" in err and "Traceback" not in err
    store.db.dispose(db_url)


def test_lag_rule_and_reset_policy() -> None:
    assert lag.partition_lag(10, 0, 100) == 90
    assert lag.partition_lag(120, 0, 100) == 0  # committed past the end (truncation): never negative
    assert lag.partition_lag(None, 30, 100, "latest") == 0
    assert lag.partition_lag(None, 30, 100, "earliest") == 70
    assert lag.partition_lag(None, 30, 100, "none") == 70
    policy = lag.ResetPolicy.parse("orders-.*=earliest, audit=latest, earliest")
    assert policy.default == "earliest"
    assert [policy.for_group(g) for g in ("orders-eu", "audit", "other", "xorders-eu")] == [
        "earliest",
        "latest",
        "earliest",
        "earliest",
    ]
    assert lag.ResetPolicy.parse(None).for_group("any") == "latest"
    with pytest.raises(AdvisorError, match="must be one of"):
        lag.ResetPolicy.parse("g=sometimes")
    with pytest.raises(AdvisorError, match="bad regex"):
        lag.ResetPolicy.parse("g(=earliest")


def test_group_filter_full_match() -> None:
    f = kafka_snapshot.GroupFilter.parse("orders-.*", "orders-test")
    assert [f.accepts(g) for g in ("orders-eu", "orders-test", "my-orders-eu")] == [True, False, False]


@pytest.mark.kafka
@pytest.mark.slow
def test_broker_stopped_mid_snapshot_stores_nothing(tmp_path: Path, sqlite_url: str) -> None:
    """A broker of its own (the session broker must live on), stopped between listing and describing."""
    from confluent_kafka.admin import AdminClient, NewTopic
    from rebalance_advisor.devtools import local_kafka

    state_dir = tmp_path / "kafka"
    info = local_kafka.start(state_dir)
    try:
        bootstrap = info.bootstrap_servers
        admin = AdminClient({"bootstrap.servers": bootstrap})
        admin.create_topics([NewTopic("doomed", num_partitions=2, replication_factor=1)])["doomed"].result(30)
        for i in range(3):
            commit(bootstrap, f"g{i}-{uuid.uuid4().hex[:6]}", "doomed", {0: 0})
        store.upgrade(sqlite_url)

        def stop_broker(stage: str) -> None:
            if stage == "listed":
                local_kafka.stop(state_dir)

        options = kafka_snapshot.SnapshotOptions(timeout_s=3)
        with pytest.raises(kafka_snapshot.SnapshotAborted, match=bootstrap.replace(".", r"\.")):
            taken = kafka_snapshot.collect(bootstrap, options=options, on_stage=stop_broker)
            store.write_snapshot(taken, sqlite_url)  # not reached: nothing may land
    finally:
        local_kafka.stop(state_dir)
    assert _snapshot_rows(sqlite_url) == 0


@pytest.mark.postgres
def test_migration_matches_the_models(db_url) -> None:
    """Alembic's revisions create exactly what models.py declares (no drift), on both databases;
    on PostgreSQL the plan tables' long-id columns too (0004_long_ids)."""
    from alembic.autogenerate import compare_metadata
    from alembic.runtime.migration import MigrationContext
    from rebalance_advisor.store import plan_models  # noqa: F401 - its tables join Base.metadata
    from rebalance_advisor.store.models import SNAPSHOT_CHILDREN, Base, SnapshotRow, StaticMemberRow

    mine = {m.__tablename__ for m in (*SNAPSHOT_CHILDREN, SnapshotRow, StaticMemberRow)}
    if db_url.startswith("postgresql"):
        mine |= {"plans", "plan_assignments", "group_outcomes"}
    store.upgrade(db_url)
    with store.engine_for(db_url).connect() as conn:
        diffs = compare_metadata(MigrationContext.configure(conn), Base.metadata)
    assert [d for d in diffs if mine & set(str(d).split("'"))] == []
    store.db.dispose(db_url)
