"""A secured cluster (issue 16): the local broker with SASL/SCRAM logins and ACLs (one broker for the
module). The snapshot works with Describe on the groups and topics it reads (and on the cluster, to
list groups), a missing right is named in the error, and the password appears nowhere: not in
output, logs, errors or stored rows.
"""

from __future__ import annotations

import logging
import sqlite3
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from rebalance_advisor.cli import main
from rebalance_advisor.devtools import local_kafka
from rebalance_advisor.polling import poll_until

pytestmark = [pytest.mark.kafka]

ADMIN = local_kafka.ScramSuperUser("admin", f"admin-{uuid.uuid4().hex}")
USER, PASSWORD = "advisor", f"Pw-{uuid.uuid4().hex}"
RECORDS = 10
COMMITTED = {0: 3, 1: 4}


def _admin(bootstrap: str):
    from confluent_kafka.admin import AdminClient

    return AdminClient({**ADMIN.client_config(), "bootstrap.servers": bootstrap})


def _acl(kind: str, name: str, prefixed: bool = True):
    from confluent_kafka.admin import (
        AclBinding,
        AclOperation,
        AclPermissionType,
        ResourcePatternType,
        ResourceType,
    )

    pattern = ResourcePatternType.PREFIXED if prefixed else ResourcePatternType.LITERAL
    return AclBinding(
        getattr(ResourceType, kind), name, pattern, f"User:{USER}", "*", AclOperation.DESCRIBE,
        AclPermissionType.ALLOW,
    )  # fmt: skip


@pytest.fixture(scope="module")
def secured(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, str]]:
    """The broker, a user with Describe on ``sec-ok-*`` groups and ``sec-*`` topics and on the
    cluster, a topic and committed offsets for one allowed and one denied group."""
    from confluent_kafka import Consumer, Producer, TopicPartition
    from confluent_kafka.admin import (
        NewTopic,
        ScramCredentialInfo,
        ScramMechanism,
        UserScramCredentialUpsertion,
    )

    state = tmp_path_factory.mktemp("kafka-secured")
    info = local_kafka.start(state, secured=ADMIN)
    try:
        bootstrap = info.bootstrap_servers
        admin = _admin(bootstrap)
        credential = ScramCredentialInfo(ScramMechanism.SCRAM_SHA_512, 4096)
        for future in admin.alter_user_scram_credentials(
            [UserScramCredentialUpsertion(USER, credential, PASSWORD.encode())]
        ).values():
            future.result(60)
        tag = uuid.uuid4().hex[:6]
        topic, allowed, denied = f"sec-t-{tag}", f"sec-ok-{tag}", f"sec-denied-{tag}"
        admin.create_topics([NewTopic(topic, 2, 1)])[topic].result(60)
        producer = Producer({**ADMIN.client_config(), "bootstrap.servers": bootstrap})
        for i in range(2 * RECORDS):
            producer.produce(topic, b"x", partition=i % 2)
        assert producer.flush(30) == 0
        for group in (allowed, denied):
            consumer = Consumer({**ADMIN.client_config(), "bootstrap.servers": bootstrap, "group.id": group})
            offsets = [TopicPartition(topic, p, o) for p, o in COMMITTED.items()]
            assert poll_until(lambda c=consumer, o=offsets: _committed(c, o), timeout=60, interval=0.5)
            consumer.close()
        acls = [
            _acl("BROKER", "kafka-cluster", prefixed=False),
            _acl("GROUP", "sec-ok-"),
            _acl("TOPIC", "sec-"),
        ]
        for future in admin.create_acls(acls).values():
            future.result(60)
        config = state / "advisor.properties"
        config.write_text(
            "".join(f"{k}={v}\n" for k, v in local_kafka.scram_client_config(USER, PASSWORD).items())
        )
        yield {
            "bootstrap": bootstrap,
            "config": str(config),
            "topic": topic,
            "allowed": allowed,
            "denied": denied,
        }
    finally:
        local_kafka.stop(state)


def _committed(consumer, offsets) -> bool:
    """Commit; False while the new broker's group coordinator is still loading (asked again)."""
    from confluent_kafka import KafkaException

    try:
        consumer.commit(offsets=offsets, asynchronous=False)
    except KafkaException as error:
        if error.args[0].retriable() or "COORDINATOR" in error.args[0].name():
            return False
        raise
    return True


def _no_secret(*texts: str) -> None:
    for text in texts:
        assert PASSWORD not in text and ADMIN.password not in text


def _stored_text(db_file: Path) -> str:
    """Every value of every table, as text (the password must be in none)."""
    with sqlite3.connect(db_file) as conn:
        tables = [r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type='table'")]
        return "\n".join(
            str(row)
            for table in tables
            for row in conn.execute(f'SELECT * FROM "{table}"')  # noqa: S608
        )


def test_least_rights_snapshot_and_no_credentials_anywhere(secured, tmp_path, capsys, caplog) -> None:
    caplog.set_level(logging.DEBUG)
    db_file = tmp_path / "advisor.db"
    url = f"sqlite:///{db_file}"
    code = main(
        ["snapshot", "--bootstrap-servers", secured["bootstrap"], "--config", secured["config"], "--db", url,
         "--groups", "sec-ok-.*", "--timeout", "20"]
    )  # fmt: skip
    out, err = capsys.readouterr()
    assert code == 0, err
    assert "(complete)" in out, out + err

    assert main(["lag", "--db", url, "--group", secured["allowed"], "--format", "tool"]) == 0
    lag_out, lag_err = capsys.readouterr()
    rows = local_kafka.parse_describe_output(lag_out)
    # by hand: RECORDS per partition, offsets COMMITTED
    assert {(r["PARTITION"], r["CURRENT-OFFSET"], r["LOG-END-OFFSET"], r["LAG"]) for r in rows} == {
        (str(p), str(o), str(RECORDS), str(RECORDS - o)) for p, o in COMMITTED.items()
    }
    _no_secret(out, err, lag_out, lag_err, caplog.text, _stored_text(db_file))


def test_a_missing_group_right_is_named(secured, tmp_path, capsys) -> None:
    """Describe on the denied group is missing: with the allowed one the snapshot is partial and its
    error row names the ACL; alone, the command refuses in one line naming it."""
    url = f"sqlite:///{tmp_path / 'advisor.db'}"
    base = ["snapshot", "--bootstrap-servers", secured["bootstrap"], "--config", secured["config"], "--db", url,
            "--timeout", "20"]  # fmt: skip
    code = main([*base, "--groups", f"({secured['allowed']}|{secured['denied']})"])
    out, err = capsys.readouterr()
    assert code == 0, err
    assert "(partial)" in out
    assert f"missing ACL: DESCRIBE on Group '{secured['denied']}'" in err

    code = main([*base, "--groups", secured["denied"]])
    out, err = capsys.readouterr()
    assert code == 1
    [line] = err.strip().splitlines()
    assert f"missing ACL: DESCRIBE on Group '{secured['denied']}'" in line and "Nothing was stored" in line
    _no_secret(out, err)


def test_a_wrong_password_is_an_authentication_error_without_the_password(secured, tmp_path, capsys) -> None:
    wrong = tmp_path / "wrong.properties"
    wrong.write_text(
        "".join(f"{k}={v}\n" for k, v in local_kafka.scram_client_config(USER, PASSWORD + "x").items())
    )
    code = main(
        ["snapshot", "--bootstrap-servers", secured["bootstrap"], "--config", str(wrong), "--db",
         f"sqlite:///{tmp_path / 'advisor.db'}", "--timeout", "10"]
    )  # fmt: skip
    out, err = capsys.readouterr()
    assert code == 1
    assert "Traceback" not in err
    assert "authentication" in err.lower() or "handshake" in err.lower(), err
    _no_secret(out, err)
    assert PASSWORD + "x" not in err
