"""Closed-loop benchmark on a real broker (docs/benchmarks/closed-loop.md): Kafka's assignor vs the advisor loop.

    python bench/closed_loop.py                       # A and B at the same time, 6 min warm-up + 10 min
    python bench/closed_loop.py --runs A,B            # one after the other
    python bench/closed_loop.py --minutes 2 --warmup 1 --runs B   # a short look at run B
    python bench/closed_loop.py --runs A+C            # Kafka's uniform beside the broker-applied loop
    nohup python bench/closed_loop.py > bench/results/closed_loop.log 2>&1 &   # unattended

One producer process writes Zipf(1.1) rates with drift (log-rate random walk, reverting) on
``--partitions`` (24) partitions of a fresh topic per run, ``--rate`` (600) msg/s in total. Four
consumer processes process records at fixed capacities (a simulated processing time per record)
that are 1:1.5:2:2.5 apart and total ``--capacity-factor`` (1.3) x the produce rate. Each record
costs its processing time, slept off outside ``poll()`` record by record; an overrun sleep on a busy
machine is paid back, so the capacity does not drift with CPU load.

By default both runs go at the same time (``--runs A+B``): two topics, two groups, two producers
with the same seed (the same rates and drift), so machine load hits both alike. ``--runs A,B`` runs
them one after the other (``uptime`` is recorded every 30 s either way).

- Run A: the consumers ``subscribe()`` with librdkafka's default assignor (range, roundrobin) and
  auto-commit every second.
- Run B: the same consumers as ``AssignedConsumer`` (the client helper; manual assign, registered
  static members) and, every ``--interval`` (30) s, the advisor loop: snapshot -> advise (the Spark
  planner, local[1]; its default thresholds: rate-aware rule when main has it) -> auto-approve ->
  publish static assignments, with the rule's catch-up target at ``--target-catch-up`` (60) s. Consumers
  commit every second.
- Run C: plain ``subscribe()`` consumers as in A (no helper, auto-commit every second) on the consumer
  protocol (KIP-848) with ``group.remote.assignor=advised``, the broker plugin's assignor (``uniform``
  until a plan exists); the same advisor loop as B, whose auto-approve publishes the group's plan
  record and has the broker re-assign the group (docs/operations/broker-applied-plans.md). Also
  reported: plans published and how long each took to be in force. Its consumers report nothing:
  capacities come from KIP-714 client telemetry (source ``telemetry``; the started broker's
  client-metrics subscription is awaited before any consumer starts) or from saturation; each
  member's capacity and source per advisor step are logged and summed up (``learnt_capacities``).
- Run J: run C with Java consumers (bench/java/ClosedLoopConsumer.java: Kafka's Java client, the
  same processing schedule and reports).

Measured after the warm-up, each run: time lag of every processed record (processing time minus the
record's CreateTime, i.e. how far behind its consumer was when it got to it) -> p50 / p99 overall
and per 30 s window; every 5 s the group's lag per partition (log end - committed, read by a
sampler process that never joins the group) ->
max member lag over time (members' owned partitions as they report them); a member is *overloaded*
in a sample when its lag grew by more than 1 s of its capacity over the previous 30 s (the JSON's
series keeps each sample's member lags and names the members overloaded in it); moves =
partitions that changed owner between reports. Target: run B's p99 time lag <= 1/10 of run A's.

Everything runs in its own process group and is stopped on exit (also on SIGTERM, and SIGHUP unless
started under nohup); a broker
is started here unless ``--bootstrap`` names one. Writes bench/results/closed_loop.json and a PNG
of both runs; records ``uptime`` load averages (the machine is shared).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import random
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "include"))

RESULTS = Path(__file__).resolve().parent / "results"
REPORT_EVERY_S = 5.0
WINDOW_S = 30.0
CAPACITY_SHARES = (1.0, 1.5, 2.0, 2.5)
#: advisor loops using the process's one SparkSession (see advisor_loop)
SPARK_USERS = [0]
SPARK_USERS_LOCK = threading.Lock()


# ---- child processes --------------------------------------------------------------------------


def zipf_rates(partitions: int, total: float, exponent: float, seed: int) -> list[float]:
    """Base rate per partition: Zipf over ranks, ranks shuffled by the seed."""
    weights = [1.0 / (k + 1) ** exponent for k in range(partitions)]
    scale = total / sum(weights)
    order = list(range(partitions))
    random.Random(seed).shuffle(order)
    return [weights[order[p]] * scale for p in range(partitions)]


def run_producer(cfg: dict) -> None:
    """Produce at drifting Zipf rates until terminated."""
    from confluent_kafka import Producer

    producer = Producer({"bootstrap.servers": cfg["bootstrap"], "linger.ms": 5, "acks": 1})
    base = zipf_rates(cfg["partitions"], cfg["rate"], cfg["zipf"], cfg["seed"])
    rng = random.Random(cfg["seed"] + 1)
    drift = [0.0] * len(base)
    theta, sigma = 1.0 / cfg["reversion_s"], cfg["sigma_per_sqrt_hour"] / math.sqrt(3600.0)
    due = [0.0] * len(base)
    payload = b"x" * 100
    last = time.time()
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    while not stop.is_set():
        time.sleep(0.02)
        now = time.time()
        dt, last = now - last, now
        for p, rate in enumerate(base):
            drift[p] += -theta * drift[p] * dt + sigma * math.sqrt(dt) * rng.gauss(0.0, 1.0)
            due[p] += rate * math.exp(drift[p]) * dt
            n = int(due[p])
            due[p] -= n
            for _ in range(n):
                try:
                    producer.produce(cfg["topic"], payload, partition=p)
                except BufferError:
                    producer.poll(0.05)
                    producer.produce(cfg["topic"], payload, partition=p)
        producer.poll(0)
    producer.flush(10)


def run_consumer(cfg: dict) -> None:
    """Consume at a fixed capacity; every 5 s append a report line (owned, latencies) to a file."""
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    config = {
        "bootstrap.servers": cfg["bootstrap"],
        "group.id": cfg["group"],
        "client.id": cfg["member"],
        "auto.offset.reset": "earliest",
        "session.timeout.ms": 10000,
        "heartbeat.interval.ms": 1000,
        "queued.max.messages.kbytes": 1024,
    }
    if cfg["mode"] in ("subscribe", "advised"):
        from confluent_kafka import Consumer

        if cfg["mode"] == "advised":  # run C: the consumer protocol, the broker plugin's assignor
            config = {
                k: v for k, v in config.items() if k not in ("session.timeout.ms", "heartbeat.interval.ms")
            }
            config |= {"group.protocol": "consumer", "group.remote.assignor": "advised"}
        consumer = Consumer({**config, "enable.auto.commit": True, "auto.commit.interval.ms": 1000})
        consumer.subscribe([cfg["topic"]])

        def owned() -> list[int]:
            return sorted(tp.partition for tp in consumer.assignment())

        def commit() -> None:
            return None

        def close() -> None:
            consumer.close()
    else:
        from rebalance_advisor_client import AssignedConsumer

        consumer = AssignedConsumer(config, cfg["group"], cfg["member"], takeover_timeout=30.0)

        def owned() -> list[int]:
            return sorted(tp[1] for tp in consumer.owned)

        def commit() -> None:
            consumer.commit()

        def close() -> None:
            consumer.close()

    # Processing time is owed per record and slept off record by record (devtools/cost_consumers.Owed,
    # the schedule client telemetry is calibrated for: docs/benchmarks/telemetry-accuracy.md); an
    # overrun sleep on a busy machine is paid back by the next records, so the capacity stays what it
    # is configured to be while CPU load varies. Time spent waiting in poll() earns no credit: every
    # record costs its processing time, outside poll(), which is what the client helper's capacity
    # report and the clients' idle ratios measure. Slices of 20 ms (before 2026-11-27, 18:30) made
    # librdkafka's telemetry read capacities 1.6x too high, and Java's idle ratio NaN (polls
    # started in the same millisecond) - docs/benchmarks/closed-loop.md.
    from rebalance_advisor.devtools.cost_consumers import Owed

    owed = Owed(1.0 / cfg["capacity"])
    latencies: list[float] = []
    processed = 0
    next_report = next_commit = time.time()
    with open(cfg["report"], "a", encoding="utf-8") as out:
        while not stop.is_set():
            msg = consumer.poll(0.1)
            now = time.time()
            if msg is not None and not msg.error():
                kind, stamp = msg.timestamp()
                if kind != 0:
                    latencies.append(round(now - stamp / 1000.0, 3))
                processed += 1
                owed.record()
            if now >= next_commit:
                commit()
                next_commit = now + 1.0
            if now >= next_report:
                line = {
                    "t": now,
                    "member": cfg["member"],
                    "owned": owned(),
                    "processed": processed,
                    "lat": latencies,
                }
                out.write(json.dumps(line) + "\n")
                out.flush()
                latencies, processed = [], 0
                next_report = now + REPORT_EVERY_S
    close()


# ---- the orchestrator --------------------------------------------------------------------------


class Children:
    """Child processes in their own process groups, all stopped on exit."""

    def __init__(self) -> None:
        self.procs: list[subprocess.Popen] = []

    def start(self, role: str, cfg: dict, log: Path) -> subprocess.Popen:
        cmd = [sys.executable, str(Path(__file__).resolve()), f"_{role}", json.dumps(cfg)]
        proc = subprocess.Popen(cmd, stdout=log.open("ab"), stderr=subprocess.STDOUT, start_new_session=True)
        self.procs.append(proc)
        return proc

    def start_java(self, cfg: dict, log: Path) -> subprocess.Popen:
        """Run J's consumer: bench/java/ClosedLoopConsumer.java on the cached Kafka jars."""
        from rebalance_advisor.adapters.kafka_jars import jar_dir, java_executable

        source = Path(__file__).resolve().parent / "java" / "ClosedLoopConsumer.java"
        cmd = [java_executable(), "-Xmx128m", "-XX:TieredStopAtLevel=1", "-XX:+UseSerialGC", "-cp", f"{jar_dir()}/*",
               str(source), cfg["bootstrap"], cfg["group"], cfg["topic"], cfg["member"], str(cfg["capacity"]),
               cfg["report"]]  # fmt: skip
        proc = subprocess.Popen(cmd, stdout=log.open("ab"), stderr=subprocess.STDOUT, start_new_session=True)
        self.procs.append(proc)
        return proc

    def stop_all(self, grace: float = 15.0) -> None:
        for proc in self.procs:
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGTERM)
        deadline = time.time() + grace
        for proc in self.procs:
            try:
                proc.wait(max(0.1, deadline - time.time()))
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
        self.procs.clear()


def run_sampler(cfg: dict) -> None:
    """Every 5 s: log end - committed per partition (what a snapshot shows), one JSON line each.

    A child process with a plain consumer that never joins the group (committed() and watermark
    queries only): a client crash here cannot take the orchestrator down.
    """
    from confluent_kafka import Consumer, TopicPartition

    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    consumer = Consumer(
        {"bootstrap.servers": cfg["bootstrap"], "group.id": cfg["group"], "enable.auto.commit": False}
    )
    tps = [TopicPartition(cfg["topic"], p) for p in range(cfg["partitions"])]
    with open(cfg["samples"], "a", encoding="utf-8") as out:
        while not stop.wait(REPORT_EVERY_S):
            try:
                committed = {tp.partition: tp.offset for tp in consumer.committed(tps, timeout=10)}
                end = {tp.partition: consumer.get_watermark_offsets(tp, timeout=10)[1] for tp in tps}
            except Exception as error:  # a slow broker: skip this sample, say so
                print(f"lag sample skipped: {error}", flush=True)
                continue
            lag = {p: max(end[p] - committed[p], 0) if committed.get(p, -1) >= 0 else end[p] for p in end}
            out.write(json.dumps({"t": time.time(), "lag": lag}) + "\n")
            out.flush()
    consumer.close()


def advisor_loop(ctx: dict, stop: threading.Event, log: list, first: threading.Event) -> None:
    """The advisor's own use cases, every interval: take_and_store_snapshot -> advise (Spark local[1], the
    advisor's default thresholds) -> auto_approve_and_publish (publish mode static)."""
    from rebalance_advisor.adapters.spark_session import spark_session
    from rebalance_advisor.domain.parameters import AdvisorParams, SnapshotParams
    from rebalance_advisor.services.advise_service import advise
    from rebalance_advisor.services.plan_lifecycle import auto_approve_and_publish
    from rebalance_advisor.services.snapshot_service import take_and_store_snapshot

    kafka = {"bootstrap.servers": ctx["bootstrap"]}
    snapshot_params = SnapshotParams(groups=ctx["group"], retention_hours=0)
    tuned = {"target_catch_up_s": ctx["target_catch_up_s"]} if ctx.get("target_catch_up_s") else {}
    advisor_params = AdvisorParams(group_regex=ctx["group"], publish_mode="static", **tuned)
    with SPARK_USERS_LOCK:
        SPARK_USERS[0] += 1
    spark = spark_session("local[1]", app_name="closed-loop-advisor")
    try:
        while True:
            started = time.time()
            try:
                taken = take_and_store_snapshot(snapshot_params, kafka, ctx["db"], prune=False)
                run = advise(spark, ctx["db"], taken.snapshot_id, advisor_params)
                published = auto_approve_and_publish(run.recommended_plan_ids, ctx["db"], kafka_config=kafka)
                outcomes = [(o.outcome, o.reason[:200]) for o in run.outcomes]
                capacities = member_capacities(ctx["db"], taken.snapshot_id, ctx["group"])
                log.append(
                    {
                        "t": started,
                        "step_s": round(time.time() - started, 1),
                        "snapshot": taken.snapshot_id,
                        "outcomes": outcomes,
                        "capacities": capacities,
                        "published": [p.to_dict() for p in published.published],
                    }
                )
                sources = {c: (round(v["capacity"] or 0), v["source"]) for c, v in capacities.items()}
                print(
                    f"  advisor {time.strftime('%H:%M:%S')} {ctx['group']} ({time.time() - started:.0f} s): "
                    f"{outcomes} capacities {sources} "
                    f"published {[(p.group_id, p.epoch) for p in published.published]}",
                    flush=True,
                )
            except Exception as error:  # keep the loop alive; the report lists failures
                log.append({"t": started, "error": f"{type(error).__name__}: {error}"[:300]})
                print(f"  advisor step failed: {type(error).__name__}: {error}", flush=True)
            first.set()
            if stop.wait(max(1.0, ctx["interval"] - (time.time() - started))):
                break
    finally:
        # runs C and J share one SparkSession (getOrCreate): the last loop to end stops it, so the
        # other's final step does not fail on a stopped session
        with SPARK_USERS_LOCK:
            SPARK_USERS[0] -= 1
            if SPARK_USERS[0] == 0:
                spark.stop()


def member_capacities(db_url: str, snapshot_id: int, group: str) -> dict[str, dict]:
    """Each member's capacity and its source in the snapshot (by client id: the bench's member name),
    so the report shows whether run C/J learnt them from telemetry (docs/operations/telemetry.md)."""
    import sqlalchemy as sa
    from rebalance_advisor.store.models import GroupMemberRow

    engine = sa.create_engine(db_url)
    try:
        with engine.connect() as conn:
            rows = conn.execute(
                sa.select(GroupMemberRow).where(
                    GroupMemberRow.snapshot_id == snapshot_id, GroupMemberRow.group_id == group
                )
            ).all()
    finally:
        engine.dispose()
    return {
        r.client_id: {"capacity": r.capacity, "source": r.capacity_source, "note": r.capacity_note}
        for r in rows
    }


def percentile(values: list[float], q: float) -> float | None:
    if not values:
        return None
    ordered = sorted(values)
    k = min(len(ordered) - 1, max(0, math.ceil(q / 100.0 * len(ordered)) - 1))
    return ordered[k]


def analyse(
    reports: list[dict], samples: list[dict], capacities: dict[str, float], t0: float, t1: float
) -> dict:
    """The run's numbers over [t0, t1] (see module docstring)."""
    latencies = [x for r in reports if t0 <= r["t"] <= t1 for x in r["lat"]]
    windows = []
    t = t0
    while t < t1:
        w = [x for r in reports if t <= r["t"] < t + WINDOW_S for x in r["lat"]]
        windows.append({"t": t - t0, "p50": percentile(w, 50), "p99": percentile(w, 99), "records": len(w)})
        t += WINDOW_S
    # ownership over time: each member's latest report at or before a sample
    by_member: dict[str, list[dict]] = {}
    for r in sorted(reports, key=lambda r: r["t"]):
        by_member.setdefault(r["member"], []).append(r)

    def owned_at(member: str, when: float) -> list[int]:
        last = [r for r in by_member.get(member, []) if r["t"] <= when]
        return last[-1]["owned"] if last else []

    series, member_lag_hist = [], []
    for s in samples:
        if not t0 <= s["t"] <= t1:
            continue
        lags = {m: sum(s["lag"].get(p, 0) for p in owned_at(m, s["t"])) for m in capacities}
        series.append(
            {
                "t": s["t"] - t0,
                "max_member_lag": max(lags.values()),
                "total_lag": sum(s["lag"].values()),
                "member_lags": lags,
            }
        )
        member_lag_hist.append((s["t"], lags))
    overloaded = 0
    for i, (when, lags) in enumerate(member_lag_hist):
        before = [x for x in member_lag_hist[:i] if x[0] <= when - WINDOW_S]
        if not before:
            continue
        old = before[-1][1]
        behind = sorted(m for m in capacities if lags[m] - old[m] > capacities[m])
        if behind:
            overloaded += 1
            series[i]["overloaded"] = behind
    measured = sum(1 for s in series if s["t"] >= WINDOW_S)
    moves = 0
    for _member, rs in by_member.items():
        inside = [r for r in rs if t0 <= r["t"] <= t1]
        for a, b in zip(inside, inside[1:], strict=False):
            moves += len(set(b["owned"]) - set(a["owned"]))
    return {
        "records": len(latencies),
        "p50_time_lag_s": percentile(latencies, 50),
        "p99_time_lag_s": percentile(latencies, 99),
        "max_time_lag_s": max(latencies) if latencies else None,
        "avg_max_member_lag": sum(s["max_member_lag"] for s in series) / len(series) if series else None,
        "peak_max_member_lag": max((s["max_member_lag"] for s in series), default=None),
        "overloaded_share": overloaded / measured if measured else None,
        "moves_gained": moves,
        "windows": windows,
        "series": series,
    }


def prepare_run(name: str, args: argparse.Namespace, bootstrap: str, work: Path, children: Children) -> dict:
    """Topic, group, (B: registered members, starting offsets, the advisor loop's first step), the
    consumers and the lag sampler of one run; its producer is started by :func:`start_traffic`."""
    from confluent_kafka.admin import AdminClient, NewTopic

    topic, group = f"closed-loop-{name.lower()}-{int(time.time())}", f"closed-loop-{name.lower()}"
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, args.partitions, 1)])[topic].result(30)
    total_capacity = args.rate * args.capacity_factor
    shares = [CAPACITY_SHARES[i % len(CAPACITY_SHARES)] for i in range(args.consumers)]
    capacities = {f"c{i}": total_capacity * s / sum(shares) for i, s in enumerate(shares)}
    ctx = {
        "bootstrap": bootstrap,
        "group": group,
        "topic": topic,
        "interval": args.interval,
        "target_catch_up_s": args.target_catch_up,
    }
    run = {
        "name": name,
        "topic": topic,
        "capacities": capacities,
        "advisor_log": [],
        "stop": threading.Event(),
    }
    if name in ("C", "J"):
        from rebalance_advisor.store import db

        ctx["db"] = f"sqlite:///{work / f'advisor-{topic}.db'}"
        db.upgrade(ctx["db"])
        run["in_force"] = []
    if name == "B":
        from rebalance_advisor.adapters import assignment_topic
        from rebalance_advisor.services import static_members
        from rebalance_advisor.store import db

        ctx["db"] = f"sqlite:///{work / f'advisor-{topic}.db'}"
        db.upgrade(ctx["db"])
        assignment_topic.ensure_topic({"bootstrap.servers": bootstrap})
        for member in capacities:
            static_members.add(group, member, [topic], ctx["db"])
        # The group's offsets start at the beginning (as run A's auto.offset.reset=earliest): a
        # manual-assign group with no commit at all is not in a snapshot, so it would never be planned.
        from confluent_kafka import Consumer, KafkaException, TopicPartition

        starter = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "enable.auto.commit": False})
        try:
            for attempt in range(30):  # a fresh broker answers NOT_COORDINATOR for a while
                try:
                    starter.commit(
                        offsets=[TopicPartition(topic, p, 0) for p in range(args.partitions)],
                        asynchronous=False,
                    )
                    break
                except KafkaException:
                    if attempt == 29:
                        raise
                    time.sleep(1.0)
        finally:
            starter.close()
        # Spark starts (slowly on a busy machine) and plans the group once before traffic starts
        first = threading.Event()
        run["advisor"] = threading.Thread(
            target=advisor_loop, args=(ctx, run["stop"], run["advisor_log"], first), daemon=True
        )
        run["advisor"].start()
        if not first.wait(900):
            run["stop"].set()
            raise RuntimeError("the advisor loop's first step did not finish within 15 minutes")
    run["report"] = work / f"reports-{topic}.jsonl"
    log = run["log"] = work / f"children-{topic}.log"
    mode = {"A": "subscribe", "B": "assigned", "C": "advised", "J": "advised"}[name]
    for member, capacity in capacities.items():
        cfg = {"bootstrap": bootstrap, "group": group, "topic": topic, "member": member, "capacity": capacity}
        if name == "J":  # Java consumers (bench/java/ClosedLoopConsumer.java), otherwise as run C
            children.start_java(cfg | {"report": str(run["report"])}, log)
        else:
            children.start("consumer", cfg | {"mode": mode, "report": str(run["report"])}, log)
    run["samples"] = work / f"samples-{topic}.jsonl"
    sampler_cfg = {"bootstrap": bootstrap, "group": group, "topic": topic, "partitions": args.partitions}
    children.start("sampler", sampler_cfg | {"samples": str(run["samples"])}, log)
    if name in ("C", "J"):  # after the consumers: the group is broker-applied once they are in it
        first = threading.Event()
        run["advisor"] = threading.Thread(
            target=advisor_loop, args=(ctx, run["stop"], run["advisor_log"], first), daemon=True
        )
        run["advisor"].start()
        if not first.wait(900):
            run["stop"].set()
            raise RuntimeError("the advisor loop's first step did not finish within 15 minutes")
    print(
        f"run {name}: topic {topic}, capacities {[round(c) for c in capacities.values()]} msg/s", flush=True
    )
    return run


def start_traffic(runs: list[dict], args: argparse.Namespace, bootstrap: str, children: Children) -> None:
    """One producer per run, the same seed (so the same Zipf rates and the same drift), started together."""
    time.sleep(5)  # consumers up before traffic
    for run in runs:
        producer_cfg = {
            "bootstrap": bootstrap,
            "topic": run["topic"],
            "partitions": args.partitions,
            "rate": args.rate,
            "zipf": 1.1,
            "seed": args.seed,
            "sigma_per_sqrt_hour": 0.6,
            "reversion_s": 1800.0,
        }
        children.start("producer", producer_cfg, run["log"])
    started = time.time()
    for run in runs:
        run["t0"] = started + args.warmup * 60
        run["t1"] = started + (args.warmup + args.minutes) * 60


def wait_and_collect(runs: list[dict], args: argparse.Namespace, children: Children) -> list[dict]:
    """Wait out warm-up + measured time (recording ``uptime`` load), stop everything, analyse each run."""
    t1 = max(run["t1"] for run in runs)
    started = min(run["t0"] for run in runs) - args.warmup * 60
    names = "+".join(run["name"] for run in runs)
    load = [os.getloadavg()]
    while time.time() < t1:
        time.sleep(min(30.0, max(0.1, t1 - time.time())))
        load.append(os.getloadavg())
        print(f"  run {names}: {time.time() - started:5.0f} s, load {load[-1][0]:.1f}", flush=True)
    for run in runs:
        run["stop"].set()
    children.stop_all()
    results = []
    for run in runs:
        if "advisor" in run:
            run["advisor"].join(300)
        reports = [json.loads(line) for line in run["report"].read_text().splitlines() if line.strip()]
        samples = [json.loads(line) for line in run["samples"].read_text().splitlines() if line.strip()]
        samples = [{"t": x["t"], "lag": {int(p): v for p, v in x["lag"].items()}} for x in samples]
        result = analyse(reports, samples, run["capacities"], run["t0"], run["t1"])
        result |= {
            "run": run["name"],
            "topic": run["topic"],
            "capacities": run["capacities"],
            "produce_rate": args.rate,
            "concurrent_with": [r["name"] for r in runs if r is not run],
            "load_1min": [round(x[0], 2) for x in load],
            "advisor": run["advisor_log"],
        }
        if run["name"] in ("C", "J"):
            result["broker_plans"] = broker_plan_stats(run["advisor_log"])
            result["learnt_capacities"] = learnt_capacities(run["advisor_log"], run["t0"])
        results.append(result)
    return results


def broker_plan_stats(advisor_log: list[dict]) -> dict:
    """Run C's published plans: how many, how many were seen in force, and how long that took."""
    published = [p for step in advisor_log for p in step.get("published", ()) if p.get("changed")]
    seconds = sorted(
        p["in_force_s"] for p in published if p.get("in_force") and p.get("in_force_s") is not None
    )
    return {
        "published": len(published),
        "in_force": sum(1 for p in published if p.get("in_force")),
        "in_force_within_30s": sum(1 for s in seconds if s <= 30.0),
        "in_force_median_s": seconds[len(seconds) // 2] if seconds else None,
        "in_force_max_s": seconds[-1] if seconds else None,
        "failed_steps": sum(1 for step in advisor_log if "error" in step),
    }


def learnt_capacities(advisor_log: list[dict], t0: float) -> dict[str, dict]:
    """Per member: the advisor's last capacity and source, and the share of measured steps per source."""
    steps = [step["capacities"] for step in advisor_log if "capacities" in step and step["t"] >= t0]
    steps = steps or [step["capacities"] for step in advisor_log if "capacities" in step][-1:]
    learnt: dict[str, dict] = {}
    for member in sorted({m for step in steps for m in step}):
        seen = [step[member] for step in steps if member in step]
        sources = [x["source"] for x in seen]
        learnt[member] = {
            "last_capacity": seen[-1]["capacity"],
            "last_source": seen[-1]["source"],
            "sources": {src: round(sources.count(src) / len(steps), 2) for src in sorted(set(sources))},
            "note": seen[-1]["note"],
        }
    return learnt


def ratio_target(by_run: dict, name: str) -> dict | None:
    """Run ``name``'s p99 time lag against run A's (target: at most a tenth)."""
    if "A" not in by_run or name not in by_run or not by_run["A"]["p99_time_lag_s"]:
        return None
    if by_run[name]["p99_time_lag_s"] is None:
        return None
    ratio = by_run[name]["p99_time_lag_s"] / by_run["A"]["p99_time_lag_s"]
    return {
        "target": f"run {name} p99 time lag <= 1/10 of run A's",
        "ratio": ratio,
        "status": "PASS" if ratio <= 0.1 else "FAIL",
    }


def plot(results: list[dict], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(2, 1, figsize=(10, 7), sharex=True)
    for r in results:
        w = [x for x in r["windows"] if x["p99"] is not None]
        axes[0].plot([x["t"] / 60 for x in w], [x["p99"] for x in w], label=f"run {r['run']} p99")
        axes[0].plot(
            [x["t"] / 60 for x in w], [x["p50"] for x in w], linestyle=":", label=f"run {r['run']} p50"
        )
        axes[1].plot(
            [s["t"] / 60 for s in r["series"]],
            [s["max_member_lag"] for s in r["series"]],
            label=f"run {r['run']}",
        )
    axes[0].set_ylabel("time lag of processed records (s)")
    axes[0].set_yscale("symlog", linthresh=1.0)
    axes[1].set_ylabel("max member lag (messages)")
    axes[1].set_xlabel("minutes after warm-up")
    for ax in axes:
        ax.legend(fontsize="small")
    axes[0].set_title(
        "closed loop: A = subscribe(), B = advisor + AssignedConsumer, C = advisor + broker assignor"
    )
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--minutes", type=float, default=10.0, help="measured minutes per run (default 10)")
    # Warm-up 6 min, the same for A and B: run B starts with no assignment and no capacities; at a 30 s
    # interval it learns the four capacities (each needs one saturated interval on unchanged partitions)
    # in about 4 min. Interval 30 s, the low end of a 30-60 s snapshot interval: every learning step
    # (rate, measurement, plan) takes one interval; at 45 s the same steps took about 6 min.
    parser.add_argument("--warmup", type=float, default=6.0, help="warm-up minutes per run (default 6)")
    parser.add_argument(
        "--interval",
        type=float,
        default=30.0,
        help="advisor loop interval, s (default 30; 30-60 is the advisor's usual range)",
    )
    # Run B's rule target 60 s, not the advisor's default 300 s: the target here (B's p99 <= A's / 10,
    # A's about 500 s) asks for backlogs that clear within about a minute; with 300 s the rule rightly
    # calls a group "balanced" at a predicted catch-up of 268-295 s (measured: B p99 84 s, ratio 0.16).
    parser.add_argument(
        "--target-catch-up",
        type=float,
        default=60.0,
        help="run B's rule: predicted catch-up target, s (default 60; the advisor's own default is 300)",
    )
    parser.add_argument("--partitions", type=int, default=24)
    parser.add_argument("--rate", type=float, default=600.0, help="total produce rate, msg/s (default 600)")
    parser.add_argument("--consumers", type=int, default=4)
    parser.add_argument("--capacity-factor", type=float, default=1.3)
    parser.add_argument(
        "--runs", default="A+B", help="A,B = one after the other; A+B = at the same time (default)"
    )
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--bootstrap", help="use this broker instead of starting one")
    parser.add_argument("--output", default=str(RESULTS / "closed_loop.json"))
    parser.add_argument("--plot", default=str(RESULTS / "closed_loop.png"))
    args = parser.parse_args(argv)
    if args.partitions < 24 or args.consumers < 4 or args.minutes <= 0 or args.interval <= 0:
        parser.error("need --partitions >= 24, --consumers >= 4, --minutes > 0, --interval > 0")
    if args.target_catch_up is not None and not (
        math.isfinite(args.target_catch_up) and args.target_catch_up > 0
    ):
        parser.error(f"--target-catch-up must be a number of seconds > 0, got {args.target_catch_up}")
    children = Children()
    work = Path(tempfile.mkdtemp(prefix="closed-loop-"))
    broker_dir = None
    results: list[dict] = []

    def on_signal(signum, _frame):
        raise KeyboardInterrupt(f"signal {signum}")

    signal.signal(signal.SIGTERM, on_signal)
    if signal.getsignal(signal.SIGHUP) is not signal.SIG_IGN:  # under nohup a hangup stays ignored
        signal.signal(signal.SIGHUP, on_signal)
    uptime_start = subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip()
    failed = None
    try:
        bootstrap = args.bootstrap
        if not bootstrap:
            from rebalance_advisor.devtools import local_kafka

            broker_dir = work / "kafka"
            bootstrap = local_kafka.start(broker_dir, heap="-Xmx512m").bootstrap_servers
            print(f"broker {bootstrap} ({broker_dir})", flush=True)
            # runs C/J learn capacities only from telemetry: a consumer that starts before the
            # subscription exists pushes nothing for 5 minutes (docs/operations/telemetry.md)
            local_kafka.await_telemetry_subscription(broker_dir)
        # "A,B": one after the other; "A+B": at the same time (two topics, two groups, the same
        # producer rates and capacities), so the machine's load hits both alike
        for batch in args.runs.split(","):
            names = [n.strip().upper() for n in batch.split("+")]
            runs = [prepare_run(n, args, bootstrap, work, children) for n in sorted(names, reverse=True)]
            start_traffic(runs, args, bootstrap, children)
            for r in sorted(wait_and_collect(runs, args, children), key=lambda r: r["run"]):
                results.append(r)
                print(
                    f"run {r['run']}: p50 {r['p50_time_lag_s']} s, p99 {r['p99_time_lag_s']} s, peak max member "
                    f"lag {r['peak_max_member_lag']}, overloaded {r['overloaded_share']}, moves {r['moves_gained']}",
                    flush=True,
                )
    except KeyboardInterrupt as stopped:
        print(f"stopped: {stopped}", flush=True)
    except Exception as error:  # report what finished, then fail
        print(f"failed: {type(error).__name__}: {error}", flush=True)
        failed = f"{type(error).__name__}: {error}"
    finally:
        children.stop_all()
        if broker_dir is not None:
            from rebalance_advisor.devtools import local_kafka

            local_kafka.stop(broker_dir)
            shutil.rmtree(broker_dir, ignore_errors=True)  # the broker's data; reports stay in ``work``
    by_run = {r["run"]: r for r in results}
    targets = [t for name in ("B", "C", "J") if (t := ratio_target(by_run, name)) is not None]
    target = targets[0] if targets else None
    document = {
        "args": vars(args),
        "work_dir": str(work),
        "uptime_start": uptime_start,
        "uptime_end": subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip(),
        "runs": results,
        "target": target,
        "targets": targets,
        "failed": failed,
    }
    out = Path(args.output)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(document, indent=1))
    print("\nrun  records  p50 s  p99 s  max s  avg max lag  peak max lag  overloaded  moves")
    for r in results:
        print(
            f"{r['run']:3}  {r['records']:7}  {r['p50_time_lag_s']}  {r['p99_time_lag_s']}  {r['max_time_lag_s']}  "
            f"{r['avg_max_member_lag']}  {r['peak_max_member_lag']}  {r['overloaded_share']}  {r['moves_gained']}"
        )
    for r in results:
        if "broker_plans" in r:
            print(f"run {r['run']} plans put in force by the broker: {r['broker_plans']}")
            for member, x in r["learnt_capacities"].items():
                truth = r["capacities"].get(member)
                print(
                    f"run {r['run']} {member}: capacity {x['last_capacity'] and round(x['last_capacity'])} "
                    f"({x['last_source']}; true {truth and round(truth)}), sources over measured steps {x['sources']}"
                )
    for t in targets:
        print(f"{t['status']}  {t['target']} (ratio {t['ratio']:.3f})")
    if not targets:
        print("NOT RUN  run B (or C) p99 time lag <= 1/10 of run A's")
    if results:
        plot(results, Path(args.plot))
        print(f"wrote {out} and {args.plot}")
    return 1 if failed else 0


if __name__ == "__main__":
    roles = {"_producer": run_producer, "_consumer": run_consumer, "_sampler": run_sampler}
    if len(sys.argv) == 3 and sys.argv[1] in roles:
        roles[sys.argv[1]](json.loads(sys.argv[2]))
        sys.exit(0)
    sys.exit(main())
