"""The demo workload: consumer groups with known, skewed lag on a real broker.

Lag is made the plain way: produce N records to a partition, commit offset C for the group, so
LAG = N - C exactly as ``kafka-consumer-groups`` computes it. Groups that must show members get
live consumers (``rebalance_advisor.devtools.demo_members``, a separate process) that poll but never commit,
so the lag stays where it was put.

One more group has live traffic (:class:`LiveGroup`, :func:`live_traffic`): a producer writes at
fixed Zipf rates and consumers with a fixed capacity (simulated processing time per record)
``subscribe()`` on the consumer protocol (KIP-848) with the broker plugin's assignor
(``group.remote.assignor=advised``), no helper of ours. It starts from Kafka's range split (put in
force through the plugin, :func:`start_from_range_split`), which puts the hot partitions on one
member and overloads it; the advisor's plan is then applied by the broker. Its lag changes while the
demo runs, so it is kept apart from the exact-lag groups.
"""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field

from rebalance_advisor.adapters import LIBRDKAFKA_LOG
from rebalance_advisor.domain.apply_mode import BROKER_ASSIGNOR
from rebalance_advisor.errors import AdvisorError
from rebalance_advisor.polling import poll_until

SEED = 20170523  # KAFKA-5337's creation date: any fixed seed would do
RECORD_VALUE = b"demo-record-payload"


@dataclass(frozen=True)
class DemoMember:
    """A live consumer: static when ``instance_id`` is set; ``protocol`` is classic or consumer."""

    instance_id: str | None = None
    protocol: str = "classic"


@dataclass(frozen=True)
class DemoGroup:
    group_id: str
    #: topic -> per-partition number of records produced (the log-end offset)
    produced: dict[str, list[int]]
    #: topic -> per-partition committed offset, None where the group never committed
    committed: dict[str, list[int | None]]
    members: list[DemoMember] = field(default_factory=list)
    #: what the group is for, printed by the demo
    purpose: str = ""

    def expected_lag(self, topic: str, partition: int, reset: str = "latest") -> int:
        """The lag rule (docs/architecture.md, "Lag") for this demo group (log-start is 0: nothing is deleted)."""
        end = self.produced[topic][partition]
        committed = self.committed[topic][partition]
        if committed is None:
            return 0 if reset == "latest" else end
        return max(end - committed, 0)


def zipf_lags(count: int, exponent: float, largest: int, rng: random.Random) -> list[int]:
    """Lags following rank^-exponent, placed on partitions in random order."""
    lags = [max(1, round(largest / (rank**exponent))) for rank in range(1, count + 1)]
    rng.shuffle(lags)
    return lags


def build_workload(seed: int = SEED) -> list[DemoGroup]:
    """The groups the demo and the integration tests rely on (deterministic for a seed)."""
    rng = random.Random(seed)
    zipf_topics = {f"zipf-{name}": zipf_lags(24, 1.1, 20_000, rng) for name in ("a", "b", "c")}
    zipf_committed = {topic: [rng.randint(0, 300) for _ in lags] for topic, lags in zipf_topics.items()}
    return [
        DemoGroup(
            "kip-example",
            produced={"t0": [100_000, 60_000, 50_000]},
            committed={"t0": [0, 0, 0]},
            members=[DemoMember("C0"), DemoMember("C1")],
            purpose="the KAFKA-5337 worked example: range puts 160,000 on C0 and 50,000 on C1",
        ),
        DemoGroup(
            "zipf-multi",
            produced={
                t: [c + lag for c, lag in zip(zipf_committed[t], lags, strict=True)]
                for t, lags in zipf_topics.items()
            },
            committed={t: list(c) for t, c in zipf_committed.items()},
            members=[DemoMember() for _ in range(6)],
            purpose="3 topics x 24 partitions, 6 members, Zipf-skewed lag",
        ),
        DemoGroup(
            "idle-group",
            produced={"idle-topic": [1_000] * 4},
            committed={"idle-topic": [1_000] * 4},
            members=[DemoMember(), DemoMember()],
            purpose="caught up: zero lag",
        ),
        DemoGroup(
            "balanced-group",
            produced={"balanced-topic": [5_000] * 4},
            committed={"balanced-topic": [0] * 4},
            members=[DemoMember(), DemoMember()],
            purpose="equal lag on every partition: already balanced",
        ),
        DemoGroup(
            "partial-commit",
            produced={"never-committed": [2_000, 2_000, 3_000, 4_000]},
            committed={"never-committed": [500, 500, None, None]},
            members=[DemoMember()],
            purpose="partitions 2 and 3 never committed (auto.offset.reset decides their lag)",
        ),
        DemoGroup(
            "manual-assign",
            produced={"manual-topic": [30_000, 2_000, 2_000, 1_500, 1_000, 500]},
            committed={"manual-topic": [0] * 6},
            members=[],
            purpose="committed offsets, no members: consumers that use assign()",
        ),
        DemoGroup(
            "kip848-group",
            produced={"kip848-topic": [40_000, 5_000, 5_000, 3_000, 2_000, 1_000]},
            committed={"kip848-topic": [0] * 6},
            members=[DemoMember(protocol="consumer"), DemoMember(protocol="consumer")],
            purpose="members on the KIP-848 consumer protocol (group.protocol=consumer)",
        ),
    ]


@dataclass(frozen=True)
class LiveGroup:
    """A group with live traffic: known produce rates per partition, known capacity per consumer.

    ``produce_rates[p]`` is partition p's rate (records/s); consumer i (client id
    ``{group_id}-c{i}``) processes at most ``capacities[i]`` records/s. Every partition starts
    with ``initial_backlog`` records, so each member has backlog on what it owns while the demo
    observes it (that is when its capacity can be measured).
    """

    group_id: str
    topic: str
    produce_rates: tuple[float, ...]
    capacities: tuple[float, ...]
    initial_backlog: int
    purpose: str = ""

    def client_id(self, index: int) -> str:
        return f"{self.group_id}-c{index}"

    def range_assignment(self) -> dict[str, list[int]]:
        """Kafka's range assignor for this one topic: members in client-id order (dynamic member ids
        start with the client id) get consecutive partitions, the first ``P % C`` one extra."""
        count, members = len(self.produce_rates), len(self.capacities)
        per, extra = divmod(count, members)
        owned, start = {}, 0
        for index in range(members):
            size = per + (1 if index < extra else 0)
            owned[self.client_id(index)] = list(range(start, start + size))
            start += size
        return owned

    def inflow(self, partitions: list[int]) -> float:
        return sum(self.produce_rates[p] for p in partitions)

    def as_loaded(self) -> DemoGroup:
        """The group as loaded before its traffic starts: the initial backlog, offset 0 committed on
        every partition, one (dynamic) member per consumer; what topic creation, reset, the commit
        and the stable wait use.

        The commit at 0 gives every partition a committed offset from the start, so the first
        snapshot already has one on each and the second one a consume rate (0 where the owner has
        not reached the partition yet). Waiting for the consumers' own first commits instead took
        25-95 s: a member works through its prefetched chunks one partition at a time.
        """
        count = len(self.produce_rates)
        return DemoGroup(
            self.group_id,
            produced={self.topic: [self.initial_backlog] * count},
            committed={self.topic: [0] * count},
            members=[DemoMember() for _ in self.capacities],
            purpose=self.purpose,
        )

    def traffic_specs(self) -> list[dict]:
        """What the members process runs for this group: one producer, one consumer per capacity."""
        producer = {
            "kind": "producer",
            "topic": self.topic,
            "rates": list(self.produce_rates),
            "client_id": f"{self.group_id}-producer",
        }
        consumers = [
            {
                "group_id": self.group_id,
                "topics": [self.topic],
                "instance_id": None,
                "protocol": "consumer",
                "client_id": self.client_id(index),
                "capacity": capacity,
                "assignor": BROKER_ASSIGNOR,
            }
            for index, capacity in enumerate(self.capacities)
        ]
        return [producer, *consumers]


def zipf_rates(count: int, exponent: float, total: float) -> tuple[float, ...]:
    """Rates proportional to rank^-exponent summing to ``total``, hottest on partition 0."""
    weights = [rank**-exponent for rank in range(1, count + 1)]
    scale = total / sum(weights)
    return tuple(round(w * scale, 3) for w in weights)


def build_live_group() -> LiveGroup:
    """The demo's live group: 24 partitions at Zipf(0.9) rates totalling 120 records/s, 4 consumers
    of 50 records/s each (60 % of the total capacity is needed). Range gives c0 partitions 0-5,
    72.7 records/s: overloaded, while a rate-aware assignment fits everyone (the hottest partition
    is 27.7 records/s). Rates are low so that the consumers reach their capacity on a busy machine."""
    return LiveGroup(
        "live-orders",
        "live-orders",
        produce_rates=zipf_rates(24, 0.9, 120.0),
        capacities=(50.0,) * 4,
        initial_backlog=1_000,
        purpose="live traffic: Zipf produce rates, 4 consumers of 50 records/s (KIP-848, advised), "
        "starting from range's split",
    )


def _admin(bootstrap_servers: str, extra: dict | None = None):
    from confluent_kafka.admin import AdminClient

    return AdminClient({"bootstrap.servers": bootstrap_servers, **(extra or {})}, logger=LIBRDKAFKA_LOG)


def remove_workload(bootstrap_servers: str, groups: list[DemoGroup], timeout: float = 60.0) -> None:
    """Delete the demo's groups and topics from an earlier load, so a shared cluster can be reloaded.

    A group still holding members cannot be deleted: static members linger until their session
    times out, so non-empty groups are retried until ``timeout``. Topic deletion is asynchronous:
    wait until the broker no longer lists them.
    """
    from confluent_kafka import KafkaError, KafkaException

    admin = _admin(bootstrap_servers)
    pending = [g.group_id for g in groups]
    deadline = time.monotonic() + timeout
    delete_again = _coordinator_not_ready() | {KafkaError.NON_EMPTY_GROUP}  # members, or loading

    def groups_deleted() -> bool:
        retry = []
        for group_id, future in admin.delete_consumer_groups(pending, request_timeout=10).items():
            try:
                future.result()
            except KafkaException as error:
                code = error.args[0].code()
                if code in delete_again or error.args[0].retriable():
                    retry.append(group_id)
                elif code != KafkaError.GROUP_ID_NOT_FOUND:
                    raise AdvisorError(f"could not delete demo group {group_id}: {error}") from error
        pending[:] = retry
        return not pending

    if pending and not poll_until(groups_deleted, timeout, interval=1.0):
        raise AdvisorError(f"demo groups still have members after {timeout:.0f} s: {', '.join(pending)}")
    topics = sorted({topic for group in groups for topic in group.produced})
    existing = set(admin.list_topics(timeout=10).topics)
    doomed = [t for t in topics if t in existing]
    if doomed:
        for topic, future in admin.delete_topics(doomed, operation_timeout=timeout).items():
            try:
                future.result()
            except KafkaException as error:
                if error.args[0].code() != KafkaError.UNKNOWN_TOPIC_OR_PART:
                    raise AdvisorError(f"could not delete demo topic {topic}: {error}") from error

    def topics_gone() -> bool:
        return not set(doomed) & set(admin.list_topics(timeout=10).topics)

    if not poll_until(topics_gone, deadline - time.monotonic(), interval=0.5):  # the same deadline
        raise AdvisorError(f"demo topics were not deleted within {timeout:.0f} s: {', '.join(doomed)}")


def create_topics(bootstrap_servers: str, groups: list[DemoGroup], timeout: float = 30.0) -> None:
    """Create every demo topic; refuse when one exists (the demo wants exact, known lag)."""
    from confluent_kafka.admin import NewTopic

    admin = _admin(bootstrap_servers)
    wanted = {topic: len(counts) for group in groups for topic, counts in group.produced.items()}
    existing = set(admin.list_topics(timeout=timeout).topics)
    clash = sorted(set(wanted) & existing)
    if clash:
        raise AdvisorError(
            f"demo topics already exist on {bootstrap_servers}: {', '.join(clash)}. The demo needs exact lag: "
            "reload with --reset (deletes the demo's topics and groups) or use a fresh broker."
        )
    futures = admin.create_topics(
        [NewTopic(topic, num_partitions=count, replication_factor=1) for topic, count in wanted.items()],
        operation_timeout=timeout,
        request_timeout=timeout,
    )
    for topic, future in futures.items():
        try:
            future.result(timeout=timeout)
        except Exception as error:
            raise AdvisorError(f"could not create demo topic {topic}: {error}") from error


def produce_records(
    bootstrap_servers: str, groups: list[DemoGroup], timeout: float = 120.0, batch_records: int = 10_000
) -> int:
    """Produce each partition's record count; return the total produced.

    ``batch_records`` bounds the records per batch. A fetch returns at least one whole batch, so a
    consumer that should read its partitions evenly (the live group) needs small ones.
    """
    from confluent_kafka import Producer

    producer = Producer(
        {
            "bootstrap.servers": bootstrap_servers,
            "linger.ms": 20,
            "batch.num.messages": batch_records,
            "queue.buffering.max.messages": 1_000_000,
            "compression.type": "lz4",
            "acks": "all",
        },
        logger=LIBRDKAFKA_LOG,
    )
    failures: list[str] = []

    def on_delivery(error, message) -> None:
        if error is not None:
            failures.append(f"{message.topic()}-{message.partition()}: {error}")

    total = 0
    for group in groups:
        for topic, counts in group.produced.items():
            for partition, count in enumerate(counts):
                for _ in range(count):
                    while True:
                        try:
                            producer.produce(
                                topic, RECORD_VALUE, partition=partition, on_delivery=on_delivery
                            )
                            break
                        except BufferError:
                            producer.poll(0.05)
                total += count
            producer.poll(0)
    remaining = producer.flush(timeout)
    if remaining or failures:
        raise AdvisorError(
            f"producing the demo records failed ({remaining} undelivered; {failures[:3]}); is the broker healthy?"
        )
    return total


def _coordinator_not_ready() -> frozenset[int]:
    from confluent_kafka import KafkaError

    return frozenset({
        KafkaError.NOT_COORDINATOR, KafkaError.COORDINATOR_NOT_AVAILABLE,
        KafkaError.COORDINATOR_LOAD_IN_PROGRESS, KafkaError.REQUEST_TIMED_OUT, KafkaError._TIMED_OUT,
    })  # fmt: skip


def commit_offsets(bootstrap_servers: str, groups: list[DemoGroup], timeout: float = 60.0) -> None:
    """Commit each group's offsets while it has no members (a plain, memberless commit).

    Right after a broker starts, the offsets topic's coordinators may still be loading: such
    retriable errors are retried until ``timeout``; anything else fails at once.
    """
    from confluent_kafka import Consumer, KafkaException, TopicPartition

    for group in groups:
        offsets = [
            TopicPartition(topic, partition, offset)
            for topic, per_partition in group.committed.items()
            for partition, offset in enumerate(per_partition)
            if offset is not None
        ]
        if not offsets:
            continue
        consumer = Consumer(
            {"bootstrap.servers": bootstrap_servers, "group.id": group.group_id, "enable.auto.commit": False},
            logger=LIBRDKAFKA_LOG,
        )
        deadline = time.monotonic() + timeout
        not_ready = _coordinator_not_ready()
        try:
            while True:
                try:
                    results = consumer.commit(offsets=offsets, asynchronous=False)
                    failed = [r for r in results if r.error]
                    error = failed[0].error if failed else None
                except KafkaException as raised:
                    error = raised.args[0]
                if error is None:
                    break
                retriable = error.retriable() or error.code() in not_ready
                if not retriable or time.monotonic() > deadline:
                    raise AdvisorError(f"committing the demo offsets of {group.group_id} failed: {error}")
                time.sleep(0.5)
        finally:
            consumer.close()


def member_specs(groups: list[DemoGroup]) -> list[dict]:
    """What the members process runs: one entry per live consumer."""
    specs = []
    for group in groups:
        for index, member in enumerate(group.members):
            specs.append(
                {
                    "group_id": group.group_id,
                    "topics": sorted(group.produced),
                    "instance_id": member.instance_id,
                    "protocol": member.protocol,
                    "client_id": f"{group.group_id}-{member.instance_id or index}",
                }
            )
    return specs


@dataclass
class MembersProcess:
    """The background process that keeps the demo's consumers alive."""

    process: subprocess.Popen

    def stop(self, timeout: float = 30.0) -> None:
        if self.process.poll() is not None:
            return
        os.killpg(self.process.pid, signal.SIGTERM)
        try:
            self.process.wait(timeout)
        except subprocess.TimeoutExpired:
            os.killpg(self.process.pid, signal.SIGKILL)
            self.process.wait(5)


def start_members(
    bootstrap_servers: str, groups: list[DemoGroup], live: LiveGroup | None = None
) -> MembersProcess:
    specs = member_specs(groups) + (live.traffic_specs() if live else [])
    process = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "rebalance_advisor.devtools.demo_members",
            bootstrap_servers,
            json.dumps(specs),
        ],
        start_new_session=True,
        stdin=subprocess.DEVNULL,
    )
    return MembersProcess(process)


def _settled(description) -> bool:
    """Stable; or, for a KIP-848 group, any state while every partition has one owner (checked by the
    caller): confluent-kafka reports its reconciling state as UNKNOWN, and on a loaded machine a
    member's acknowledgement can trail its assignment for long after the partitions are in place."""
    from confluent_kafka import ConsumerGroupState, ConsumerGroupType

    if description.state == ConsumerGroupState.STABLE:
        return True
    return description.type == ConsumerGroupType.CONSUMER and description.state == ConsumerGroupState.UNKNOWN


def wait_until_stable(
    bootstrap_servers: str,
    groups: list[DemoGroup],
    members: MembersProcess | None = None,
    timeout: float = 90.0,
) -> None:
    """Wait until every group with members is Stable with all of them holding an assignment."""
    admin = _admin(bootstrap_servers)
    pending = {g.group_id: len(g.members) for g in groups if g.members}
    deadline = time.monotonic() + timeout
    last_seen: dict[str, str] = {}
    while pending and time.monotonic() < deadline:
        if members and members.process.poll() is not None:
            raise AdvisorError(f"the demo members process exited with code {members.process.returncode}")
        futures = admin.describe_consumer_groups(list(pending), request_timeout=10)
        for group_id, future in futures.items():
            try:
                description = future.result()
            except Exception as error:  # noqa: BLE001 - group may not exist yet
                last_seen[group_id] = str(error)
                continue
            assigned = [m for m in description.members if m.assignment and m.assignment.topic_partitions]
            last_seen[group_id] = f"{description.state}, {len(assigned)}/{pending[group_id]} members assigned"
            if _settled(description) and len(assigned) == pending[group_id]:
                total = sum(len(g.produced[t]) for g in groups if g.group_id == group_id for t in g.produced)
                if sum(len(m.assignment.topic_partitions) for m in assigned) == total:
                    del pending[group_id]
        if pending:
            time.sleep(1.0)
    if pending:
        raise AdvisorError(f"demo groups did not become stable within {timeout:.0f} s: {last_seen}")


def start_from_range_split(bootstrap_servers: str, live: LiveGroup, timeout: float = 180.0) -> None:
    """Put Kafka's range split (:meth:`LiveGroup.range_assignment`, by client id) in force on the live
    group through the broker plugin: the demo's known starting point. Without a plan the plugin gives
    ``uniform``'s split, which depends on the order the members joined in. On a loaded machine a member
    can be fenced and rejoin under a new id meanwhile: the split is then published again for the
    members the group has now."""
    from rebalance_advisor.adapters.broker_plans import publish_broker_plan
    from rebalance_advisor.adapters.broker_reassign import apply_plan

    config = {"bootstrap.servers": bootstrap_servers}
    admin = _admin(bootstrap_servers)  # kept alive until its answers are in
    deadline, seen = time.monotonic() + timeout, None
    while time.monotonic() < deadline:
        described = admin.describe_consumer_groups([live.group_id], request_timeout=30)[live.group_id]
        ids = {m.client_id: m.member_id for m in described.result(60).members}
        if set(ids) != set(live.range_assignment()):
            time.sleep(1.0)  # a member is (re)joining
            continue
        plan = {ids[c]: [(live.topic, p) for p in parts] for c, parts in live.range_assignment().items()}
        plan_id = f"demo-range-split-{time.time_ns()}"  # a new id each time: the topic may hold an older one
        record = publish_broker_plan(
            config, live.group_id, plan_id, plan, {m: (m, None) for m in plan}
        ).record
        seen = apply_plan(config, record, timeout=max(10.0, min(90.0, deadline - time.monotonic())))
        if seen.in_force:
            return
    raise AdvisorError(
        f"the live group {live.group_id} did not take range's split through the broker plugin within "
        f"{timeout:.0f} s ({seen.describe() if seen else 'its members never all joined'}): is the broker "
        "running with the plugin (dev kafka start), and the machine not overloaded?"
    )


@contextmanager
def demo_workload(
    bootstrap_servers: str,
    groups: list[DemoGroup] | None = None,
    reset: bool = False,
    live: LiveGroup | None = None,
) -> Iterator[list[DemoGroup]]:
    """Load the workload and keep its members alive for the ``with`` block; stop them afterwards.

    ``reset`` first deletes what an earlier load left (a shared cluster from ``KAFKA_BOOTSTRAP_SERVERS``).
    ``live`` adds a group with live traffic (its producer and consumers run in the members process
    until the block ends); the yielded list holds the exact-lag groups only.
    """
    groups = build_workload() if groups is None else groups
    loaded = groups + ([live.as_loaded()] if live else [])
    if reset:
        remove_workload(bootstrap_servers, loaded)
    create_topics(bootstrap_servers, loaded)
    produce_records(bootstrap_servers, groups)
    if live:
        produce_records(bootstrap_servers, [live.as_loaded()], batch_records=10)
    commit_offsets(bootstrap_servers, loaded)
    members = start_members(bootstrap_servers, groups, live)
    try:
        wait_until_stable(bootstrap_servers, loaded, members)
        if live:
            start_from_range_split(bootstrap_servers, live)
        yield groups
    finally:
        members.stop()
