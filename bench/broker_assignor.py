"""Benchmark of the broker-side ``advised`` assignor against Kafka's ``uniform`` (not a test).

    python bench/broker_assignor.py            # 1k x 10k, 1k x 100k, 10k x 100k
    python bench/broker_assignor.py --quick    # 1k x 10k only

It builds the plugin's test classes (Maven) and runs their ``AssignBench`` main in one JVM per size:
assign() of uniform, of advised with no plan for the group (a miss, 100 other groups' plans indexed)
and of advised applying a plan for every member (a hit), on the same group spec, in three
scenarios: ``steady`` (the plan already in force, re-checked), ``shift`` (a plan moving a tenth of
the partitions) and ``join`` (a member joined; the plan names the others). Times are the median
and minimum wall ms and the median and minimum CPU ms of the calling thread; the targets are
judged on the CPU medians, which other work on this shared 2-core machine inflates less than wall
time (the load average is printed and stored). Writes bench/results/broker_assignor.json.

Targets (docs/operations/broker-plugin.md, "Cost"): at 10k members x 100k partitions a hit costs at
most 2x uniform and a miss at most uniform + 10 %.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "include"))

from rebalance_advisor.adapters import kafka_jars  # noqa: E402

SIZES = [(1_000, 10_000), (1_000, 100_000), (10_000, 100_000)]
HIT_LIMIT, MISS_LIMIT = 2.0, 1.10
TARGET_SIZE = (10_000, 100_000)


def run_size(build: Path, members: int, partitions: int, topics: int, repeats: int) -> list[dict]:
    """One JVM timing every scenario and assignor at this size; its JSON lines."""
    libs = kafka_jars.fetch_jars()
    classpath = os.pathsep.join([str(build / "classes"), str(build / "test-classes"), f"{libs}/*"])
    command = [
        kafka_jars.java_executable(), "-Xmx3g", "-XX:+UseG1GC", kafka_jars.log4j_option(), "-cp", classpath,
        "io.rebalanceadvisor.broker.assignor.AssignBench", str(members), str(partitions), str(topics), str(repeats),
    ]  # fmt: skip
    done = subprocess.run(command, capture_output=True, text=True, timeout=1800, check=False)
    if done.returncode != 0:
        raise SystemExit(f"AssignBench failed (exit {done.returncode}):\n{done.stderr[-3000:]}")
    return [json.loads(line) for line in done.stdout.splitlines() if line.startswith("{")]


def with_ratios(rows: list[dict]) -> list[dict]:
    """Each row with its CPU-median ratio to uniform's in the same scenario and size."""
    uniform = {(r["scenario"], r["members"], r["partitions"]): r for r in rows if r["assignor"] == "uniform"}
    for row in rows:
        base = uniform[(row["scenario"], row["members"], row["partitions"])]
        row["cpu_ratio_to_uniform"] = round(row["cpu_median_ms"] / max(base["cpu_median_ms"], 1e-9), 3)
        row["wall_min_ratio_to_uniform"] = round(row["min_ms"] / max(base["min_ms"], 1e-9), 3)
    return rows


def print_table(rows: list[dict]) -> None:
    header = f"{'scenario':<8} {'members':>7} {'parts':>7} {'assignor':<13} {'med ms':>8} {'min ms':>8} "
    print(header + f"{'cpu med':>8} {'cpu min':>8} {'cpu x uni':>9}")
    for r in rows:
        print(
            f"{r['scenario']:<8} {r['members']:>7} {r['partitions']:>7} {r['assignor']:<13} "
            f"{r['median_ms']:>8.2f} {r['min_ms']:>8.2f} {r['cpu_median_ms']:>8.2f} {r['cpu_min_ms']:>8.2f} "
            f"{r['cpu_ratio_to_uniform']:>9.2f}"
        )


def targets(rows: list[dict]) -> list[dict]:
    """PASS/FAIL per scenario at the target size, on the CPU-median ratios."""
    found = []
    for assignor, limit, what in (("advised-hit", HIT_LIMIT, "hit <= 2x uniform"),
                                  ("advised-miss", MISS_LIMIT, "miss <= uniform + 10 %")):  # fmt: skip
        at_size = [
            r for r in rows if r["assignor"] == assignor and (r["members"], r["partitions"]) == TARGET_SIZE
        ]
        for row in at_size:
            ratio = row["cpu_ratio_to_uniform"]
            found.append({
                "target": f"{what} ({row['scenario']}, 10k x 100k)",
                "status": "PASS" if ratio <= limit else "FAIL",
                "detail": f"{ratio:.2f}x uniform (CPU medians; wall minimum {row['wall_min_ratio_to_uniform']:.2f}x)",
            })  # fmt: skip
    return found or [{"target": "hit and miss at 10k x 100k", "status": "NOT RUN", "detail": "size not run"}]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="1k members x 10k partitions only")
    parser.add_argument("--topics", type=int, default=10)
    parser.add_argument("--repeats", type=int, default=21)
    parser.add_argument(
        "--out", default=str(Path(__file__).resolve().parent / "results" / "broker_assignor.json")
    )
    args = parser.parse_args()
    result: dict = {"cpu_count": os.cpu_count(), "load_average_start": os.getloadavg()}
    print(f"load average at start: {' '.join(f'{x:.2f}' for x in result['load_average_start'])}")
    with tempfile.TemporaryDirectory(prefix="broker-bench-") as build:
        compiled = kafka_jars.run_plugin_maven(["test-compile"], Path(build), timeout=900)
        if compiled.returncode != 0:
            raise SystemExit(f"building the plugin's test classes failed:\n{compiled.stdout[-3000:]}")
        rows = []
        for members, partitions in SIZES[:1] if args.quick else SIZES:
            rows += run_size(Path(build), members, partitions, args.topics, args.repeats)
    result["rows"] = with_ratios(rows)
    result["load_average_end"] = os.getloadavg()
    result["targets"] = targets(rows)
    print_table(rows)
    print("\ntargets:")
    for t in result["targets"]:
        print(f"{t['status']:<8} {t['target']}: {t['detail']}")
    print(f"load average at end: {' '.join(f'{x:.2f}' for x in result['load_average_end'])}")
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(result, indent=1))
    print(f"\nwrote {args.out}")


if __name__ == "__main__":
    main()
