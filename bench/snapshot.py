"""Benchmark: our snapshot vs Kafka's ``kafka-consumer-groups --describe --all-groups`` on one cluster.

Builds G memberless groups over T topics (P partitions in all) on a local broker (its own, in a temp
dir, unless --bootstrap-servers), then alternates rounds of:
  - ours, in process: ``kafka_snapshot.collect`` with time lag (record timestamps at every lagging
    committed offset, the default) and without (``time_lag=False``), and writing it to SQLite
    (rates derived from the previous snapshot in the same transaction)
  - ours, as a command: ``rebalance-advisor snapshot`` (Python start-up and DB write included)
  - the reference tool as a command (JVM start-up included)
Prints medians and ratios (the target: a snapshot with time lag takes at most 2x one without), peak memory (max RSS of each command; Python heap peak of collect), and
writes JSON to bench/results/snapshot.json.

    .venv/bin/python bench/snapshot.py                 # 500 groups, 19,000 partitions
    .venv/bin/python bench/snapshot.py --groups 50 --topics 20 --partitions 2000 --rounds 3
"""

from __future__ import annotations

import argparse
import concurrent.futures
import contextlib
import dataclasses
import gc
import json
import os
import platform
import random
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
import tracemalloc
from collections.abc import Callable
from pathlib import Path
from typing import Any

from rebalance_advisor import store
from rebalance_advisor.adapters import kafka_snapshot
from rebalance_advisor.devtools import local_kafka

RESULTS = Path(__file__).resolve().parent / "results" / "snapshot.json"
CLI = str(Path(sys.executable).parent / "rebalance-advisor")


#: Errors a fresh or busy broker answers while the group coordinators are still loading: retried.
_RETRIABLE = (
    "NOT_COORDINATOR",
    "COORDINATOR_LOAD_IN_PROGRESS",
    "COORDINATOR_NOT_AVAILABLE",
    "UNKNOWN_TOPIC_OR_PART",  # a partition the broker is still creating
    "_TIMED_OUT",
)
#: The KRaft controller refuses one request creating more than 10,000 records (topic + partitions).
_PARTITIONS_PER_CREATE = 5000


def create_topics(admin: Any, names: list[str], per_topic: int, timeout: float) -> None:
    """Create ``names`` in requests under the controller's per-request record limit."""
    from confluent_kafka.admin import NewTopic

    batch = max(1, _PARTITIONS_PER_CREATE // per_topic)
    for start in range(0, len(names), batch):
        futures = admin.create_topics(
            [
                NewTopic(n, num_partitions=per_topic, replication_factor=1)
                for n in names[start : start + batch]
            ],
            operation_timeout=timeout,
            request_timeout=timeout,
        )
        for future in futures.values():
            try:
                future.result(timeout + 30)
            except Exception as error:  # an existing topic (re-used cluster) is fine
                if "TOPIC_ALREADY_EXISTS" not in str(error):
                    raise


def produce_records(bootstrap: str, names: list[str], per_topic: int, rng: random.Random) -> dict:
    """A few records per partition; returns each partition's log-end offset."""
    from confluent_kafka import Producer

    producer = Producer(
        {
            "bootstrap.servers": bootstrap,
            "linger.ms": 50,
            "queue.buffering.max.messages": 2_000_000,
            "message.timeout.ms": 300_000,
        }
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
    left = producer.flush(300)
    if left:
        raise SystemExit(f"{left} records were not acknowledged by the broker within 300 s")
    return ends


def commit_offsets(bootstrap: str, wanted: dict[str, list[Any]], clients: int, timeout: float) -> None:
    """Commit every group's offsets with all requests in flight together over ``clients`` connections.

    A broker serves one connection's requests one at a time, so several admin clients let its I/O
    threads work in parallel. A group whose coordinator is still loading (a fresh broker) is sent
    again on its own half a second later, without waiting for the slowest request of a round.
    """
    from confluent_kafka import ConsumerGroupTopicPartitions
    from confluent_kafka.admin import AdminClient

    admins = [AdminClient({"bootstrap.servers": bootstrap}) for _ in range(clients)]
    deadline = time.monotonic() + timeout
    due = {group_id: 0.0 for group_id in wanted}  # group -> when to (re)send it
    in_flight: dict[Any, str] = {}
    sent = 0
    last_error = ""
    try:
        while due or in_flight:
            now = time.monotonic()
            if now > deadline:
                raise SystemExit(
                    f"could not commit offsets for {len(due) + len(in_flight)} of {len(wanted)} groups "
                    f"within {timeout:.0f} s: {last_error or 'no answer'}"
                )
            for group_id in [g for g, at in due.items() if at <= now]:
                del due[group_id]
                request = [ConsumerGroupTopicPartitions(group_id, wanted[group_id])]
                admin = admins[sent % clients]
                sent += 1
                for future in admin.alter_consumer_group_offsets(request, request_timeout=60).values():
                    in_flight[future] = group_id
            if not in_flight:
                time.sleep(0.05)
                continue
            done, _ = concurrent.futures.wait(in_flight, 0.5, concurrent.futures.FIRST_COMPLETED)
            for future in done:
                group_id = in_flight.pop(future)
                try:
                    result = future.result()
                    errors = [tp.error for tp in result.topic_partitions if tp.error]
                    if errors:
                        raise RuntimeError(str(errors[0]))
                except Exception as error:  # noqa: BLE001 - retriable ones are retried, others reported
                    last_error = str(error)
                    if not any(code in last_error for code in _RETRIABLE):
                        raise SystemExit(f"committing offsets of {group_id} failed: {error}") from error
                    due[group_id] = time.monotonic() + 0.5
    finally:
        del admins  # destroy the clients while the broker is still up


def build_cluster(
    bootstrap: str,
    groups: int,
    topics: int,
    partitions: int,
    per_group: int,
    seed: int,
    clients: int = 4,
    timeout: float = 900,
) -> dict:
    """Topics, a few records per partition, and memberless groups with committed offsets."""
    from confluent_kafka import TopicPartition
    from confluent_kafka.admin import AdminClient

    rng = random.Random(seed)
    per_topic = max(1, partitions // topics)
    names = [f"bench-t{i:04d}" for i in range(topics)]
    steps: dict[str, float] = {}
    started = time.perf_counter()
    admin = AdminClient({"bootstrap.servers": bootstrap})
    try:
        create_topics(admin, names, per_topic, timeout=min(300, timeout))
    finally:
        del admin
    steps["create_topics_s"] = time.perf_counter() - started
    started = time.perf_counter()
    ends = produce_records(bootstrap, names, per_topic, rng)
    steps["produce_s"] = time.perf_counter() - started
    wanted = {}
    for g in range(groups):
        chosen = [names[(g * per_group + k) % topics] for k in range(per_group)]
        wanted[f"bench-g{g:04d}"] = [
            TopicPartition(t, p, rng.randint(0, ends[(t, p)])) for t in chosen for p in range(per_topic)
        ]
    started = time.perf_counter()
    commit_offsets(bootstrap, wanted, clients, timeout)
    steps["commit_s"] = time.perf_counter() - started
    return {
        "groups": groups,
        "topics": topics,
        "partitions": per_topic * topics,
        "committed": groups * per_group * per_topic,
        "build_steps_s": {k: round(v, 2) for k, v in steps.items()},
    }


class _Terminated(BaseException):
    """SIGTERM/SIGHUP turned into an exception so every ``finally`` (broker stop) still runs."""


def _on_signal(signum: int, _frame: Any) -> None:
    raise _Terminated(f"signal {signum}")


def run_measured(command: list[str], timeout: float) -> tuple[float, int]:
    """Wall seconds and max RSS (MiB) of one command; killed (its whole group) on timeout or error."""
    with tempfile.TemporaryFile() as stderr:  # a file, not a pipe: a chatty tool cannot block on it
        started = time.perf_counter()
        pid = 0
        process = subprocess.Popen(
            command,
            stdout=subprocess.DEVNULL,
            stderr=stderr,
            stdin=subprocess.DEVNULL,
            start_new_session=True,
        )
        try:
            while True:
                pid, status, usage = os.wait4(process.pid, os.WNOHANG)
                if pid:
                    break
                if time.perf_counter() - started > timeout:
                    raise SystemExit(f"{command[0]} did not finish within {timeout:.0f} s")
                time.sleep(0.01)
        finally:
            if not pid:
                _kill(process)
        elapsed = time.perf_counter() - started
        process.returncode = os.waitstatus_to_exitcode(status)
        if process.returncode != 0:
            stderr.seek(0)
            raise SystemExit(f"{command[0]} failed: {stderr.read().decode(errors='replace')[-2000:]}")
    return elapsed, usage.ru_maxrss // 1024


def _kill(process: subprocess.Popen) -> None:
    """Kill the command's process group and reap it."""
    with contextlib.suppress(ProcessLookupError):
        os.killpg(process.pid, signal.SIGKILL)
    with contextlib.suppress(ChildProcessError):
        process.wait(10)


def _stage_timer() -> tuple[Callable[[str], None], dict[str, float]]:
    """An ``on_stage`` hook recording seconds spent in each stage of ``kafka_snapshot.collect``."""
    stages: dict[str, float] = {}
    last = [time.perf_counter()]

    def on_stage(name: str) -> None:
        now = time.perf_counter()
        stages[name] = now - last[0]
        last[0] = now

    return on_stage, stages


#: Open files the broker needs besides one per partition: jars, internal topics, sockets.
_BROKER_FILES_RESERVE = 800


def open_files_limit(pid: int) -> int | None:
    """The soft open-files limit of process ``pid`` (None when unknown or unlimited)."""
    try:
        for line in Path(f"/proc/{pid}/limits").read_text().splitlines():
            if line.startswith("Max open files"):
                value = line.split()[3]
                return None if value == "unlimited" else int(value)
    except OSError:
        return None
    return None


def check_open_files(pid: int, partitions: int) -> None:
    """Refuse a cluster the broker cannot hold open, instead of letting it wedge mid-build."""
    limit = open_files_limit(pid)
    if limit is not None and partitions + _BROKER_FILES_RESERVE > limit:
        raise SystemExit(
            f"{partitions} partitions need about {partitions + _BROKER_FILES_RESERVE} open files in the broker, "
            f"but its limit is {limit} (and cannot be raised here): choose --partitions "
            f"{limit - _BROKER_FILES_RESERVE} or fewer, or raise the hard limit (ulimit -Hn) first"
        )


def _load() -> float:
    """The 1-minute load average: numbers taken on a busy machine are flagged by it."""
    return round(os.getloadavg()[0], 2)


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--groups", type=int, default=500)
    parser.add_argument("--topics", type=int, default=200)
    parser.add_argument(
        "--partitions",
        type=int,
        default=19_000,
        help="partitions in all (split over topics); the broker holds one open file per partition, "
        "so this must stay under its open-files limit (20,000 here: 19,000 fits)",
    )
    parser.add_argument("--topics-per-group", type=int, default=2)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument(
        "--collect-only",
        action="store_true",
        help="time only collect with and without time lag (no write, CLI or reference tool): "
        "more rounds of the time-lag ratio in the same time",
    )
    parser.add_argument(
        "--bootstrap-servers", default=None, help="use this (empty) cluster instead of a local broker"
    )
    parser.add_argument("--seed", type=int, default=5337)
    parser.add_argument("--broker-heap", default="-Xmx2g", help="the local broker's JVM -Xmx option")
    parser.add_argument("--commit-clients", type=int, default=4, help="admin clients committing offsets")
    parser.add_argument("--build-timeout", type=float, default=900, help="seconds to build the cluster")
    parser.add_argument("--tool-timeout", type=float, default=600, help="seconds per measured command")
    parser.add_argument("--output", type=Path, default=RESULTS)
    args = parser.parse_args()

    for signum in (signal.SIGTERM, signal.SIGHUP):
        signal.signal(signum, _on_signal)
    tmp = tempfile.mkdtemp(prefix="bench-snapshot-")
    state_dir = Path(tmp) / "kafka"
    runs: dict[str, list[float]] = {
        "collect": [],
        "collect_no_time_lag": [],
        "write": [],
        "cli": [],
        "reference": [],
    }
    stage_runs: dict[str, list[float]] = {}
    loads: list[float] = [_load()]
    rss = {"cli": 0, "reference": 0}
    try:
        if args.bootstrap_servers:
            bootstrap = args.bootstrap_servers
        else:
            broker = local_kafka.start(state_dir, heap=args.broker_heap)
            bootstrap = broker.bootstrap_servers
            check_open_files(broker.pid, args.partitions)
        t0 = time.perf_counter()
        shape = build_cluster(
            bootstrap,
            args.groups,
            args.topics,
            args.partitions,
            args.topics_per_group,
            args.seed,
            clients=args.commit_clients,
            timeout=args.build_timeout,
        )
        shape["build_s"] = round(time.perf_counter() - t0, 1)
        print(f"cluster built in {shape['build_s']} s (load {_load()}): {shape}", flush=True)
        db_url = f"sqlite:///{Path(tmp) / 'bench.db'}"
        store.upgrade(db_url)
        options = kafka_snapshot.SnapshotOptions(
            groups=kafka_snapshot.GroupFilter.parse("bench-g.*"), timeout_s=60
        )
        cli_command = [
            CLI,
            "snapshot",
            "--bootstrap-servers",
            bootstrap,
            "--db",
            db_url,
            "--groups",
            "bench-g.*",
        ]
        tool_command = local_kafka.consumer_groups_command(
            bootstrap, "--describe", "--all-groups", "--timeout", "120000"
        )

        plain = dataclasses.replace(options, time_lag=False)

        def without_time_lag() -> None:
            started = time.perf_counter()
            taken = kafka_snapshot.collect(bootstrap, options=plain)
            runs["collect_no_time_lag"].append(time.perf_counter() - started)
            assert not taken.record_timestamps and len(taken.committed) == shape["committed"]

        def ours() -> None:
            on_stage, stages = _stage_timer()
            started = time.perf_counter()
            taken = kafka_snapshot.collect(bootstrap, options=options, on_stage=on_stage)
            runs["collect"].append(time.perf_counter() - started)
            for name, seconds in stages.items():
                stage_runs.setdefault(name, []).append(seconds)
            assert len(taken.groups) == shape["groups"] and not taken.errors, taken.summary()
            assert len(taken.committed) == shape["committed"], taken.summary()
            ends = ends_of(taken)
            lagging = sum(1 for c in taken.committed if c.offset < ends[(c.topic, c.partition)])
            timestamps.append((len(taken.record_timestamps), lagging))
            if args.collect_only:
                return
            started = time.perf_counter()
            store.write_snapshot(taken, db_url)
            runs["write"].append(time.perf_counter() - started)
            elapsed, mem = run_measured(cli_command, args.tool_timeout)
            runs["cli"].append(elapsed)
            rss["cli"] = max(rss["cli"], mem)

        timestamps: list[tuple[int, int]] = []

        def ends_of(taken: Any) -> dict[tuple[str, int], int]:
            return {(p.topic, p.partition): p.log_end_offset for p in taken.partitions}

        def reference() -> None:
            if args.collect_only:
                return
            elapsed, mem = run_measured(tool_command, args.tool_timeout)
            runs["reference"].append(elapsed)
            rss["reference"] = max(rss["reference"], mem)

        for round_no in range(1, args.rounds + 1):
            # Alternate who goes first, so a load spike does not always hit the same side.
            for measure in (
                (ours, without_time_lag, reference) if round_no % 2 else (reference, without_time_lag, ours)
            ):
                measure()
            loads.append(_load())
            commands = (
                ""
                if args.collect_only
                else f", write {runs['write'][-1]:.3f} s, cli {runs['cli'][-1]:.2f} s, "
                f"reference {runs['reference'][-1]:.2f} s"
            )
            print(
                f"round {round_no}: collect {runs['collect'][-1]:.3f} s "
                f"(without time lag {runs['collect_no_time_lag'][-1]:.3f} s, "
                f"{timestamps[-1][0]} of {timestamps[-1][1]} lagging offsets stamped){commands} "
                f"(load {loads[-1]})",
                flush=True,
            )
        # Heap peak in a separate, untimed pass: tracemalloc slows Python down several-fold.
        tracemalloc.start()
        kafka_snapshot.collect(bootstrap, options=options)
        heap_peak = tracemalloc.get_traced_memory()[1]
        tracemalloc.stop()
    finally:
        gc.collect()  # destroy any client still referenced (e.g. by a traceback) while the broker is up
        if not args.bootstrap_servers:
            local_kafka.stop(state_dir)
        shutil.rmtree(tmp, ignore_errors=True)

    med = {k: statistics.median(v) if v else None for k, v in runs.items()}
    ref, cli, write = med["reference"], med["cli"], med["write"]
    result = {
        "shape": shape,
        "rounds": args.rounds,
        "median_s": med,
        "collect_stage_median_s": {k: statistics.median(v) for k, v in stage_runs.items()},
        "runs_s": runs,
        "time_lag_cost_ratio": med["collect"] / med["collect_no_time_lag"],
        "time_lag_target": "PASS" if med["collect"] <= 2 * med["collect_no_time_lag"] else "FAIL",
        "record_timestamps_vs_lagging_offsets": timestamps,
        "speedup_collect_vs_reference": ref / med["collect"] if ref else None,
        "speedup_collect_and_write_vs_reference": ref / (med["collect"] + write) if ref and write else None,
        "speedup_cli_vs_reference": ref / cli if ref and cli else None,
        "max_rss_mib": rss,
        "collect_python_heap_peak_mib": round(heap_peak / 2**20, 1),
        "load_average_1m": {"start": loads[0], "after_each_round": loads[1:]},
        "machine": {"cpus": os.cpu_count(), "python": platform.python_version()},
    }
    print()
    print(f"{'':28}{'median s':>10}")
    for name, label in (("collect", "ours: collect (in process)"),
                        ("collect_no_time_lag", "ours: collect, no time lag"),
                        ("write", "ours: write to SQLite"),
                        ("cli", "ours: CLI snapshot command"), ("reference", "kafka-consumer-groups")):  # fmt: skip
        if med[name] is not None:
            print(f"{label:28}{med[name]:>10.3f}")
    print(
        "collect stages (median s): "
        + ", ".join(f"{k} {v:.3f}" for k, v in result["collect_stage_median_s"].items())
    )
    print(
        f"\ntime lag cost: collect with / without = {result['time_lag_cost_ratio']:.2f}x "
        f"(target <= 2x: {result['time_lag_target']})"
    )
    if ref is not None:
        print(
            f"speedup vs reference: collect {result['speedup_collect_vs_reference']:.1f}x, "
            f"collect+write {result['speedup_collect_and_write_vs_reference']:.1f}x, "
            f"CLI command {result['speedup_cli_vs_reference']:.1f}x"
        )
    print(
        f"memory: CLI max RSS {rss['cli']} MiB, reference max RSS {rss['reference']} MiB, "
        f"collect Python heap peak {result['collect_python_heap_peak_mib']} MiB"
    )
    print(f"load average (1 min): start {loads[0]}, after each round {loads[1:]}")
    args.output.parent.mkdir(parents=True, exist_ok=True)
    args.output.write_text(json.dumps(result, indent=2) + "\n")
    print(f"wrote {args.output}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
