"""Benchmark: key-range sharing (issue 15).

Sections (all by default, or pick with --only):
  hash   the client helper's key filter: records/s through ``select_in_range`` (murmur2 of every
         key + range mask + selection) on real confluent-kafka Message objects, per key shape and
         poll batch size, one thread. Target: >= 200,000 records/s filtered per consumer.

Prints a table per section and PASS/FAIL per target, writes JSON to bench/results/key_range.json.

    .venv/bin/python bench/key_range.py --only hash
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import random
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from confluent_kafka import Message
from rebalance_advisor_client.key_hash import HASH_SPACE, select_in_range

RESULTS = Path(__file__).resolve().parent / "results" / "key_range.json"
FILTER_TARGET = 200_000  # records/s filtered per consumer


def _key_shapes(rng: random.Random) -> dict[str, Callable[[int], bytes]]:
    return {
        "fixed 16 B": lambda i: f"key-{i:012d}".encode(),
        "varying 6-17 B": lambda i: f"user-{rng.randrange(10 ** rng.randint(1, 12))}".encode(),
        "uuid 36 B": lambda i: str(__import__("uuid").UUID(int=rng.getrandbits(128))).encode(),
        "varying 1-200 B": lambda i: rng.randbytes(rng.randint(1, 200)),
    }


def bench_hash(seconds: float) -> dict[str, Any]:
    """records/s through the filter, range = a quarter of the hash space (a 4-way split)."""
    rng = random.Random(15)
    rows = []
    print(f"\n{'keys':<16} {'batch':>6} {'filtered rec/s':>15} {'kept':>6}")
    for shape, make in _key_shapes(rng).items():
        for batch in (100, 500, 1000):
            msgs = [
                Message(key=make(i), value=b"v" * 100, topic="t", partition=0, offset=i) for i in range(batch)
            ]
            lo, hi = HASH_SPACE // 4, HASH_SPACE // 2
            done = kept = 0
            start = time.perf_counter()
            while time.perf_counter() - start < seconds:
                kept += len(select_in_range(msgs, lo, hi))
                done += batch
            rate = done / (time.perf_counter() - start)
            rows.append({"keys": shape, "batch": batch, "records_per_s": round(rate), "kept": kept / done})
            print(f"{shape:<16} {batch:>6} {rate:>15,.0f} {kept / done:>6.2f}")
    worst = min(r["records_per_s"] for r in rows if r["batch"] >= 500)
    return {
        "rows": rows,
        "target": {
            "target": f">= {FILTER_TARGET:,} records/s filtered per consumer (poll batches >= 500)",
            "status": "PASS" if worst >= FILTER_TARGET else "FAIL",
            "detail": f"slowest key shape at batch >= 500: {worst:,} records/s",
        },
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--only", choices=["hash"], nargs="+", default=["hash"])
    parser.add_argument("--seconds", type=float, default=1.0, help="time per hash row")
    parser.add_argument("--out", default=str(RESULTS))
    args = parser.parse_args()
    result: dict[str, Any] = {
        "cpu_count": os.cpu_count(),
        "python": platform.python_version(),
        "load_average_start": os.getloadavg(),
    }
    print(f"load average at start: {' '.join(f'{x:.2f}' for x in result['load_average_start'])}")
    if "hash" in args.only:
        result["hash"] = bench_hash(args.seconds)
    result["load_average_end"] = os.getloadavg()
    targets = [
        section["target"] for section in result.values() if isinstance(section, dict) and "target" in section
    ]
    print("\nissue 15 targets:")
    for t in targets:
        print(f"{t['status']:<8} {t['target']}: {t['detail']}")
    print(f"load average at end: {' '.join(f'{x:.2f}' for x in result['load_average_end'])}")
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(result, indent=1))
    print(f"\nwrote {args.out}")


if __name__ == "__main__":
    main()
