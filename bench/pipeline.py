"""Planner benchmark: synthetic snapshots of 100 / 1,000 / 10,000 groups, planned end to end.

Each group: 10 members, about 100 partitions (one of 100 shared topics of 100 partitions, as
many groups read the same topics), Zipf-skewed lag, owners as Kafka's range assignor left them.
Two snapshots 10 s apart are written, so the second carries what the planner plans on in
production: Zipf produce rates per partition (Δ log end), consume rates (Δ committed: each member
works its partitions at an even share of a capacity equal to its group's mean member inflow, so
range's hot members are overloaded) and member capacities measured from them (backlog on every
partition at both ends). The snapshots are written to the database first (not timed), then the
planner runs on the second under Spark
``local[2]`` with its read / plan / write breakdown, and the same per-group work (spec build,
every default strategy, metrics, decisions) runs in one plain Python process for comparison.

    .venv/bin/python bench/pipeline.py [--sizes 100,1000,10000] [--db URL] [--quick]

The issue-13 target case, 10,000 groups (1,000,000 partitions) under Spark ``local[2]``, alone
and without the plain-Python comparison (which would add minutes and its load to the machine):

    .venv/bin/python bench/pipeline.py --sizes 10000 --no-python

It stores the two synthetic snapshots first (about a minute, not timed), warms Spark up on 20
groups, then times the planner run; the row's ``total`` is the number the target is about.

Prints a table (``load``: the 1-minute load average right after that size's planner run, as other
work shares the machine; ``cpu``: CPU seconds the planner run used in this process tree, the
driver, Spark's JVM and its Python workers, which on 2 free cores bounds the wall time from below at cpu / 2) and writes ``bench/results/pipeline.json``. Target: 10,000 groups < 60 s.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import random
import sys
import tempfile
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
TOPICS = 100
PARTITIONS = 100
MEMBERS = 10


INTERVAL_S = 10.0
GROUP_RATE = 500.0  # records/s produced to each group's topic


def synthetic_snapshot(groups: int, seed: int = 5337, previous: bool = False):
    """A Snapshot with ``groups`` groups as described in the module docstring; ``previous`` gives
    the one taken ``INTERVAL_S`` earlier (log ends and committed offsets rolled back by the rates)."""
    from rebalance_advisor.domain.snapshot_model import (
        CommittedOffset,
        Group,
        GroupMemberSnapshot,
        PartitionOffsets,
        Snapshot,
    )

    rng = random.Random(seed)
    ends = {
        (f"topic-{t:03d}", p): 1_000_000 + rng.randint(0, 1000)
        for t in range(TOPICS)
        for p in range(PARTITIONS)
    }
    weights = [rank**-1.1 for rank in range(1, PARTITIONS + 1)]
    rates = {}
    for t in range(TOPICS):
        shuffled = rng.sample(weights, len(weights))
        for p, w in enumerate(shuffled):
            rates[(f"topic-{t:03d}", p)] = GROUP_RATE * w / sum(weights)
    # One partition's consume rate: an even share of a capacity equal to the mean member inflow.
    share = GROUP_RATE / MEMBERS / (PARTITIONS // MEMBERS)
    back = INTERVAL_S if previous else 0.0
    partitions = [
        PartitionOffsets(t, p, 0, e - round(rates[(t, p)] * back), 1) for (t, p), e in sorted(ends.items())
    ]
    out_groups, committed = [], []
    for g in range(groups):
        group_id = f"group-{g:05d}"
        topic = f"topic-{g % TOPICS:03d}"
        lags = [max(1, int(20_000 / (rank**1.1))) for rank in range(1, PARTITIONS + 1)]
        rng.shuffle(lags)
        for p, lag in enumerate(lags):
            end = ends[(topic, p)]
            offset = end - lag
            if previous:  # still behind then: the member had backlog on it at both ends
                offset = min(offset - round(share * back), end - round(rates[(topic, p)] * back) - 1)
            committed.append(CommittedOffset(group_id, topic, p, offset))
        per = PARTITIONS // MEMBERS
        members = tuple(
            GroupMemberSnapshot(
                member_id=f"{group_id}-m{m:02d}",
                client_id=f"c{m}",
                host="/10.0.0.1",
                subscribed_topics=(topic,),
                assignment=tuple((topic, p) for p in range(m * per, (m + 1) * per)),
                position=m,
            )
            for m in range(MEMBERS)
        )
        out_groups.append(Group(group_id, "Stable", "classic", "range", 1, "10.0.0.1", members))
    now = datetime.now(UTC)
    return Snapshot(
        taken_at=now - timedelta(seconds=back),
        bootstrap_servers="bench:9092",
        cluster_id="bench",
        duration_s=0.0,
        groups=out_groups,
        committed=committed,
        partitions=partitions,
    )


def write_history(groups: int, url: str) -> int:
    """Store the previous snapshot, then the current one (rates derived from the pair); its id."""
    from rebalance_advisor import store

    store.write_snapshot(synthetic_snapshot(groups, previous=True), url)
    return store.write_snapshot(synthetic_snapshot(groups), url)


def tree_cpu_s() -> float:
    """CPU seconds (user + system) of this process and all its descendants: Spark's JVM, its Python
    workers, and what they already reaped. On a shared machine wall time includes waiting for a
    core; this is the work done."""
    import psutil

    total = 0.0
    me = psutil.Process()
    for proc in [me, *me.children(recursive=True)]:
        try:
            t = proc.cpu_times()
        except psutil.NoSuchProcess:
            continue
        total += t.user + t.system + t.children_user + t.children_system
    return total


def plain_python(url: str, snapshot_id: int) -> dict[str, float]:
    """The same per-group work without Spark: load, build specs, plan every group in a loop."""
    import gc

    from rebalance_advisor.domain.decisions import Thresholds
    from rebalance_advisor.domain.group_planning import plan_group
    from rebalance_advisor.domain.spec_documents import build_docs_from_tables
    from rebalance_advisor.store.snapshot_reader import read_snapshot_tables

    gc.disable()  # as run_planner does (rebalance_advisor.gcpause.gc_paused)
    try:
        started = time.perf_counter()
        docs = build_docs_from_tables(read_snapshot_tables(snapshot_id, url))
        read = time.perf_counter() - started
        thresholds, now = Thresholds(), datetime.now(UTC)
        results = [plan_group(d, thresholds, now) for d in docs]
        plan = time.perf_counter() - started - read
    finally:
        gc.enable()
    assert len(results) == len(docs)
    return {"read_s": read, "plan_s": plan, "total_s": read + plan}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--sizes", default="100,1000,10000", help="group counts, comma-separated")
    parser.add_argument("--quick", action="store_true", help="100 and 1,000 groups only")
    parser.add_argument("--db", default=None, help="SQLAlchemy URL (default: a fresh SQLite file per size)")
    parser.add_argument("--master", default="local[2]", help="Spark master (the target is for local[2])")
    parser.add_argument("--no-python", action="store_true", help="skip the plain-Python comparison")
    args = parser.parse_args(argv)
    sizes = [100, 1000] if args.quick else [int(s) for s in args.sizes.split(",")]

    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    from rebalance_advisor import store
    from rebalance_advisor.adapters.spark_planner import run_planner
    from rebalance_advisor.adapters.spark_session import spark_session

    spark = spark_session(args.master, "rebalance-advisor-bench")
    rows = []
    try:
        with tempfile.TemporaryDirectory(prefix="rebalance-advisor-bench-") as tmp:
            # Warm-up: JVM, Python workers and Arrow paths, so the first size is not charged for them.
            warm = f"sqlite:///{tmp}/warm.db"
            store.upgrade(warm)
            run_planner(spark, warm, write_history(20, warm))
            for size in sizes:
                url = args.db or f"sqlite:///{tmp}/bench-{size}.db"
                store.upgrade(url)
                t0 = time.perf_counter()
                snapshot_id = write_history(size, url)
                stored = time.perf_counter() - t0
                load_before = os.getloadavg()[0]
                cpu0 = tree_cpu_s()
                run = run_planner(spark, url, snapshot_id)
                cpu = tree_cpu_s() - cpu0
                flagged = len(run.flagged)
                python = None if args.no_python else plain_python(url, snapshot_id)
                rows.append(
                    {
                        "groups": size,
                        "partitions": size * PARTITIONS,
                        "flagged": flagged,
                        "snapshot_write_s": stored,
                        "spark": run.timings,
                        "spark_cpu_s": cpu,
                        "python": python,
                    }
                )
                load = os.getloadavg()[0]
                rows[-1]["load_1min"] = load
                rows[-1]["load_1min_before"] = load_before
                print(
                    f"  {size:>6} groups: {run.timings['total_s']:.1f} s, CPU {cpu:.1f} s (load {load_before:.1f} -> {load:.1f})",
                    file=sys.stderr,
                    flush=True,
                )
    finally:
        spark.stop()

    header = f"{'groups':>7} {'partitions':>10} {'flagged':>7} | {'read':>6} {'plan':>6} {'write':>6} {'total':>7} {'cpu':>7} {'ms/group':>8} {'load':>5} | {'python':>7} {'ms/group':>8}"
    print(f"planner end to end, Spark {args.master}, {os.cpu_count()} cores (seconds)")
    print(header)
    print("-" * len(header))
    for r in rows:
        s, p = r["spark"], r["python"]
        py = f"{p['total_s']:>7.1f} {1000 * p['total_s'] / r['groups']:>8.2f}" if p else f"{'-':>7} {'-':>8}"
        print(
            f"{r['groups']:>7} {r['partitions']:>10} {r['flagged']:>7} | {s['read_s']:>6.1f} {s['plan_s']:>6.1f} "
            f"{s['write_s']:>6.1f} {s['total_s']:>7.1f} {r['spark_cpu_s']:>7.1f} {1000 * s['total_s'] / r['groups']:>8.2f} "
            f"{r['load_1min']:>5.1f} | {py}"
        )
    out = ROOT / "bench" / "results" / "pipeline.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    meta = {
        "machine": platform.platform(),
        "cpus": os.cpu_count(),
        "master": args.master,
        "at": datetime.now(UTC).isoformat(),
    }
    out.write_text(json.dumps({"meta": meta, "results": rows}, indent=2) + "\n")
    print(f"wrote {out.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
