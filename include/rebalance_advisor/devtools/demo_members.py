"""Live demo consumers: ``python -m rebalance_advisor.devtools.demo_members BOOTSTRAP SPECS_JSON``.

Each spec is one consumer (group, topics, optional static ``group.instance.id``, protocol). They
subscribe and poll, never commit, so the group shows members while its lag stays as loaded.
Runs until SIGTERM/SIGINT or until its parent process dies, then closes every consumer (dynamic members leave the group).
"""

from __future__ import annotations

import json
import os
import signal
import sys
import threading


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
    return config


def run_member(bootstrap_servers: str, spec: dict, stop: threading.Event) -> None:
    from confluent_kafka import Consumer

    consumer = Consumer(consumer_config(bootstrap_servers, spec))
    consumer.subscribe(spec["topics"])
    try:
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
