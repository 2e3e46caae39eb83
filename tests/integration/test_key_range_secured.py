"""The key-range path on a secured cluster (docs/concepts/key-ranges.md, docs/operations/security.md): SASL/SCRAM logins, ACLs, least rights.

A user with only what a range consumer needs: READ on the input topic, READ on groups prefixed
with the application's group id (which covers its derived ``<group>.keyrange.<lo>-<hi>`` groups),
WRITE and DESCRIBE on TransactionalIds prefixed ``rebalance-advisor-client.<group>.`` (fenced
mode). The RangeSet (what AssignedConsumer runs for its ranges) gets the connection settings the
consumer passes it, SASL included: it fences, starts a range at its progress, hands out only the
range's records and commits them in the range's transaction under the derived group. Every one of
its clients must carry the login: without it the broker would not answer at all.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator

import pytest
from rebalance_advisor.devtools import local_kafka
from rebalance_advisor.polling import poll_until
from rebalance_advisor_client.handover_rules import RELEASED, decode_mark
from rebalance_advisor_client.key_hash import HASH_SPACE, positive_hashes
from rebalance_advisor_client.key_ranges import range_group
from rebalance_advisor_client.range_member import committed_with_metadata, read_progress
from rebalance_advisor_client.range_set import RangeSet

from tests.support.acls import allow

pytestmark = [pytest.mark.kafka]

ADMIN = local_kafka.ScramSuperUser("admin", f"admin-{uuid.uuid4().hex}")
USER, PASSWORD = "ranger", f"Pw-{uuid.uuid4().hex}"
TOPIC, GROUP, RECORDS = "krs-hot", "krs-app", 3000
HALF = HASH_SPACE // 2


def _acl(kind: str, name: str, operation: str, prefixed: bool = True):
    return allow(kind, name, operation, USER, prefixed)


@pytest.fixture(scope="module")
def secured(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict]:
    """The secured broker, the least-rights user and a topic of keyed records."""
    state = tmp_path_factory.mktemp("kafka-krs")
    info = local_kafka.start(state, secured=ADMIN)
    try:
        bootstrap = info.bootstrap_servers
        keys = _populate(bootstrap)
        yield {
            "bootstrap": bootstrap,
            "settings": {**local_kafka.scram_client_config(USER, PASSWORD), "bootstrap.servers": bootstrap},
            "keys": keys,
        }
    finally:
        local_kafka.stop(state)


def _populate(bootstrap: str) -> list[bytes]:
    """The user, the topic of keyed records (returns the keys) and the user's ACLs. A function of its
    own so that its clients are gone when it returns, not held until after the broker stopped."""
    from confluent_kafka import Producer
    from confluent_kafka.admin import (
        AdminClient,
        NewTopic,
        ScramCredentialInfo,
        ScramMechanism,
        UserScramCredentialUpsertion,
    )

    admin = AdminClient({**ADMIN.client_config(), "bootstrap.servers": bootstrap})
    credential = ScramCredentialInfo(ScramMechanism.SCRAM_SHA_512, 4096)
    for future in admin.alter_user_scram_credentials(
        [UserScramCredentialUpsertion(USER, credential, PASSWORD.encode())]
    ).values():
        future.result(60)
    admin.create_topics([NewTopic(TOPIC, 1, 1)])[TOPIC].result(60)
    keys = [f"user-{(i * 7919) % 500}".encode() for i in range(RECORDS)]
    producer = Producer({**ADMIN.client_config(), "bootstrap.servers": bootstrap, "linger.ms": 5})
    for key in keys:
        producer.produce(TOPIC, b"v", key, partition=0)
    assert producer.flush(60) == 0
    producer.close()
    prefix = f"rebalance-advisor-client.{GROUP}."
    acls = [
        _acl("TOPIC", TOPIC, "READ", prefixed=False),
        _acl("GROUP", GROUP, "READ"),  # the group and its derived key-range groups
        _acl("TRANSACTIONAL_ID", prefix, "WRITE"),
        _acl("TRANSACTIONAL_ID", prefix, "DESCRIBE"),
    ]
    for future in admin.create_acls(acls).values():
        future.result(60)
    return keys


def test_a_fenced_range_runs_with_the_consumer_s_login_and_least_rights(secured) -> None:
    settings = secured["settings"]
    ranges = RangeSet(
        settings,
        GROUP,
        "w0",
        lambda tp, waited: True,
        fenced=True,
        takeover_timeout=5.0,
        request_timeout=10.0,
    )
    got = []
    try:
        ranges.apply(((TOPIC, 0, 0, HALF),))

        def drained() -> bool:
            ranges.start_ready(every=0.0)
            while (message := ranges.poll(0.2)) is not None:
                got.append((message.offset(), message.key()))
            return len(got) >= expected

        hashes = positive_hashes(secured["keys"])
        expected = int((hashes < HALF).sum())  # by hand: the produced keys in [0, HALF)
        assert poll_until(drained, 120, 0.1), (len(got), expected)
        (committed,) = ranges.commit().values()
        assert got[-1][0] < committed <= RECORDS
    finally:
        ranges.close()  # commits the position again, with a RELEASED mark
    # exactly the range's records, in offset order
    assert [o for o, _ in got] == [o for o in range(RECORDS) if hashes[o] < HALF]
    # the commit is under the derived group, read back with the same login (read_committed)
    derived = range_group(GROUP, 0, HALF)
    bootstrap = settings["bootstrap.servers"]
    config = {k: v for k, v in settings.items() if k != "bootstrap.servers"}
    offset, metadata = committed_with_metadata(bootstrap, derived, TOPIC, 0, 30.0, config)
    mark = decode_mark(metadata)
    assert committed <= offset <= RECORDS and (mark.member, mark.state) == ("w0", RELEASED)
    progress = read_progress(bootstrap, GROUP, TOPIC, 0, config=config)
    assert progress.start(0, HALF) == offset and progress.start() == -1  # the other half: nothing yet


def test_without_the_login_the_range_path_gets_no_answer(secured) -> None:
    """The plumbing matters: the same read without the consumer's settings is refused (no answer)."""
    from confluent_kafka import KafkaException

    started = time.monotonic()
    with pytest.raises(KafkaException):
        committed_with_metadata(secured["settings"]["bootstrap.servers"], GROUP, TOPIC, 0, 5.0)
    assert time.monotonic() - started < 60
