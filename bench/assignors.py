"""Benchmark of the assignors (not a test): speed and memory over Kafka's benchmark shapes, and
plan quality on Zipf-distributed lags starting from a range assignment.

    python bench/assignors.py            # full grid + quality
    python bench/assignors.py --quick    # a small grid + quality on small groups

Prints tables, then one PASS / FAIL / NOT RUN line per target (:func:`targets`; also under "targets" in
the JSON), and writes bench/results/assignors.json. "ms" is the assignor call alone
(``owners``; the GroupSpec is built first and timed separately as "spec"); "+dict" is a separate
call of the public ``assign`` (assignor again plus the dict form), i.e. the whole assignment. The
spec caches its (topic, partition) key tuples on first use, so the first strategy's "+dict" per
shape also pays for building them. "cpu" is the process CPU time of that ``assign`` call, which
other work on the machine inflates less than wall time. Memory is the tracemalloc peak of a
third, separate call (tracemalloc slows Python code, so it is not timed).

One core: BLAS/OpenMP thread pools are limited to one thread before NumPy loads (the assignors
use no BLAS, so this only rules out hidden parallelism), and the 1-minute load average is
recorded per row and for the run, since other work on the machine inflates the times.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
import tracemalloc
from pathlib import Path

for _var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS", "NUMEXPR_NUM_THREADS"):
    os.environ[_var] = "1"  # before NumPy loads: one core, no hidden thread pools

import numpy as np  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "include"))

from rebalance_advisor.domain.assignors import ASSIGNORS  # noqa: E402
from rebalance_advisor.domain.group_spec import GroupSpec, Member  # noqa: E402
from rebalance_advisor.domain.metrics import compute_metrics, lower_bound_max_lag  # noqa: E402

STRATEGIES = list(ASSIGNORS)


def make_spec(
    members: int, per_member: int, topics: int, identical: bool, lags=None, owned_from=None, seed=0
):
    """members x per_member partitions spread evenly over `topics` topics.

    Differing subscriptions follow Kafka's heterogeneous benchmark idea: topics are split in three
    buckets and member i subscribes to buckets i % 3 and (i + 1) % 3.
    """
    total = members * per_member
    names = [f"topic-{t:04d}" for t in range(topics)]
    sizes = np.full(topics, total // topics)
    sizes[: total % topics] += 1
    topic_col = np.repeat(np.arange(topics), sizes)
    part_col = np.concatenate([np.arange(s) for s in sizes])
    lag_col = np.zeros(total, dtype=np.int64) if lags is None else lags
    if identical:
        shared = tuple(names)
        subs = [shared] * members
    else:
        buckets = [tuple(names[b::3]) for b in range(3)]
        pairs = [tuple(sorted(buckets[b] + buckets[(b + 1) % 3])) for b in range(3)]
        subs = [pairs[i % 3] for i in range(members)]
    member_objs = [Member(member_id=f"consumer-{i:05d}", topics=subs[i]) for i in range(members)]
    topic_names = [names[t] for t in topic_col.tolist()]
    spec = GroupSpec.build("bench", member_objs, topic=topic_names, partition=part_col, lag=lag_col)
    if owned_from is not None:
        spec = with_owned(spec, ASSIGNORS[owned_from].assign(spec), generation=1)
    return spec


def with_owned(spec: GroupSpec, assignment, generation: int) -> GroupSpec:
    members = [
        Member(m.member_id, m.group_instance_id, m.topics, tuple(assignment[m.member_id]), generation)
        for m in spec.members
    ]
    return GroupSpec.build(
        spec.group_id,
        members,
        topic=[spec.topics[t] for t in spec.topic_index.tolist()],
        partition=spec.partition,
        lag=spec.lag,
    )


def speed(args) -> list[dict]:
    rows = []
    members_list = [100, 1000] if args.quick else args.members
    per_list = [5, 50] if args.quick else args.per_member
    topics_list = [10, 100] if args.quick else args.topics
    rng = np.random.default_rng(7)
    for members in members_list:
        for per in per_list:
            for topics in topics_list:
                total = members * per
                if topics > total:
                    print(f"skip {members}x{per} with {topics} topics: more topics than partitions")
                    continue
                for identical in (True, False):
                    lags = rng.zipf(1.5, total).astype(np.int64) % 1_000_000
                    t0 = time.perf_counter()
                    spec = make_spec(members, per, topics, identical, lags=lags)
                    spec_s = time.perf_counter() - t0
                    for name in STRATEGIES:
                        assignor = ASSIGNORS[name]
                        t0 = time.perf_counter()
                        assignor.owners(spec)
                        secs = time.perf_counter() - t0
                        t0, c0 = time.perf_counter(), time.process_time()
                        assignor.assign(spec)
                        dict_s = time.perf_counter() - t0
                        dict_cpu = time.process_time() - c0
                        tracemalloc.start()
                        assignor.owners(spec)
                        peak = tracemalloc.get_traced_memory()[1]
                        tracemalloc.stop()
                        row = dict(
                            members=members,
                            per_member=per,
                            partitions=total,
                            topics=topics,
                            subscriptions="identical" if identical else "differing",
                            strategy=name,
                            seconds=round(secs, 4),
                            seconds_with_dict=round(dict_s, 4),
                            cpu_seconds_with_dict=round(dict_cpu, 4),
                            load_1min=round(os.getloadavg()[0], 2),
                            spec_seconds=round(spec_s, 4),
                            peak_mib=round(peak / 2**20, 1),
                        )
                        rows.append(row)
                        print(
                            f"{members:>6} x {per:>3} = {total:>7} p, {topics:>5} t, {row['subscriptions']:<9} "
                            f"{name:<17} {secs * 1000:9.1f} ms  (+dict {dict_s * 1000:8.1f} ms, cpu {dict_cpu * 1000:7.1f})  "
                            f"spec {spec_s * 1000:7.1f} ms  peak {row['peak_mib']:7.1f} MiB  load {row['load_1min']:.2f}",
                            flush=True,
                        )
    return rows


def quality(args) -> list[dict]:
    rows = []
    shapes = [(20, 10, 10), (100, 10, 10)] if args.quick else [(20, 10, 10), (100, 10, 10), (1000, 10, 100)]
    for members, per, topics in shapes:
        for exponent in (1.1, 1.5, 2.0):
            for seed in (1, 2, 3):
                rng = np.random.default_rng(seed)
                total = members * per
                lags = np.minimum(rng.zipf(exponent, total), 10**9).astype(np.int64) * 100
                lags = rng.permutation(lags)  # random placement
                spec = make_spec(members, per, topics, True, lags=lags, owned_from="range")
                bound = lower_bound_max_lag(spec)
                for name in STRATEGIES:
                    t0 = time.perf_counter()
                    owners = ASSIGNORS[name].owners(spec)
                    secs = time.perf_counter() - t0
                    m = compute_metrics(spec, owners, lower_bound=bound)
                    rows.append(
                        dict(
                            members=members,
                            partitions=total,
                            topics=topics,
                            exponent=exponent,
                            seed=seed,
                            strategy=name,
                            max_over_bound=m.max_member_lag / bound if bound else 1.0,
                            imbalance=m.imbalance,
                            moves=m.moves,
                            seconds=secs,
                        )
                    )
    print()
    print(f"{'shape':<18} {'zipf':>4} {'strategy':<17} {'max/LB':>8} {'worst':>8} {'imbal':>7} {'moves':>8}")
    summary = []
    for members, per, topics in shapes:
        for exponent in (1.1, 1.5, 2.0):
            for name in STRATEGIES:
                sel = [
                    r
                    for r in rows
                    if r["members"] == members and r["exponent"] == exponent and r["strategy"] == name
                ]
                avg = dict(
                    shape=f"{members}x{per},{topics}t",
                    exponent=exponent,
                    strategy=name,
                    max_over_bound=float(np.mean([r["max_over_bound"] for r in sel])),
                    worst_max_over_bound=float(np.max([r["max_over_bound"] for r in sel])),
                    imbalance=float(np.mean([r["imbalance"] for r in sel])),
                    moves=float(np.mean([r["moves"] for r in sel])),
                )
                summary.append(avg)
                print(
                    f"{avg['shape']:<18} {exponent:>4} {name:<17} {avg['max_over_bound']:8.4f} "
                    f"{avg['worst_max_over_bound']:8.4f} {avg['imbalance']:7.3f} {avg['moves']:8.1f}"
                )
    return rows + [dict(summary=s) for s in summary]


TARGET_MEMBERS, TARGET_PARTITIONS, TARGET_SECONDS = 10_000, 500_000, 1.0
QUALITY_TARGETS = (
    "quality lag_aware_sticky <= lower bound + 2%",
    "quality lag_aware_sticky <= lag_aware + 1%",
    "moves lag_aware_sticky <= lag_aware / 4",
)


def targets(result: dict) -> list[dict]:
    """PASS / FAIL / NOT RUN per assignor target, each with the figure it was judged on.

    Speed: the whole assignment (``assign``, i.e. "+dict") of every shape with 10,000 members and
    500,000 partitions, identical and differing, under 1 s per strategy. Quality, checked on every
    (shape, exponent, seed) run, not on averages: lag_aware_sticky's max member lag within 2% of
    the lower bound, at most lag_aware's + 1%, with at most a quarter of lag_aware's moves.
    """
    out = []

    def add(name: str, ok: bool | None, detail: str) -> None:
        out.append(
            dict(target=name, status="NOT RUN" if ok is None else "PASS" if ok else "FAIL", detail=detail)
        )

    speed_rows = [
        r
        for r in result.get("speed", [])
        if r["members"] == TARGET_MEMBERS and r["partitions"] == TARGET_PARTITIONS
    ]
    for name in STRATEGIES:
        sel = [r for r in speed_rows if r["strategy"] == name]
        if not sel:
            add(f"speed {name}", None, f"no {TARGET_MEMBERS} x {TARGET_PARTITIONS} row in this run")
            continue
        worst = max(sel, key=lambda r: r["seconds_with_dict"])
        add(
            f"speed {name}",
            worst["seconds_with_dict"] < TARGET_SECONDS,
            f"slowest +dict {worst['seconds_with_dict']:.3f} s ({worst['topics']} topics, "
            f"{worst['subscriptions']}) < {TARGET_SECONDS} s",
        )
    runs: dict[tuple, dict[str, dict]] = {}
    for r in result.get("quality", []):
        if "strategy" in r:
            runs.setdefault((r["members"], r["exponent"], r["seed"]), {})[r["strategy"]] = r
    pairs = [(run["lag_aware_sticky"], run["lag_aware"]) for run in runs.values()]
    if not pairs:
        for name in QUALITY_TARGETS:
            add(name, None, "no quality runs")
        return out
    gap = max(s["max_over_bound"] for s, _ in pairs)
    add(
        "quality lag_aware_sticky <= lower bound + 2%",
        gap <= 1.02,
        f"worst max/LB {gap:.4f} over {len(pairs)} runs",
    )
    ratio = max(s["max_over_bound"] / a["max_over_bound"] for s, a in pairs)
    add(QUALITY_TARGETS[1], ratio <= 1.01, f"worst max/lag_aware's max {ratio:.4f}")
    over = [(s["moves"], a["moves"]) for s, a in pairs if 4 * s["moves"] > a["moves"]]
    worst_moves = max(pairs, key=lambda p: p[0]["moves"] / max(p[1]["moves"], 1))
    add(
        QUALITY_TARGETS[2],
        not over,
        f"{len(over)} of {len(pairs)} runs over; highest share {worst_moves[0]['moves']} of "
        f"{worst_moves[1]['moves']}",
    )
    baseline = [a["max_over_bound"] for _, a in pairs]
    out.append(
        dict(
            target="baseline lag_aware gap (reported, no target)",
            status="INFO",
            detail=f"max/LB mean {np.mean(baseline):.4f}, worst {max(baseline):.4f}",
        )
    )
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="small grid")
    parser.add_argument("--members", type=int, nargs="+", default=[100, 1000, 10000])
    parser.add_argument("--per-member", type=int, nargs="+", default=[5, 10, 50])
    parser.add_argument("--topics", type=int, nargs="+", default=[10, 100, 1000])
    parser.add_argument("--no-speed", action="store_true")
    parser.add_argument("--no-quality", action="store_true")
    parser.add_argument("--out", default=str(Path(__file__).resolve().parent / "results" / "assignors.json"))
    args = parser.parse_args()
    result = {
        "cpu_count": os.cpu_count(),
        "numpy": np.__version__,
        "threads": {v: os.environ[v] for v in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS")},
        "load_average_start": os.getloadavg(),
    }
    print(f"load average at start: {' '.join(f'{x:.2f}' for x in result['load_average_start'])}")
    if not args.no_speed:
        result["speed"] = speed(args)
    if not args.no_quality:
        result["quality"] = quality(args)
    result["load_average_end"] = os.getloadavg()
    result["targets"] = targets(result)
    print("\ntargets:")
    for t in result["targets"]:
        print(f"{t['status']:<8} {t['target']}: {t['detail']}")
    print(f"load average at end: {' '.join(f'{x:.2f}' for x in result['load_average_end'])}")
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(result, indent=1))
    print(f"\nwrote {args.out}")


if __name__ == "__main__":
    main()
