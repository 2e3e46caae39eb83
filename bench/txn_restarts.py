"""Transactional offset commits across broker restarts, with no project code in the clients.

What it settles (docs/protocol/liveness.md, "Without the helper"): whether the stalls the torture
run sees after a broker restart come from the client helper or from librdkafka and the broker.
Each of N threads is an exactly-once loop as an application writes it with confluent-kafka alone:
begin, produce 5 records to ``out``-p, ``send_offsets_to_transaction`` of ``in``-p for group
``g``, commit; after any error, abort (or a new producer when the error is fatal) and start again
from the group's stable committed offset. A nemesis restarts the broker every few seconds (SIGTERM
and Kafka's clean shutdown, or ``--crash``: SIGKILL).

Reported per run: every transactional call that overran its own timeout by more than 5 s (and
calls still blocked when the run ends), stable offset reads not answered, and at the end the
hanging transactions (stable reads that time out, ``out`` partitions whose last stable offset
stays below their end, Kafka's ``kafka-transactions find-hanging``) and the exactly-once check
(committed outputs equal the committed offset, no value twice).

    python bench/txn_restarts.py [--partitions 12] [--restarts 25] [--every 6] [--crash]
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

from confluent_kafka import Consumer, IsolationLevel, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic, OffsetSpec
from rebalance_advisor.adapters.kafka_jars import java_command
from rebalance_advisor.devtools import local_kafka

CALL_TIMEOUT_S = 15.0  # the timeout every transactional call is given
TRANSACTION_TIMEOUT_S = 60.0  # the clients' default transaction.timeout.ms (--transaction-timeout)
OVERRUN_S = 5.0  # a call that returns this much later than its timeout overran it
RESULTS = Path(__file__).parent / "results" / "txn_restarts.json"


@dataclass
class Calls:
    """Every transactional call's start and duration, and the calls running now (thread-safe)."""

    done: list[tuple[str, int, float, float]] = field(default_factory=list)  # (call, p, start, s)
    running: dict[int, tuple[str, float]] = field(default_factory=dict)
    unanswered_reads: int = 0
    timeout: float = CALL_TIMEOUT_S  # what every transactional call is given
    lock: threading.Lock = field(default_factory=threading.Lock)

    def timed(self, name: str, p: int, call, *args):
        start = time.time()
        with self.lock:
            self.running[p] = (name, start)
        try:
            return call(*args)
        finally:
            with self.lock:
                self.running.pop(p, None)
                self.done.append((name, p, start, time.time() - start))


def stable_committed(bootstrap: str, p: int, timeout: float) -> int | None:
    """The group's stable committed offset of in-p (a ``read_committed`` consumer asks with
    require_stable); None when not answered within ``timeout``."""
    consumer = Consumer(
        {"bootstrap.servers": bootstrap, "group.id": "g", "isolation.level": "read_committed", "log_level": 0}
    )
    try:
        return max(consumer.committed([TopicPartition("in", p)], timeout=timeout)[0].offset, 0)
    except KafkaException:
        return None
    finally:
        consumer.close()


def exactly_once_loop(
    bootstrap: str, p: int, stop: threading.Event, calls: Calls, extra: dict[str, str]
) -> None:
    """Read-process-write of partition p with a transactional producer; restart from the stable
    committed offset after any error."""
    metadata = Consumer({"bootstrap.servers": bootstrap, "group.id": "g", "log_level": 0})
    group = metadata.consumer_group_metadata()
    producer, offset = None, None
    while not stop.is_set():
        try:
            if producer is None:
                producer = Producer(
                    {"bootstrap.servers": bootstrap, "transactional.id": f"t-{p}", "log_level": 0}
                )
                calls.timed("init_transactions", p, producer.init_transactions, calls.timeout)
            if offset is None:
                offset = stable_committed(bootstrap, p, 10.0)
                if offset is None:
                    calls.unanswered_reads += 1
                    continue
            producer.begin_transaction()
            for i in range(5):
                producer.produce("out", value=str(offset + i).encode(), partition=p)
            sent = [TopicPartition("in", p, offset + 5)]
            calls.timed(
                "send_offsets_to_transaction",
                p,
                producer.send_offsets_to_transaction,
                sent,
                group,
                calls.timeout,
            )
            calls.timed("commit_transaction", p, producer.commit_transaction, calls.timeout)
            offset += 5
        except KafkaException as exc:
            offset = None
            if exc.args[0].txn_requires_abort():
                try:
                    calls.timed("abort_transaction", p, producer.abort_transaction, calls.timeout)
                    continue
                except KafkaException:
                    pass
            producer = None  # fatal (fenced) or the abort failed: a new producer fences this one
    metadata.close()


def committed_outputs(bootstrap: str, partitions: int) -> dict[int, tuple[int, int]]:
    """Per out-p: (records read ``read_committed``, distinct values among them)."""
    consumer = Consumer(
        {"bootstrap.servers": bootstrap, "group.id": "checker", "isolation.level": "read_committed",
         "enable.auto.commit": False, "auto.offset.reset": "earliest", "log_level": 0}
    )  # fmt: skip
    result = {}
    for p in range(partitions):
        consumer.assign([TopicPartition("out", p, 0)])
        values, idle = [], 0
        while idle < 3:
            batch = consumer.consume(1000, 1.0)
            idle = 0 if batch else idle + 1
            values += [int(m.value()) for m in batch if m.error() is None]
        result[p] = (len(values), len(set(values)))
    consumer.close()
    return result


def open_output_transactions(bootstrap: str, partitions: int) -> dict[int, int]:
    """out-p -> records above its last stable offset (a transaction still open there)."""
    admin = AdminClient({"bootstrap.servers": bootstrap})
    tps = [TopicPartition("out", p) for p in range(partitions)]
    ends = {}
    for level in (IsolationLevel.READ_UNCOMMITTED, IsolationLevel.READ_COMMITTED):
        futures = admin.list_offsets({tp: OffsetSpec.latest() for tp in tps}, isolation_level=level)
        ends[level] = {tp.partition: f.result(30).offset for tp, f in futures.items()}
    high, stable = ends[IsolationLevel.READ_UNCOMMITTED], ends[IsolationLevel.READ_COMMITTED]
    return {p: high[p] - stable[p] for p in high if high[p] != stable[p]}


def find_hanging(bootstrap: str) -> list[str]:
    """Kafka's ``kafka-transactions find-hanging`` rows for the broker (node 1)."""
    command = java_command(
        "org.apache.kafka.tools.TransactionsCommand",
        "--bootstrap-server",
        bootstrap,
        "find-hanging",
        "--broker-id",
        "1",
    )
    out = subprocess.run(command, capture_output=True, text=True, timeout=120).stdout
    return [line for line in out.splitlines()[1:] if line.strip()]


def restart_broker(state: Path, crash: bool) -> None:
    if crash:
        os.killpg(local_kafka.status(state).pid, signal.SIGKILL)
    local_kafka.restart(state)


def summary(calls: Calls, end: float) -> dict:
    overran = [
        {"call": name, "partition": p, "s": round(s, 1)}
        for name, p, _, s in calls.done
        if s > calls.timeout + OVERRUN_S
    ]
    blocked = [
        {"call": name, "partition": p, "s": round(end - start, 1)}
        for p, (name, start) in calls.running.items()
        if end - start > calls.timeout + OVERRUN_S
    ]
    return {
        "calls": len(calls.done),
        "longest_call_s": round(max((s for *_, s in calls.done), default=0.0), 1),
        "overran_timeout": overran,
        "blocked_at_end": blocked,
        "unanswered_stable_reads": calls.unanswered_reads,
    }


def run(args: argparse.Namespace, state: Path) -> dict:
    bootstrap = local_kafka.start(state, port=args.port).bootstrap_servers
    admin = AdminClient({"bootstrap.servers": bootstrap})
    for future in admin.create_topics([NewTopic(t, args.partitions, 1) for t in ("in", "out")]).values():
        future.result(30)
    stop, calls = threading.Event(), Calls(timeout=args.call_timeout)
    for p in range(args.partitions):
        threading.Thread(
            target=exactly_once_loop,
            args=(
                bootstrap,
                p,
                stop,
                calls,
                {
                    "transaction.timeout.ms": int(args.transaction_timeout * 1000),
                    **dict(args.producer_config),
                },
            ),
            daemon=True,
        ).start()
    for _ in range(args.restarts):
        time.sleep(args.every)
        restart_broker(state, args.crash)
    time.sleep(args.every)
    stop.set()
    time.sleep(calls.timeout + OVERRUN_S + 5)  # every loop ends within its call's timeout, or is blocked
    result = summary(calls, time.time())
    reads = {p: stable_committed(bootstrap, p, 10.0) for p in range(args.partitions)}
    still_open = open_output_transactions(bootstrap, args.partitions)
    result |= {
        "open_after_stop": {
            "stable_reads_unanswered": [p for p, o in reads.items() if o is None],
            "output": still_open,
        }
    }
    if still_open or None in reads.values():  # a blocked producer's transaction ends at its timeout
        time.sleep(args.transaction_timeout + 15)
        reads = {p: stable_committed(bootstrap, p, 10.0) for p in range(args.partitions)}
    outputs = committed_outputs(bootstrap, args.partitions)
    result |= {
        "hanging_stable_reads": [p for p, offset in reads.items() if offset is None],
        "open_output_transactions": open_output_transactions(bootstrap, args.partitions),
        "find_hanging": find_hanging(bootstrap),
        "exactly_once_violations": [
            p
            for p, (count, distinct) in outputs.items()
            if reads[p] is not None and (count != reads[p] or distinct != count)
        ],
    }
    return result


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--partitions", type=int, default=12)
    parser.add_argument("--restarts", type=int, default=25)
    parser.add_argument("--every", type=float, default=6.0, help="seconds between restarts")
    parser.add_argument("--crash", action="store_true", help="SIGKILL the broker instead of a clean shutdown")
    parser.add_argument("--port", type=int, default=None)
    parser.add_argument(
        "--transaction-timeout",
        type=float,
        default=TRANSACTION_TIMEOUT_S,
        help="producers' transaction.timeout.ms, s",
    )
    parser.add_argument(
        "--call-timeout", type=float, default=CALL_TIMEOUT_S, help="timeout of every transactional call, s"
    )
    parser.add_argument(
        "--producer-config",
        type=lambda text: tuple(text.split("=", 1)),
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="a librdkafka setting for every producer (repeatable), e.g. socket.timeout.ms=10000",
    )
    parser.add_argument("--json", type=Path, default=RESULTS)
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="txn-restarts-") as tmp:
        state = Path(tmp) / "broker"
        started = time.time()
        try:
            result = run(args, state)
        finally:
            local_kafka.stop(state)
    result = {
        "config": vars(args) | {"json": str(args.json)},
        "load": os.getloadavg()[0],
        "started": started,
        **result,
    }
    args.json.parent.mkdir(parents=True, exist_ok=True)
    args.json.write_text(json.dumps(result, indent=1))
    print(
        f"{'restarts':<34}{args.restarts} ({'SIGKILL' if args.crash else 'clean shutdown'}), every {args.every} s"
    )
    for key in ("calls", "longest_call_s", "unanswered_stable_reads"):
        print(f"{key:<34}{result[key]}")
    for key in ("overran_timeout", "blocked_at_end", "hanging_stable_reads", "open_output_transactions",
                "find_hanging", "exactly_once_violations"):  # fmt: skip
        print(f"{key:<34}{len(result[key])}  {json.dumps(result[key])[:300]}")
    print(f"written: {args.json}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
