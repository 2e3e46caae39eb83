"""The foundation: CLI skeleton, the local broker and its reference tool, the demo workload, databases."""

from __future__ import annotations

import socket
import subprocess
import sys
from pathlib import Path

import pytest
import sqlalchemy as sa
from rebalance_advisor import __version__, localkafka
from rebalance_advisor.cli import main
from rebalance_advisor.errors import AdvisorError


def test_cli_version_and_help(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_info:
        main(["--version"])
    assert exit_info.value.code == 0
    assert __version__ in capsys.readouterr().out
    result = subprocess.run(
        [str(Path(sys.executable).parent / "rebalance-advisor"), "--help"],
        capture_output=True,
        text=True,
        check=True,
    )
    for command in ("dev", "demo", "demo-load"):
        assert command in result.stdout


def test_port_taken_gives_clear_error(tmp_path) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        with pytest.raises(localkafka.LocalKafkaError, match=f"port {port} .* already taken"):
            localkafka.start(tmp_path / "kafka", port=port)
    assert localkafka.status(tmp_path / "kafka") is None


def test_cli_error_is_one_line_and_nonzero(tmp_path, capsys: pytest.CaptureFixture[str]) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        code = main(["dev", "kafka", "start", "--state-dir", str(tmp_path), "--port", str(port)])
    assert code == 1
    err = capsys.readouterr().err
    assert "already taken" in err and "Traceback" not in err


def test_missing_java_is_reported(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("JAVA_HOME", "/nonexistent")
    monkeypatch.setenv("PATH", "/nonexistent")
    with pytest.raises(AdvisorError, match="Java not found"):
        localkafka.java_executable()


def test_parse_describe_output_keeps_dashes() -> None:
    text = (
        "\nGROUP TOPIC PARTITION CURRENT-OFFSET LOG-END-OFFSET LAG CONSUMER-ID HOST CLIENT-ID\n"
        "g t 0 - 10 - - - -\n"
        "g t 1 5 10 5 m-1 /127.0.0.1 c\n"
    )
    rows = localkafka.parse_describe_output(text)
    assert [r["LAG"] for r in rows] == ["-", "5"]
    assert rows[1]["CONSUMER-ID"] == "m-1"


@pytest.mark.kafka
def test_demo_workload_lags_match_reference_tool(kafka_bootstrap: str, demo_groups) -> None:
    rows = localkafka.parse_describe_output(
        localkafka.run_consumer_groups(kafka_bootstrap, "--describe", "--all-groups")
    )
    by_key = {(r["GROUP"], r["TOPIC"], int(r["PARTITION"])): r for r in rows}
    checked = 0
    for group in demo_groups:
        for topic, counts in group.produced.items():
            for partition, end in enumerate(counts):
                row = by_key[(group.group_id, topic, partition)]
                assert int(row["LOG-END-OFFSET"]) == end
                committed = group.committed[topic][partition]
                if committed is None:
                    assert row["CURRENT-OFFSET"] == "-" and row["LAG"] == "-"
                else:
                    assert int(row["CURRENT-OFFSET"]) == committed
                    assert int(row["LAG"]) == end - committed
                expect_member = bool(group.members)
                assert (row["CONSUMER-ID"] != "-") == expect_member
                checked += 1
    assert checked == sum(len(c) for g in demo_groups for c in g.produced.values())
    kip = [r for r in rows if r["GROUP"] == "kip-example"]
    assert {r["CONSUMER-ID"].split("-")[0] for r in kip} == {"C0", "C1"}


@pytest.mark.kafka
def test_broker_status_and_reference_tool(kafka_bootstrap: str) -> None:
    out = localkafka.run_consumer_groups(kafka_bootstrap, "--list")
    assert isinstance(out, str)
    with pytest.raises(localkafka.LocalKafkaError, match="kafka-consumer-groups failed"):
        localkafka.run_consumer_groups(kafka_bootstrap, "--describe", "--group")


@pytest.mark.postgres
def test_both_databases_answer(db_url: str) -> None:
    engine = sa.create_engine(db_url)
    with engine.connect() as conn:
        assert conn.execute(sa.text("select 1 + 1")).scalar_one() == 2
    engine.dispose()


def test_unreachable_maven_leaves_no_partial_cache(tmp_path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A real mvn against a mirror on a closed port: one clear error, nothing cached."""
    with socket.socket() as closed:
        closed.bind(("127.0.0.1", 0))
        port = closed.getsockname()[1]
    settings = tmp_path / "settings.xml"
    settings.write_text(
        f"""<settings><localRepository>{tmp_path / "m2"}</localRepository><offline>false</offline>
        <mirrors><mirror><id>down</id><mirrorOf>*</mirrorOf><url>http://127.0.0.1:{port}/maven2</url></mirror></mirrors>
        </settings>"""
    )
    cache = tmp_path / "cache"
    monkeypatch.setenv("REBALANCE_ADVISOR_CACHE", str(cache))
    monkeypatch.setenv("REBALANCE_ADVISOR_MAVEN_SETTINGS", str(settings))
    with pytest.raises(
        localkafka.LocalKafkaError, match="could not fetch the Kafka .* jars from Maven Central"
    ):
        localkafka.fetch_jars()
    leftovers = [p for p in cache.rglob("*") if p.is_file()]
    assert leftovers == []
    assert not localkafka.jar_dir().exists()


@pytest.mark.kafka
def test_broker_that_does_not_come_up_in_time_is_stopped(tmp_path) -> None:
    state_dir = tmp_path / "kafka"
    with pytest.raises(
        localkafka.LocalKafkaError, match="did not answer a metadata request .* it was stopped"
    ):
        localkafka.start(state_dir, timeout=0.5)
    assert localkafka.status(state_dir) is None
    java = subprocess.run(["pgrep", "-f", f"kafka.Kafka {state_dir}"], capture_output=True, text=True)
    assert java.stdout.strip() == ""
