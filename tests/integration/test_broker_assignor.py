"""The broker-side ``advised`` assignor on the real local broker (docs/operations/broker-plugin.md):
plain confluent-kafka ``subscribe()`` consumers on the consumer protocol ask for it, a plan record
written with a plain producer is applied at the next re-assignment, what the plan does not place is
filled by uniform, bad records fall back to uniform, and a restarted broker reads the plans again."""

from __future__ import annotations

import json
import subprocess
import threading
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka.admin import AdminClient, NewPartitions
from rebalance_advisor.adapters import kafka_jars
from rebalance_advisor.devtools import local_kafka

from tests.support import broker_plans as bp

pytestmark = [pytest.mark.kafka, pytest.mark.slow]


class Group:
    """Planned members plus one extra member that can be swapped to make the broker re-assign."""

    def __init__(
        self, bootstrap: str, topic: str, size: int, assignor: str = "advised", static: bool = False
    ):
        self.bootstrap, self.topic, self.assignor = bootstrap, topic, assignor
        self.name = f"adv-g-{uuid.uuid4().hex[:8]}"
        self.static = static
        self.members = [self._join(f"w{i}") for i in range(size)]
        self.extra = None

    def _join(self, instance: str):
        return bp.consumer(
            self.bootstrap, self.name, self.topic, self.assignor, instance if self.static else None
        )

    def everyone(self) -> list:
        return self.members + ([self.extra] if self.extra else [])

    def add_extra(self) -> None:
        """A member joins (a re-assignment); called again, it leaves and a fresh one joins."""
        if self.extra:
            self.extra.close()
        self.extra = self._join(f"extra-{uuid.uuid4().hex[:6]}")

    def owned(self) -> list[set[int]]:
        return [bp.owned(m) for m in self.members]

    def settle(self, done, bounce: bool = False, timeout: float = 45.0) -> bool:
        return bp.settle(self.everyone, done, timeout, self.add_extra if bounce else None)

    def close(self) -> None:
        bp.close_all(self.everyone())


def _balanced(sizes: list[int], total: int) -> bool:
    return sum(sizes) == total and max(sizes) - min(sizes) <= 1


@pytest.fixture
def topic(kafka_bootstrap: str) -> tuple[str, str]:
    bp.ensure_plans_topic(kafka_bootstrap)
    name = f"adv-t-{uuid.uuid4().hex[:8]}"
    return name, bp.create_topic(kafka_bootstrap, name, 6)


def test_a_published_plan_is_applied_then_filled_when_a_member_leaves_and_partitions_are_added(
    kafka_bootstrap: str, topic: tuple[str, str]
) -> None:
    name, tid = topic
    group = Group(kafka_bootstrap, name, 3)
    try:
        assert group.settle(lambda: _balanced([len(o) for o in group.owned()], 6)), group.owned()
        ids = [m.memberid() for m in group.members]
        plan = {ids[0]: {0, 1, 2, 3}, ids[1]: {4}, ids[2]: {5}}
        bp.publish(kafka_bootstrap, group.name, bp.plan_record(group.name, name, tid, plan))
        group.add_extra()
        applied = group.settle(
            lambda: group.owned() == list(plan.values()) and not bp.owned(group.extra), bounce=True
        )
        assert applied, f"plan not applied: {group.owned()} + extra {bp.owned(group.extra)}"

        # A planned member leaves: its partition goes to the member the plan gave nothing (the extra one).
        group.members.pop().close()
        moved = group.settle(lambda: group.owned() == [{0, 1, 2, 3}, {4}] and bp.owned(group.extra) == {5})
        assert moved, f"after a member left: {group.owned()} + extra {bp.owned(group.extra)}"

        # New partitions: also to the member the plan gave nothing; the planned members keep the plan.
        admin = AdminClient({"bootstrap.servers": kafka_bootstrap})
        admin.create_partitions([NewPartitions(name, 8)])[name].result(30)
        grown = group.settle(
            lambda: group.owned() == [{0, 1, 2, 3}, {4}] and bp.owned(group.extra) == {5, 6, 7}
        )
        assert grown, f"after partitions were added: {group.owned()} + extra {bp.owned(group.extra)}"
    finally:
        group.close()


def test_a_malformed_record_sends_the_group_back_to_uniform(
    kafka_bootstrap: str, topic: tuple[str, str]
) -> None:
    name, tid = topic
    group = Group(kafka_bootstrap, name, 3)
    try:
        assert group.settle(lambda: _balanced([len(o) for o in group.owned()], 6))
        ids = [m.memberid() for m in group.members]
        plan = {ids[0]: {0, 1, 2, 3}, ids[1]: {4}, ids[2]: {5}}
        bp.publish(kafka_bootstrap, group.name, bp.plan_record(group.name, name, tid, plan))
        group.add_extra()
        assert group.settle(lambda: group.owned() == list(plan.values()), bounce=True), group.owned()

        bp.publish(kafka_bootstrap, group.name, b'{"version": 1, "members": [oops')
        back = group.settle(lambda: _balanced([len(bp.owned(m)) for m in group.everyone()], 6), bounce=True)
        assert back, f"still not uniform's balance: {[bp.owned(m) for m in group.everyone()]}"
    finally:
        group.close()


def test_a_group_without_a_plan_is_assigned_as_by_uniform(kafka_bootstrap: str) -> None:
    name = f"adv-t-{uuid.uuid4().hex[:8]}"
    bp.create_topic(kafka_bootstrap, name, 7)
    advised, uniform = Group(kafka_bootstrap, name, 3), Group(kafka_bootstrap, name, 3, assignor="uniform")
    try:
        for group in (advised, uniform):
            # Settled once every member holds something: a lone first member briefly owns all seven.
            everyone_placed = lambda g=group: sum(map(len, g.owned())) == 7 and all(g.owned())  # noqa: E731
            assert group.settle(everyone_placed), group.owned()
        assert sorted(len(o) for o in advised.owned()) == sorted(len(o) for o in uniform.owned()) == [2, 2, 3]
        admin = AdminClient({"bootstrap.servers": kafka_bootstrap})
        described = admin.describe_consumer_groups([advised.name, uniform.name])
        assignors = {g: f.result(30).partition_assignor for g, f in described.items()}
        assert assignors == {advised.name: "advised", uniform.name: "uniform"}
    finally:
        advised.close()
        uniform.close()


@pytest.fixture(scope="module")
def own_broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, Path]]:
    """A broker of this module's own, so it may be restarted."""
    state = tmp_path_factory.mktemp("kafka-advised")
    info = local_kafka.start(state)
    try:
        yield info.bootstrap_servers, state
    finally:
        local_kafka.stop(state)


def test_without_the_plans_topic_groups_get_uniform_and_one_log_line(own_broker: tuple[str, Path]) -> None:
    bootstrap, state = own_broker  # the first test on this broker: the plans topic does not exist yet
    name = f"adv-t-{uuid.uuid4().hex[:8]}"
    bp.create_topic(bootstrap, name, 5)
    group = Group(bootstrap, name, 2)
    try:
        assert group.settle(lambda: sorted(len(o) for o in group.owned()) == [2, 3]), group.owned()
        for _ in range(2):  # more re-assignments: still one line
            group.add_extra()
            assert group.settle(lambda: _balanced([len(bp.owned(m)) for m in group.everyone()], 5))
        log = (state / "broker.log").read_text(errors="replace")
        assert log.count("the plans topic _rebalance_advisor_broker_plans does not exist (yet)") == 1, log[
            -2000:
        ]
    finally:
        group.close()


def test_a_restarted_broker_reads_the_plans_again_and_follows_them(own_broker: tuple[str, Path]) -> None:
    bootstrap, state = own_broker
    bp.ensure_plans_topic(bootstrap)
    name = f"adv-t-{uuid.uuid4().hex[:8]}"
    tid = bp.create_topic(bootstrap, name, 4)
    group = Group(bootstrap, name, 2, static=True)
    try:
        assert group.settle(lambda: [len(o) for o in group.owned()] == [2, 2]), group.owned()
        plan = {"w0": {0, 1, 2}, "w1": {3}}
        bp.publish(bootstrap, group.name, bp.plan_record(group.name, name, tid, plan, by_instance=True))
        local_kafka.restart(state)
        log = (state / "broker.log").read_text(errors="replace")
        restarted_at = log.rindex("Kafka Server started")  # the restarted broker logs after it
        group.add_extra()
        applied = group.settle(
            lambda: group.owned() == [{0, 1, 2}, {3}] and not bp.owned(group.extra), bounce=True, timeout=120
        )
        assert applied, (
            f"plan not followed after the restart: {group.owned()} + extra {bp.owned(group.extra)}"
        )
        after = (state / "broker.log").read_text(errors="replace")[restarted_at:]
        assert "read the plans topic _rebalance_advisor_broker_plans to its end" in after
    finally:
        group.close()


def test_bad_records_are_logged_once_each_and_never_break_assignment(own_broker: tuple[str, Path]) -> None:
    bootstrap, state = own_broker
    bp.ensure_plans_topic(bootstrap)
    name = f"adv-t-{uuid.uuid4().hex[:8]}"
    tid = bp.create_topic(bootstrap, name, 3)
    group = Group(bootstrap, name, 2)
    try:
        assert group.settle(lambda: sum(len(o) for o in group.owned()) == 3)
        bp.publish(bootstrap, group.name, b"not json at all")
        ids = [m.memberid() for m in group.members]
        unknown = bp.plan_record(
            group.name, name, tid, {ids[0]: {0, 1, 99}, ids[1]: {2}}, plan_id="p-bad-part"
        )
        bp.publish(bootstrap, group.name, unknown)
        for _ in range(3):  # several re-assignments: still one line per cause
            group.add_extra()
            assert group.settle(lambda: group.owned() == [{0, 1}, {2}] and not bp.owned(group.extra)), (
                group.owned()
            )
        log = (state / "broker.log").read_text(errors="replace")
        assert log.count(f"the plan record of group {group.name} is not JSON") == 1, log[-3000:]
        assert log.count("partition 99 of topic id") == 1, log[-3000:]
    finally:
        group.close()


class JavaMember:
    """tests/support/AdvisedJavaConsumer.java in a JVM of its own: its member id and its partitions."""

    def __init__(self, bootstrap: str, group: str, topic: str, assignor: str = "advised"):
        program = Path(__file__).resolve().parents[1] / "support" / "AdvisedJavaConsumer.java"
        command = kafka_jars.java_command(str(program), bootstrap, group, topic, assignor)
        self.process = subprocess.Popen(command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        self.lines: list[dict] = []
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        for line in self.process.stdout:
            if line.startswith("{"):
                self.lines.append(json.loads(line))

    def last(self) -> dict:
        return self.lines[-1] if self.lines else {}

    def stop(self) -> None:
        self.process.stdin.close()
        try:
            self.process.wait(20)
        except subprocess.TimeoutExpired:
            self.process.kill()


def test_a_java_consumer_follows_the_plan(kafka_bootstrap: str) -> None:
    bp.ensure_plans_topic(kafka_bootstrap)
    name = f"adv-t-{uuid.uuid4().hex[:8]}"
    tid = bp.create_topic(kafka_bootstrap, name, 4)
    group = Group(kafka_bootstrap, name, 1)
    java = JavaMember(kafka_bootstrap, group.name, name)
    try:
        joined = group.settle(  # the JVM compiles the consumer's source first: slow on a busy machine
            lambda: len(java.last().get("partitions", [])) == 2 and len(group.owned()[0]) == 2, timeout=180
        )
        assert joined, f"java {java.lines[-3:]}, python {group.owned()}"
        python_id = group.members[0].memberid()
        plan = {java.last()["member_id"]: {0, 1, 2}, python_id: {3}}
        bp.publish(kafka_bootstrap, group.name, bp.plan_record(group.name, name, tid, plan))
        group.add_extra()
        applied = group.settle(
            lambda: java.last().get("partitions") == [0, 1, 2] and group.owned() == [{3}], bounce=True
        )
        assert applied, f"java {java.lines[-3:]}, python {group.owned()}"
    finally:
        java.stop()
        group.close()
