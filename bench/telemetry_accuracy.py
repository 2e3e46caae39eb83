"""Telemetry capacity against the truth, on the real broker with the plugin (docs/operations/telemetry.md).

    python bench/telemetry_accuracy.py                      # Python and Java, 20/50/90 % busy, a pool
    python bench/telemetry_accuracy.py --languages python --measure 60

Per language (confluent-kafka 2.16.1 = librdkafka, Java 4.3.1): consumers of a known cost per record
(devtools/cost_consumers.py: ``--cost-ms`` of simulated processing on the poll thread), each on its
own one-partition topic and group, all at the same time (so machine load hits them alike):
- ``saturated``: a backlog it cannot finish: its throughput is the truth (its capacity);
- ``inline`` at 20, 50 and 90 % of that capacity (Poisson arrivals at level / cost; ``--arrivals
  ticks``: every 20 ms what accrued, as bench/closed_loop.py's producer sends: the librdkafka model
  assumes Poisson arrivals, and this measures what it reads when they are regular);
- ``pool``: hands records to ``--workers`` threads and pauses fetching while they are behind,
  produced at 1.3 x the pool's capacity: its lag grows while its poll thread idles.
After ``--warmup`` seconds, over ``--measure`` seconds: the consumer's processed rate (its own
report), the busy share its telemetry reports (mean of the pushes' 1 - idle ratio, raw), the
corrected busy share (domain/telemetry.py's calibration), the telemetry capacity (the rule with its
gates, domain.telemetry.telemetry_capacity), and its error against the saturated throughput.
Writes bench/results/telemetry_accuracy.json; records ``uptime`` (the machine is shared).
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import statistics
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "include"))

RESULTS = Path(__file__).resolve().parent / "results"
LEVELS = (0.2, 0.5, 0.9)


@dataclass
class Case:
    language: str
    mode: str
    level: float | None
    topic: str
    group: str
    rate: float
    report: Path
    process: object = None
    idle: list[tuple[float, float]] = field(default_factory=list)
    samples: list = field(default_factory=list)


def make_cases(args: argparse.Namespace, work: Path, stamp: int) -> list[Case]:
    capacity = 1000.0 / args.cost_ms
    cases = []
    for language in args.languages.split(","):
        plan = [("saturated", None, 0.0)] + [("inline", lv, lv * capacity) for lv in args.levels]
        plan.append(("pool", None, 1.3 * args.workers * capacity))
        for mode, level, rate in plan:
            name = f"ta-{stamp}-{language}-{mode}-{int((level or 0) * 100)}"
            cases.append(Case(language, mode, level, name, name, rate, work / f"{name}.jsonl"))
    return cases


def prepare_topics(bootstrap: str, cases: list[Case], backlog: int) -> None:
    """One partition per case; the saturated ones get a backlog they cannot finish."""
    from confluent_kafka import Producer
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": bootstrap})
    for future in admin.create_topics([NewTopic(c.topic, 1, 1) for c in cases]).values():
        future.result()
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 20})
    for case in cases:
        if case.mode == "saturated":
            for _ in range(backlog):
                _produce(producer, case.topic)
            producer.flush(120)


def _produce(producer, topic: str) -> None:
    while True:
        try:
            producer.produce(topic, b"x" * 100)
            return
        except BufferError:  # the local queue is full: wait for deliveries
            producer.poll(0.1)


def tick_arrivals(carried: float, rate: float, elapsed_s: float) -> tuple[int, float]:
    """Records due at a tick under ``--arrivals ticks``, and the fraction carried to the next one:
    what accrued at ``rate`` over ``elapsed_s``, whole records only (no randomness)."""
    due = carried + rate * elapsed_s
    return int(due), due - int(due)


def run_producer(bootstrap: str, rates: dict[str, float], arrivals: str = "poisson", seed: int = 1) -> None:
    """Arrivals at the given mean rates until SIGTERM, in its own process (own GIL): ``poisson``
    (records many independent producers would send, each sent when its time comes, checked every
    2 ms) or ``ticks`` (every 20 ms the records that accrued, as bench/closed_loop.py sends)."""
    import random
    import signal

    from confluent_kafka import Producer

    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 0})
    rng = random.Random(seed)
    ticks = arrivals == "ticks"
    start = last = time.monotonic()
    due = {topic: 0.0 if ticks else start + rng.expovariate(rate) for topic, rate in rates.items()}
    while not stop.is_set():
        time.sleep(0.02 if ticks else 0.002)
        now = time.monotonic()
        for topic, rate in rates.items():
            if ticks:
                count, due[topic] = tick_arrivals(due[topic], rate, now - last)
                for _ in range(count):
                    _produce(producer, topic)
                continue
            while due[topic] <= now:
                _produce(producer, topic)
                due[topic] += rng.expovariate(rate)
        last = now
        producer.poll(0)
    producer.flush(10)


def start_producer(bootstrap: str, cases: list[Case], log: Path, arrivals: str = "poisson"):
    """This script again, as the producer process, in its own process group."""
    import subprocess

    rates = {c.topic: c.rate for c in cases if c.rate > 0}
    spec = {"bootstrap": bootstrap, "rates": rates, "arrivals": arrivals}
    command = [sys.executable, __file__, "--produce", json.dumps(spec)]
    with open(log, "ab") as out:
        return subprocess.Popen(command, stdout=out, stderr=subprocess.STDOUT, start_new_session=True)


def follow_telemetry(bootstrap: str, cases: list[Case], stop: threading.Event) -> None:
    """Every sample the plugin writes for the cases' groups, as it arrives."""
    from confluent_kafka import OFFSET_BEGINNING, Consumer, TopicPartition
    from rebalance_advisor.adapters.client_telemetry import TOPIC, TelemetryRead, apply_record

    by_group = {c.group: c for c in cases}
    consumer = Consumer(
        {"bootstrap.servers": bootstrap, "group.id": "ta-follower", "enable.auto.commit": False}
    )
    while not stop.is_set() and TOPIC not in consumer.list_topics(timeout=5).topics:
        time.sleep(1)
    consumer.assign([TopicPartition(TOPIC, 0, OFFSET_BEGINNING)])
    while not stop.is_set():
        for msg in consumer.consume(100, 0.5):
            read = TelemetryRead()
            if not msg.error():
                apply_record(read, msg.key(), msg.value())
            for (group, _), sample in read.samples.items():
                if group in by_group:
                    by_group[group].samples.append(sample)
    consumer.close()


def committed_lag(bootstrap: str, case: Case) -> int:
    """Log end - committed offset of the case's one partition (the whole log when none committed)."""
    from confluent_kafka import Consumer, TopicPartition

    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": case.group, "enable.auto.commit": False})
    try:
        tp = TopicPartition(case.topic, 0)
        committed = consumer.committed([tp], timeout=10)[0].offset
        low, high = consumer.get_watermark_offsets(tp, timeout=10)
        return high - (committed if committed >= 0 else low)
    finally:
        consumer.close()


def _report_lines(case: Case, start: float, end: float) -> list[dict]:
    from rebalance_advisor.devtools.cost_consumers import read_report

    return read_report(case.report, start, end)


def processed_rate(case: Case, start: float, end: float) -> float:
    return sum(line["processed"] for line in _report_lines(case, start, end)) / (end - start)


def poll_thread_stats(case: Case, start: float, end: float) -> dict:
    """What the consumer measured of itself (devtools/cost_consumers.py, CostConsumer.java): its busy
    share outside ``poll()`` by its own clock, its polls per second and (Java) ``time-between-poll-avg``."""
    from rebalance_advisor.devtools.cost_consumers import own_clock

    lines = [x for x in _report_lines(case, start, end) if "in_poll_s" in x]
    if len(lines) < 2:
        return {}
    elapsed, busy = own_clock(lines)
    return {
        "self_busy": round(busy / elapsed, 3),
        "polls_per_s": round(sum(x["polls"] for x in lines[1:]) / elapsed, 1),
        **java_poll_metrics(lines),
    }


def java_poll_metrics(lines: list[dict]) -> dict:
    """The Java consumer's own ``time-between-poll-avg`` and the seconds its idle ratio read NaN."""
    if not all("time_between_poll_avg" in x for x in lines):
        return {}
    return {
        "time_between_poll_ms": round(statistics.fmean(x["time_between_poll_avg"] for x in lines), 2),
        "local_idle_nan_s": sum(1 for x in lines if x["poll_idle_ratio_avg"] < 0),
    }


def analyse(
    case: Case, start: float, end: float, truth: float | None, lag: tuple[int, int], cost_s: float
) -> dict:
    """One row: rates, reported and corrected busy, the rule's capacity, its error."""
    from rebalance_advisor.domain.telemetry import STEADY, busy_share, telemetry_capacity

    rate = processed_rate(case, start, end)
    window = [s for s in case.samples if start <= s.idle_time <= end and s.idle_ratio is not None]
    raw = statistics.fmean(1 - s.idle_ratio for s in window) if window else None
    corrected = statistics.fmean(busy_share(s) for s in window) if window else None
    # the same pushes read as records at a steady spacing (docs/operations/telemetry.md)
    steady = statistics.fmean(busy_share(s, STEADY) for s in window) if window else None
    verdict = telemetry_capacity(
        window[-1] if window else None, rate, lag[1] - lag[0], window[-1].idle_time if window else end
    )
    capacity = rate / corrected if corrected and corrected > 0 and rate > 0 else None
    row = {
        "language": case.language,
        "mode": case.mode,
        "level": case.level,
        "rate": round(rate, 1),
        "true_busy": round(rate / truth, 3) if truth else None,
        "reported_busy": None if raw is None else round(raw, 3),
        "corrected_busy": None if corrected is None else round(corrected, 3),
        "pushes": len(window),
        "capacity": None if capacity is None else round(capacity, 1),
        "rule_capacity": None if verdict.capacity is None else round(verdict.capacity, 1),
        "rule_reason": verdict.reason,
        "truth": None if truth is None else round(truth, 1),
        "nominal": round(1 / cost_s, 1),
        "lag_growth": lag[1] - lag[0],
        **poll_thread_stats(case, start, end),
    }
    if capacity and truth:
        row["error_pct"] = round(100 * (capacity - truth) / truth, 1)
    if steady and steady > 0 and rate > 0:
        row["steady_busy"] = round(steady, 3)
        row["steady_capacity"] = round(rate / steady, 1)
        row["steady_error_pct"] = round(100 * (rate / steady - truth) / truth, 1) if truth else None
    if window and rate > 0:
        row["summaries"] = summaries(window, rate, truth)
        row["time_between_poll_pushed_ms"] = [s.time_between_poll_ms for s in window][-3:]
    return row


#: the advisor's snapshot interval the summaries are taken over (bench/closed_loop.py's default)
SNAPSHOT_INTERVAL_S = 30.0


def summaries(window: list, rate: float, truth: float | None) -> dict:
    """Each summary of the recent pushes (domain.telemetry.summary_busy), taken as a snapshot would
    at every push of the window: its capacity error at the last one, the median and largest absolute
    error over all, how many were gated, and how many the starved-Java gate refused (what it would
    have read is still counted in the errors)."""
    from rebalance_advisor.domain.telemetry import TelemetryParameters, telemetry_capacity

    out = {}
    for summary in ("newest", "median", "mean"):
        loose = TelemetryParameters(summary=summary, starved_batch_factor=float("inf"))
        gated = TelemetryParameters(summary=summary)
        errors, refused, starved, last = [], 0, 0, None
        for s in window:
            last = telemetry_capacity(s, rate, 0, s.idle_time, loose, SNAPSHOT_INTERVAL_S)
            if last.capacity is None:
                refused += 1
            elif truth:
                errors.append(100 * (last.capacity - truth) / truth)
            starved += (
                telemetry_capacity(s, rate, 0, s.idle_time, gated, SNAPSHOT_INTERVAL_S).capacity is None
            )
        out[summary] = {
            "last_error_pct": round(100 * (last.capacity - truth) / truth, 1)
            if last is not None and last.capacity and truth
            else None,
            "median_abs_error_pct": round(statistics.median(abs(e) for e in errors), 1) if errors else None,
            "max_abs_error_pct": round(max(errors, key=abs), 1) if errors else None,
            "gated": refused,
            "refused_with_starved_gate": int(starved),
            "snapshots": len(window),
        }
    return out


def print_summaries(rows: list[dict]) -> None:
    print(
        f"{'client':<8}{'mode':<10}{'level':>6}  summary: last / median |err| / max err, gated, refused w/ starved gate"
    )
    for r in rows:
        cells = []
        for name, v in r.get("summaries", {}).items():
            cells.append(
                f"{name} {v['last_error_pct']}/{v['median_abs_error_pct']}/{v['max_abs_error_pct']}"
                f" g{v['gated']} s{v['refused_with_starved_gate']}"
            )
        print(f"{r['language']:<8}{r['mode']:<10}{str(r['level'] or '-'):>6}  " + " | ".join(cells))  # fmt: skip


def print_table(rows: list[dict]) -> None:
    head = (
        f"{'client':<8}{'mode':<10}{'level':>6}{'rate/s':>8}{'true busy':>10}{'reported':>9}{'corrected':>10}"
    )
    print(head + f"{'capacity':>9}{'truth':>8}{'error':>8}{'steady':>8}  rule")
    for r in rows:
        cells = [r["language"], r["mode"], r["level"], r["rate"], r["true_busy"], r["reported_busy"]]
        cells += [
            r["corrected_busy"],
            r["capacity"],
            r["truth"],
            r.get("error_pct"),
            r.get("steady_error_pct"),
        ]
        text = [str("-" if c is None else c) for c in cells]
        print(f"{text[0]:<8}{text[1]:<10}{text[2]:>6}{text[3]:>8}{text[4]:>10}{text[5]:>9}{text[6]:>10}"
              f"{text[7]:>9}{text[8]:>8}{text[9]:>8}{text[10]:>8}  {r['rule_reason']}")  # fmt: skip


def load_drifts(rows: list[dict]) -> list[dict]:
    """Per client and each two busy levels of its single-threaded consumers: which way the two
    models' mean capacity drifts between them (``telemetry.consistency_evidence``; positive reads
    as records at a steady spacing), what the advisor's evidence sees when a member's load moves."""
    from rebalance_advisor.domain.telemetry import (
        TelemetryParameters,
        TelemetryReadings,
        TelemetryReference,
        consistency_evidence,
    )

    floor = TelemetryParameters().min_busy  # the source's gate, under each model

    def reference(row: dict) -> TelemetryReference | None:
        if not (row.get("rate") and row.get("capacity") and row.get("steady_capacity")):
            return None
        if min(row.get("corrected_busy") or 0.0, row.get("steady_busy") or 0.0) < floor:
            return None
        return TelemetryReference(row["rate"], TelemetryReadings(row["capacity"], row["steady_capacity"]))

    inline = sorted((r for r in rows if r["mode"] == "inline"), key=lambda r: (r["language"], r["rate"]))
    out = []
    for low, high in itertools.combinations(inline, 2):
        a, b = reference(low), reference(high)
        if low["language"] != high["language"] or a is None or b is None:
            continue
        drift = consistency_evidence([(a, b)])
        if drift is not None:
            out.append(
                {
                    "language": low["language"],
                    "levels": [low["level"], high["level"]],
                    "drift": round(drift, 3),
                }
            )
    return out


def print_drifts(drifts: list[dict]) -> None:
    print("a member's readings at two loads (drift > 0: read as records at a steady spacing)")
    for d in drifts:
        verdict = "steady" if d["drift"] > 0 else "random"
        print(f"{d['language']:<8}{d['levels'][0]:>5} -> {d['levels'][1]:<5}{d['drift']:>+8.3f}  {verdict}")


def _levels(text: str) -> tuple[float, ...]:
    try:
        levels = tuple(float(x) for x in text.split(","))
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a comma-separated list of numbers: {text!r}") from None
    if not all(0 < x < 1 for x in levels):
        raise argparse.ArgumentTypeError(f"each level is a busy share between 0 and 1, got {text!r}")
    return levels


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--bootstrap", help="a broker with the plugin and a subscription (default: start one)"
    )
    parser.add_argument("--languages", default="python,java")
    parser.add_argument("--cost-ms", type=float, default=4.0)
    parser.add_argument(
        "--levels",
        type=_levels,
        default=LEVELS,
        help="busy shares of the inline consumers (default 0.2,0.5,0.9)",
    )
    parser.add_argument(
        "--arrivals",
        choices=("poisson", "ticks"),
        default="poisson",
        help="how records arrive: at random (default), or every 20 ms what accrued (bench/closed_loop.py)",
    )
    parser.add_argument("--workers", type=int, default=4)
    parser.add_argument("--warmup", type=float, default=60.0)
    parser.add_argument("--measure", type=float, default=90.0)
    parser.add_argument("--out", default=str(RESULTS / "telemetry_accuracy.json"))
    parser.add_argument("--produce", help=argparse.SUPPRESS)  # internal: be the producer process
    args = parser.parse_args(argv)
    if args.produce:
        spec = json.loads(args.produce)
        run_producer(spec["bootstrap"], spec["rates"], spec.get("arrivals", "poisson"))
        return 0
    from rebalance_advisor.devtools import cost_consumers, local_kafka

    work = Path(tempfile.mkdtemp(prefix="telemetry-accuracy-"))
    broker = None if args.bootstrap else local_kafka.start(state_dir=work / "kafka")
    bootstrap = args.bootstrap or broker.bootstrap_servers
    cases = make_cases(args, work, int(time.time()))
    stop, producer = threading.Event(), None
    try:
        if broker is not None:
            local_kafka.await_telemetry_subscription(work / "kafka")
        backlog = int((args.warmup + args.measure + 30) * 1000 / args.cost_ms * 1.5)
        prepare_topics(bootstrap, cases, backlog)
        producer = start_producer(bootstrap, cases, work / "producer.log", args.arrivals)
        threading.Thread(target=follow_telemetry, args=(bootstrap, cases, stop), daemon=True).start()
        for case in cases:
            spec = cost_consumers.CostConsumerSpec(
                bootstrap, case.topic, case.group, case.group, args.cost_ms / 1000,
                "pool" if case.mode == "pool" else "inline",
                workers=args.workers, report=str(case.report),
                offset_reset="earliest" if case.mode == "saturated" else "latest",
            )  # fmt: skip
            case.process = cost_consumers.launch(spec, case.language, work / f"{case.group}.log")
        print(f"consumers started, logs in {work}; measuring after {args.warmup:.0f} s", flush=True)
        time.sleep(args.warmup)
        start, lag0 = time.time(), {c.group: committed_lag(bootstrap, c) for c in cases}
        loads = [os.getloadavg()]
        time.sleep(args.measure)
        end, lag1 = time.time(), {c.group: committed_lag(bootstrap, c) for c in cases}
        loads.append(os.getloadavg())
        truth = {c.language: processed_rate(c, start, end) for c in cases if c.mode == "saturated"}
        rows = [
            analyse(c, start, end, truth[c.language], (lag0[c.group], lag1[c.group]), args.cost_ms / 1000)
            for c in cases
        ]
    finally:
        stop.set()
        for process in [c.process for c in cases] + [producer]:
            if process is not None:
                cost_consumers.stop(process)
        if broker is not None:
            local_kafka.stop(work / "kafka")
    print_table(rows)
    print_summaries(rows)
    drifts = load_drifts(rows)
    print_drifts(drifts)
    print(f"load averages (1/5/15 min) at start and end of the measurement: {loads}")
    result = {
        "args": vars(args),
        "rows": rows,
        "drifts": drifts,
        "loadavg": loads,
        "measured_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
    }
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(result, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
