"""The ``advised`` assignor's plan reader on a secured broker (SASL/SCRAM, ACLs): it logs in with its
own settings (``rebalance.advisor.plans.consumer.*``) as a user of its own, and READ + DESCRIBE on the
plans topic are all it needs (docs/operations/broker-plugin.md, "Security"). Without them the groups
get uniform's assignment and the broker log says why, once; once granted, plans are applied."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from rebalance_advisor.devtools import local_kafka
from rebalance_advisor.polling import poll_until

from tests.support import broker_plans as bp
from tests.support.acls import allow

pytestmark = [pytest.mark.kafka, pytest.mark.slow]

ADMIN = local_kafka.ScramSuperUser("admin", f"admin-{uuid.uuid4().hex}")
READER, READER_PASSWORD = "plans-reader", f"Reader-{uuid.uuid4().hex}"


def _reader_settings() -> dict[str, str]:
    jaas = (
        "org.apache.kafka.common.security.scram.ScramLoginModule required "
        f'username="{READER}" password="{READER_PASSWORD}";'
    )
    prefix = "rebalance.advisor.plans.consumer."
    return {f"{prefix}sasl.mechanism": local_kafka.SCRAM_MECHANISM, f"{prefix}sasl.jaas.config": jaas}


@pytest.fixture(scope="module")
def secured(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, Path]]:
    state = tmp_path_factory.mktemp("kafka-advised-secured")
    info = local_kafka.start(state, secured=ADMIN, extra_properties=_reader_settings())
    try:
        _add_reader(info.bootstrap_servers)
        yield info.bootstrap_servers, state
    finally:
        local_kafka.stop(state)


def _add_reader(bootstrap: str) -> None:
    from confluent_kafka.admin import (
        AdminClient,
        ScramCredentialInfo,
        ScramMechanism,
        UserScramCredentialUpsertion,
    )

    admin = AdminClient({**ADMIN.client_config(), "bootstrap.servers": bootstrap})
    credential = ScramCredentialInfo(ScramMechanism.SCRAM_SHA_512, 4096)
    upsert = UserScramCredentialUpsertion(READER, credential, READER_PASSWORD.encode())
    for future in admin.alter_user_scram_credentials([upsert]).values():
        future.result(60)


def _grant(bootstrap: str, *acls) -> None:
    from confluent_kafka.admin import AdminClient

    admin = AdminClient({**ADMIN.client_config(), "bootstrap.servers": bootstrap})
    for future in admin.create_acls(list(acls)).values():
        future.result(60)


def test_the_reader_needs_read_and_describe_on_the_plans_topic_and_nothing_more(secured) -> None:
    bootstrap, state = secured
    login = ADMIN.client_config()
    bp.ensure_plans_topic(bootstrap, login)
    name = f"adv-t-{uuid.uuid4().hex[:8]}"
    tid = bp.create_topic(bootstrap, name, 4, login)
    group = f"adv-g-{uuid.uuid4().hex[:8]}"
    members = [bp.consumer(bootstrap, group, name, config=login) for _ in range(2)]
    extra: list = []
    try:
        assert bp.settle(lambda: members + extra, lambda: [len(bp.owned(m)) for m in members] == [2, 2])
        plan = {members[0].memberid(): {0, 1, 2}, members[1].memberid(): {3}}
        bp.publish(bootstrap, group, bp.plan_record(group, name, tid, plan), login)

        def bounce() -> None:
            if extra:
                extra.pop().close()
            extra.append(bp.consumer(bootstrap, group, name, config=login))

        def applied() -> bool:
            return [bp.owned(m) for m in members] == [{0, 1, 2}, {3}]

        bounce()
        assert not bp.settle(lambda: members + extra, applied, timeout=15, bounce=bounce), (
            "applied without rights"
        )
        log = state / "broker.log"
        denied = "cannot read the plans topic _rebalance_advisor_broker_plans"
        assert poll_until(lambda: denied in log.read_text(errors="replace"), timeout=30, interval=0.5)

        _grant(
            bootstrap,
            allow("TOPIC", bp.PLANS_TOPIC, "READ", READER, prefixed=False),
            allow("TOPIC", bp.PLANS_TOPIC, "DESCRIBE", READER, prefixed=False),
        )
        assert bp.settle(lambda: members + extra, applied, timeout=60, bounce=bounce), [
            bp.owned(m) for m in members
        ]
        text = log.read_text(errors="replace")
        assert text.count(denied) == 1, "the reader's failure is logged once per interval, not per retry"
        assert READER_PASSWORD not in text
    finally:
        bp.close_all(members + extra)
