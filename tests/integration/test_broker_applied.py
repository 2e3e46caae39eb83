"""Plans applied by the broker's ``advised`` assignor, on the local broker with the plugin installed:
snapshot -> plan -> approve -> publish (record + trigger) -> the next snapshot shows the plan's owners.
The consumers are plain ``subscribe()`` confluent-kafka consumers on the consumer protocol."""

from __future__ import annotations

import socket
import uuid

import pytest
from rebalance_advisor.adapters.assignment_topic import KafkaUnavailable
from rebalance_advisor.adapters.broker_plans import read_plans
from rebalance_advisor.cli import main
from rebalance_advisor.domain.apply_mode import ADVICE, BROKER
from rebalance_advisor.domain.parameters import SnapshotParams
from rebalance_advisor.services import plan_lifecycle
from rebalance_advisor.services.broker_plan_refresh import refresh_published_broker_plans
from rebalance_advisor.services.snapshot_service import take_and_store_snapshot
from rebalance_advisor.store import db
from rebalance_advisor.store.plans import get_plan, plan_assignment_map

from tests._plans import record_plan
from tests.support.kip848 import create_topic, kip848_members

pytestmark = pytest.mark.kafka
SKEWED = [6000, 100, 100, 100, 100, 100]


def _snapshot(config: dict, url: str, group: str):
    taken = take_and_store_snapshot(SnapshotParams(groups=group, retention_hours=0), config, url, prune=False)
    return taken.snapshot_id, taken.snapshot.group(group)


def _owners(group) -> dict[str, list[tuple[str, int]]]:
    return {m.group_instance_id or m.member_id: sorted(m.assignment) for m in group.members}


def _closed_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def test_published_plan_is_applied_by_the_broker(
    sqlite_url: str, kafka_bootstrap: str, capsys: pytest.CaptureFixture[str]
) -> None:
    url, config = sqlite_url, {"bootstrap.servers": kafka_bootstrap}
    db.upgrade(url)
    group = topic = f"advised-{uuid.uuid4().hex[:8]}"
    create_topic(kafka_bootstrap, topic, len(SKEWED))
    with kip848_members(kafka_bootstrap, group, [topic], 3):
        snapshot_id, seen = _snapshot(config, url, group)
        assert (seen.group_type, seen.assignor) == ("consumer", "advised")
        plan_id = record_plan(url, group, [m.member_id for m in seen.members], SKEWED, topic, snapshot_id)
        planned = {m: sorted(p) for m, p in plan_assignment_map(plan_id, url).items()}
        assert planned != _owners(seen)  # the plan moves partitions: uniform's 2/2/2 is not it
        assert sorted(len(p) for p in planned.values()) == [1, 2, 3]
        assert get_plan(plan_id, url).apply_mode == BROKER

        plan_lifecycle.approve(plan_id, "alice", url)
        done = plan_lifecycle.publish(plan_id, config, "alice", url, timeout=120)  # a loaded machine is slow
        assert (done.apply_mode, done.changed, done.in_force) == (BROKER, True, True), done.reassignment
        record = read_plans(config).plans[group]
        assert (record.plan_id, record.epoch) == (str(plan_id), done.epoch)
        assert {m.member_id for m in record.members} == set(planned)

        _, after = _snapshot(config, url, group)
        assert _owners(after) == planned
        again = plan_lifecycle.publish(plan_id, config, "alice", url)  # in force already: nothing to do
        assert (again.changed, again.in_force) == (False, True)
        assert "in force after 0.0 s (0 trigger(s))" in again.reassignment

        # The advisor keeps the record younger than the assignor's age bound: not yet due ...
        assert refresh_published_broker_plans(url, kafka_config=config) == []
        # ... and once due, the same plan and epoch are written again with a newer stamp.
        assert refresh_published_broker_plans(url, kafka_config=config, after_s=0) == [group]
        refreshed = read_plans(config).plans[group]
        assert (refreshed.plan_id, refreshed.epoch, refreshed.members) == (
            str(plan_id),
            done.epoch,
            record.members,
        )
        assert refreshed.published_at_ms > record.published_at_ms

        # Withdrawn by hand: a tombstone on the topic, the plan superseded, nothing left to refresh.
        withdraw = [
            "plan-status",
            "withdraw",
            str(plan_id),
            "--db",
            url,
            "--bootstrap-servers",
            kafka_bootstrap,
        ]
        assert main([*withdraw, "--note", "maintenance"]) == 0
        assert (
            f"plan {plan_id} of group {group} withdrawn: published -> superseded" in capsys.readouterr().out
        )
        assert read_plans(config).plans[group] is None
        assert get_plan(plan_id, url).status == "superseded"
        assert refresh_published_broker_plans(url, kafka_config=config, after_s=0) == []
        assert main(withdraw) == 1  # once only
        assert "only a published plan applied by the broker assignor" in capsys.readouterr().err

    assert main(["plans", "--db", url, "--group", group]) == 0
    assert "superseded  broker assignor" in capsys.readouterr().out
    assert main(["plan-status", "show", str(plan_id), "--db", url]) == 0
    shown = capsys.readouterr().out
    assert (
        "applied by: broker assignor" in shown
        and "withdrawn: the group is back on uniform; maintenance" in shown
    )


def test_broker_applied_publish_with_the_broker_down_stays_approved(
    sqlite_url: str, kafka_bootstrap: str, capsys: pytest.CaptureFixture[str]
) -> None:
    url, config = sqlite_url, {"bootstrap.servers": kafka_bootstrap}
    db.upgrade(url)
    group = topic = f"advised-down-{uuid.uuid4().hex[:8]}"
    create_topic(kafka_bootstrap, topic, len(SKEWED))
    with kip848_members(kafka_bootstrap, group, [topic], 2):
        snapshot_id, seen = _snapshot(config, url, group)
    plan_id = record_plan(url, group, [m.member_id for m in seen.members], SKEWED, topic, snapshot_id)
    plan_lifecycle.approve(plan_id, "alice", url)
    down = f"127.0.0.1:{_closed_port()}"
    with pytest.raises(KafkaUnavailable, match="Nothing was published"):
        plan_lifecycle.publish(plan_id, {"bootstrap.servers": down}, "alice", url, timeout=3)
    assert get_plan(plan_id, url).status == "approved"
    base = ["--db", url, "--bootstrap-servers", down, "--timeout", "3"]
    assert main(["plan-status", "publish", str(plan_id), *base]) == 1
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and f"plan {plan_id} for group {group}" in err
    assert get_plan(plan_id, url).status == "approved"
    assert group not in read_plans(config).plans


def test_kip848_group_on_uniform_is_advice_only(sqlite_url: str, kafka_bootstrap: str) -> None:
    url, config = sqlite_url, {"bootstrap.servers": kafka_bootstrap}
    db.upgrade(url)
    group = topic = f"uniform-{uuid.uuid4().hex[:8]}"
    create_topic(kafka_bootstrap, topic, len(SKEWED))
    with kip848_members(kafka_bootstrap, group, [topic], 2, assignor="uniform"):
        snapshot_id, seen = _snapshot(config, url, group)
    assert (seen.group_type, seen.assignor) == ("consumer", "uniform")
    plan_id = record_plan(url, group, [m.member_id for m in seen.members], SKEWED, topic, snapshot_id)
    assert get_plan(plan_id, url).apply_mode == ADVICE
    with pytest.raises(plan_lifecycle.AdviceOnly, match="group.remote.assignor=advised"):
        plan_lifecycle.approve(plan_id, "alice", url)
