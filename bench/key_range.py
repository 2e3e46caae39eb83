"""Benchmark: key-range sharing (docs/concepts/key-ranges.md).

Sections (all by default, or pick with --only):
  hash   the client helper's key filter: records/s through ``select_in_range`` (murmur2 of every
         key + range mask + selection) on real confluent-kafka Message objects, per key shape and
         poll batch size, one thread. Target: >= 200,000 records/s filtered per consumer.

  drain  a real broker (its own, unless --bootstrap-servers): one partition with a backlog of
         --records records (keys uniform over 100,000 keys, then Zipf 1.1 over 10,000 keys) drained
         by 1, 2 and 4 members sharing it, each a separate process with a fixed processing
         capacity (--capacity records/s, a sleep, like I/O-bound work). Cut points come from
         key_range.plan over a bounded sample (20,000 records) of the partition. Targets: 4
         members >= 3.2x the throughput of 1 (uniform); Zipf >= 80 % of the uniform speed-up; a
         hot key reported, not split.
  handover  continuous production over 1,000 keys (value = per-key sequence number) while the
         partition goes 1 member -> 4 ranges (split) -> 1 member (merge); every processed record is
         logged. Targets: zero per-key order violations, zero duplicates, zero losses.

Prints a table per section and PASS/FAIL per target, writes JSON to bench/results/key_range.json.

    .venv/bin/python bench/key_range.py --only hash
    .venv/bin/python bench/key_range.py --only drain handover --records 200000
"""

from __future__ import annotations

import argparse
import contextlib
import json
import multiprocessing
import os
import platform
import random
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
from confluent_kafka import Message
from rebalance_advisor_client.key_hash import HASH_SPACE, positive_hashes, select_in_range

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
    """records/s through the filter, range = a quarter of the hash space (a 4-way split).

    Two rates: per wall second, and per CPU second of this process (``time.process_time``). The
    machine is shared (other processes compete for its 2 cores), so the CPU rate is what one
    consumer's filter costs; the target is checked on it, and both are recorded.
    """
    rng = random.Random(15)
    rows = []
    print(f"\n{'keys':<16} {'batch':>6} {'rec/s wall':>11} {'rec/CPU-s':>11} {'kept':>6}")
    for shape, make in _key_shapes(rng).items():
        for batch in (100, 500, 1000):
            msgs = [
                Message(key=make(i), value=b"v" * 100, topic="t", partition=0, offset=i) for i in range(batch)
            ]
            lo, hi = HASH_SPACE // 4, HASH_SPACE // 2
            done = kept = 0
            start, cpu = time.perf_counter(), time.process_time()
            while time.process_time() - cpu < seconds:
                kept += len(select_in_range(msgs, lo, hi))
                done += batch
            wall = done / (time.perf_counter() - start)
            per_cpu = done / (time.process_time() - cpu)
            rows.append(
                {
                    "keys": shape,
                    "batch": batch,
                    "records_per_s": round(wall),
                    "records_per_cpu_s": round(per_cpu),
                    "kept": kept / done,
                }
            )
            print(f"{shape:<16} {batch:>6} {wall:>11,.0f} {per_cpu:>11,.0f} {kept / done:>6.2f}")
    worst = min(r["records_per_cpu_s"] for r in rows if r["batch"] >= 500)
    worst_wall = min(r["records_per_s"] for r in rows if r["batch"] >= 500)
    return {
        "rows": rows,
        "target": {
            "target": f">= {FILTER_TARGET:,} records/s filtered per consumer (per CPU second, batches >= 500)",
            "status": "PASS" if worst >= FILTER_TARGET else "FAIL",
            "detail": f"slowest key shape at batch >= 500: {worst:,} records/CPU-s ({worst_wall:,} per wall s)",
        },
    }


# ---- real broker --------------------------------------------------------------------------------

SAMPLE = 20_000


def _produce(bootstrap: str, topic: str, keys: np.ndarray, values: list[bytes] | None = None) -> None:
    from confluent_kafka import Producer

    producer = Producer(
        {"bootstrap.servers": bootstrap, "linger.ms": 20, "batch.size": 1_000_000, "acks": "all"}
    )
    for i, k in enumerate(keys.tolist()):
        while True:
            try:
                producer.produce(topic, key=b"key-%d" % k, value=values[i] if values else b"v", partition=0)
                break
            except BufferError:
                producer.poll(0.05)
        if i % 10000 == 0:
            producer.poll(0)
    assert producer.flush(120) == 0


def _create_topic(bootstrap: str, topic: str) -> None:
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, 1, 1)])[topic].result(60)


def _sample_keys(bootstrap: str, topic: str, count: int) -> list[bytes | None]:
    """A bounded read of the partition's latest records (the advisor's key sample)."""
    from confluent_kafka import Consumer, TopicPartition

    c = Consumer(
        {"bootstrap.servers": bootstrap, "group.id": "keyrange-sampler", "enable.auto.commit": False}
    )
    low, high = c.get_watermark_offsets(TopicPartition(topic, 0), timeout=30)
    c.assign([TopicPartition(topic, 0, max(low, high - count))])
    keys: list[bytes | None] = []
    while len(keys) < min(count, high - low):
        keys += [m.key() for m in c.consume(1000, 1.0) if m.error() is None]
    c.close()
    return keys


def _drain_member(bootstrap, group, topic, lo, hi, whole, end, capacity, queue) -> None:
    from rebalance_advisor_client.range_member import RangeMember

    member = RangeMember(bootstrap, group, topic, 0, lo, hi, whole=whole)
    queue.put(("ready", None))
    start = time.perf_counter()
    done = [0]

    def handle(batch) -> None:  # fixed processing capacity: done records take done/capacity seconds
        done[0] += len(batch)
        lag = done[0] / capacity - (time.perf_counter() - start)
        if lag > 0:
            time.sleep(lag)

    cpu = time.process_time()
    member.run(handle, until_offset=end)
    member.close()
    queue.put(("done", (time.perf_counter() - start, done[0], time.process_time() - cpu)))


def _drain(
    bootstrap: str, topic: str, group: str, cuts: list[tuple[int, int]], end: int, capacity: float
) -> dict:
    ctx = multiprocessing.get_context("spawn")
    queue = ctx.Queue()
    whole = len(cuts) == 1
    procs = [
        ctx.Process(target=_drain_member, args=(bootstrap, group, topic, lo, hi, whole, end, capacity, queue))
        for lo, hi in cuts
    ]
    for p in procs:
        p.start()
    results = []
    try:
        while len(results) < len(procs):
            kind, value = queue.get(timeout=3600)
            if kind == "done":
                results.append(value)
    finally:
        for p in procs:
            p.join(30)
            if p.is_alive():
                p.kill()
    seconds = max(r[0] for r in results)
    handled = sum(r[1] for r in results)
    return {
        "members": len(cuts),
        "cpu_seconds_per_member": [round(r[2], 2) for r in results],
        "seconds": seconds,
        "records": handled,
        "records_per_s": handled / seconds,
        "per_member": [r[1] for r in results],
    }


def bench_drain(bootstrap: str, records: int, capacity: float) -> dict[str, Any]:
    from rebalance_advisor.domain.assignors.key_range import KeySample, KeySharingPolicy, plan
    from rebalance_advisor.domain.group_spec import GroupSpec, Member, PartitionLag

    rng = np.random.default_rng(15)
    cases = {
        "uniform": rng.integers(0, 100_000, records),
        "zipf 1.1": _zipf(rng, 1.1, 10_000, records),
    }
    rows = []
    hot_reports = {}
    print(
        f"\n{'keys':<10} {'members':>7} {'seconds':>8} {'rec/s':>9} {'speed-up':>8} {'load':>5}  per member (CPU s)"
    )
    base = None  # the 1-member uniform rate: the reference for both key shapes
    for name, keys in cases.items():
        topic = f"hot-{name.split()[0]}"
        _create_topic(bootstrap, topic)
        _produce(bootstrap, topic, keys)
        sample = KeySample.from_keys(_sample_keys(bootstrap, topic, SAMPLE))
        key_hashes = positive_hashes([b"key-%d" % k for k in range(int(keys.max()) + 1)])
        all_hashes = key_hashes[keys]
        for n in (1, 2, 4) if name == "uniform" else (4,):
            members = [Member(f"m{i}", topics=(topic,)) for i in range(n)]
            spec = GroupSpec.build("bench", members, [PartitionLag(topic, 0, records)])
            policy = KeySharingPolicy(
                allowed=True, topics=frozenset({topic}), members=frozenset(m.member_id for m in members)
            )
            # capacity in the load's unit (backlog records): what one member drains in a quarter of the 1-member time
            p = plan(spec, sharing=policy, samples={(topic, 0): sample}, capacity=records / 8)
            cuts = [(r.hash_lo, r.hash_hi) for r in p.ranges] or [(0, HASH_SPACE)]
            if n == 4:
                hot_reports[name] = {
                    "reason": p.reason,
                    "hot_keys": [h.key_hash for h in p.hot_keys],
                    # exact share of all produced records in the heaviest range: cuts by observed
                    # load (the plan) vs cuts by hash width (what a sample-free split would do)
                    "max_range_share_by_load": _max_share(all_hashes, cuts),
                    "max_range_share_by_width": _max_share(
                        all_hashes, [(i * HASH_SPACE // 4, (i + 1) * HASH_SPACE // 4) for i in range(4)]
                    ),
                }
            r = _drain(bootstrap, topic, f"drain-{topic}-{n}", cuts, records, capacity)
            base = base or r["records_per_s"]  # one member's rate does not depend on the keys
            r.update(keys=name, speed_up=r["records_per_s"] / base, load_average_1m=os.getloadavg()[0])
            rows.append(r)
            print(
                f"{name:<10} {n:>7} {r['seconds']:>8.1f} {r['records_per_s']:>9,.0f} {r['speed_up']:>8.2f} "
                f"{r['load_average_1m']:>5.1f}  {r['per_member']} ({r['cpu_seconds_per_member']})"
            )
    uniform4 = next(r for r in rows if r["keys"] == "uniform" and r["members"] == 4)
    zipf4 = next(r for r in rows if r["keys"] == "zipf 1.1")
    zipf_speed_up = zipf4["speed_up"]
    for name, rep in hot_reports.items():
        print(f"plan ({name}, 4 members): {rep['reason']}")
        print(
            f"  heaviest of 4 ranges, share of all records: cuts by observed load "
            f"{rep['max_range_share_by_load']:.1%}, cuts by hash width {rep['max_range_share_by_width']:.1%}"
        )
    top_zipf_hash = int(KeySample.from_keys([b"key-1"]).hashes[0])
    return {
        "records": records,
        "capacity_per_member": capacity,
        "rows": rows,
        "plans": hot_reports,
        "targets": [
            _target(
                ">= 3.2x throughput with 4 members vs 1 (uniform keys)",
                uniform4["speed_up"] >= 3.2,
                f"4 members {uniform4['speed_up']:.2f}x, 2 members "
                f"{next(r for r in rows if r['keys'] == 'uniform' and r['members'] == 2)['speed_up']:.2f}x",
            ),
            _target(
                "Zipf 1.1 speed-up >= 80 % of the uniform one",
                zipf_speed_up >= 0.8 * uniform4["speed_up"],
                f"zipf {zipf_speed_up:.2f}x vs uniform {uniform4['speed_up']:.2f}x "
                f"({zipf_speed_up / uniform4['speed_up']:.0%})",
            ),
            _target(
                "the hottest Zipf key is reported as a hot key, not split",
                hot_reports["zipf 1.1"]["hot_keys"] == [top_zipf_hash],
                f"reported hashes {hot_reports['zipf 1.1']['hot_keys']}, key-1 hashes to {top_zipf_hash}",
            ),
        ],
    }


def _max_share(hashes: np.ndarray, cuts: list[tuple[int, int]]) -> float:
    return max(float(np.count_nonzero((hashes >= lo) & (hashes < hi))) for lo, hi in cuts) / len(hashes)


def _zipf(rng: np.random.Generator, s: float, n: int, size: int) -> np.ndarray:
    """Zipf(s) over keys 1..n (bounded, so not numpy's unbounded zipf)."""
    weights = 1.0 / np.arange(1, n + 1) ** s
    return rng.choice(np.arange(1, n + 1), size=size, p=weights / weights.sum())


def _target(target: str, ok: bool, detail: str) -> dict[str, str]:
    return {"target": target, "status": "PASS" if ok else "FAIL", "detail": detail}


def _handover_member(bootstrap, group, topic, lo, hi, whole, seconds, until, out, capacity, queue) -> None:
    from rebalance_advisor_client.range_member import RangeMember

    member = RangeMember(bootstrap, group, topic, 0, lo, hi, whole=whole)
    start = time.perf_counter()
    done = [0]
    with open(out, "a") as log:

        def handle(batch) -> None:
            for m in batch:
                log.write(f"{m.key().decode()} {m.value().decode()} {m.offset()}\n")
            log.flush()
            done[0] += len(batch)
            ahead = done[0] / capacity - (time.perf_counter() - start)
            if ahead > 0:
                time.sleep(ahead)

        member.run(
            handle,
            until_offset=until,
            should_stop=lambda: seconds is not None and time.perf_counter() - start > seconds,
        )
    member.close()
    queue.put((lo, hi, done[0], member.skipped))


def _producer_loop(bootstrap, topic, seconds, rate, queue) -> None:
    from confluent_kafka import Producer

    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5, "enable.idempotence": True})
    seq = [0] * 1000
    rng = random.Random(3)
    start = time.perf_counter()
    sent = 0
    while time.perf_counter() - start < seconds:
        k = rng.randrange(1000)
        producer.produce(topic, key=f"key-{k}".encode(), value=str(seq[k]).encode(), partition=0)
        seq[k] += 1
        sent += 1
        if sent % 100 == 0:
            producer.poll(0)
            ahead = sent / rate - (time.perf_counter() - start)
            if ahead > 0:
                time.sleep(ahead)
    assert producer.flush(60) == 0
    queue.put(("sent", sent, seq))


def bench_handover(bootstrap: str, phase_seconds: float, rate: float, capacity: float) -> dict[str, Any]:
    """1 -> 4 -> 1 under continuous production; each phase's owners stop before the next start.

    One member's capacity is below the produce rate, so a backlog builds in the first phase and
    the four range members drain it at different speeds and stop at different times: the merged
    owner must skip exactly what each range already processed.
    """
    from confluent_kafka import Consumer, TopicPartition

    topic, group = "handover", "handover-app"
    _create_topic(bootstrap, topic)
    ctx = multiprocessing.get_context("spawn")
    queue, done = ctx.Queue(), ctx.Queue()
    producer = ctx.Process(target=_producer_loop, args=(bootstrap, topic, 3 * phase_seconds, rate, queue))
    producer.start()
    logs = Path(tempfile.mkdtemp(prefix="keyrange-handover-"))
    q = HASH_SPACE // 4
    phases = [
        ("1 member", [(0, HASH_SPACE)]),
        ("split 1 -> 4", [(i * q, (i + 1) * q) for i in range(4)]),
        ("merge 4 -> 1", [(0, HASH_SPACE)]),
    ]
    files = []
    phase_rows: list[dict[str, Any]] = []
    try:
        for index, (name, cuts) in enumerate(phases):
            last = index == len(phases) - 1
            print(f"handover phase: {name}", flush=True)
            until = None
            if last:
                kind, sent, seq = queue.get(timeout=600)  # the producer is done: drain to its end
                producer.join(30)
                c = Consumer({"bootstrap.servers": bootstrap, "group.id": "x"})
                until = c.get_watermark_offsets(TopicPartition(topic, 0), timeout=30)[1]
                c.close()
            procs = []
            for lo, hi in cuts:
                out = logs / f"{index}-{lo}.log"
                files.append((index, out))
                procs.append(
                    ctx.Process(
                        target=_handover_member,
                        args=(
                            bootstrap,
                            group,
                            topic,
                            lo,
                            hi,
                            len(cuts) == 1,
                            # range members stop at staggered times: uneven progress for the merge
                            None if last else phase_seconds * (0.6 + 0.2 * len(procs)),
                            until,
                            out,
                            capacity,
                            done,
                        ),
                    )
                )
            for p in procs:
                p.start()
            for p in procs:
                p.join(600)
            failed = [p.exitcode for p in procs if p.exitcode != 0]
            if failed:
                raise RuntimeError(f"handover phase {name!r}: member processes exited with {failed}")
            reports = sorted(done.get(timeout=60) for _ in procs)
            phase_rows.append(
                {
                    "phase": name,
                    "members": len(cuts),
                    "processed": sum(r[2] for r in reports),
                    "skipped_already_done": sum(r[3] for r in reports),
                }
            )
            print(
                f"  processed {phase_rows[-1]['processed']:,}, skipped as already processed "
                f"{phase_rows[-1]['skipped_already_done']:,}",
                flush=True,
            )
    finally:
        if producer.is_alive():
            producer.kill()
    processed: dict[int, list[tuple[int, int]]] = {}  # key -> [(phase, seq)] in processing order per phase
    total = 0
    for index, path in files:
        if not path.exists():
            continue
        for line in path.read_text().splitlines():
            key, value, _offset = line.split()
            processed.setdefault(int(key[4:]), []).append((index, int(value)))
            total += 1
    duplicates = losses = violations = 0
    for k, count in enumerate(seq):
        seen = processed.get(k, [])
        seqs = [v for _, v in sorted(seen, key=lambda x: x[0])]  # stable: phase order, then log order
        duplicates += len(seqs) - len(set(seqs))
        losses += len(set(range(count)) - set(seqs))
        violations += sum(1 for a, b in zip(seqs, seqs[1:], strict=False) if b <= a)
    print(
        f"\nhandover: produced {sent:,}, processed {total:,}; duplicates {duplicates}, losses {losses}, "
        f"per-key order violations {violations}"
    )
    return {
        "produced": sent,
        "processed": total,
        "phases": phase_rows,
        "duplicates": duplicates,
        "losses": losses,
        "order_violations": violations,
        "targets": [
            _target(
                "zero per-key order violations, duplicates and losses across 1 -> 4 -> 1",
                duplicates == losses == violations == 0,
                f"{duplicates} duplicates, {losses} losses, {violations} order violations of {sent:,}",
            )
        ],
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument(
        "--only", choices=["hash", "drain", "handover"], nargs="+", default=["hash", "drain", "handover"]
    )
    parser.add_argument("--records", type=int, default=1_000_000, help="backlog of the hot partition")
    parser.add_argument(
        "--capacity",
        type=float,
        default=10_000,
        help="records/s one member processes (each member also reads the whole partition: ~1.3 CPU-s per"
        " 1 M records here, so on a crowded machine a high capacity measures CPU contention)",
    )
    parser.add_argument("--phase-seconds", type=float, default=8.0, help="handover: seconds per phase")
    parser.add_argument("--rate", type=float, default=3000, help="handover: records/s produced")
    parser.add_argument(
        "--handover-capacity", type=float, default=2000, help="handover: records/s one member processes"
    )
    parser.add_argument(
        "--bootstrap-servers", default=None, help="use this cluster instead of a local broker"
    )
    parser.add_argument("--seconds", type=float, default=1.0, help="time per hash row")
    parser.add_argument("--out", default=str(RESULTS))
    args = parser.parse_args(argv)
    result: dict[str, Any] = {
        "cpu_count": os.cpu_count(),
        "python": platform.python_version(),
        "load_average_start": os.getloadavg(),
    }
    print(f"load average at start: {' '.join(f'{x:.2f}' for x in result['load_average_start'])}")
    if "hash" in args.only:
        result["hash"] = bench_hash(args.seconds)
    if {"drain", "handover"} & set(args.only):
        with _broker(args.bootstrap_servers) as bootstrap:
            if "drain" in args.only:
                result["drain"] = bench_drain(bootstrap, args.records, args.capacity)
            if "handover" in args.only:
                result["handover"] = bench_handover(
                    bootstrap, args.phase_seconds, args.rate, args.handover_capacity
                )
    result["load_average_end"] = os.getloadavg()
    targets = []
    for section in result.values():
        if isinstance(section, dict):
            targets += [section["target"]] if "target" in section else section.get("targets", [])
    print("\ntargets:")
    for t in targets:
        print(f"{t['status']:<8} {t['target']}: {t['detail']}")
    print(f"load average at end: {' '.join(f'{x:.2f}' for x in result['load_average_end'])}")
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(result, indent=1))
    print(f"\nwrote {args.out}")
    return 0


@contextlib.contextmanager
def _broker(bootstrap: str | None):
    if bootstrap:
        yield bootstrap
        return
    from rebalance_advisor.devtools import local_kafka

    state = Path(tempfile.mkdtemp(prefix="keyrange-bench-kafka-"))
    info = local_kafka.start(state)
    try:
        yield info.bootstrap_servers
    finally:
        local_kafka.stop(state)


if __name__ == "__main__":
    raise SystemExit(main())
