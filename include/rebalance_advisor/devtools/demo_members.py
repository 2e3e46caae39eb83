"""Live demo consumers: ``python -m rebalance_advisor.devtools.demo_members BOOTSTRAP SPECS_JSON``.

Each spec is one consumer (group, topics, optional static ``group.instance.id``, protocol). They
subscribe and poll, never commit, so the group shows members while its lag stays as loaded.
The live group's specs (``demo_workload.LiveGroup``) differ: a consumer with a ``capacity``
processes records at most that fast (a simulated processing time of 1/capacity s per record) and
commits what it processed; a ``"kind": "producer"`` spec writes ``rates[p]`` records/s to partition p.
Runs until SIGTERM/SIGINT or until its parent process dies, then closes every consumer (dynamic members leave the group).
"""

from __future__ import annotations

import json
import os
import signal
import sys
import threading
import time
from contextlib import suppress

from rebalance_advisor.adapters import LIBRDKAFKA_LOG

#: the live producer's record; its timestamp (CreateTime) is what the time lag is measured from
LIVE_VALUE = b"live-demo-record"


def consumer_config(bootstrap_servers: str, spec: dict) -> dict:
    config = {
        "bootstrap.servers": bootstrap_servers,
        "group.id": spec["group_id"],
        "client.id": spec["client_id"],
        "enable.auto.commit": False,
        "enable.auto.offset.store": False,
        "auto.offset.reset": "latest",
        "max.partition.fetch.bytes": 16384,
        "queued.max.messages.kbytes": 256,
    }
    if spec["protocol"] == "consumer":
        config["group.protocol"] = "consumer"
    else:
        config["session.timeout.ms"] = 6000
        config["heartbeat.interval.ms"] = 1000
    if spec.get("instance_id"):
        config["group.instance.id"] = spec["instance_id"]
    if spec.get("capacity"):
        # A processing consumer: starts at the initial backlog, commits what it processed every
        # second, and keeps its prefetch short so it reads its partitions about evenly.
        config |= {
            "auto.offset.reset": "earliest",
            "enable.auto.commit": True,
            "auto.commit.interval.ms": 1000,
            "max.partition.fetch.bytes": 2048,
            "queued.min.messages": 20,
            "queued.max.messages.kbytes": 64,
        }
    if spec.get("assignor"):  # the broker's assignor on the consumer protocol, the client's on classic
        key = "group.remote.assignor" if spec["protocol"] == "consumer" else "partition.assignment.strategy"
        config[key] = spec["assignor"]
    return config


#: how far behind its schedule a processing consumer may fall (a starved thread) and still catch up
MAX_BEHIND_S = 2.0


def _batch(consumer, count: int, timeout: float) -> list:
    """Up to ``count`` records, one ``poll()`` each: on the consumer protocol a ``consume()`` batch
    left a member's revocations unserved for minutes on a loaded machine (the broker's re-assignment
    then never completed); ``poll()`` serves them between records."""
    records = []
    deadline = time.monotonic() + timeout
    while len(records) < count:
        record = consumer.poll(max(0.0, deadline - time.monotonic()) if not records else 0)
        if record is None:
            break
        if record.error() is None:
            records.append(record)
    return records


def run_processor(consumer, capacity: float, stop: threading.Event) -> None:
    """Process at most ``capacity`` records/s: each record keeps the consumer busy 1/capacity s,
    then its offset is stored for the next commit. The schedule is kept in wall-clock time, so a
    thread the machine starved for a moment catches up (at most :data:`MAX_BEHIND_S`), and idle
    time is not saved up beyond that."""
    per_record = 1.0 / capacity
    busy_until = time.monotonic()
    while not stop.is_set():
        records = _batch(consumer, 20, 0.5)
        if not records:
            continue
        busy_until = max(busy_until, time.monotonic() - MAX_BEHIND_S) + per_record * len(records)
        stop.wait(max(0.0, busy_until - time.monotonic()))
        for record in records:
            with suppress(Exception):  # revoked by a rebalance meanwhile: its new owner reprocesses it
                consumer.store_offsets(message=record)


def run_producer(bootstrap_servers: str, spec: dict, stop: threading.Event) -> None:
    """Write ``rates[p]`` records/s to each partition p (paced every 50 ms) until stopped.

    A tick that comes late (a loaded machine) makes up for at most one second, so the rate never
    runs above the one asked for in a burst after a stall.
    """
    from confluent_kafka import Producer

    producer = Producer(
        {"bootstrap.servers": bootstrap_servers, "client.id": spec["client_id"], "linger.ms": 10, "acks": 1},
        logger=LIBRDKAFKA_LOG,
    )
    rates = spec["rates"]
    owed = [0.0] * len(rates)
    last = time.monotonic()
    try:
        while not stop.is_set():
            now = time.monotonic()
            elapsed, last = min(now - last, 1.0), now
            for partition, rate in enumerate(rates):
                owed[partition] += rate * elapsed
                while owed[partition] >= 1.0:
                    try:
                        producer.produce(spec["topic"], LIVE_VALUE, partition=partition)
                    except BufferError:
                        producer.poll(0.05)
                        break
                    owed[partition] -= 1.0
            producer.poll(0)
            stop.wait(0.05)
    finally:
        producer.flush(5)


def run_member(bootstrap_servers: str, spec: dict, stop: threading.Event) -> None:
    from confluent_kafka import Consumer

    if spec.get("kind") == "producer":
        run_producer(bootstrap_servers, spec, stop)
        return
    consumer = Consumer(consumer_config(bootstrap_servers, spec), logger=LIBRDKAFKA_LOG)
    consumer.subscribe(spec["topics"])
    try:
        if spec.get("capacity"):
            run_processor(consumer, float(spec["capacity"]), stop)
        while not stop.is_set():
            consumer.poll(0.5)
    finally:
        consumer.close()


def main(argv: list[str]) -> int:
    bootstrap_servers, specs = argv[0], json.loads(argv[1])
    stop = threading.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: stop.set())
    failed = False
    threads = [
        threading.Thread(target=run_member, args=(bootstrap_servers, spec, stop), daemon=True)
        for spec in specs
    ]
    for thread in threads:
        thread.start()
    parent = os.getppid()
    while not stop.is_set():
        stop.wait(1.0)
        if os.getppid() != parent:  # whoever started us died without stopping us: don't linger
            stop.set()
        if not all(thread.is_alive() for thread in threads):
            stop.set()
            failed = True
    for thread in threads:
        thread.join(timeout=15)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
