"""Benchmark: our snapshot vs Kafka's ``kafka-consumer-groups --describe --all-groups`` on one cluster.

Builds G memberless groups over T topics (P partitions in all) on a local broker (its own, in a temp
dir, unless --bootstrap-servers), then alternates rounds of:
  - ours, in process: ``snapshot.collect`` (and, separately, writing it to SQLite)
  - ours, as a command: ``rebalance-advisor snapshot`` (Python start-up and DB write included)
  - the reference tool as a command (JVM start-up included)
Prints medians and ratios, peak memory (max RSS of each command; Python heap peak of collect), and
writes JSON to bench/results/snapshot.json.

    .venv/bin/python bench/snapshot.py                 # ~500 groups, 20,000 partitions
    .venv/bin/python bench/snapshot.py --groups 50 --topics 20 --partitions 2000 --rounds 3
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import random
import statistics
import subprocess
import sys
import tempfile
import time
import tracemalloc
from pathlib import Path

from rebalance_advisor import localkafka, snapshot, store

RESULTS = Path(__file__).resolve().parent / "results" / "snapshot.json"
CLI = str(Path(sys.executable).parent / "rebalance-advisor")


def build_cluster(
    bootstrap: str, groups: int, topics: int, partitions: int, per_group: int, seed: int
) -> dict:
    """Topics, a few records per partition, and memberless groups with committed offsets."""
    from confluent_kafka import ConsumerGroupTopicPartitions, Producer, TopicPartition
    from confluent_kafka.admin import AdminClient, NewTopic

    rng = random.Random(seed)
    admin = AdminClient({"bootstrap.servers": bootstrap})
    per_topic = max(1, partitions // topics)
    names = [f"bench-t{i:04d}" for i in range(topics)]
    batch = max(1, 5000 // per_topic)  # brokers refuse requests creating too many partitions at once
    for start in range(0, topics, batch):
        futures = admin.create_topics(
            [
                NewTopic(n, num_partitions=per_topic, replication_factor=1)
                for n in names[start : start + batch]
            ],
            operation_timeout=300,
            request_timeout=300,
        )
        for future in futures.values():
            future.result(600)
    producer = Producer(
        {"bootstrap.servers": bootstrap, "linger.ms": 50, "queue.buffering.max.messages": 2_000_000}
    )
    ends: dict[tuple[str, int], int] = {}
    for n in names:
        for p in range(per_topic):
            count = rng.randint(1, 8)
            ends[(n, p)] = count
            for _ in range(count):
                while True:
                    try:
                        producer.produce(n, b"bench", partition=p)
                        break
                    except BufferError:
                        producer.poll(0.05)
        producer.poll(0)
    assert producer.flush(300) == 0
    wanted = {}
    for g in range(groups):
        chosen = [names[(g * per_group + k) % topics] for k in range(per_group)]
        wanted[f"bench-g{g:04d}"] = [
            TopicPartition(t, p, rng.randint(0, ends[(t, p)])) for t in chosen for p in range(per_topic)
        ]
    deadline = time.monotonic() + 300
    while wanted:  # a fresh broker answers NOT_COORDINATOR until __consumer_offsets is loaded
        futures = {}
        for group_id, offsets in wanted.items():
            futures.update(
                admin.alter_consumer_group_offsets(
                    [ConsumerGroupTopicPartitions(group_id, offsets)], request_timeout=120
                )
            )
        last_error = ""
        for group_id, future in futures.items():
            try:
                result = future.result(300)
            except Exception as error:  # noqa: BLE001 - retried below
                last_error = str(error)
                continue
            errors = [tp.error for tp in result.topic_partitions if tp.error]
            if errors:
                last_error = str(errors[0])
            else:
                del wanted[group_id]
        if wanted:
            if time.monotonic() > deadline:
                raise SystemExit(f"could not commit offsets for {len(wanted)} groups: {last_error}")
            time.sleep(0.5)
    return {
        "groups": groups,
        "topics": topics,
        "partitions": per_topic * topics,
        "committed": groups * per_group * per_topic,
    }


def run_measured(command: list[str]) -> tuple[float, int]:
    """Wall seconds and max RSS (MiB) of one command."""
    started = time.perf_counter()
    process = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    _, status, usage = os.wait4(process.pid, 0)
    elapsed = time.perf_counter() - started
    if os.waitstatus_to_exitcode(status) != 0:
        raise SystemExit(f"{command[0]} failed: {process.stderr.read().decode()[-2000:]}")
    return elapsed, usage.ru_maxrss // 1024


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--groups", type=int, default=500)
    parser.add_argument("--topics", type=int, default=200)
    parser.add_argument(
        "--partitions", type=int, default=20_000, help="partitions in all (split over topics)"
    )
    parser.add_argument("--topics-per-group", type=int, default=2)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument(
        "--bootstrap-servers", default=None, help="use this (empty) cluster instead of a local broker"
    )
    parser.add_argument("--seed", type=int, default=5337)
    args = parser.parse_args()

    with tempfile.TemporaryDirectory(prefix="bench-snapshot-") as tmp:
        state_dir = Path(tmp) / "kafka"
        bootstrap = args.bootstrap_servers or localkafka.start(state_dir).bootstrap_servers
        try:
            t0 = time.perf_counter()
            shape = build_cluster(
                bootstrap, args.groups, args.topics, args.partitions, args.topics_per_group, args.seed
            )
            print(f"cluster built in {time.perf_counter() - t0:.1f} s: {shape}", flush=True)
            db_url = f"sqlite:///{Path(tmp) / 'bench.db'}"
            store.upgrade(db_url)
            options = snapshot.SnapshotOptions(groups=snapshot.GroupFilter.parse("bench-g.*"), timeout_s=60)
            runs: dict[str, list[float]] = {"collect": [], "write": [], "cli": [], "reference": []}
            rss = {"cli": 0, "reference": 0}
            heap_peak = 0
            for round_no in range(1, args.rounds + 1):
                tracemalloc.start()
                started = time.perf_counter()
                taken = snapshot.collect(bootstrap, options=options)
                runs["collect"].append(time.perf_counter() - started)
                heap_peak = max(heap_peak, tracemalloc.get_traced_memory()[1])
                tracemalloc.stop()
                assert len(taken.groups) == shape["groups"] and not taken.errors, snapshot.summarize(taken)
                assert len(taken.committed) == shape["committed"]
                started = time.perf_counter()
                store.write_snapshot(taken, db_url)
                runs["write"].append(time.perf_counter() - started)
                elapsed, mem = run_measured(
                    [
                        CLI,
                        "snapshot",
                        "--bootstrap-servers",
                        bootstrap,
                        "--db",
                        db_url,
                        "--groups",
                        "bench-g.*",
                    ]
                )
                runs["cli"].append(elapsed)
                rss["cli"] = max(rss["cli"], mem)
                elapsed, mem = run_measured(
                    localkafka.consumer_groups_command(
                        bootstrap, "--describe", "--all-groups", "--timeout", "120000"
                    )
                )
                runs["reference"].append(elapsed)
                rss["reference"] = max(rss["reference"], mem)
                print(
                    f"round {round_no}: collect {runs['collect'][-1]:.3f} s, write {runs['write'][-1]:.3f} s, "
                    f"cli {runs['cli'][-1]:.2f} s, reference {runs['reference'][-1]:.2f} s",
                    flush=True,
                )
        finally:
            if not args.bootstrap_servers:
                localkafka.stop(state_dir)

    med = {k: statistics.median(v) for k, v in runs.items()}
    result = {
        "shape": shape,
        "rounds": args.rounds,
        "median_s": med,
        "runs_s": runs,
        "speedup_collect_vs_reference": med["reference"] / med["collect"],
        "speedup_collect_and_write_vs_reference": med["reference"] / (med["collect"] + med["write"]),
        "speedup_cli_vs_reference": med["reference"] / med["cli"],
        "max_rss_mib": rss,
        "collect_python_heap_peak_mib": round(heap_peak / 2**20, 1),
        "machine": {"cpus": os.cpu_count(), "python": platform.python_version()},
    }
    print()
    print(f"{'':28}{'median s':>10}")
    for name, label in (("collect", "ours: collect (in process)"), ("write", "ours: write to SQLite"),
                        ("cli", "ours: CLI snapshot command"), ("reference", "kafka-consumer-groups")):  # fmt: skip
        print(f"{label:28}{med[name]:>10.3f}")
    print(
        f"\nspeedup vs reference: collect {result['speedup_collect_vs_reference']:.1f}x, "
        f"collect+write {result['speedup_collect_and_write_vs_reference']:.1f}x, "
        f"CLI command {result['speedup_cli_vs_reference']:.1f}x"
    )
    print(
        f"memory: CLI max RSS {rss['cli']} MiB, reference max RSS {rss['reference']} MiB, "
        f"collect Python heap peak {result['collect_python_heap_peak_mib']} MiB"
    )
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(json.dumps(result, indent=2) + "\n")
    print(f"wrote {RESULTS}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
