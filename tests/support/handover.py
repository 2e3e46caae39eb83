"""Test harness for handover tests: worker processes, a steady producer, a committed-offset watcher."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
import uuid
from collections import Counter, defaultdict
from dataclasses import dataclass
from pathlib import Path

from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic
from rebalance_advisor_client.handover_rules import OwnerMark, decode_mark

ROOT = Path(__file__).resolve().parents[2]


@dataclass(frozen=True)
class Processed:
    at: float
    member: str
    epoch: int
    partition: int
    offset: int
    instance: str = ""
    producer: tuple[int, int] | None = None


@dataclass
class Worker:
    """One ``tests.support.assigned_worker`` process in its own process group."""

    member: str
    out: Path
    process: subprocess.Popen

    def lines(self) -> list[Processed]:
        if not self.out.exists():
            return []
        result = []
        for line in self.out.read_text().splitlines():
            parts = line.split()
            if len(parts) == 9:  # a SIGKILL can cut the last line short
                producer = None if parts[7] == "-" else (int(parts[7]), int(parts[8]))
                result.append(
                    Processed(
                        float(parts[0]),
                        parts[1],
                        int(parts[3]),
                        int(parts[5]),
                        int(parts[6]),
                        parts[2],
                        producer,
                    )
                )
        return result

    def log(self) -> str:
        path = Path(str(self.out) + ".log")
        return path.read_text() if path.exists() else ""

    def signal(self, sig: int) -> None:
        if self.process.poll() is None:
            os.killpg(self.process.pid, sig)

    def stop(self, timeout: float = 15.0) -> int | None:
        self.signal(signal.SIGCONT)
        self.signal(signal.SIGTERM)
        try:
            return self.process.wait(timeout)
        except subprocess.TimeoutExpired:
            self.signal(signal.SIGUSR1)  # the worker writes its threads' stacks to OUT.stacks
            time.sleep(1)
            self.signal(signal.SIGKILL)
            self.process.wait(5)
            return None


def start_worker(
    bootstrap: str,
    group: str,
    member: str,
    assignments_topic: str,
    out: Path,
    takeover_timeout: float,
    *extra: str,
) -> Worker:
    process = subprocess.Popen(
        [
            sys.executable, "-m", "tests.support.assigned_worker", bootstrap, group, member,
            assignments_topic, str(out), "--takeover-timeout", str(takeover_timeout), *extra,
        ],
        cwd=ROOT,
        start_new_session=True,
        stdin=subprocess.DEVNULL,
    )  # fmt: skip
    return Worker(member, out, process)


def create_topic(bootstrap: str, partitions: int) -> str:
    topic = f"pub-{uuid.uuid4().hex[:10]}"
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, partitions, 1)])[topic].result(30)
    return topic


class SteadyProducer(threading.Thread):
    """Produces to every partition of a topic in turn at a steady rate until stopped."""

    def __init__(self, bootstrap: str, topic: str, partitions: int, rate: float = 300.0) -> None:
        super().__init__(daemon=True)
        self.topic, self.partitions, self.rate = topic, partitions, rate
        # idempotent: a retry under load wrote a record twice (7,820 in the topic for 7,818 sent)
        self.producer = Producer(
            {"bootstrap.servers": bootstrap, "linger.ms": 5, "acks": "all", "enable.idempotence": True}
        )
        self.halt = threading.Event()
        self.sent = 0
        self.unsent = 0

    def run(self) -> None:
        while not self.halt.is_set():
            self.producer.produce(self.topic, f"r{self.sent}".encode(), partition=self.sent % self.partitions)
            self.sent += 1
            self.producer.poll(0)
            time.sleep(1.0 / self.rate)
        self.unsent = self.producer.flush(180)  # a broker restart on a loaded machine takes a while

    def finish(self) -> None:
        self.halt.set()
        self.join(190)
        assert self.unsent == 0, f"{self.unsent} records not delivered"


class OffsetWatch(threading.Thread):
    """Samples the group's committed offsets and marks every 50 ms: what each partition went through."""

    def __init__(self, bootstrap: str, group: str, topic: str, partitions: int) -> None:
        super().__init__(daemon=True)
        self.bootstrap, self.group, self.topic, self.partitions = bootstrap, group, topic, partitions
        self.history: dict[int, list[tuple[float, int, OwnerMark | None]]] = defaultdict(list)
        self.halt = threading.Event()

    def run(self) -> None:
        # read_uncommitted: the committed offsets as they are, without waiting until no member's
        # transaction holds offsets of any partition read (librdkafka's default, read_committed,
        # asks for stable offsets; under load the watch timed out and its thread ended)
        consumer = Consumer(
            {
                "bootstrap.servers": self.bootstrap,
                "group.id": self.group,
                "isolation.level": "read_uncommitted",
            }
        )
        try:
            tps = [TopicPartition(self.topic, p) for p in range(self.partitions)]
            while not self.halt.is_set():
                try:
                    found = consumer.committed(tps, timeout=10)
                except KafkaException:
                    continue  # a coordinator restarting: sample again
                for item in found:
                    if item.offset >= 0:
                        entry = (time.time(), item.offset, decode_mark(item.metadata))
                        seen = self.history[item.partition]
                        if not seen or seen[-1][1:] != entry[1:]:
                            seen.append(entry)
                self.halt.wait(0.05)
        finally:
            consumer.close()

    def finish(self) -> None:
        self.halt.set()
        self.join(15)

    def backwards(self) -> list[str]:
        """Every time a partition's committed offset went down."""
        return [
            f"partition {p}: {a[1]} -> {b[1]}"
            for p, seen in self.history.items()
            for a, b in zip(seen, seen[1:], strict=False)
            if b[1] < a[1]
        ]


def end_offsets(bootstrap: str, topic: str, partitions: int) -> dict[int, int]:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "watermarks"})
    try:
        return {
            p: consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=10)[1]
            for p in range(partitions)
        }
    finally:
        consumer.close()


def processed(workers: list[Worker]) -> list[Processed]:
    return sorted((line for w in workers for line in w.lines()), key=lambda x: x.at)


def wait_for(condition, timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout:.0f} s waiting for {what}")
        time.sleep(0.1)


def coverage(workers: list[Worker], ends: dict[int, int]) -> tuple[set[tuple[int, int]], Counter]:
    """(missing (partition, offset) pairs, how often each processed pair was seen)."""
    seen = Counter((x.partition, x.offset) for x in processed(workers))
    wanted = {(p, o) for p, end in ends.items() for o in range(end)}
    return wanted - set(seen), seen


def owners(lines: list[Processed]) -> dict[int, list[str]]:
    """Per partition, the members that processed it, in time order, one entry per uninterrupted run."""
    runs: dict[int, list[str]] = defaultdict(list)
    for item in sorted(lines, key=lambda x: x.at):
        if not runs[item.partition] or runs[item.partition][-1] != item.member:
            runs[item.partition].append(item.member)
    return dict(runs)


def out_of_order(lines: list[Processed]) -> list[str]:
    """Records processed, in time order across all members, at an offset not above the one before.

    Two members consuming one partition at once would interleave old and new offsets.
    """
    last: dict[int, Processed] = {}
    problems = []
    for item in sorted(lines, key=lambda x: x.at):
        before = last.get(item.partition)
        if before is not None and item.offset <= before.offset:
            problems.append(f"partition {item.partition}: {before} then {item}")
        last[item.partition] = item
    return problems
