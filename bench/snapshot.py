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

Fleet mode (``--fleet 5000,20000,65000``): one broker, 1,000 topics of 8 partitions; each group
commits on the first 1-8 partitions of one topic (4.5 on average: 65,000 groups hold ~290,000
committed offsets). The sizes are loaded one after the other (only the new groups' commits, timed
apart as ``load_s``); at each size the whole ``rebalance-advisor snapshot`` command and the
reference tool's ``--describe --all-groups`` run side by side (time and max RSS; ``--rounds`` each,
alternating who goes first), then every row of our ``lag --format tool`` is compared with the
reference tool's output. Writes bench/results/snapshot-fleet.json.

    .venv/bin/python bench/snapshot.py --fleet 5000,20000,65000 --rounds 1
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
FLEET_RESULTS = RESULTS.with_name("snapshot-fleet.json")
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
    elapsed, rss, _ = run_measured_cpu(command, timeout)
    return elapsed, rss


def run_measured_cpu(command: list[str], timeout: float) -> tuple[float, int, float]:
    """:func:`run_measured` and the CPU seconds (user + system) of the command and the children it
    waited for (its JVMs): a figure the other processes on a shared machine do not inflate much."""
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
    return elapsed, usage.ru_maxrss // 1024, usage.ru_utime + usage.ru_stime


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


# ------------------------------------------------------------------------------------------ fleet

FLEET_TOPICS = 1000
FLEET_PARTITIONS_PER_TOPIC = 8
FLEET_GROUP_PREFIX = "fleet-g"


def fleet_offsets(
    first: int, last: int, ends: dict[tuple[str, int], int], seed: int, topics: int = FLEET_TOPICS
) -> dict[str, list[Any]]:
    """Groups ``first``..``last - 1``: each commits on the first 1-8 partitions of one topic, at a
    random offset up to the partition's end (the same for a group whichever run loads it)."""
    from confluent_kafka import TopicPartition

    wanted = {}
    for g in range(first, last):
        rng = random.Random(seed * 1_000_003 + g)
        topic = f"bench-t{g % topics:04d}"
        count = rng.randint(1, FLEET_PARTITIONS_PER_TOPIC)
        wanted[f"{FLEET_GROUP_PREFIX}{g:06d}"] = [
            TopicPartition(topic, p, rng.randint(0, ends[(topic, p)])) for p in range(count)
        ]
    return wanted


def run_captured(command: list[str], timeout: float) -> tuple[float, int, float, str]:
    """:func:`run_measured_cpu` that also returns what the command printed (written to a file)."""
    with tempfile.NamedTemporaryFile(suffix=".out") as out:
        measured = run_measured_cpu(["sh", "-c", 'exec "$@" > "$0"', out.name, *command], timeout)
        return *measured, Path(out.name).read_text()


def compare_rows(ours_text: str, theirs_text: str) -> dict[str, Any]:
    """Every fleet row of the reference tool's output against ours: rows, and the ones that differ."""
    columns = ("CURRENT-OFFSET", "LOG-END-OFFSET", "LAG", "CONSUMER-ID", "HOST", "CLIENT-ID")

    def keyed(text: str) -> dict[tuple[str, str, str], dict[str, str]]:
        return {
            (r["GROUP"], r["TOPIC"], r["PARTITION"]): r
            for r in local_kafka.parse_describe_output(text)
            if r["GROUP"].startswith(FLEET_GROUP_PREFIX)
        }

    ours, theirs = keyed(ours_text), keyed(theirs_text)
    sampled = {group for group, _, _ in theirs}  # all groups, or the sample the reference described
    ours = {k: row for k, row in ours.items() if k[0] in sampled}
    differ = [k for k, row in theirs.items() if k not in ours or any(ours[k][c] != row[c] for c in columns)]
    return {"rows": len(theirs), "ours_rows": len(ours), "differ": len(differ) + len(set(ours) - set(theirs)),
            "first_differences": [list(k) for k in differ[:5]]}  # fmt: skip


def fleet_size(bootstrap: str, size: int, db_url: str, args: argparse.Namespace) -> dict[str, Any]:
    """One fleet size: the snapshot command and the reference tool side by side, rows compared.

    The reference tool describes group after group (one OffsetFetch and one ListOffsets round trip
    each): past ``--reference-timeout`` it is stopped and the time recorded as a lower bound; its
    rows are then compared on ``--sample`` random groups (``--describe --group ...``) instead.
    """
    # No --groups: like-for-like with the reference tool's --all-groups (the broker holds only the
    # fleet). A filter costs about 15 us a group on top (the linear-time regex engine's wrapper).
    commands = {
        "ours": [CLI, "snapshot", "--bootstrap-servers", bootstrap, "--db", db_url, "--timeout", "120"],
        "reference": local_kafka.consumer_groups_command(
            bootstrap, "--describe", "--all-groups", "--timeout", "600000"
        ),
    }
    measured: dict[str, Any] = {"groups": size, "ours_s": [], "reference_s": [], "reference_finished": True,
                                "cpu_s": {"ours": [], "reference": []}, "max_rss_mib": {"ours": 0, "reference": 0},
                                "load_average_1m": []}  # fmt: skip
    reference_text: str | None = None
    for round_no in range(args.rounds):
        for side in ("ours", "reference") if round_no % 2 == 0 else ("reference", "ours"):
            printed = _measure_side(side, commands[side], size, measured, args)
            reference_text = printed if side == "reference" else reference_text
    *_, ours_text = run_captured([CLI, "lag", "--db", db_url, "--format", "tool"], args.tool_timeout)
    measured["rows"] = compare_rows(ours_text, reference_text or _sampled_reference(bootstrap, size, args))
    measured["rows_compared"] = "all" if reference_text else f"sample of {args.sample} groups"
    if not args.skip_stages:
        on_stage, stages = _stage_timer()  # one more pass in process: where the time goes
        kafka_snapshot.collect(bootstrap, on_stage=on_stage)
        measured["collect_stages_s"] = {k: round(v, 3) for k, v in stages.items()}
    ours, ref = statistics.median(measured["ours_s"]), statistics.median(measured["reference_s"])
    measured["speedup"] = round(ref / ours, 2)
    return measured


def _measure_side(
    side: str, command: list[str], size: int, measured: dict[str, Any], args: argparse.Namespace
) -> str | None:
    """One timed run of ``side`` recorded into ``measured``; the reference's output, or None."""
    printed = None
    if side == "ours":
        elapsed, mem, used = run_measured_cpu(command, args.tool_timeout)
    else:
        try:
            elapsed, mem, used, printed = run_captured(command, args.reference_timeout)
        except SystemExit as stopped:  # did not finish in time: a lower bound
            print(f"  {size} groups: reference {stopped}", flush=True)
            elapsed, mem, used = args.reference_timeout, 0, float("nan")
            measured["reference_finished"] = False
    measured[f"{side}_s"].append(round(elapsed, 3))
    measured["cpu_s"][side].append(round(used, 2))
    measured["max_rss_mib"][side] = max(measured["max_rss_mib"][side], mem)
    measured["load_average_1m"].append(_load())
    print(f"  {size} groups: {side} {elapsed:.2f} s (CPU {used:.1f} s), max RSS {mem} MiB "
          f"(load {measured['load_average_1m'][-1]})", flush=True)  # fmt: skip
    return printed


def _sampled_reference(bootstrap: str, size: int, args: argparse.Namespace) -> str:
    """The reference tool's rows for ``--sample`` random groups of the fleet."""
    chosen = random.Random(args.seed).sample(range(size), min(args.sample, size))
    groups = [x for g in sorted(chosen) for x in ("--group", f"{FLEET_GROUP_PREFIX}{g:06d}")]
    return local_kafka.run_consumer_groups(bootstrap, "--describe", *groups, timeout=args.reference_timeout)


def fleet_main(args: argparse.Namespace) -> int:
    """Fleet mode (module docstring): sizes loaded in turn, each measured against the reference tool."""
    for signum in (signal.SIGTERM, signal.SIGHUP):
        signal.signal(signum, _on_signal)
    sizes = sorted(int(x) for x in args.fleet.split(","))
    tmp = tempfile.mkdtemp(prefix="bench-snapshot-fleet-")
    state_dir = Path(tmp) / "kafka"
    db_url = args.db or f"sqlite:///{Path(tmp) / 'bench.db'}"
    result: dict[str, Any] = {"sizes": [], "load_average_start": _load(), "machine": {"cpus": os.cpu_count()}}
    try:
        if args.bootstrap_servers:
            bootstrap = args.bootstrap_servers
        else:
            bootstrap = local_kafka.start(state_dir, heap=args.broker_heap).bootstrap_servers
        started = time.perf_counter()
        ends = fleet_topics(bootstrap, args.seed, args.fleet_topics)
        result["topics_s"] = round(time.perf_counter() - started, 1)
        store.upgrade(db_url)
        loaded = 0
        for size in sizes:
            started = time.perf_counter()
            wanted = fleet_offsets(loaded, size, ends, args.seed, args.fleet_topics)
            commit_offsets(bootstrap, wanted, args.commit_clients, args.build_timeout)
            load_s = round(time.perf_counter() - started, 1)
            committed = sum(
                len(v) for v in fleet_offsets(0, size, ends, args.seed, args.fleet_topics).values()
            )
            loaded = size
            print(
                f"{size} groups ({committed} committed offsets) loaded: +{load_s} s (load {_load()})",
                flush=True,
            )
            measured = fleet_size(bootstrap, size, db_url, args)
            result["sizes"].append({**measured, "committed_offsets": committed, "load_s": load_s})
    finally:
        gc.collect()
        if not args.bootstrap_servers:
            local_kafka.stop(state_dir)
        shutil.rmtree(tmp, ignore_errors=True)
    print_fleet(result)
    output = args.output or FLEET_RESULTS
    output.parent.mkdir(parents=True, exist_ok=True)
    output.write_text(json.dumps(result, indent=2) + "\n")
    print(f"wrote {output}")
    return 0


def fleet_topics(bootstrap: str, seed: int, topics: int) -> dict[tuple[str, int], int]:
    """The fleet's topics with a few records on each partition; each partition's log end."""
    from confluent_kafka.admin import AdminClient

    names = [f"bench-t{i:04d}" for i in range(topics)]
    admin = AdminClient({"bootstrap.servers": bootstrap})
    try:
        create_topics(admin, names, FLEET_PARTITIONS_PER_TOPIC, timeout=300)
    finally:
        del admin  # destroyed while the broker is up
    return produce_records(bootstrap, names, FLEET_PARTITIONS_PER_TOPIC, random.Random(seed))


def print_fleet(result: dict[str, Any]) -> None:
    """The table: per size, medians, max RSS, speedup, rows compared; then growth against the smallest."""
    print(f"\n{'groups':>7} {'offsets':>8} {'load s':>7} {'ours s':>7} {'CPU s':>6} {'RSS MiB':>8} "
          f"{'ref s':>8} {'RSS MiB':>8} {'speedup':>8} {'rows':>7} {'differ':>6} {'load avg':>9}")  # fmt: skip
    for r in result["sizes"]:
        bound = "" if r["reference_finished"] else ">"  # stopped at --reference-timeout
        print(f"{r['groups']:>7} {r['committed_offsets']:>8} {r['load_s']:>7} "
              f"{statistics.median(r['ours_s']):>7.2f} {statistics.median(r['cpu_s']['ours']):>6.1f} "
              f"{r['max_rss_mib']['ours']:>8} {bound + format(statistics.median(r['reference_s']), '.2f'):>8} "
              f"{r['max_rss_mib']['reference']:>8} {bound + format(r['speedup'], '.1f'):>7}x "
              f"{r['rows']['rows']:>7} {r['rows']['differ']:>6} {max(r['load_average_1m']):>9}")  # fmt: skip
    first = result["sizes"][0]
    for r in result["sizes"][1:]:
        scale = r["groups"] / first["groups"]
        time_growth = statistics.median(r["ours_s"]) / statistics.median(first["ours_s"])
        rss_growth = r["max_rss_mib"]["ours"] / first["max_rss_mib"]["ours"]
        r["growth_vs_smallest"] = {
            "groups": scale,
            "time": round(time_growth, 2),
            "rss": round(rss_growth, 2),
        }
        print(f"growth {first['groups']} -> {r['groups']} groups (x{scale:.1f}): time x{time_growth:.2f}, "
              f"max RSS x{rss_growth:.2f}")  # fmt: skip
    for r in result["sizes"]:
        print(f"{r['groups']} groups, in-process stages (s): {r.get('collect_stages_s', 'not run')}")


def main(argv: list[str] | None = None) -> int:
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
    parser.add_argument(
        "--output", type=Path, default=None, help=f"default {RESULTS} ({FLEET_RESULTS} with --fleet)"
    )
    parser.add_argument(
        "--baseline-cli",
        default=None,
        help="another build's rebalance-advisor (e.g. main's venv) timed alternately on the same cluster",
    )
    parser.add_argument(
        "--skip-stages", action="store_true", help="fleet mode: no extra in-process pass timing each stage"
    )
    parser.add_argument(
        "--fleet-topics", type=int, default=FLEET_TOPICS, help="fleet mode: topics of 8 partitions"
    )
    parser.add_argument(
        "--fleet", default=None, help="fleet mode: comma-separated group counts, e.g. 5000,20000,65000"
    )
    parser.add_argument(
        "--db",
        default=None,
        help="fleet mode: the database URL to snapshot into (default: SQLite in a temp dir)",
    )
    parser.add_argument(
        "--reference-timeout", type=float, default=900, help="fleet mode: seconds the reference tool may take"
    )
    parser.add_argument(
        "--sample", type=int, default=500, help="fleet mode: groups compared when the reference timed out"
    )
    args = parser.parse_args(argv)
    if args.fleet:
        return fleet_main(args)
    args.output = args.output or RESULTS

    for signum in (signal.SIGTERM, signal.SIGHUP):
        signal.signal(signum, _on_signal)
    tmp = tempfile.mkdtemp(prefix="bench-snapshot-")
    state_dir = Path(tmp) / "kafka"
    runs: dict[str, list[float]] = {
        "collect": [],
        "collect_no_time_lag": [],
        "write": [],
        "cli": [],
        "baseline_cli": [],
        "reference": [],
    }
    stage_runs: dict[str, list[float]] = {}
    loads: list[float] = [_load()]
    rss = {"cli": 0, "baseline_cli": 0, "reference": 0}
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

        def baseline() -> None:
            if args.baseline_cli:
                elapsed, mem = run_measured([args.baseline_cli, *cli_command[1:]], args.tool_timeout)
                runs["baseline_cli"].append(elapsed)
                rss["baseline_cli"] = max(rss["baseline_cli"], mem)

        def reference() -> None:
            if args.collect_only:
                return
            elapsed, mem = run_measured(tool_command, args.tool_timeout)
            runs["reference"].append(elapsed)
            rss["reference"] = max(rss["reference"], mem)

        for round_no in range(1, args.rounds + 1):
            # Alternate who goes first, so a load spike does not always hit the same side.
            for measure in (
                (ours, baseline, without_time_lag, reference)
                if round_no % 2
                else (reference, without_time_lag, baseline, ours)
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
        "cli_vs_baseline_cli": cli / med["baseline_cli"] if cli and med["baseline_cli"] else None,
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
                        ("cli", "ours: CLI snapshot command"), ("baseline_cli", "baseline: CLI command"),
                        ("reference", "kafka-consumer-groups")):  # fmt: skip
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
    if result["cli_vs_baseline_cli"] is not None:
        print(
            f"CLI command vs baseline CLI ({args.baseline_cli}): {result['cli_vs_baseline_cli']:.2f}x the time"
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
