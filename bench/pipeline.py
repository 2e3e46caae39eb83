"""Planner benchmark: synthetic fleets of 10,000 / 30,000 / 100,000 groups, planned end to end.

A fleet (``SIZE_CLASSES``): most groups small (85 % with 1-6 partitions, 13 % with 10-30, 2 % with
100-400), two groups per topic, about ten partitions per group; Zipf-skewed lag, owners as Kafka's
range assignor left them. Two snapshots exactly ``INTERVAL_S`` apart are stored, so the second
carries what the planner plans on in production: Zipf produce rates per partition (Δ log end),
consume rates (Δ committed: each member works its partitions at an even share of a capacity equal
to its group's mean member inflow, so range's hot members are overloaded) and member capacities
measured from them (backlog on every partition at both ends). Fleets are stored once per size under
``$REBALANCE_ADVISOR_HOME/bench-fleets`` (not timed); each run plans a fresh copy of the newer
snapshot under Spark (``local[2]`` by default) as of 30 s after it.

    .venv/bin/python bench/pipeline.py                              # 10k, 30k, 100k, the pipeline
    .venv/bin/python bench/pipeline.py --sizes 10000 --path both    # the pipeline and the driver path

Prints a table per size: read / plan / write / total wall seconds, the driver's and the executors'
CPU seconds (Spark's JVM and its Python workers; ``jvm_cpu_s`` in the JSON), the driver's and the
JVM's peak RSS, the flagged groups (checked against the stored outcome rows) and the load after;
writes ``bench/results/pipeline.json`` (``--out``). Targets and results: docs/benchmarks/sizing.md.
bench/planner_cpu.py splits an executor's CPU by step on the same stored fleets.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import platform
import random
import shutil
import subprocess
import sys
import tempfile
from datetime import UTC, datetime, timedelta
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
INTERVAL_S = 10.0
TOPIC_RATE = 50.0  # records/s produced to each topic, per partition on average (Zipf-skewed)
#: (share of groups, fewest, most partitions): most groups small, a few with hundreds of partitions;
#: on average about ten partitions per group (100,000 groups: about a million partitions)
SIZE_CLASSES = ((0.85, 1, 6), (0.13, 10, 30), (0.02, 100, 400))
GROUPS_PER_TOPIC = 2  # consecutive groups read the same topic (as many groups share topics)
#: in the stored fleets' file names: v1 fleets had a stretched rate interval (write_history says why)
FLEET_VERSION = "v2"


def group_partitions(groups: int, seed: int) -> list[int]:
    """Partition count of each topic (one topic per ``GROUPS_PER_TOPIC`` groups), drawn from SIZE_CLASSES."""
    rng = random.Random(seed)
    sizes = []
    for _ in range((groups + GROUPS_PER_TOPIC - 1) // GROUPS_PER_TOPIC):
        r, acc = rng.random(), 0.0
        for share, low, high in SIZE_CLASSES:
            acc += share
            if r < acc or share == SIZE_CLASSES[-1][0]:
                sizes.append(rng.randint(low, high))
                break
    return sizes


def synthetic_snapshot(
    groups: int, seed: int = 5337, previous: bool = False, taken_at: datetime | None = None
):
    """A Snapshot with ``groups`` groups of mixed sizes (module docstring), taken at ``taken_at`` (default:
    now); ``previous`` gives the one taken ``INTERVAL_S`` before it (log ends and committed offsets
    rolled back by the rates)."""
    from rebalance_advisor.domain.snapshot_model import (
        CommittedOffset,
        Group,
        GroupMemberSnapshot,
        PartitionOffsets,
        Snapshot,
    )

    rng = random.Random(seed + 1)
    back = INTERVAL_S if previous else 0.0
    partitions, out_groups, committed = [], [], []
    for t, count in enumerate(group_partitions(groups, seed)):
        topic = f"topic-{t:06d}"
        weights = [rank**-1.1 for rank in range(1, count + 1)]
        rng.shuffle(weights)
        rates = [TOPIC_RATE * count * w / sum(weights) for w in weights]
        ends = [1_000_000 + rng.randint(0, 1000) for _ in range(count)]
        partitions.extend(
            PartitionOffsets(topic, p, 0, ends[p] - round(rates[p] * back), 1) for p in range(count)
        )
        member_count = max(1, min(50, count // 8 or 1 + count // 3))
        share = TOPIC_RATE * count / member_count / max(1, count // member_count)
        for g in range(t * GROUPS_PER_TOPIC, min(groups, (t + 1) * GROUPS_PER_TOPIC)):
            group_id = f"group-{g:06d}"
            lags = [max(1, int(20_000 / (rank**1.1))) for rank in range(1, count + 1)]
            rng.shuffle(lags)
            for p, lag in enumerate(lags):
                offset = ends[p] - lag
                if previous:  # still behind then: the member had backlog on it at both ends
                    offset = min(offset - round(share * back), ends[p] - round(rates[p] * back) - 1)
                committed.append(CommittedOffset(group_id, topic, p, offset))
            out_groups.append(_range_group(group_id, topic, count, member_count, Group, GroupMemberSnapshot))
    now = taken_at or datetime.now(UTC)
    return Snapshot(
        taken_at=now - timedelta(seconds=back),
        bootstrap_servers="bench:9092",
        cluster_id="bench",
        duration_s=0.0,
        groups=out_groups,
        committed=committed,
        partitions=partitions,
    )


def _range_group(group_id, topic, count, member_count, group_type, member_type):
    """A classic group whose owners are as Kafka's range assignor left them."""
    per, extra = divmod(count, member_count)
    members, start = [], 0
    for m in range(member_count):
        take = per + (1 if m < extra else 0)
        members.append(
            member_type(
                member_id=f"{group_id}-m{m:02d}",
                client_id=f"c{m}",
                host="/10.0.0.1",
                subscribed_topics=(topic,),
                assignment=tuple((topic, p) for p in range(start, start + take)),
                position=m,
            )
        )
        start += take
    return group_type(group_id, "Stable", "classic", "range", 1, "10.0.0.1", tuple(members))


def write_history(groups: int, url: str) -> int:
    """Store the previous snapshot, then the current one (rates derived from the pair); its id.

    Both are stamped from one clock reading, exactly ``INTERVAL_S`` apart: the store derives the rates
    from the stamps, and stamping each when it was generated (v1 fleets) stretched the interval by the
    time it took to build and store the first, so the rates came out 2x (10,000 groups) to 37x
    (100,000 groups) too low and the fleets' sizes were not the same workload (docs/benchmarks/sizing.md).
    """
    from rebalance_advisor import store

    taken_at = datetime.now(UTC)
    store.write_snapshot(synthetic_snapshot(groups, previous=True, taken_at=taken_at), url)
    return store.write_snapshot(synthetic_snapshot(groups, taken_at=taken_at), url)


def tree_cpu_s() -> tuple[float, float, float]:
    """CPU seconds (user + system) of (this driver process, its descendants: Spark's JVM, whose
    task threads are the executors under ``local[N]``, and its Python workers; of those, the
    JVM's). On a shared machine wall time includes waiting for a core; this is the work done."""
    import psutil

    me = psutil.Process()
    own = me.cpu_times()
    rest = jvm = 0.0
    for proc in me.children(recursive=True):
        try:
            t = proc.cpu_times()
            name = proc.name()
        except psutil.NoSuchProcess:
            continue
        used = t.user + t.system + t.children_user + t.children_system
        rest += used
        jvm += used if name == "java" else 0.0
    return own.user + own.system, rest + own.children_user + own.children_system, jvm


class PeakRss:
    """Samples the resident memory of the driver (this Python process) every 50 ms and of Spark's JVM
    every second (finding it walks every child process: every 50 ms that cost the driver a few
    seconds of CPU per minute of a run, charged to the driver CPU column)."""

    def __init__(self) -> None:
        import threading

        self.driver = self.jvm = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def __enter__(self) -> PeakRss:
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join()

    def _run(self) -> None:
        import psutil

        me = psutil.Process()
        ticks = 0
        while not self._stop.wait(0.05):
            self.driver = max(self.driver, me.memory_info().rss)
            ticks += 1
            if ticks % 20:
                continue
            for child in me.children(recursive=True):
                try:
                    if child.name() == "java":
                        self.jvm = max(self.jvm, child.memory_info().rss)
                except psutil.NoSuchProcess:
                    continue


def stored_fleet(size: int, cache: Path) -> Path:
    """A SQLite file holding the two synthetic snapshots of ``size`` groups, built once (in a child
    process, so the generator's memory is not charged to the driver) and kept under ``cache``."""
    path = cache / f"fleet-{size}-{FLEET_VERSION}.db"
    if not path.exists():
        tmp = path.with_suffix(".tmp")
        tmp.unlink(missing_ok=True)
        code = (
            "import sys; sys.path.insert(0, 'bench'); import pipeline; from rebalance_advisor import store; "
            f"url = 'sqlite:///{tmp}'; store.upgrade(url); print(pipeline.write_history({size}, url))"
        )
        subprocess.run([sys.executable, "-c", code], check=True, cwd=ROOT, stdout=subprocess.DEVNULL)
        tmp.rename(path)
    return path


def uptime() -> str:
    return subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip()


def stored_flagged(url: str, run_id: int) -> int:
    """Flagged outcome rows the run stored: what the run's ``flagged`` list must agree with."""
    import sqlalchemy as sa
    from rebalance_advisor.domain.decisions import FLAGGED_OUTCOMES
    from rebalance_advisor.store import db
    from rebalance_advisor.store.plan_models import GroupOutcome

    query = sa.select(sa.func.count()).where(
        GroupOutcome.run_id == run_id, GroupOutcome.outcome.in_(FLAGGED_OUTCOMES)
    )
    with db.connect(url) as conn:
        return conn.execute(query).scalar_one()


def measure(spark, url: str, path: str) -> tuple[dict, list]:
    """One planner run on the newest snapshot of ``url``: timings, CPU, peak RSS, load; and its
    outcomes. Planned as of 30 s after the snapshot, so both paths and every rerun of a stored fleet
    decide on the same ages (capacities, cool-downs)."""
    import sqlalchemy as sa
    from rebalance_advisor import store
    from rebalance_advisor.adapters.spark_planner import run_planner
    from rebalance_advisor.domain.timestamps import assume_utc
    from rebalance_advisor.store import db
    from rebalance_advisor.store.models import SnapshotRow
    from rebalance_advisor.store.plans import run_outcomes

    store.upgrade(url)  # a fleet stored by an older schema
    with db.connect(url) as conn:
        taken_at, interval = conn.execute(
            sa.select(SnapshotRow.taken_at, SnapshotRow.rate_interval_s)
            .order_by(SnapshotRow.id.desc())
            .limit(1)
        ).one()
    taken_at = assume_utc(taken_at)
    before = uptime()
    cpu0 = tree_cpu_s()
    with PeakRss() as rss:
        run = run_planner(
            spark, url, "latest", now=taken_at + timedelta(seconds=30), pipeline=path == "pipeline"
        )
    cpu1 = tree_cpu_s()
    row = {
        "groups": run.group_count,
        "flagged": len(run.flagged),
        "stored_flagged": stored_flagged(url, run.run_id),
        "rate_interval_s": interval,
        "timings": run.timings,
        "driver_cpu_s": cpu1[0] - cpu0[0],
        "executor_cpu_s": cpu1[1] - cpu0[1],
        "jvm_cpu_s": cpu1[2] - cpu0[2],
        "driver_peak_rss_mb": rss.driver / 2**20,
        "jvm_peak_rss_mb": rss.jvm / 2**20,
        "uptime_before": before,
        "uptime_after": uptime(),
    }
    # a run of more than spark_pipeline.KEPT_OUTCOME_LINES groups hands back no lines: the store has them
    lines = run.outcomes if run.outcomes is not None else run_outcomes(run.run_id, url)
    # what both paths decide alike (a line read back has its run id and not its plan's status)
    return row, [dataclasses.replace(o, plan_id=None, plan_status=None, run_id=None) for o in lines]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--sizes", default="10000,30000,100000", help="group counts, comma-separated")
    parser.add_argument("--quick", action="store_true", help="1,000 groups only (a smoke run)")
    parser.add_argument("--master", default="local[2]", help="Spark master (the targets are for local[2])")
    parser.add_argument(
        "--path", default="pipeline", choices=("pipeline", "driver", "both"),
        help="pipeline: executors read, plan and stage; driver: the driver reads and writes all; both: each in turn",
    )  # fmt: skip
    parser.add_argument(
        "--cache",
        default=None,
        help="where the stored fleets are kept (default: under REBALANCE_ADVISOR_HOME)",
    )
    parser.add_argument("--out", default="pipeline.json", help="file name under bench/results")
    args = parser.parse_args(argv)
    sizes = [1000] if args.quick else [int(s) for s in args.sizes.split(",")]
    home = Path(os.environ.get("REBALANCE_ADVISOR_HOME", Path.home() / ".rebalance-advisor"))
    cache = Path(args.cache) if args.cache else home / "bench-fleets"
    cache.mkdir(parents=True, exist_ok=True)

    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    from rebalance_advisor.adapters.spark_session import spark_session

    fleets = {size: stored_fleet(size, cache) for size in sizes}
    spark = spark_session(args.master, "rebalance-advisor-bench")
    rows = []
    try:
        with tempfile.TemporaryDirectory(prefix="rebalance-advisor-bench-") as tmp:
            # Warm-up: JVM, Python workers and Arrow paths, so the first size is not charged for them.
            warm = Path(tmp) / "warm.db"
            shutil.copy(stored_fleet(100, cache), warm)
            paths = ["driver", "pipeline"] if args.path == "both" else [args.path]
            for path in paths:
                measure(spark, f"sqlite:///{warm}", path)
            for size in sizes:
                outcomes = {}
                for path in paths:  # back to back: the same load for both paths
                    work = (
                        Path(tmp) / f"run-{size}-{path}.db"
                    )  # a fresh copy (and a fresh engine): no plans yet
                    shutil.copy(fleets[size], work)
                    row, outcomes[path] = measure(spark, f"sqlite:///{work}", path)
                    rows.append({"size": size, "path": path, **row})
                    work.unlink()
                    print(f"  {size:>6} groups, {path}: {row['timings']['total_s']:.1f} s, rate interval "
                          f"{row['rate_interval_s']} s ({row['uptime_after']})", file=sys.stderr)  # fmt: skip
                if len(outcomes) == 2:
                    rows[-1]["same_outcomes_as_driver"] = outcomes["driver"] == outcomes["pipeline"]
    finally:
        spark.stop()
    print_table(rows, args)
    out = ROOT / "bench" / "results" / args.out
    out.parent.mkdir(parents=True, exist_ok=True)
    meta = {"machine": platform.platform(), "cpus": os.cpu_count(), "master": args.master,
            "path": args.path, "at": datetime.now(UTC).isoformat()}  # fmt: skip
    out.write_text(json.dumps({"meta": meta, "results": rows}, indent=2) + "\n")
    print(f"wrote {out}")
    return 0


def print_table(rows: list[dict], args) -> None:
    """The table: time split, CPU, peak memory and load per size, and growth against the first size."""
    header = (
        f"{'groups':>7} {'path':>8} {'flagged':>7} | {'read':>6} {'plan':>6} {'write':>6} {'total':>7} | "
        f"{'drv cpu':>7} {'exec cpu':>8} | {'drv MB':>6} {'jvm MB':>6} {'x drv':>5} | load (1/5/15 min) after"
    )
    print(f"planner end to end, Spark {args.master}, {os.cpu_count()} cores (seconds)")
    print(header)
    print("-" * len(header))
    for r in rows:
        base = next(b["driver_peak_rss_mb"] for b in rows if b["path"] == r["path"])
        t = r["timings"]
        print(
            f"{r['size']:>7} {r['path']:>8} {r['flagged']:>7} | {t.get('read_s', 0):>6.1f} {t.get('plan_s', 0):>6.1f} "
            f"{t.get('write_s', 0):>6.1f} {t['total_s']:>7.1f} | {r['driver_cpu_s']:>7.1f} {r['executor_cpu_s']:>8.1f} | "
            f"{r['driver_peak_rss_mb']:>6.0f} {r['jvm_peak_rss_mb']:>6.0f} {r['driver_peak_rss_mb'] / base:>5.2f} | "
            f"{r['uptime_after'].split('load average:')[-1].strip()}"
        )
        if r.get("stored_flagged", r["flagged"]) != r["flagged"]:
            print(
                f"{'':>7} the run reported {r['flagged']} flagged, its stored outcomes {r['stored_flagged']}"
            )
        if "same_outcomes_as_driver" in r:
            print(f"{'':>7} outcomes of both paths identical: {r['same_outcomes_as_driver']}")


if __name__ == "__main__":
    sys.exit(main())
