"""Consumers of a known cost per record, in Python (confluent-kafka) and Java, each in its own process.

For measuring what client telemetry says about a consumer against the truth (bench/telemetry_accuracy.py,
tests/integration/test_telemetry_capacity.py). Each record costs ``cost_s`` of simulated processing,
slept off outside ``poll()`` in slices and owed, never earned while idle (as bench/closed_loop.py's
consumers). Mode ``inline`` processes on the poll thread; ``pool`` hands records to ``workers``
threads and pauses fetching while they are ``max_queued`` behind (Kafka's advice for off-thread
processing), committing only what the workers finished: its lag grows while its poll thread idles.
"""

from __future__ import annotations

import contextlib
import json
import os
import queue
import signal
import subprocess
import sys
import threading
import time
from dataclasses import asdict, dataclass
from pathlib import Path

from rebalance_advisor.adapters import LIBRDKAFKA_LOG
from rebalance_advisor.adapters.kafka_jars import fetch_jars, java_executable

JAVA_SOURCE = Path(__file__).resolve().with_name("CostConsumer.java")
#: processing is slept off per record (a consumer that works record by record, as librdkafka's
#: per-call idle ratio assumes); an overrun sleep is paid back by the next records, up to CREDIT_S,
#: but a record always takes at least half its cost: a consumer that handles records in no time
#: starts polls in the same millisecond, and Java's idle ratio then reads NaN for up to a minute
#: (docs/benchmarks/telemetry-accuracy.md#nan)
SLICE_S = 0.0
CREDIT_S = 0.05


@dataclass(frozen=True)
class CostConsumerSpec:
    """One consumer process: who it is, what a record costs and how it processes."""

    bootstrap: str
    topic: str
    group: str
    client_id: str
    cost_s: float
    mode: str = "inline"
    workers: int = 4
    max_queued: int = 200
    report: str = ""
    instance_id: str = ""
    #: ``earliest`` works off a backlog (a saturated consumer); ``latest`` starts at the live end
    offset_reset: str = "earliest"


class Owed:
    """Simulated processing time: owed per record and slept off; an overrun is paid back."""

    def __init__(self, cost_s: float) -> None:
        self.cost_s, self.owed = cost_s, 0.0

    def record(self) -> None:
        self.owed += self.cost_s
        if self.owed > SLICE_S:  # with SLICE_S 0: every record, unless an overrun is being paid back
            start = time.monotonic()
            time.sleep(self.owed)
            self.owed = max(self.owed - (time.monotonic() - start), -min(CREDIT_S, self.cost_s / 2))


def _consumer(spec: CostConsumerSpec):
    from confluent_kafka import Consumer

    config = {
        "bootstrap.servers": spec.bootstrap,
        "group.id": spec.group,
        "client.id": spec.client_id,
        "group.protocol": "consumer",
        "auto.offset.reset": spec.offset_reset,
        "enable.auto.commit": False,
        "enable.auto.offset.store": False,
    }
    if spec.instance_id:
        config["group.instance.id"] = spec.instance_id
    consumer = Consumer(config, logger=LIBRDKAFKA_LOG)
    consumer.subscribe([spec.topic])
    return consumer


def run_python(spec: CostConsumerSpec, stop: threading.Event) -> None:
    """The Python consumer's loop until ``stop``; appends ``{"t", "processed", "polls", "in_poll_s"}``
    lines to the report (the time in ``poll()`` since the line before: its busy share by its own clock)."""
    consumer = _consumer(spec)
    done = _Done()
    work: queue.Queue = queue.Queue()
    if spec.mode == "pool":
        for _ in range(spec.workers):
            threading.Thread(target=_worker, args=(spec.cost_s, work, done, stop), daemon=True).start()
    owed, paused, next_commit, next_report = Owed(spec.cost_s), False, time.time() + 1, time.time() + 1
    in_poll_s, polls = 0.0, 0
    with open(spec.report or os.devnull, "a", encoding="utf-8") as out:
        while not stop.is_set():
            poll_start = time.monotonic()
            msg = consumer.poll(0.1)
            in_poll_s, polls = in_poll_s + time.monotonic() - poll_start, polls + 1
            if msg is not None and not msg.error():
                if spec.mode == "pool":
                    work.put(msg)
                else:
                    owed.record()
                    done.finish(msg.topic(), msg.partition(), msg.offset())
            if spec.mode == "pool" and (work.qsize() > spec.max_queued) != paused:
                paused = not paused
                (consumer.pause if paused else consumer.resume)(consumer.assignment())
            now = time.time()
            if now >= next_commit:
                done.commit(consumer)
                next_commit = now + 1
            if now >= next_report:
                line = {"t": now, "processed": done.take_count(), "polls": polls, "in_poll_s": in_poll_s}
                out.write(json.dumps(line) + "\n")
                out.flush()
                in_poll_s, polls = 0.0, 0
                next_report = now + 1
    consumer.close()


def _worker(cost_s: float, work: queue.Queue, done: _Done, stop: threading.Event) -> None:
    owed = Owed(cost_s)
    while not stop.is_set():
        try:
            msg = work.get(timeout=0.2)
        except queue.Empty:
            continue
        owed.record()
        done.finish(msg.topic(), msg.partition(), msg.offset())


class _Done:
    """Finished offsets per partition; commits the contiguous prefix (workers finish out of order)."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.finished: dict[tuple[str, int], set[int]] = {}
        self.next: dict[tuple[str, int], int] = {}
        self.count = 0

    def finish(self, topic: str, partition: int, offset: int) -> None:
        with self.lock:
            key = (topic, partition)
            self.next.setdefault(key, offset)
            self.finished.setdefault(key, set()).add(offset)
            while self.next[key] in self.finished[key]:
                self.finished[key].discard(self.next[key])
                self.next[key] += 1
            self.count += 1

    def take_count(self) -> int:
        with self.lock:
            count, self.count = self.count, 0
        return count

    def commit(self, consumer) -> None:
        from confluent_kafka import KafkaException, TopicPartition

        with self.lock:
            offsets = [TopicPartition(t, p, o) for (t, p), o in self.next.items()]
        # a rebalance in progress: the next second's commit carries the same offsets
        if offsets:
            with contextlib.suppress(KafkaException):
                consumer.commit(offsets=offsets, asynchronous=True)


def java_command(spec: CostConsumerSpec) -> list[str]:
    """The Java consumer (Java 17's single-file launcher on CostConsumer.java, Kafka's client jars)."""
    return [
        java_executable(),
        "-Xmx256m",
        "-cp",
        f"{fetch_jars()}/*",
        str(JAVA_SOURCE),
        json.dumps(asdict(spec)),
    ]


def read_report(path: Path, start: float = float("-inf"), end: float = float("inf")) -> list[dict]:
    """The report lines of a consumer (both languages write the same ones) with ``t`` in
    ``(start, end]``; none when it wrote none yet."""
    if not path.exists():
        return []
    lines = (json.loads(x) for x in path.read_text().splitlines() if x.strip())
    return [line for line in lines if start < line["t"] <= end]


def own_clock(lines: list[dict]) -> tuple[float, float]:
    """(elapsed seconds, seconds outside ``poll()``) over report lines that carry ``in_poll_s``, by
    the consumer's own clock: each line counts what happened since the line before it."""
    elapsed = lines[-1]["t"] - lines[0]["t"]
    return elapsed, elapsed - sum(line["in_poll_s"] for line in lines[1:])


def launch(spec: CostConsumerSpec, language: str, log: Path) -> subprocess.Popen:
    """Starts one consumer process in its own process group (stop it with ``stop``)."""
    if language == "java":
        command = java_command(spec)
    else:
        command = [
            sys.executable,
            "-m",
            "rebalance_advisor.devtools.cost_consumers",
            json.dumps(asdict(spec)),
        ]
    with open(log, "ab") as out:
        return subprocess.Popen(command, stdout=out, stderr=subprocess.STDOUT, start_new_session=True)


def stop(process: subprocess.Popen, grace: float = 15.0) -> None:
    """SIGTERM to its group, then SIGKILL after ``grace`` seconds."""
    try:
        os.killpg(process.pid, signal.SIGTERM)
        process.wait(grace)
    except ProcessLookupError:
        return
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)
        process.wait(5)


def main(argv: list[str]) -> int:
    """``python -m rebalance_advisor.devtools.cost_consumers '<spec JSON>'``: run until SIGTERM."""
    spec = CostConsumerSpec(**json.loads(argv[0]))
    stopped = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stopped.set())
    run_python(spec, stopped)
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
