"""What it costs to make the broker apply a new plan now: the trigger member vs removing members.

    .venv/bin/python bench/broker_trigger.py [--bootstrap HOST:PORT] [--rounds 10]

The broker runs a group's assignor only when the group epoch moves. Three ways to move it, each on
its own group of ``--members`` plain ``subscribe()`` consumers (confluent-kafka, consumer protocol,
``group.remote.assignor=advised``, auto-commit every second) reading ``--partitions`` partitions
fed at ``--rate`` records/s in all:

- ``trigger-member`` (dynamic members): a short-lived member joins asking for ``advised``,
  subscribed to a topic that does not exist, and leaves (adapters/broker_reassign.py);
- ``remove-one-static`` (members with ``group.instance.id``): Kafka's Java Admin API removes one
  member (``removeMembersFromConsumerGroup`` with ``MemberToRemove(instanceId)``), which rejoins;
- ``remove-all-dynamic`` (dynamic members): the same call without members, the only form Kafka
  4.3's Admin API has for members without an instance id: every member is removed and rejoins.

Each round publishes the other of two plans (blocks of 6/2/2/2 and 2/2/2/6 partitions, so 8 of 12
partitions move) and applies it the scenario's way, then waits until every member holds its planned
partitions. Measured per round: seconds until in force (from the trigger's start), every partition's
longest gap between two processed records around it (a partition "pauses" when that exceeds 1 s;
the normal gap is 1 / its rate), which members paused on partitions the plan did not move, and
records processed twice; over the whole run, records lost (an offset never processed between a
partition's first and last processed ones), records processed by two different members, and
duplicates. ``--scenarios trigger-member --rounds 50`` is the 50-plan-change check of the chosen
way; ``--consumers java`` runs it with Java consumers (bench/java/LoggingConsumer.java). Prints a table and writes bench/results/broker_trigger.json with ``uptime``.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "include"))
RESULTS = ROOT / "bench" / "results" / "broker_trigger.json"
PAUSE_S = 1.0
SCENARIOS = ("trigger-member", "remove-one-static", "remove-all-dynamic")


class Group:
    """A topic, its producer and its consumers (threads), each processed record logged."""

    def __init__(self, bootstrap: str, name: str, args: argparse.Namespace, static: bool) -> None:
        from confluent_kafka.admin import AdminClient, NewTopic

        self.bootstrap, self.group = bootstrap, f"{name}-{uuid.uuid4().hex[:6]}"
        self.topic, self.args, self.static = self.group, args, static
        self.admin = AdminClient({"bootstrap.servers": bootstrap})
        self.admin.create_topics([NewTopic(self.topic, args.partitions, 1)])[self.topic].result(30)
        self.log: list[tuple[float, str, int, int]] = []
        self.stop = threading.Event()
        self.threads = [threading.Thread(target=self._produce, daemon=True)]
        self.threads += [
            threading.Thread(target=self._consume, args=(i,), daemon=True) for i in range(args.members)
        ]
        for thread in self.threads:
            thread.start()

    def _produce(self) -> None:
        from confluent_kafka import Producer

        producer = Producer({"bootstrap.servers": self.bootstrap, "linger.ms": 5})
        per = self.args.rate / self.args.partitions
        sent, started = 0, time.monotonic()
        while not self.stop.is_set():
            due = int((time.monotonic() - started) * per)
            for _ in range(due - sent):
                for p in range(self.args.partitions):
                    producer.produce(self.topic, b"x", partition=p)
            sent = max(sent, due)
            producer.poll(0.02)
        producer.flush(5)

    def _consume(self, index: int) -> None:
        if self.args.consumers == "java":
            self._consume_java(f"m{index}")
            return
        from confluent_kafka import Consumer

        client = f"m{index}"
        config = {
            "bootstrap.servers": self.bootstrap, "group.id": self.group, "client.id": client,
            "group.protocol": "consumer", "group.remote.assignor": "advised", "auto.offset.reset": "earliest",
        }  # fmt: skip
        if self.static:
            config["group.instance.id"] = client
        consumer = Consumer(config)
        consumer.subscribe([self.topic])
        while not self.stop.is_set():
            msg = consumer.poll(0.05)
            if msg is not None and not msg.error():
                self.log.append((time.time(), client, msg.partition(), msg.offset()))
        consumer.close()

    def _consume_java(self, client: str) -> None:
        """bench/java/LoggingConsumer.java: the same consumer in Java (auto-commit, advised); it logs
        each record it processed, which this thread adds to the run's log."""
        from rebalance_advisor.adapters.kafka_jars import jar_dir, java_executable

        source = ROOT / "bench" / "java" / "LoggingConsumer.java"
        command = [java_executable(), "-Xmx256m", "-cp", f"{jar_dir()}/*", str(source),
                   self.bootstrap, self.group, self.topic, client, *([client] if self.static else [])]  # fmt: skip
        process = subprocess.Popen(command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        closer = threading.Thread(target=lambda: (self.stop.wait(), process.stdin.close()), daemon=True)
        closer.start()
        for line in process.stdout:
            fields = line.split()
            if len(fields) == 3 and all(f.isdigit() for f in fields):
                self.log.append((int(fields[0]) / 1000, client, int(fields[1]), int(fields[2])))
            elif line.strip() != "ready":  # the client's own output (a warning): shown, never fatal
                print(f"  {client}: {line.rstrip()}", file=sys.stderr, flush=True)
        process.wait(30)

    def describe(self):
        """The group as the broker describes it; asked again for up to 2 minutes while a fresh broker
        loads its offsets topic (a first describe then times out or answers NOT_COORDINATOR)."""
        from confluent_kafka import KafkaException

        deadline = time.monotonic() + 120
        while True:
            try:
                return self.admin.describe_consumer_groups([self.group], request_timeout=30)[
                    self.group
                ].result(45)
            except KafkaException:
                if time.monotonic() > deadline:
                    raise
                time.sleep(2.0)

    def close(self) -> None:
        self.stop.set()
        for thread in self.threads:
            thread.join(30)


def plans(described, partitions: int) -> list[dict[str, list[tuple[str, int]]]]:
    """Two plans over the members in client-id order: blocks 6/2/2/2 and 2/2/2/6 (for 12 partitions)."""
    members = sorted(described.members, key=lambda m: m.client_id)
    keys = [m.group_instance_id or m.member_id for m in members]
    topic = described.group_id
    out = []
    for big in (0, len(keys) - 1):
        small = max(1, partitions // (len(keys) + 2))
        sizes = [partitions - small * (len(keys) - 1) if i == big else small for i in range(len(keys))]
        start, plan = 0, {}
        for key, size in zip(keys, sizes, strict=True):
            plan[key] = [(topic, p) for p in range(start, start + size)]
            start += size
        out.append(plan)
    return out


def remove_members(bootstrap: str, group: str, instance: str | None) -> None:
    from rebalance_advisor.adapters.kafka_jars import jar_dir, java_executable

    source = ROOT / "bench" / "java" / "RemoveGroupMembers.java"
    command = [java_executable(), "-Xmx128m", "-XX:TieredStopAtLevel=1", "-cp", f"{jar_dir()}/*", str(source),
               bootstrap, group, *([instance] if instance else [])]  # fmt: skip
    done = subprocess.run(command, capture_output=True, text=True, timeout=120)
    if done.returncode != 0:
        raise RuntimeError(f"RemoveGroupMembers failed: {done.stderr.strip().splitlines()[-1:]}")


def one_round(g: Group, scenario: str, plan: dict, plan_id: str) -> dict:
    """Publish ``plan``, apply it the scenario's way, wait until it is in force; the round's numbers."""
    from rebalance_advisor.adapters.broker_plans import publish_broker_plan
    from rebalance_advisor.adapters.broker_reassign import apply_plan, plan_state

    config = {"bootstrap.servers": g.bootstrap}
    before = {m.group_instance_id or m.member_id: m.client_id for m in g.describe().members}
    owners_before = {
        (tp.topic, tp.partition): m.client_id
        for m in g.describe().members
        for tp in m.assignment.topic_partitions
    }
    identities = {k: (k, None) for k in plan}
    if g.static:  # the record names static members by instance id (their member id changes on restart)
        identities = {m.group_instance_id: (m.member_id, m.group_instance_id) for m in g.describe().members}
    record = publish_broker_plan(config, g.group, plan_id, plan, identities).record
    time.sleep(1.0)  # the plugin follows the topic (it polls every 0.5 s): let it read the record
    started = time.time()
    in_force_s, triggers = None, 1
    if scenario == "trigger-member":
        seen = apply_plan(config, record, timeout=30)
        in_force_s, triggers = seen.in_force_s, seen.triggers
    else:
        remove_members(g.bootstrap, g.group, sorted(before)[0] if scenario == "remove-one-static" else None)
        while time.time() - started < 30:
            if plan_state(g.describe(), record)[1]:
                in_force_s = time.time() - started
                break
            time.sleep(0.25)
    time.sleep(3.0)  # records after the handover
    window = [r for r in g.log if started - 1.0 <= r[0] <= time.time()]
    moved = {tp for key, tps in plan.items() for tp in tps if owners_before.get(tp) != before.get(key)}
    return analyse(window, moved, owners_before, g.topic, scenario, in_force_s, triggers)


def analyse(window, moved, owners_before, topic, scenario, in_force_s, triggers) -> dict:
    by_partition: dict[int, list[float]] = {}
    seen, duplicates = set(), 0
    for t, _client, partition, offset in sorted(window):
        by_partition.setdefault(partition, []).append(t)
        duplicates += (partition, offset) in seen
        seen.add((partition, offset))
    gaps = {
        p: max((b - a for a, b in zip(ts, ts[1:], strict=False)), default=0.0)
        for p, ts in by_partition.items()
    }
    paused = {p for p, gap in gaps.items() if gap > PAUSE_S}
    unmoved_paused = {p for p in paused if (topic, p) not in moved}
    return {
        "scenario": scenario,
        "in_force_s": None if in_force_s is None else round(in_force_s, 2),
        "triggers": triggers,
        "moved_partitions": len(moved),
        "paused_partitions": len(paused),
        "paused_unmoved_partitions": len(unmoved_paused),
        "members_paused_on_unmoved": sorted({owners_before.get((topic, p), "?") for p in unmoved_paused}),
        "max_gap_moved_s": round(max((gaps.get(p, 0.0) for _, p in moved), default=0.0), 2),
        "max_gap_unmoved_s": round(
            max((g for p, g in gaps.items() if (topic, p) not in moved), default=0.0), 2
        ),
        "duplicates": duplicates,
    }


def run_scenario(bootstrap: str, scenario: str, args: argparse.Namespace) -> list[dict]:
    g = Group(bootstrap, f"trig-{scenario}", args, static=scenario == "remove-one-static")
    try:
        deadline = time.time() + 60
        while len([m for m in g.describe().members if m.assignment.topic_partitions]) < args.members:
            if time.time() > deadline:
                raise RuntimeError(f"{g.group} did not settle")
            time.sleep(0.5)
        time.sleep(3.0)
        pair = plans(g.describe(), args.partitions)
        rounds = []
        for i in range(args.rounds):
            result = one_round(g, scenario, pair[i % 2], f"{scenario}-{i}")
            print(f"  {scenario} round {i}: {result}", flush=True)
            rounds.append(result)
    finally:
        g.close()
    rounds.append({"scenario": scenario, "whole_run": whole_run(g.log)})
    return rounds


def whole_run(log: list[tuple[float, str, int, int]]) -> dict:
    """Over the whole run: offsets never processed between a partition's first and last processed one
    (lost), offsets processed by two different members, and extra processings (duplicates)."""
    by_offset: dict[tuple[int, int], set[str]] = {}
    count: dict[tuple[int, int], int] = {}
    for _t, client, partition, offset in log:
        by_offset.setdefault((partition, offset), set()).add(client)
        count[(partition, offset)] = count.get((partition, offset), 0) + 1
    lost = 0
    for partition in {p for p, _ in by_offset}:
        offsets = sorted(o for p, o in by_offset if p == partition)
        lost += offsets[-1] - offsets[0] + 1 - len(offsets)
    return {
        "records": len(by_offset),
        "lost": lost,
        "by_two_members": sum(1 for clients in by_offset.values() if len(clients) > 1),
        "duplicates": sum(n - 1 for n in count.values()),
    }


def summary(rounds: list[dict]) -> dict:
    whole = next((r["whole_run"] for r in rounds if "whole_run" in r), {})
    rounds = [r for r in rounds if "whole_run" not in r]
    forced = [r["in_force_s"] for r in rounds if r["in_force_s"] is not None]
    return {
        "rounds": len(rounds),
        "in_force": len(forced),
        "in_force_median_s": sorted(forced)[len(forced) // 2] if forced else None,
        "in_force_max_s": max(forced) if forced else None,
        "paused_unmoved_per_round": sum(r["paused_unmoved_partitions"] for r in rounds) / len(rounds),
        "max_gap_unmoved_s": max(r["max_gap_unmoved_s"] for r in rounds),
        "max_gap_moved_s": max(r["max_gap_moved_s"] for r in rounds),
        "duplicates": sum(r["duplicates"] for r in rounds),
        "triggers": sum(r["triggers"] for r in rounds),
        "in_force_within_30s": sum(1 for x in forced if x <= 30.0),
        **{f"run_{k}": v for k, v in whole.items()},
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--bootstrap")
    parser.add_argument("--rounds", type=int, default=10)
    parser.add_argument("--partitions", type=int, default=12)
    parser.add_argument("--members", type=int, default=4)
    parser.add_argument("--rate", type=float, default=240.0)
    parser.add_argument("--scenarios", default=",".join(SCENARIOS))
    parser.add_argument(
        "--consumers", choices=("python", "java"), default="python",
        help="confluent-kafka consumers in threads, or Java KafkaConsumers (bench/java/LoggingConsumer.java)",
    )  # fmt: skip
    parser.add_argument("--output", default=str(RESULTS))
    args = parser.parse_args()
    uptime = [subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip()]
    work, bootstrap = None, args.bootstrap
    if not bootstrap:
        from rebalance_advisor.devtools import local_kafka

        work = Path(tempfile.mkdtemp(prefix="broker-trigger-"))
        bootstrap = local_kafka.start(work / "kafka").bootstrap_servers
    results = {}
    try:
        for scenario in args.scenarios.split(","):
            results[scenario] = run_scenario(bootstrap, scenario, args)
    finally:
        if work is not None:
            from rebalance_advisor.devtools import local_kafka

            local_kafka.stop(work / "kafka")
    uptime.append(subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip())
    table = {s: summary(r) for s, r in results.items()}
    print(f"\n{'scenario':20} {'in force':>8} {'median s':>8} {'max s':>6} {'unmoved paused/round':>20} "
          f"{'max gap unmoved s':>17} {'max gap moved s':>15} {'dups':>5} {'triggers':>8}")  # fmt: skip
    for s, t in table.items():
        print(f"{s:20} {t['in_force']:>3}/{t['rounds']:<4} {t['in_force_median_s']!s:>8} {t['in_force_max_s']!s:>6} "
              f"{t['paused_unmoved_per_round']:>20.1f} {t['max_gap_unmoved_s']:>17} {t['max_gap_moved_s']:>15} "
              f"{t['duplicates']:>5} {t['triggers']:>8}")  # fmt: skip
    for s, t in table.items():
        print(f"{s}: whole run {t.get('run_records')} records, lost {t.get('run_lost')}, processed by two "
              f"members {t.get('run_by_two_members')}, duplicates {t.get('run_duplicates')}")  # fmt: skip
    print(f"uptime: {uptime[0]}\n        {uptime[1]}")
    out = Path(args.output)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(
        json.dumps({"args": vars(args), "uptime": uptime, "summary": table, "rounds": results}, indent=1)
    )
    print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    os.environ.setdefault("PYTHONUNBUFFERED", "1")
    sys.exit(main())
