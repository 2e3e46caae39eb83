"""Torture run of the client helper: workers, a producer, a plan controller, a nemesis, a checker.

Used by the short marked test (tests/test_client_torture.py) and the long run (bench/torture.py).
Everything runs against a broker of its own (so the nemesis may restart it): worker processes
(``tests.support.assigned_worker``), a producer of sequence-numbered records, a controller that
publishes a new random plan every few seconds (sometimes two epochs a few ms apart), and a
nemesis that stops workers (SIGSTOP, some longer than the takeover timeout; workers also stop
themselves between a read and the write that depends on it), kills and restarts them, and
restarts the broker. The checker then reads the group's whole commit history from
``__consumer_offsets`` (read_committed: only commits the broker accepted), every worker's
processing log and (fenced mode) the output topic.
"""

from __future__ import annotations

import contextlib
import json
import os
import random
import re
import signal
import struct
import subprocess
import threading
import time
import uuid
from collections import Counter, defaultdict
from dataclasses import asdict, dataclass, field
from pathlib import Path

from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic
from rebalance_advisor.adapters.assignment_publisher import publish_assignments
from rebalance_advisor.devtools import local_kafka
from rebalance_advisor_client import fencing
from rebalance_advisor_client.handover_rules import OWNED, RELEASED, OwnerMark, decode_mark

from tests.support import handover as h
from tests.support import torture_liveness as live
from tests.support import torture_stalls as stalls

# -- a broker of our own, restartable -------------------------------------------------------------


class OwnBroker:
    """A local broker whose process this run may kill and start again on the same ports and data."""

    def __init__(self, state_dir: Path, extra_properties: dict[str, str] | None = None) -> None:
        self.state_dir = state_dir
        self.info = local_kafka.start(state_dir)
        self.bootstrap = self.info.bootstrap_servers
        self.restarts = 0
        if extra_properties:
            self.configure(extra_properties)

    def configure(self, extra_properties: dict[str, str]) -> None:
        """The project's template plus settings of this test's own, then a restart to apply them."""
        properties = self.state_dir / "server.properties"
        lines = [
            line for line in properties.read_text().splitlines() if line.split("=")[0] not in extra_properties
        ]
        lines += [f"{key}={value}" for key, value in extra_properties.items()]
        properties.write_text("\n".join(lines) + "\n")
        self.restart(down_for=0.5)

    def restart(self, down_for: float = 1.0, crash: bool = False) -> None:
        """Stop the broker (``crash``: SIGKILL, no clean shutdown) and start it again on the same data."""
        if crash:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.info.pid, signal.SIGKILL)
        local_kafka.stop(self.state_dir, timeout=10)
        time.sleep(down_for)
        log_file = self.state_dir / "broker.log"
        with log_file.open("ab") as log:
            process = subprocess.Popen(
                local_kafka.broker_command(self.state_dir / "server.properties"),
                stdout=log,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                start_new_session=True,
                cwd=self.state_dir,
            )
        self.info = local_kafka.BrokerInfo(**{**asdict(self.info), "pid": process.pid})
        (self.state_dir / "broker.json").write_text(json.dumps(asdict(self.info)))
        self.restarts += 1
        deadline = time.monotonic() + 90
        while time.monotonic() < deadline:
            admin = AdminClient({"bootstrap.servers": self.bootstrap, "log_level": 0})
            try:
                if admin.list_topics(timeout=2).brokers:
                    return
            except Exception:  # noqa: BLE001 - not up yet
                pass
            time.sleep(0.5)
        raise RuntimeError("the broker did not come back within 90 s")

    def stop(self) -> None:
        local_kafka.stop(self.state_dir)


# -- the group's commit history ---------------------------------------------------------------------


@dataclass(frozen=True)
class Commit:
    partition: int
    offset: int
    mark: OwnerMark | None
    at: float = 0.0  # broker's append time of the commit record


def _string(data: bytes, at: int) -> tuple[str, int]:
    (length,) = struct.unpack_from(">h", data, at)
    return data[at + 2 : at + 2 + length].decode(), at + 2 + length


def _varint(data: bytes, at: int) -> tuple[int, int]:
    shift = result = 0
    while True:
        byte = data[at]
        at += 1
        result |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return result, at
        shift += 7


def decode_offset_commit(key: bytes, value: bytes | None) -> tuple[str, str, int, int, str] | None:
    """(group, topic, partition, offset, metadata) of an offset commit record, else None.

    Key and value layouts of ``__consumer_offsets`` (OffsetCommitKey v0/v1, OffsetCommitValue
    v0 to v4), as Kafka's group coordinator writes them.
    """
    (key_version,) = struct.unpack_from(">h", key, 0)
    if key_version not in (0, 1) or value is None:
        return None
    group, at = _string(key, 2)
    topic, at = _string(key, at)
    (partition,) = struct.unpack_from(">i", key, at)
    (version,) = struct.unpack_from(">h", value, 0)
    (offset,) = struct.unpack_from(">q", value, 2)
    at = 10
    if version >= 3:
        at += 4  # leader epoch
    if version >= 4:  # flexible version: compact string
        length, at = _varint(value, at)
        metadata = value[at : at + length - 1].decode() if length else ""
    else:
        metadata, at = _string(value, at)
    return group, topic, partition, offset, metadata.rstrip("\x00")  # librdkafka sends the C string's NUL


def _read_to_end(
    consumer: Consumer, topic: str, partitions: set[int], handle, bound_s: float = 120
) -> set[int]:
    """Hand every record of ``partitions`` (from the start to the end seen at EOF) to ``handle``;
    other errors are skipped. Returns the partitions not read to the end within ``bound_s``."""
    pending = set(partitions)
    consumer.assign([TopicPartition(topic, p, -2) for p in pending])
    deadline = time.monotonic() + bound_s
    while pending and time.monotonic() < deadline:
        message = consumer.poll(0.5)
        if message is None:
            continue
        if message.error():
            if message.error().code() == KafkaError._PARTITION_EOF:
                pending.discard(message.partition())
            continue
        handle(message)
    return pending


def commit_history(bootstrap: str, group: str, topic: str) -> dict[int, list[Commit]]:
    """Every commit of ``group`` on ``topic`` the broker accepted, per partition, in log order."""
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"torture-checker-{uuid.uuid4().hex[:6]}",
            "enable.auto.commit": False,
            "enable.partition.eof": True,
            "isolation.level": "read_committed",
        }
    )
    history: dict[int, list[Commit]] = defaultdict(list)
    try:
        meta = consumer.list_topics("__consumer_offsets", timeout=10).topics["__consumer_offsets"]

        def keep(message) -> None:
            decoded = decode_offset_commit(message.key(), message.value())
            if decoded and decoded[0] == group and decoded[1] == topic:
                stamp = message.timestamp()[1] / 1000
                history[decoded[2]].append(Commit(decoded[2], decoded[3], decode_mark(decoded[4]), stamp))

        pending = _read_to_end(consumer, "__consumer_offsets", set(meta.partitions), keep)
        assert not pending, "reading __consumer_offsets did not finish"
    finally:
        consumer.close()
    return dict(history)


def read_outputs(bootstrap: str, topic: str, partitions: int) -> Counter:
    """How often each ``(partition, offset)`` appears on the output topic (committed records only)."""
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"torture-outputs-{uuid.uuid4().hex[:6]}",
            "enable.partition.eof": True,
            "isolation.level": "read_committed",
        }
    )
    seen: Counter = Counter()
    try:

        def count(message) -> None:
            p, o = message.value().decode().split(":")
            seen[(int(p), int(o))] += 1

        _read_to_end(consumer, topic, set(range(partitions)), count)
    finally:
        consumer.close()
    return seen


# -- the broker's own recovery after a restart -------------------------------------------------------


def _java_hash(text: str) -> int:
    """Java's ``String.hashCode`` (ASCII ids): Kafka maps a transactional.id to a partition by it."""
    h = 0
    for char in text:
        h = (31 * h + ord(char)) & 0xFFFFFFFF
    return h - (1 << 32) if h >= 1 << 31 else h


def transaction_partition(transactional_id: str, partitions: int) -> int:
    """The ``__transaction_state`` partition whose coordinator serves ``transactional_id``
    (Kafka's TransactionStateManager.partitionFor: abs(hashCode) % partitions, abs(MIN) = 0)."""
    h = _java_hash(transactional_id)
    return (0 if h == -(1 << 31) else abs(h)) % partitions


def transaction_coordinators_answer(
    bootstrap: str, state_dir: Path, group: str, topic: str, partitions: int, bound_s: float = 90
) -> dict[int, float]:
    """Per partition of ``topic``: when the coordinator of its claims' transactional.id answered.

    One probe producer per coordinator involved (a transactional.id of its own that maps to the
    same ``__transaction_state`` partition, so no worker is fenced), ``init_transactions`` until
    it succeeds: a fresh producer, so the time is the broker's, not a client's reconnect backoff.
    """
    count = 50  # Kafka's default transaction.state.log.num.partitions
    for line in (state_dir / "server.properties").read_text().splitlines():
        if line.startswith("transaction.state.log.num.partitions="):
            count = int(line.split("=", 1)[1])
    wanted = {
        p: transaction_partition(fencing.transactional_id(group, topic, p), count) for p in range(partitions)
    }
    probes: dict[int, str] = {}
    n = 0
    while len(probes) < len(set(wanted.values())):
        probe = f"torture-probe.{group}.{n}"
        probes.setdefault(transaction_partition(probe, count), probe)
        n += 1
    answered: dict[int, float] = {}

    def probe_one(state_partition: int) -> None:
        deadline = time.monotonic() + bound_s
        while time.monotonic() < deadline:
            producer = Producer({"bootstrap.servers": bootstrap, "transactional.id": probes[state_partition]})
            try:
                producer.init_transactions(5)
                answered[state_partition] = time.time()
                return
            except KafkaException:
                time.sleep(0.2)
            finally:
                producer.flush(0)

    threads = [threading.Thread(target=probe_one, args=(q,), daemon=True) for q in set(wanted.values())]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(bound_s + 10)
    return {p: answered.get(q, time.time()) for p, q in wanted.items()}


# -- the run ------------------------------------------------------------------------------------------


@dataclass
class Config:
    name: str
    fenced: bool
    duration: float
    workers: int = 4
    partitions: int = 12
    rate: float = 500.0
    takeover_timeout: float = 3.0
    plan_every: tuple[float, float] = (2.0, 5.0)
    burst_probability: float = 0.2  # a second epoch a few ms after the first
    pause_every: tuple[float, float] = (2.0, 6.0)
    pause_seconds: tuple[float, float] = (0.5, 10.0)
    self_pause: float = 0.01
    first_self_pause: int = 0  # the n-th read-then-write point of each worker run stops for sure
    kill_every: tuple[float, float] = (15.0, 30.0)
    #: share of kills placed inside a transaction: the worker dies between
    #: send_offsets_to_transaction and commit_transaction, leaving the transaction open
    in_transaction_kills: float = 0.5
    #: the workers' transaction.timeout.ms in seconds; None: the helper's default (60 s), which a
    #: transaction left open by a dead member lasts unless its successor's fence aborts it
    transaction_timeout: float | None = None
    broker_restart_every: float | None = None
    first_broker_restart: float | None = None  # seconds into the run (default: broker_restart_every)
    commit_interval: float = 0.1
    #: seconds after the first plan during which handovers do not count as normal for the pause
    #: percentiles: the workers are still starting (interpreter, consumer, transaction probe), so
    #: the epochs of those seconds meet members that cannot act yet. Only the pause statistics
    #: leave them out (the result says how many); lost, duplicates, regressions count the whole run.
    warmup: float = 10.0
    #: up to this many seconds more of faults when, after ``duration``, some kind has not run yet
    #: (an aimed pause, a pause longer than the takeover timeout, a kill, 5 plans): on a loaded
    #: machine the workers reach their read-then-write points late
    fault_grace: float = 0.0


@dataclass
class Events:
    """What the controller and the nemesis did, with times, for the checker."""

    publishes: list[tuple[float, int, dict]] = field(default_factory=list)
    pauses: list[tuple[float, float, str, str]] = field(default_factory=list)  # start, end, member, kind
    kills: list[tuple[float, str, str]] = field(default_factory=list)  # time, member, killed run
    kills_in_transaction: list[tuple[float, str, str]] = field(default_factory=list)  # among kills
    broker_restarts: list[tuple[float, float]] = field(
        default_factory=list
    )  # start, group coordinator answered
    #: str(partition) -> (restart start, when the transaction coordinator of its claims'
    #: transactional.id answered again): the broker's own recovery, measured (transaction_probe)
    coordinators: dict[str, list[tuple[float, float]]] = field(default_factory=dict)


class Run:
    def __init__(self, config: Config, bootstrap: str, broker: OwnBroker | None, work_dir: Path) -> None:
        self.config, self.bootstrap, self.broker, self.work_dir = config, bootstrap, broker, work_dir
        self.group = f"torture-{uuid.uuid4().hex[:8]}"
        self.assignments = f"{self.group}-assignments"
        self.members = [f"w{i}" for i in range(config.workers)]
        admin = AdminClient({"bootstrap.servers": bootstrap})
        self.topic = f"{self.group}-in"
        self.output = f"{self.group}-out" if config.fenced else None
        topics = [NewTopic(self.topic, config.partitions, 1)]
        if self.output:
            topics.append(NewTopic(self.output, config.partitions, 1))
        for future in admin.create_topics(topics).values():
            future.result(30)
        self.events = Events()
        self.workers: dict[str, list[h.Worker]] = defaultdict(list)
        self.halt = threading.Event()
        self.random = random.Random()
        self.epoch = 0
        self.lock = threading.Lock()
        #: repeats no fault explains (``normal_handover``), described with the events around them
        self.unexplained: list[str] = []

    # controller
    def publish_random(self) -> None:
        shuffled = list(range(self.config.partitions))
        self.random.shuffle(shuffled)
        plan: dict[str, list[int]] = {m: [] for m in self.members}
        for i, p in enumerate(shuffled):
            plan[self.members[i % len(self.members)]].append(p)
        self.epoch += 1
        members = {m: [(self.topic, p) for p in parts] for m, parts in plan.items()}
        for attempt in range(30):
            try:
                result = publish_assignments(
                    {"bootstrap.servers": self.bootstrap}, self.group, f"plan-{self.epoch}", members,
                    topic=self.assignments, timeout=10,
                )  # fmt: skip
                break
            except Exception:  # noqa: BLE001 - broker restarting: retry
                if attempt == 29:
                    raise
                time.sleep(1)
        self.events.publishes.append((time.time(), result.epoch, plan))

    def controller(self) -> None:
        while not self.halt.wait(self.random.uniform(*self.config.plan_every)):
            self.publish_random()
            if self.random.random() < self.config.burst_probability:
                time.sleep(self.random.uniform(0.002, 0.02))
                self.publish_random()

    # workers
    def start_worker(self, member: str) -> None:
        extra = [
            "--commit-interval",
            str(self.config.commit_interval),
            "--self-pause",
            str(self.config.self_pause),
            "--first-self-pause",
            str(self.config.first_self_pause),
        ]
        extra += ["--ready-timeout", "120"]  # a worker restarted while the broker restarts waits for it
        if self.config.transaction_timeout is not None:
            extra += ["--transaction-timeout", str(self.config.transaction_timeout)]
        if not self.config.fenced:
            extra.append("--unfenced")
        if self.output:
            extra += ["--output-topic", self.output]
        n = len(self.workers[member])
        out = self.work_dir / f"{member}.{n}.processed"
        worker = h.start_worker(
            self.bootstrap, self.group, member, self.assignments, out, self.config.takeover_timeout, *extra
        )
        self.workers[member].append(worker)

    def current(self, member: str) -> h.Worker:
        return self.workers[member][-1]

    # nemesis
    def nemesis(self) -> None:
        cfg = self.config
        next_pause = time.monotonic() + self.random.uniform(*cfg.pause_every)
        next_kill = time.monotonic() + self.random.uniform(*cfg.kill_every)
        first_restart = cfg.first_broker_restart or cfg.broker_restart_every
        next_restart = time.monotonic() + first_restart if cfg.broker_restart_every else None
        resume: dict[str, tuple[float, float, str]] = {}  # member -> (continue at, stopped at, kind)
        restarting = threading.Thread()
        while not self.halt.wait(0.05):
            now = time.monotonic()
            for member in self.members:  # workers that stopped themselves between read and write
                worker = self.current(member)
                if member not in resume and _stopped(worker.process.pid):
                    seconds = self.random.uniform(*cfg.pause_seconds)
                    resume[member] = (now + seconds, time.time(), "aimed")
            for member, (at, started, kind) in list(resume.items()):
                if now >= at:
                    self.current(member).signal(signal.SIGCONT)
                    self.events.pauses.append((started, time.time(), member, kind))
                    del resume[member]
            if now >= next_pause:
                member = self.random.choice(self.members)
                if member not in resume:
                    self.current(member).signal(signal.SIGSTOP)
                    resume[member] = (now + self.random.uniform(*cfg.pause_seconds), time.time(), "random")
                next_pause = now + self.random.uniform(*cfg.pause_every)
            if now >= next_kill:
                member = self.random.choice([m for m in self.members if m not in resume] or self.members)
                resume.pop(member, None)
                victim = self.current(member)
                self.kill(victim, inside=self.random.random() < cfg.in_transaction_kills)
                time.sleep(self.random.uniform(0.5, 2.0))
                self.start_worker(member)
                next_kill = time.monotonic() + self.random.uniform(*cfg.kill_every)
            if next_restart and now >= next_restart and self.broker and not restarting.is_alive():
                restarting = threading.Thread(target=self.restart_broker, daemon=True)
                restarting.start()  # the nemesis goes on continuing paused workers meanwhile
                next_restart = time.monotonic() + cfg.broker_restart_every
        for member, (_, started, kind) in resume.items():  # pauses still running at the end count too
            self.current(member).signal(signal.SIGCONT)
            self.events.pauses.append((started, time.time(), member, kind))
        if restarting.is_alive():
            restarting.join(120)

    def kill(self, victim: h.Worker, inside: bool) -> None:
        """SIGKILL a worker; ``inside``: arm it (SIGUSR2) to die at its next commit_transaction,
        offsets sent and not committed, and kill it plainly if it commits nothing within 10 s."""
        armed_at = time.time()
        if inside:
            victim.signal(signal.SIGUSR2)
            victim.signal(signal.SIGCONT)  # one stopped by the nemesis must run to get there
            with contextlib.suppress(subprocess.TimeoutExpired):
                victim.process.wait(10)
            inside = victim.process.poll() is not None and "dying in a transaction" in victim.log()
        victim.signal(signal.SIGKILL)
        victim.process.wait(10)
        self.events.kills.append((armed_at if inside else time.time(), victim.member, victim.out.name))
        if inside:
            self.events.kills_in_transaction.append(self.events.kills[-1])

    def restart_broker(self) -> None:
        """Restart the broker; the restart ends when the group's coordinator answers again, and
        for each partition (fenced) when the transaction coordinator of its claims answers too
        (both measured from the moment the broker answers metadata again).

        The broker answers metadata seconds before its coordinators have loaded their state:
        handovers in between are slowed by the restart, not by the helper.
        """
        started = time.time()
        self.broker.restart(down_for=self.random.uniform(0.5, 3.0))
        answered: dict[int, float] = {}
        probes = threading.Thread(
            target=lambda: answered.update(
                transaction_coordinators_answer(
                    self.bootstrap, self.broker.state_dir, self.group, self.topic, self.config.partitions
                )
            ),
            daemon=True,
        )
        if self.config.fenced:
            probes.start()
        consumer = Consumer(  # read_uncommitted: answered whether or not a transaction is open
            {
                "bootstrap.servers": self.bootstrap,
                "group.id": self.group,
                "isolation.level": "read_uncommitted",
            }
        )
        try:
            deadline = time.monotonic() + 90
            while time.monotonic() < deadline:
                try:
                    consumer.committed([TopicPartition(self.topic, 0)], timeout=5)
                    break
                except KafkaException:
                    time.sleep(0.2)
        finally:
            consumer.close()
        self.events.broker_restarts.append((started, time.time()))
        if self.config.fenced:
            probes.join(100)
            for p, at in answered.items():
                self.events.coordinators.setdefault(str(p), []).append((started, at))

    def _timelines(self) -> dict[str, list[tuple[float, int]]]:
        """Per instance: (time, epoch) of every epoch it applied, from its log."""
        if getattr(self, "_timeline_cache", None) is None:
            applied = re.compile(r"^(\d+\.\d+) \w+ \S+: epoch \d+ -> (\d+)")
            cache: dict[str, list[tuple[float, int]]] = {}
            for worker in self.all_workers():
                first = worker.lines()[:1]
                if first:
                    cache[first[0].instance] = [
                        (float(m.group(1)), int(m.group(2)))
                        for m in map(applied.match, worker.log().splitlines())
                        if m
                    ]
            self._timeline_cache = cache
        return self._timeline_cache

    def _latest_epoch(self, commit: Commit) -> int | None:
        timeline = self._timelines().get(commit.mark.instance)
        if not timeline:
            return None
        known = [epoch for at, epoch in timeline if at <= commit.at + 0.01]
        return max(known) if known else None

    def _plan(self, epoch: int) -> dict[str, list[int]] | None:
        return next((plan for _, e, plan in self.events.publishes if e == epoch), None)

    def latest_gives(self, commit: Commit) -> bool:
        """Did the writer's latest applied epoch (when it committed) give it the partition?"""
        latest = commit.mark.seen if commit.mark.seen is not None else self._latest_epoch(commit)
        plan = self._plan(latest) if latest is not None else None
        return plan is None or commit.partition in plan.get(commit.mark.member, [])

    def skipped_epochs(self, commit: Commit) -> bool:
        """Had the partition left the writer in an epoch between its claim and its latest one?

        A release is written because its latest epoch took the partition away: only the epochs
        before that one count (the flaw: owned at 4, moved at 5, "released at 6").
        """
        latest = commit.mark.seen if commit.mark.seen is not None else self._latest_epoch(commit)
        if latest is None:
            return False
        if commit.mark.state == RELEASED:
            latest -= 1
        for epoch in range(commit.mark.epoch + 1, latest + 1):
            plan = self._plan(epoch)
            if plan is not None and commit.partition not in plan.get(commit.mark.member, []):
                return True
        return False

    def every_fault_ran(self) -> bool:
        """Has each kind of fault happened at least once (an aimed pause, a pause longer than the
        takeover timeout, a kill) under at least 5 plans?"""
        pauses = list(self.events.pauses)
        return (
            any(kind == "aimed" for *_, kind in pauses)
            and any(e - s > self.config.takeover_timeout for s, e, _, _ in pauses)
            and bool(self.events.kills)
            and len(self.events.publishes) >= 5
        )

    def resume_all(self, settled: threading.Event) -> None:
        while not settled.wait(0.05):
            for member in self.members:
                self.current(member).signal(signal.SIGCONT)

    def all_workers(self) -> list[h.Worker]:
        return [w for ws in self.workers.values() for w in ws]

    def execute(self) -> dict:
        cfg = self.config
        self.publish_random()
        for member in self.members:
            self.start_worker(member)
        producer = h.SteadyProducer(self.bootstrap, self.topic, cfg.partitions, rate=cfg.rate)
        producer.start()
        threads = [
            threading.Thread(target=self.controller, daemon=True),
            threading.Thread(target=self.nemesis, daemon=True),
        ]
        started = time.time()
        for thread in threads:
            thread.start()
        try:
            time.sleep(cfg.duration)
            grace_end = time.monotonic() + cfg.fault_grace
            while not self.every_fault_ran() and time.monotonic() < grace_end:
                time.sleep(0.5)
        except BaseException:
            self.halt.set()
            producer.halt.set()
            for worker in self.all_workers():
                worker.stop(5)
            raise
        finally:
            self.halt.set()
            for thread in threads:
                thread.join(120)
        faults_end = time.time()
        # Workers still stop themselves between read and write: from here on, continue them at once.
        settled = threading.Event()
        resumer = threading.Thread(target=self.resume_all, args=(settled,), daemon=True)
        resumer.start()
        for member in self.members:  # a worker that died on its own (not by the nemesis) comes back
            if self.current(member).process.poll() is not None:
                self.start_worker(member)
        self.publish_random()  # a last plan, then quiet: every partition settles
        producer.finish()
        ends = h.end_offsets(self.bootstrap, self.topic, cfg.partitions)
        deadline = time.monotonic() + max(180.0, 6 * cfg.takeover_timeout)  # a loaded machine is slow
        while time.monotonic() < deadline and h.coverage(self.all_workers(), ends)[0]:
            time.sleep(0.5)
        time.sleep(2 * cfg.commit_interval + 1)
        settled.set()
        resumer.join(5)
        codes = {f"{w.member}:{w.out.name}": w.stop() for w in self.all_workers() if w.process.poll() is None}
        (self.work_dir / "events.json").write_text(json.dumps(asdict(self.events)))  # for a look later
        return self.check(ends, started, faults_end, producer.sent, codes)

    # checker
    def check(self, ends: dict[int, int], started: float, faults_end: float, sent: int, codes: dict) -> dict:
        cfg = self.config
        lines = h.processed(self.all_workers())
        missing, seen = h.coverage(self.all_workers(), ends)
        history = commit_history(self.bootstrap, self.group, self.topic)
        regressions, superseded, fenced_accepted, not_given = [], [], [], []
        for p, commits in history.items():
            best_epoch: dict[tuple[str, str], int] = {}
            max_producer = None
            for before, after in zip(commits, commits[1:], strict=False):
                if after.offset < before.offset:
                    regressions.append(f"partition {p}: {before.offset} -> {after.offset} by {after.mark}")
            top = (-1, None)
            for commit in commits:
                mark = commit.mark
                if mark is None:
                    continue
                writer = (mark.member, mark.instance)
                if mark.epoch < top[0] and top[1] != writer:
                    cause = "skipped_epochs" if self.skipped_epochs(commit) else "stale_read"
                    superseded.append((cause, f"partition {p}: {mark} after {top}"))
                if mark.state == OWNED and not self.latest_gives(commit):
                    not_given.append(f"partition {p}: {mark}")
                if mark.epoch > top[0] or (mark.epoch == top[0] and top[1] != writer):
                    top = (mark.epoch, writer)
                best_epoch[writer] = mark.epoch
                if mark.producer is not None:
                    if max_producer is not None and mark.producer < max_producer:
                        fenced_accepted.append(f"partition {p}: {mark} after producer {max_producer}")
                    max_producer = max(max_producer or mark.producer, mark.producer)
        final_committed = {p: (commits[-1].offset if commits else None) for p, commits in history.items()}
        runs = self.run_logs()
        rightful = live.rightful_fences(runs)
        fenced_owners = live.owners_fenced_while_rightful(runs, self.events.publishes)
        duplicates = self.classify_duplicates(lines, seen, rightful)
        handovers = self.handovers(lines)
        outputs = read_outputs(self.bootstrap, self.output, cfg.partitions) if self.output else None
        result = {
            "configuration": cfg.name,
            "mode": "fenced" if cfg.fenced else "unfenced",
            "seconds_of_faults": round(faults_end - started, 1),
            "workers": cfg.workers,
            "partitions": cfg.partitions,
            "rate_per_s": cfg.rate,
            "takeover_timeout_s": cfg.takeover_timeout,
            "produced": sum(ends.values()),  # the producer's retries across broker restarts included
            "processed_unique": len(seen),
            "processed_total": sum(seen.values()),
            "lost": len(missing),
            "duplicates": duplicates,
            "committed_offset_regressions": len(regressions),
            "commits_from_superseded_owners": len(superseded),
            "superseded_by_cause": dict(Counter(cause for cause, _ in superseded)),
            "owned_commits_not_in_writers_latest_epoch": len(not_given),
            "commits_accepted_from_fenced_members": len(fenced_accepted) if cfg.fenced else None,
            "final_commit_below_end": sum(
                1 for p, end in ends.items() if (final_committed.get(p) or 0) < end
            ),
            "commits_in_history": sum(len(c) for c in history.values()),
            "publishes": len(self.events.publishes),
            "pauses": len(self.events.pauses),
            "pauses_longer_than_timeout": sum(
                1 for s, e, _, _ in self.events.pauses if e - s > cfg.takeover_timeout
            ),
            "aimed_pauses": sum(1 for *_, kind in self.events.pauses if kind == "aimed"),
            "kills": len(self.events.kills),
            "kills_in_transaction": len(self.events.kills_in_transaction),
            "transaction_timeout_s": cfg.transaction_timeout or 60.0,
            "broker_restarts": len(self.events.broker_restarts),
            **handovers,
            **self.liveness(lines, runs, rightful, fenced_owners, {p for p, _ in missing}),
            "worker_exit_codes": codes,
            "examples": {
                "regressions": regressions[:5],
                "superseded": [text for _, text in superseded[:5]],
                "not_given": not_given[:5],
                "fenced": fenced_accepted[:5],
                "fences_of_rightful_owners": [live.describe(*pair) for pair in rightful[:5]],
                "owners_fenced_while_rightful": [live.describe_fenced_owner(o) for o in fenced_owners[:8]],
                "normal_handover_duplicates": self.unexplained,
            },
        }
        if outputs is not None:
            result["output_duplicates"] = sum(c - 1 for c in outputs.values() if c > 1)
            result["outputs_lost"] = sum(
                1 for p, end in ends.items() for o in range(end) if (p, o) not in outputs
            )
        return result

    def run_logs(self) -> list[live.RunLog]:
        """Each worker run's claims, fences and holdings, from its helper log."""
        runs = []
        for worker in self.all_workers():
            killed = [t for t, _, run in self.events.kills if run == worker.out.name]
            end = killed[0] if killed else time.time()
            runs.append(live.parse_run(worker.out.name, worker.member, worker.log(), self.topic, end))
        return runs

    def liveness(
        self,
        lines: list[h.Processed],
        runs: list[live.RunLog],
        rightful: list,
        fenced_owners: list[live.FencedOwner],
        unfinished: set[int],
    ) -> dict:
        """Stalls (unprocessed with a live owner; ``unfinished`` partitions until now), fences of
        rightful owners, fences at old epochs."""
        down = live.member_downtime(runs, self.events.pauses, self.events.kills, time.time())
        every, per_partition = live.broker_downtime(self.events.broker_restarts, self.events.coordinators)
        liveness = live.Liveness(self.events.publishes, down, every, per_partition)
        processed: dict[int, list[float]] = defaultdict(list)
        for line in lines:
            processed[line.partition].append(line.at)
        since = self.events.publishes[0][0] + self.config.warmup if self.events.publishes else 0.0
        budget = self.config.takeover_timeout + 5.0
        measured = live.stalls(processed, liveness, since, budget, dict.fromkeys(unfinished, time.time()))
        return {
            **measured,
            "stall_windows": self.explain_stalls(measured.pop("stall_windows")),
            "fences_of_rightful_owners": len(rightful),
            "owners_fenced_while_rightful": len(fenced_owners),
            "owners_fenced_by_unlogged_fences": sum(1 for o in fenced_owners if o.fencer is None),
            "fences_at_an_older_epoch": live.moved_on_fences(runs, self.events.publishes),
            "fences": sum(len(run.fences) for run in runs),
        }

    def explain_stalls(self, windows: list[live.Stall]) -> list[str]:
        """Each stall over budget: its timeline into stalls.txt, a line with its causes for the result."""
        logs = {worker.out.name: worker.log() for worker in self.all_workers()}
        explained, summary = [], []
        for stall in windows:
            lines = stalls.explain(stall, self.topic, self.events, logs)
            tags = stalls.causes(stall, self.topic, self.events, logs)
            explained.append([lines[0], f"  causes: {', '.join(tags) or 'none recognised'}", *lines[1:]])
            summary.append(f"{lines[0]}: {', '.join(tags) or 'none recognised'}")
        stalls.write(self.work_dir / "stalls.txt", explained)
        return summary

    def _log_events(
        self,
    ) -> tuple[list[tuple[float, str, int]], dict[str, list[tuple[float, str, int | None]]]]:
        """(takeovers: time, member, partition), and per worker run its fault events from its log.

        Events: ``fenced`` (the broker or a newer mark refused it), ``abort`` (a transaction or a
        release failed and was redone from the last commit), ``end`` (its last line: a crash when
        it never logged ``closed``).
        """
        takeovers, per_run = [], {}
        topic = re.escape(self.topic)
        taking = re.compile(rf"^(\d+\.\d+) \w+ (\S+): taking over {topic}-(\d+)")
        lost = re.compile(rf"^(\d+\.\d+) \w+ \S+: (fenced on|not committing) {topic}-(\d+)")
        dropped = re.compile(rf"^(\d+\.\d+) \w+ \S+: {topic}-(\d+) was taken by")
        gap = re.compile(r"^(\d+\.\d+) \w+ \S+: (\d+\.\d+) s since the last call")
        aborted = re.compile(
            rf"^(\d+\.\d+) \w+ \S+: (?:commit|begin|produce) of {topic}-(\d+) (?:failed .*aborting|is stuck)"
        )
        for worker in self.all_workers():
            events: list[tuple[float, str, int | None]] = []
            log_lines = worker.log().splitlines()
            for line in log_lines:
                if found := taking.match(line):
                    takeovers.append((float(found.group(1)), found.group(2), int(found.group(3))))
                if found := lost.match(line):
                    events.append((float(found.group(1)), "fenced", int(found.group(3))))
                if found := dropped.match(line):
                    events.append((float(found.group(1)), "fenced", int(found.group(2))))
                if found := aborted.match(line):
                    events.append((float(found.group(1)), "abort", int(found.group(2))))
                if found := gap.match(line):  # resumed after a pause: -(its length) in place of a partition
                    events.append((float(found.group(1)), "gap", -float(found.group(2))))
            if not any(line.endswith(" closed") for line in log_lines):
                events.append((self._end_of_run(worker, log_lines), "end", None))
            per_run[worker.out.name] = events
        return takeovers, per_run

    def _end_of_run(self, worker: h.Worker, log_lines: list[str]) -> float:
        """When a run that never closed ended: its kill, else the last line of either of its logs.

        Not the last line of the helper's log alone: a killed worker goes on processing (and
        writing its processing log) for seconds after its helper last logged anything, and the
        records it processed but never committed are redone by the next owner.
        """
        killed = [t for t, _, run in self.events.kills if run == worker.out.name]
        if killed:
            return killed[0]
        stamps = [float(line.split()[0]) for line in log_lines if re.match(r"^\d+\.\d+ ", line)]
        stamps += [item.at for item in worker.lines()[-1:]]
        return max(stamps, default=0.0)

    def classify_duplicates(
        self, lines: list[h.Processed], seen: Counter, rightful: list | None = None
    ) -> dict[str, int]:
        """Each repeat of a processed record, by what happened to its first processor in between.

        ``same_instance_redo`` (its own transaction aborted, rewound), ``after_stale_fence`` (fenced
        by a claim of an older epoch than its own: torture_liveness.rightful_fences),
        ``after_fenced`` (taken over while paused or slow; its commit was refused), ``after_aborted_transaction`` (its last
        transaction failed, the next owner redid it), ``after_crash`` (killed before committing),
        ``after_takeover`` (the next owner took over: the first was paused, its own log is silent),
        ``normal_handover`` (none of these: a bug).
        """
        takeovers, per_run = self._log_events()
        run_of = {item.instance: w.out.name for w in self.all_workers() for item in w.lines()[:1]}
        by_pair: dict[tuple[int, int], list[h.Processed]] = defaultdict(list)
        for line in lines:
            if seen[(line.partition, line.offset)] > 1:
                by_pair[(line.partition, line.offset)].append(line)
        causes: Counter = Counter()
        for (p, _), items in by_pair.items():
            items.sort(key=lambda x: x.at)
            for first, again in zip(items, items[1:], strict=False):
                if first.instance == again.instance:
                    causes["same_instance_redo"] += 1
                    continue
                events = [
                    kind
                    for t, kind, q in per_run.get(run_of.get(first.instance, ""), [])
                    if first.at - 0.5 <= t <= again.at and q in (p, None)
                ]
                if "fenced" in events and any(
                    held.run == run_of.get(first.instance) and fence.partition == p
                    and first.at - 0.5 <= fence.at <= again.at
                    for fence, held in rightful or []
                ):  # fmt: skip
                    causes["after_stale_fence"] += 1
                elif "fenced" in events:
                    causes["after_fenced"] += 1
                elif "abort" in events:
                    causes["after_aborted_transaction"] += 1
                elif "end" in events:
                    causes["after_crash"] += 1
                elif any(first.at - 0.5 <= t <= again.at and q == p for t, _, q in takeovers):
                    causes["after_takeover"] += 1  # the first was paused (SIGSTOP): its log is silent
                elif self._zombie_record(
                    again, p, per_run.get(run_of.get(again.instance, ""), []), takeovers
                ):
                    causes["after_takeover"] += 1  # the second had it before a pause, the first took over
                else:
                    causes["normal_handover"] += 1
                    if len(self.unexplained) < 5:
                        self.unexplained.append(
                            self._describe_repeat(first, again, per_run, takeovers, run_of)
                        )
        return dict(causes)

    @staticmethod
    def _describe_repeat(
        first: h.Processed, again: h.Processed, per_run: dict, takeovers: list, run_of: dict
    ) -> str:
        """One repeat no fault explains, with the logged events around it (a failure shows its cause)."""
        p = first.partition

        def near(t: float) -> bool:
            return first.at - 10.0 <= t <= again.at + 2.0

        def seen(item: h.Processed) -> str:
            return f"{item.member} ({run_of.get(item.instance, '?')}, epoch {item.epoch}) at {item.at:.3f}"

        events = {
            run: [
                (round(t, 3), kind, q)
                for t, kind, q in per_run.get(run, [])
                if near(t) and (q in (p, None) or kind == "gap")
            ]
            for run in {run_of.get(first.instance, ""), run_of.get(again.instance, "")}
        }
        taken = [(round(t, 3), who) for t, who, q in takeovers if q == p and near(t)]
        return f"partition {p} offset {first.offset}: {seen(first)}, again by {seen(again)}; events {events}; takeovers {taken}"

    def _moved_at(self, before: h.Processed) -> float | None:
        """When the plan first took ``before``'s partition from its member after the epoch it ran under."""
        for at, epoch, plan in self.events.publishes:
            if epoch > before.epoch and before.partition not in plan.get(before.member, []):
                return at
        return None

    @staticmethod
    def _zombie_record(again: h.Processed, p: int, events: list, takeovers: list) -> bool:
        """Was ``again`` handed out before a pause during which another member took ``p`` over?

        A worker stopped between ``poll()`` returning a record and its processing writes the
        line when it resumes, after the new owner processed the record too; its helper logs the
        pause ("N s since the last call") at its next call.
        """
        return any(
            kind == "gap"
            and again.at - 0.1 <= t <= again.at + 1.0
            and any(t + value <= when <= t and q == p for when, _, q in takeovers)
            for t, kind, value in events
        )

    def handovers(self, lines: list[h.Processed]) -> dict:
        """Owner changes per partition; the pause of normal handovers (no fault within 2 s).

        Normal handovers that started in the first ``Config.warmup`` seconds are counted apart
        (``normal_handovers_in_warmup``) and left out of the pause percentiles.

        The pause of a handover is from the later of the old owner's last record and the publish
        of the epoch that moved the partition, to the new owner's first record: the time the
        partition was not consumed because it moved. ``owner_gap`` (old owner's last record to
        the new one's first) also counts time the old owner had not consumed it before the move.
        """
        takeovers, per_run = self._log_events()
        run_of = {item.instance: w.out.name for w in self.all_workers() for item in w.lines()[:1]}
        restarts = self.events.broker_restarts
        warm_until = self.events.publishes[0][0] + self.config.warmup if self.events.publishes else 0.0
        last: dict[int, h.Processed] = {}
        gaps, pauses, changes, slow, in_warmup = [], [], 0, [], 0
        for line in sorted(lines, key=lambda x: x.at):
            before = last.get(line.partition)
            if before is not None and before.instance != line.instance:
                changes += 1
                window = (before.at - 2, line.at)
                # and whoever the plans gave the partition to in between (paused, it never consumed)
                involved = {before.member, line.member} | {
                    m
                    for at, epoch, plan in self.events.publishes
                    if epoch > before.epoch and at <= line.at
                    for m, parts in plan.items()
                    if line.partition in parts
                }
                faulty = (
                    any(
                        m in involved and s <= window[1] and e >= window[0]
                        for s, e, m, _ in self.events.pauses
                    )
                    or any(m in involved and window[0] <= t <= window[1] for t, m, _ in self.events.kills)
                    or any(q == line.partition and window[0] <= t <= window[1] for t, _, q in takeovers)
                    or any(s <= window[1] and e >= window[0] for s, e in restarts)
                    or any(  # a fault event in either owner's log (fenced, aborted, crashed, paused)
                        window[0] <= t <= window[1] + 1 and q in (line.partition, None)
                        for run in {before.instance, line.instance}
                        for t, _, q in per_run.get(run_of.get(run, ""), [])
                    )
                )
                moved = self._moved_at(before) or before.at
                if not faulty and max(before.at, moved) < warm_until:
                    in_warmup += 1
                elif not faulty:
                    gaps.append(line.at - before.at)
                    pauses.append(line.at - max(before.at, moved))
                    if pauses[-1] > 1.0:  # to look up in the workers' logs (the p99 target is 1 s)
                        slow.append(
                            (
                                round(pauses[-1], 3),
                                f"partition {line.partition}: {before.member} ({before.instance}) last "
                                f"{before.at:.3f} -> {line.member} ({line.instance}) first {line.at:.3f}",
                            )
                        )
            last[line.partition] = line

        def pct(values: list[float], q: float) -> float | None:
            values = sorted(values)
            return round(values[min(len(values) - 1, int(q * len(values)))], 3) if values else None

        return {
            "owner_changes": changes,
            "normal_handovers": len(gaps),
            "normal_handovers_in_warmup": in_warmup,  # left out of the pause percentiles
            "warmup_s": self.config.warmup,
            "takeovers": len(takeovers),
            "handover_pause_p50_s": pct(pauses, 0.5),
            "handover_pause_p99_s": pct(pauses, 0.99),
            "handover_pause_max_s": pct(pauses, 1.0),
            "owner_gap_p50_s": pct(gaps, 0.5),
            "owner_gap_p99_s": pct(gaps, 0.99),
            "slow_normal_handovers": [text for _, text in sorted(slow, reverse=True)[:5]],
        }


def _stopped(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as stat:
            return stat.read().rsplit(")", 1)[1].split()[0] == "T"
    except OSError:
        return False


def load() -> str:
    return os.getloadavg().__repr__()
