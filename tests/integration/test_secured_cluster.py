"""A secured cluster (docs/operations/security.md): the local broker with SASL/SCRAM logins and ACLs, and a second
listener with SASL over TLS (a throwaway CA made by keytool in the test's temp dir), one broker for
the module. The snapshot, the publisher and the client helper work with the rights docs/operations/security.md lists;
a missing right is named in the error, and the passwords appear nowhere: not in output, logs, errors
or stored rows.
"""

from __future__ import annotations

import logging
import sqlite3
import threading
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from rebalance_advisor.cli import main
from rebalance_advisor.devtools import local_kafka
from rebalance_advisor.polling import poll_until

from tests.support.acls import allow

pytestmark = [pytest.mark.kafka]

ADMIN = local_kafka.ScramSuperUser("admin", f"admin-{uuid.uuid4().hex}")
USER, PASSWORD = "advisor", f"Pw-{uuid.uuid4().hex}"
#: the publisher's and the client helper's own principals (least rights each, granted per test)
PUBLISHER, PUBLISHER_PASSWORD = "publisher", f"PubPw-{uuid.uuid4().hex}"
MEMBER, MEMBER_PASSWORD = "member", f"MemPw-{uuid.uuid4().hex}"
SECRETS = (PASSWORD, PUBLISHER_PASSWORD, MEMBER_PASSWORD, ADMIN.password)
RECORDS = 10
COMMITTED = {0: 3, 1: 4}


def _admin(bootstrap: str):
    from confluent_kafka.admin import AdminClient

    return AdminClient({**ADMIN.client_config(), "bootstrap.servers": bootstrap})


def _acl(kind: str, name: str, prefixed: bool = True, operation: str = "DESCRIBE", user: str = USER):
    return allow(kind, name, operation, user, prefixed)


def _grant(bootstrap: str, *acls) -> None:
    admin = _admin(bootstrap)  # kept alive until its futures are answered
    for future in admin.create_acls(list(acls)).values():
        future.result(60)


def _revoke(bootstrap: str, *acls) -> None:
    from confluent_kafka.admin import AclBindingFilter

    filters = [
        AclBindingFilter(a.restype, a.name, a.resource_pattern_type, a.principal, a.host, a.operation,
                         a.permission_type)
        for a in acls
    ]  # fmt: skip
    admin = _admin(bootstrap)
    for future in admin.delete_acls(filters).values():
        future.result(60)


@pytest.fixture(scope="module")
def secured(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, str]]:
    """The broker, a user with Describe on ``sec-ok-*`` groups and ``sec-*`` topics and on the
    cluster, a topic and committed offsets for one allowed and one denied group."""
    state = tmp_path_factory.mktemp("kafka-secured")
    tls = local_kafka.make_tls(tmp_path_factory.mktemp("kafka-tls"))
    info = local_kafka.start(state, secured=ADMIN, tls=tls)
    try:
        bootstrap = info.bootstrap_servers
        topic, allowed, denied = _populate(bootstrap)
        config = state / "advisor.properties"
        config.write_text(
            "".join(f"{k}={v}\n" for k, v in local_kafka.scram_client_config(USER, PASSWORD).items())
        )
        tls_config = state / "advisor-tls.properties"
        tls_config.write_text(
            "".join(
                f"{k}={v}\n" for k, v in local_kafka.scram_client_config(USER, PASSWORD, tls.ca_pem).items()
            )
        )
        yield {
            "bootstrap": bootstrap,
            "tls_bootstrap": info.tls_bootstrap_servers,
            "tls_config": str(tls_config),
            "ca_pem": str(tls.ca_pem),
            "config": str(config),
            "topic": topic,
            "allowed": allowed,
            "denied": denied,
        }
    finally:
        local_kafka.stop(state)


def _populate(bootstrap: str) -> tuple[str, str, str]:
    """The users, the topic with its records, the two groups' offsets and the advisor's ACLs; returns
    (topic, allowed group, denied group). A function of its own so that its clients are gone when it
    returns: held by the fixture until the broker stopped, they logged "Connection refused" after it."""
    from confluent_kafka import Consumer, Producer, TopicPartition
    from confluent_kafka.admin import (
        NewTopic,
        ScramCredentialInfo,
        ScramMechanism,
        UserScramCredentialUpsertion,
    )

    admin = _admin(bootstrap)
    credential = ScramCredentialInfo(ScramMechanism.SCRAM_SHA_512, 4096)
    users = ((USER, PASSWORD), (PUBLISHER, PUBLISHER_PASSWORD), (MEMBER, MEMBER_PASSWORD))
    for future in admin.alter_user_scram_credentials(
        [UserScramCredentialUpsertion(user, credential, password.encode()) for user, password in users]
    ).values():
        future.result(60)
    tag = uuid.uuid4().hex[:6]
    topic, allowed, denied = f"sec-t-{tag}", f"sec-ok-{tag}", f"sec-denied-{tag}"
    admin.create_topics([NewTopic(topic, 2, 1)])[topic].result(60)
    producer = Producer({**ADMIN.client_config(), "bootstrap.servers": bootstrap})
    for i in range(2 * RECORDS):
        producer.produce(topic, b"x", partition=i % 2)
    assert producer.flush(30) == 0
    producer.close()
    for group in (allowed, denied):
        consumer = Consumer({**ADMIN.client_config(), "bootstrap.servers": bootstrap, "group.id": group})
        try:
            offsets = [TopicPartition(topic, p, o) for p, o in COMMITTED.items()]
            assert poll_until(lambda c=consumer, o=offsets: _committed(c, o), timeout=60, interval=0.5)
        finally:
            consumer.close()
    acls = [
        _acl("BROKER", "kafka-cluster", prefixed=False),
        _acl("GROUP", "sec-ok-"),
        _acl("TOPIC", "sec-"),
    ]
    for future in admin.create_acls(acls).values():
        future.result(60)
    return topic, allowed, denied


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
        for secret in SECRETS:
            assert secret not in text


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


def test_the_batched_route_names_the_denied_group_and_lands_the_allowed_one(secured, monkeypatch) -> None:
    """The batched group reader (Kafka's Java AdminClient, the SCRAM login handed over on stdin; the
    per-group route made unusable, so no fallback can hide a failure): the group without Describe
    is an error row naming the ACL, the allowed group lands with its offsets."""
    from rebalance_advisor.adapters import kafka_snapshot

    monkeypatch.setattr(kafka_snapshot, "_PerGroupRequests", None)
    options = kafka_snapshot.SnapshotOptions(
        groups=kafka_snapshot.GroupFilter.parse(f"({secured['allowed']}|{secured['denied']})"),
        timeout_s=20,
        time_lag=False,
        share_groups=False,
        batched_min_groups=0,
    )
    config = kafka_snapshot.read_client_config(secured["config"])
    taken = kafka_snapshot.collect(secured["bootstrap"], config, options)
    assert taken.status == "partial"
    [error] = taken.errors
    assert (error.stage, error.group_id, error.error_code) == (
        "describe",
        secured["denied"],
        "GROUP_AUTHORIZATION_FAILED",
    )
    assert f"missing ACL: DESCRIBE on Group '{secured['denied']}'" in error.reason
    assert [g.group_id for g in taken.groups] == [secured["allowed"]]
    assert {(c.topic, c.partition, c.offset) for c in taken.committed} == {
        (secured["topic"], p, o) for p, o in COMMITTED.items()
    }


def test_a_wrong_password_is_an_authentication_error_without_the_password(secured, tmp_path, capsys) -> None:
    wrong = tmp_path / "wrong.properties"
    wrong.write_text(
        "".join(f"{k}={v}\n" for k, v in local_kafka.scram_client_config(USER, PASSWORD + "x").items())
    )
    code = main(
        ["snapshot", "--bootstrap-servers", secured["bootstrap"], "--config", str(wrong), "--db",
         f"sqlite:///{tmp_path / 'advisor.db'}", "--timeout", "4"]
    )  # fmt: skip
    out, err = capsys.readouterr()
    assert code == 1
    assert "Traceback" not in err
    assert "authentication" in err.lower() or "handshake" in err.lower(), err
    _no_secret(out, err)
    assert PASSWORD + "x" not in err


def _lag_rows(url: str, group: str, capsys) -> set[tuple[str, str, str, str]]:
    assert main(["lag", "--db", url, "--group", group, "--format", "tool"]) == 0
    rows = local_kafka.parse_describe_output(capsys.readouterr().out)
    return {(r["PARTITION"], r["CURRENT-OFFSET"], r["LOG-END-OFFSET"], r["LAG"]) for r in rows}


def test_the_snapshot_over_sasl_ssl(secured, tmp_path, capsys) -> None:
    """The same least rights over the TLS listener (CA of the throwaway keystore): complete, the hand
    values; without the CA the certificate is not trusted and the command says it is the handshake."""
    url = f"sqlite:///{tmp_path / 'advisor.db'}"
    code = main(
        ["snapshot", "--bootstrap-servers", secured["tls_bootstrap"], "--config", secured["tls_config"],
         "--db", url, "--groups", "sec-ok-.*", "--timeout", "20"]
    )  # fmt: skip
    out, err = capsys.readouterr()
    assert code == 0, err
    assert "(complete)" in out, out + err  # the share-group reader logged in over TLS as well
    assert _lag_rows(url, secured["allowed"], capsys) == {
        (str(p), str(o), str(RECORDS), str(RECORDS - o)) for p, o in COMMITTED.items()
    }

    untrusted = tmp_path / "no-ca.properties"
    settings = {**local_kafka.scram_client_config(USER, PASSWORD), "security.protocol": "SASL_SSL"}
    untrusted.write_text("".join(f"{k}={v}\n" for k, v in settings.items()))
    code = main(
        ["snapshot", "--bootstrap-servers", secured["tls_bootstrap"], "--config", str(untrusted), "--db", url,
         "--timeout", "4"]
    )  # fmt: skip
    out, err = capsys.readouterr()
    assert code == 1
    [line] = err.strip().splitlines()
    assert "handshake" in line.lower(), line
    _no_secret(out, err)


def _until_assigned(consumer, partitions: int, timeout: float = 60.0) -> None:
    def assigned() -> bool:
        consumer.poll(0.5)
        return len(consumer.assignment()) == partitions

    assert poll_until(assigned, timeout=timeout, interval=0.1), "the member got no assignment"


def test_topics_hidden_by_acls_make_the_snapshot_partial(secured, tmp_path, capsys) -> None:
    """Live members assigned a topic the snapshot's principal may not Describe: the broker leaves it out
    of the metadata and (KIP-848) refuses the whole group description. Not 'complete', not 'deleted':
    partial, with the missing ACL named."""
    from confluent_kafka import Consumer
    from confluent_kafka.admin import NewTopic

    bootstrap, tag = secured["bootstrap"], uuid.uuid4().hex[:6]
    hidden = f"hid-{tag}"  # the advisor's Describe covers sec-* topics only
    admin = _admin(bootstrap)
    admin.create_topics([NewTopic(hidden, 2, 1)])[hidden].result(60)
    classic, modern = f"sec-ok-classic-{tag}", f"sec-ok-848-{tag}"
    consumers = [
        Consumer({**ADMIN.client_config(), "bootstrap.servers": bootstrap, "group.id": classic}),
        Consumer({**ADMIN.client_config(), "bootstrap.servers": bootstrap, "group.id": modern,
                  "group.protocol": "consumer"}),
    ]  # fmt: skip
    try:
        for consumer in consumers:
            consumer.subscribe([secured["topic"], hidden])
            _until_assigned(consumer, 4)
        url = f"sqlite:///{tmp_path / 'advisor.db'}"
        code = main(
            ["snapshot", "--bootstrap-servers", bootstrap, "--config", secured["config"], "--db", url,
             "--groups", f"sec-ok-(classic|848)-{tag}", "--timeout", "20", "--no-share-groups"]
        )  # fmt: skip
        out, err = capsys.readouterr()
    finally:
        for consumer in consumers:
            consumer.close()
    assert code == 0, err
    assert "(partial)" in out, out + err
    assert f"missing ACL: DESCRIBE on Topic '{hidden}' for this client's principal" in err
    assert "does not exist" not in err
    modern_line = next(line for line in err.splitlines() if modern in line)
    assert "missing ACL: DESCRIBE on Topic (every topic the group's members subscribe to" in modern_line
    _no_secret(out, err)


def _refused_eventually(call, error_type):
    """The error ``call`` raises once the broker applies an ACL change (bounded); the last one."""
    caught = []

    def attempt() -> bool:
        try:
            call()
        except error_type as error:
            caught.append(error)
            return True
        return False

    assert poll_until(attempt, timeout=30, interval=1), "the revoked right still worked after 30 s"
    return caught[-1]


def test_the_publisher_with_least_rights_and_each_missing_right_named(secured, caplog) -> None:
    """The publisher's principal needs READ, WRITE and DESCRIBE_CONFIGS on the assignment topic
    (CREATE too when it is to create it) and WRITE on TransactionalId prefix
    'rebalance-advisor-publisher.' (docs/operations/security.md); without any one, its refusal names that one."""
    from rebalance_advisor.adapters.assignment_publisher import publish_assignments
    from rebalance_advisor.adapters.assignment_topic import KafkaAccessRefused, read_topic

    caplog.set_level(logging.DEBUG)
    bootstrap, tag, data = secured["bootstrap"], uuid.uuid4().hex[:6], secured["topic"]
    topic, group = f"assign-{tag}", f"pub-group-{tag}"
    config = {
        **local_kafka.scram_client_config(PUBLISHER, PUBLISHER_PASSWORD),
        "bootstrap.servers": bootstrap,
    }
    rights = {
        "READ on Topic": _acl("TOPIC", topic, False, "READ", PUBLISHER),
        "WRITE on Topic": _acl("TOPIC", topic, False, "WRITE", PUBLISHER),
        "DESCRIBE_CONFIGS on Topic": _acl("TOPIC", topic, False, "DESCRIBE_CONFIGS", PUBLISHER),
        "WRITE on TransactionalId prefix": _acl(
            "TRANSACTIONAL_ID", "rebalance-advisor-publisher.", True, "WRITE", PUBLISHER
        ),
    }
    create = _acl("TOPIC", topic, False, "CREATE", PUBLISHER)
    _grant(bootstrap, *rights.values())
    attempts = iter(range(1000))

    def publish(plan_id: str = ""):
        n = next(attempts)  # every attempt a new plan: a publish that is not a no-op must write
        plan = {f"w{n}": [(data, 0), (data, 1)]}
        return publish_assignments(config, group, plan_id or f"p{n}", plan, topic=topic, timeout=15)

    error = _refused_eventually(publish, KafkaAccessRefused)  # the topic is missing: create it
    assert f"missing ACL: CREATE on Topic '{topic}' for this client's principal" in str(error)
    _grant(bootstrap, create)
    first = poll_until(lambda: _published(publish, KafkaAccessRefused), timeout=30, interval=1)
    assert first is not None and first.epoch == 1
    # what the topic holds, read as the super user: the plan's one member, both partitions, epoch 1
    held = read_topic({**ADMIN.client_config(), "bootstrap.servers": bootstrap}, topic).group(group)
    assert [(r.member, r.epoch, r.partitions) for r in held.values()] == [
        (first.records[0].member, 1, ((data, 0), (data, 1)))
    ]
    _revoke(bootstrap, create)  # only needed to create the topic

    for grant, acl in rights.items():
        _revoke(bootstrap, acl)
        error = _refused_eventually(publish, KafkaAccessRefused)
        named = "'rebalance-advisor-publisher.'" if "TransactionalId" in grant else repr(topic)
        assert f"missing ACL: {grant} {named} for this client's principal" in str(error), (grant, error)
        assert len(str(error).splitlines()) == 1
        _no_secret(str(error))
        _grant(bootstrap, acl)
    last = poll_until(lambda: _published(publish, KafkaAccessRefused), timeout=30, interval=1)
    assert last is not None and last.epoch == 2  # every refused attempt published nothing
    _no_secret(caplog.text)


def _published(publish, error_type):
    try:
        return publish()
    except error_type:
        return None  # a grant not yet in force


def _member_rights(group: str, data: str, assignments: str, fenced: bool) -> dict[str, object]:
    """The client helper's rights (docs/operations/security.md): READ on its topics, the assignment topic and its group;
    fenced, WRITE on its TransactionalId prefix."""
    rights = {
        f"READ on Topic '{data}'": _acl("TOPIC", data, False, "READ", MEMBER),
        f"READ on Topic '{assignments}'": _acl("TOPIC", assignments, False, "READ", MEMBER),
        f"READ on Group '{group}'": _acl("GROUP", group, False, "READ", MEMBER),
    }
    if fenced:
        prefix = f"rebalance-advisor-client.{group}."
        rights[f"WRITE and DESCRIBE on TransactionalId prefix '{prefix}'"] = _acl(
            "TRANSACTIONAL_ID", prefix, True, "WRITE", MEMBER
        )
    return rights


def _publish_as_admin(bootstrap: str, group: str, data: str, assignments: str) -> None:
    from rebalance_advisor.adapters.assignment_publisher import publish_assignments

    config = {**ADMIN.client_config(), "bootstrap.servers": bootstrap}
    publish_assignments(config, group, "p1", {"w1": [(data, 0), (data, 1)]}, topic=assignments, timeout=30)


def _member(bootstrap: str, group: str, assignments: str, fenced: bool):
    from rebalance_advisor_client import AssignedConsumer

    config = {
        **local_kafka.scram_client_config(MEMBER, MEMBER_PASSWORD),
        "bootstrap.servers": bootstrap,
        "auto.offset.reset": "earliest",
    }
    return AssignedConsumer(config, group, "w1", topic=assignments, fenced=fenced, ready_timeout=30)


@pytest.mark.parametrize("fenced", [True, False], ids=["fenced", "unfenced"])
def test_the_client_helper_with_least_rights(secured, fenced, caplog) -> None:
    """With only the rights docs/operations/security.md lists, the member consumes its two published partitions whole
    and commits: the group's committed offsets are the log ends, read as the super user."""
    from confluent_kafka import Consumer, TopicPartition

    caplog.set_level(logging.INFO)
    bootstrap, tag, data = secured["bootstrap"], uuid.uuid4().hex[:6], secured["topic"]
    group, assignments = f"member-group-{tag}", f"assign-m-{tag}"
    _publish_as_admin(bootstrap, group, data, assignments)
    _grant(bootstrap, *_member_rights(group, data, assignments, fenced).values())
    member = _member(bootstrap, group, assignments, fenced)
    seen = 0
    try:

        def consumed_all() -> bool:
            nonlocal seen
            seen += member.poll(0.5) is not None
            return seen == 2 * RECORDS

        assert poll_until(consumed_all, timeout=120, interval=0), f"consumed {seen} of {2 * RECORDS}"
        member.commit()
    finally:
        member.close()
    reader = Consumer({**ADMIN.client_config(), "bootstrap.servers": bootstrap, "group.id": group})
    try:
        offsets = reader.committed([TopicPartition(data, p) for p in (0, 1)], timeout=30)
    finally:
        reader.close()
    assert {tp.partition: tp.offset for tp in offsets} == {0: RECORDS, 1: RECORDS}
    # the key-range path's clients log in too (they once fell back to a client without the config)
    assert "cannot read key-range" not in caplog.text
    _no_secret(caplog.text)


def _followers() -> list[str]:
    """Assignment-follower threads still running (each holds a consumer of the assignment topic)."""
    return [t.name for t in threading.enumerate() if t.name.startswith("assignments-")]


def test_the_client_helper_names_each_missing_right(secured, caplog) -> None:
    """Fenced, without any one of its rights: the helper stops with one line naming that right, and
    leaves no client behind (a refused start once kept its assignment reader polling the broker)."""
    from rebalance_advisor_client import ClientError

    caplog.set_level(logging.INFO)
    bootstrap, tag, data = secured["bootstrap"], uuid.uuid4().hex[:6], secured["topic"]
    group, assignments = f"member-denied-{tag}", f"assign-d-{tag}"
    _publish_as_admin(bootstrap, group, data, assignments)
    rights = _member_rights(group, data, assignments, fenced=True)
    _grant(bootstrap, *rights.values())
    for grant, acl in rights.items():
        _revoke(bootstrap, acl)

        def start_and_poll() -> None:
            member = _member(bootstrap, group, assignments, fenced=True)
            try:
                deadline = poll_until(lambda: member.poll(0.5) and False, timeout=60, interval=0)
                assert deadline is None
            finally:
                member.close(release=False)

        error = _refused_eventually(start_and_poll, ClientError)
        assert f"missing ACL: {grant}" in str(error) or grant in str(error), (grant, error)
        _no_secret(str(error))
        assert poll_until(lambda: not _followers(), timeout=10, interval=0.2), (grant, _followers())
        _grant(bootstrap, acl)
    _no_secret(caplog.text)
