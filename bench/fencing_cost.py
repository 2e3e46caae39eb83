"""Cost of fenced mode per claimed partition (one transactional producer each), docs/benchmarks/fencing.md.

    .venv/bin/python bench/fencing_cost.py [--bootstrap HOST:PORT] [--sizes 1,10,50,100,200,400]
                                           [--handovers 100]

For each size N, a fresh process claims N partitions the way the helper does (N producers,
``init_transactions`` in parallel threads) and reports threads, resident memory and sockets added,
the claim time, idle CPU over 5 s, and one commit round (a transaction per partition, in turn, as
``commit()`` does). First, the fence of a normal handover of one partition (``--handovers`` of
them), with the successor's producer made ahead as the helper does and made at the claim.
Without --bootstrap it starts a local broker of its own. Prints a table and
writes bench/results/fencing_cost.json with the machine's load.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "bench" / "results" / "fencing_cost.json"


def _stat() -> tuple[int, float, int, float]:
    """(threads, RSS MB, sockets, CPU seconds) of this process."""
    status = Path("/proc/self/status").read_text()
    threads = int(status.split("Threads:")[1].split()[0])
    rss = int(status.split("VmRSS:")[1].split()[0]) / 1024
    sockets = 0
    for fd in os.listdir("/proc/self/fd"):
        with contextlib.suppress(OSError):
            sockets += os.readlink(f"/proc/self/fd/{fd}").startswith("socket")
    times = os.times()
    return threads, rss, sockets, times.user + times.system


def measure(bootstrap: str, size: int) -> dict:
    """One size, in this process (run it in a fresh one)."""
    from confluent_kafka import Consumer, TopicPartition
    from confluent_kafka.admin import AdminClient, NewTopic
    from rebalance_advisor_client.fencing import PartitionTransaction, transactional_id

    group, topic = f"cost-{uuid.uuid4().hex[:8]}", f"cost-{uuid.uuid4().hex[:8]}"
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, size, 1)])[topic].result(60)
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group})
    before = _stat()
    started = time.monotonic()
    txns = [
        PartitionTransaction({"bootstrap.servers": bootstrap}, transactional_id(group, topic, p), 60)
        for p in range(size)
    ]
    threads = [threading.Thread(target=t.fence) for t in txns]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    claim_s = time.monotonic() - started
    time.sleep(2)
    after = _stat()
    time.sleep(5)
    idle_cpu = (_stat()[3] - after[3]) / 5
    started = time.monotonic()
    metadata = consumer.consumer_group_metadata()
    for p, txn in enumerate(txns):
        txn.commit([TopicPartition(topic, p, 1)], metadata)
    commit_round_s = time.monotonic() - started
    for txn in txns:
        txn.close()
    consumer.close()
    return {
        "partitions": size,
        "claim_all_s": round(claim_s, 2),
        "threads_per_partition": round((after[0] - before[0]) / size, 2),
        "rss_mb_per_partition": round((after[1] - before[1]) / size, 2),
        "sockets_per_partition": round((after[2] - before[2]) / size, 2),
        "idle_cpu_share": round(idle_cpu, 3),
        "commit_round_s": round(commit_round_s, 2),
        "commit_per_partition_ms": round(1000 * commit_round_s / size, 1),
    }


def handovers(bootstrap: str, count: int, ahead: bool) -> dict:
    """``count`` handovers of one partition between two producers, the way the helper does them.

    The old owner commits its release transaction (offset and mark); the new owner reads the
    committed offset (read_committed) until the release shows, then fences. ``ahead``: the new
    owner's producer was made when its epoch arrived, just before the release, as the helper
    does (and connects then); else it is made at the claim.
    Returns p50/p99 of the fence and of release-to-fenced.
    """
    from confluent_kafka import Consumer, TopicPartition
    from confluent_kafka.admin import AdminClient, NewTopic
    from rebalance_advisor_client.fencing import PartitionTransaction, transactional_id

    group, topic = f"cost-{uuid.uuid4().hex[:8]}", f"cost-{uuid.uuid4().hex[:8]}"
    admin = AdminClient({"bootstrap.servers": bootstrap})  # kept: the future needs its handle
    admin.create_topics([NewTopic(topic, 1, 1)])[topic].result(60)
    settings, txn_id = {"bootstrap.servers": bootstrap}, transactional_id(group, topic, 0)
    reader = Consumer(
        {"bootstrap.servers": bootstrap, "group.id": group, "isolation.level": "read_committed"}
    )
    metadata = reader.consumer_group_metadata()
    owner = PartitionTransaction(settings, txn_id, 30)
    owner.fence()
    fences, totals = [], []
    for i in range(count):
        successor = PartitionTransaction(settings, txn_id, 30) if ahead else None
        time.sleep(0.05)  # the old owner sees the same epoch a moment later and releases
        released = time.monotonic()
        owner.commit([TopicPartition(topic, 0, i + 1, metadata=f"released {i}")], metadata)
        while reader.committed([TopicPartition(topic, 0)], timeout=30)[0].metadata != f"released {i}":
            time.sleep(0.01)
        started = time.monotonic()
        successor = successor or PartitionTransaction(settings, txn_id, 30)
        successor.fence()
        fences.append(time.monotonic() - started)
        totals.append(time.monotonic() - released)
        owner.close()
        owner = successor
    owner.close()
    reader.close()

    def pct(values: list[float], q: float) -> float:
        return round(sorted(values)[min(len(values) - 1, int(q * len(values)))], 3)

    return {
        "handovers": count,
        "producer_made": "ahead" if ahead else "at claim",
        "fence_p50_s": pct(fences, 0.5),
        "fence_p99_s": pct(fences, 0.99),
        "fence_over_0_4_s": sum(f > 0.4 for f in fences),
        "release_to_fenced_p50_s": pct(totals, 0.5),
        "release_to_fenced_p99_s": pct(totals, 0.99),
    }


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--bootstrap")
    parser.add_argument("--sizes", default="1,10,50,100,200,400")
    parser.add_argument("--handovers", type=int, default=100, help="per variant (0: none)")
    parser.add_argument("--one", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--handover-variant", choices=["ahead", "at-claim"], help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.one:
        print(json.dumps(measure(args.bootstrap, args.one)))
        return 0
    if args.handover_variant:
        print(json.dumps(handovers(args.bootstrap, args.handovers, args.handover_variant == "ahead")))
        return 0
    state_dir = None
    bootstrap = args.bootstrap
    if not bootstrap:
        from rebalance_advisor.devtools import local_kafka

        state_dir = Path(tempfile.mkdtemp(prefix="fencing-cost-")) / "kafka"
        bootstrap = local_kafka.start(state_dir).bootstrap_servers
    rows, handover_rows = [], []
    try:
        for variant in ("ahead", "at-claim") if args.handovers else ():
            done = subprocess.run(
                [sys.executable, __file__, "--bootstrap", bootstrap, "--handovers", str(args.handovers),
                 "--handover-variant", variant],
                capture_output=True, text=True, timeout=900,
            )  # fmt: skip
            if done.returncode != 0:
                print(f"handovers ({variant}): failed: {done.stderr.strip().splitlines()[-1:]}", flush=True)
                continue
            handover_rows.append(json.loads(done.stdout.strip().splitlines()[-1]))
            print(json.dumps(handover_rows[-1]), flush=True)
        for size in (int(s) for s in args.sizes.split(",") if s):
            done = subprocess.run(
                [sys.executable, __file__, "--bootstrap", bootstrap, "--one", str(size)],
                capture_output=True,
                text=True,
                timeout=900,
            )
            if done.returncode != 0:
                rows.append({"partitions": size, "error": done.stderr.strip().splitlines()[-1:]})
                print(f"{size}: failed: {rows[-1]['error']}", flush=True)
                continue
            rows.append(json.loads(done.stdout.strip().splitlines()[-1]))
            print(json.dumps(rows[-1]), flush=True)
    finally:
        if state_dir is not None:
            from rebalance_advisor.devtools import local_kafka

            local_kafka.stop(state_dir)
    keys = [k for k in rows[0] if k != "error"] if rows else []
    print("\n" + "  ".join(f"{k[:14]:>14}" for k in keys))
    for row in rows:
        print("  ".join(f"{str(row.get(k, '-')):>14}" for k in keys))
    load = subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip()
    RESULTS.parent.mkdir(exist_ok=True)
    for row in handover_rows:
        print(
            f"handovers, producer made {row['producer_made']}: fence p50 {row['fence_p50_s']} s, "
            f"p99 {row['fence_p99_s']} s ({row['fence_over_0_4_s']} of {row['handovers']} over 0.4 s); "
            f"release to fenced p50 {row['release_to_fenced_p50_s']} s, p99 {row['release_to_fenced_p99_s']} s"
        )
    RESULTS.write_text(
        json.dumps({"cpus": os.cpu_count(), "load": load, "rows": rows, "handovers": handover_rows}, indent=2)
    )
    print(f"\n{load}\nwritten {RESULTS}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
