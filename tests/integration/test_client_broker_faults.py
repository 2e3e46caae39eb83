"""The client helper (fenced mode) when the broker itself fails: restarts and a wedged connection.

A broker of this module's own, behind a TCP proxy it advertises (tests/support/wedge_proxy.py),
so a test can crash and restart it, or freeze one client's group-coordinator connection.
Workers are processes (tests.support.assigned_worker) that log every record they process.
"""

from __future__ import annotations

import signal
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import Consumer, IsolationLevel, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic, OffsetSpec
from rebalance_advisor.adapters.assignment_publisher import publish_assignments

from tests.support import handover as h
from tests.support.torture import OwnBroker, _stopped, read_outputs
from tests.support.wedge_proxy import WedgeProxy

pytestmark = [pytest.mark.kafka, pytest.mark.slow]


@pytest.fixture(scope="module")
def proxied(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[OwnBroker, WedgeProxy]]:
    proxy = WedgeProxy()
    broker = OwnBroker(tmp_path_factory.mktemp("proxied-kafka"))
    try:
        proxy.target = broker.info.port
        broker.configure({"advertised.listeners": f"PLAINTEXT://127.0.0.1:{proxy.port}"})
        yield broker, proxy
    finally:
        broker.stop()
        proxy.close()


def _topics(bootstrap: str, partitions: int, output: bool = False) -> tuple[str, str, str, str | None]:
    base = f"faults-{uuid.uuid4().hex[:8]}"
    names = [f"{base}-in"] + ([f"{base}-out"] if output else [])
    admin = AdminClient({"bootstrap.servers": bootstrap})
    for future in admin.create_topics([NewTopic(n, partitions, 1) for n in names]).values():
        future.result(30)
    return f"{base}-group", f"{base}-assignments", names[0], names[1] if output else None


def _publish(bootstrap: str, group: str, assignments: str, plan: dict[str, list[tuple[str, int]]]) -> None:
    """Publish, retrying while the broker restarts."""
    deadline = time.monotonic() + 90
    while True:
        try:
            publish_assignments(
                {"bootstrap.servers": bootstrap}, group, f"p-{uuid.uuid4().hex[:4]}", plan,
                topic=assignments, timeout=10,
            )  # fmt: skip
            return
        except Exception:  # noqa: BLE001 - broker not back yet
            if time.monotonic() > deadline:
                raise
            time.sleep(1)


def _committed(bootstrap: str, group: str, topic: str, partitions: int) -> dict[int, int]:
    consumer = Consumer(
        {"bootstrap.servers": bootstrap, "group.id": group, "isolation.level": "read_committed"}
    )
    try:
        tps = [TopicPartition(topic, p) for p in range(partitions)]
        return {item.partition: item.offset for item in consumer.committed(tps, timeout=30)}
    finally:
        consumer.close()


def _open_transactions(bootstrap: str, topics: list[str]) -> dict[str, int]:
    """Partitions whose last stable offset is below their end: a transaction is still open there."""
    admin = AdminClient({"bootstrap.servers": bootstrap})
    tps = [
        TopicPartition(t, p) for t in topics for p in admin.list_topics(t, timeout=10).topics[t].partitions
    ]
    ends = {}
    for level in (IsolationLevel.READ_UNCOMMITTED, IsolationLevel.READ_COMMITTED):
        futures = admin.list_offsets({tp: OffsetSpec.latest() for tp in tps}, isolation_level=level)
        ends[level] = {(tp.topic, tp.partition): f.result(30).offset for tp, f in futures.items()}
    return {
        f"{t}-{p}": end - ends[IsolationLevel.READ_COMMITTED][(t, p)]
        for (t, p), end in ends[IsolationLevel.READ_UNCOMMITTED].items()
        if end != ends[IsolationLevel.READ_COMMITTED][(t, p)]
    }


@pytest.mark.known_failing
def test_broker_crash_during_handover_hangs_no_transaction(
    proxied: tuple[OwnBroker, WedgeProxy], tmp_path: Path
) -> None:
    """docs/protocol/index.md, "The rules": "Broker restart during a handover: a clear log line, no crash, nothing lost".

    A plan moves half the partitions; the new owner fences them (the old one released them) and
    stops itself before writing its claim; the broker is killed then (SIGKILL, no clean shutdown)
    and started again, and the new owner continues. Afterwards every
    record is processed, every output is on the output topic exactly once, the final commits are
    at the end, and no transaction is left open on ``__consumer_offsets`` or the output topic (a
    hanging transaction would hold the last stable offset below the end for good).

    Open defect (docs/protocol/liveness.md, "After a broker restart" and "A hanging transaction
    after the fence"): after a broker crash a partition can stay unprocessed for minutes (the torture
    runs traced it to a transaction whose commit marker never reached ``__consumer_offsets``; this
    test's failing run was not dumped). In 1 of 4 fresh-clone runs on 2026-11-27/28 (load 1-5) it
    waited 180 s for every record in vain; it passed in the other three. Kept out of ``make test``
    until the claim survives that hang.
    """
    broker, _ = proxied
    bootstrap, parts = broker.bootstrap, 4
    group, assignments, topic, output = _topics(bootstrap, parts, output=True)
    everything = [(topic, p) for p in range(parts)]
    _publish(bootstrap, group, assignments, {"a": everything, "b": []})
    workers = [
        h.start_worker(
            bootstrap,
            group,
            m,
            assignments,
            tmp_path / f"{m}.processed",
            3.0,
            "--output-topic",
            output,
            "--commit-interval",
            "0.1",
            "--ready-timeout",
            "120",
            *(["--pause-at", "after fencing"] if m == "b" else []),
        )
        for m in ("a", "b")
    ]
    producer = h.SteadyProducer(bootstrap, topic, parts, rate=100)
    producer.start()
    codes: list[int | None] = []
    try:
        h.wait_for(lambda: {x.partition for x in workers[0].lines()} == set(range(parts)), 60, "a consuming")
        _publish(bootstrap, group, assignments, {"a": everything[:2], "b": everything[2:]})
        # b stops itself right after fencing a's released partitions, before its claim is written
        h.wait_for(lambda: _stopped(workers[1].process.pid), 60, "b to fence and stop")
        crashed_at = time.time()
        broker.restart(down_for=1.0, crash=True)
        workers[1].signal(signal.SIGCONT)
        # a handover after the restart too: the partitions go back
        _publish(bootstrap, group, assignments, {"a": everything[2:], "b": everything[:2]})
        time.sleep(3)
        producer.finish()
        ends = h.end_offsets(bootstrap, topic, parts)
        h.wait_for(lambda: not h.coverage(workers, ends)[0], 180, "every record processed")
        time.sleep(1)  # the last commits (every 0.1 s)
    finally:
        producer.halt.set()
        codes = [w.stop() for w in workers]
    assert codes == [0, 0], "a worker crashed or hung"
    logs = "\n".join(w.log() for w in workers)
    assert "Traceback" not in logs
    after_crash = [
        line
        for line in logs.splitlines()
        if line.split(" ", 1)[0].replace(".", "").isdigit()
        and float(line.split()[0]) >= crashed_at
        and " WARNING " in line
        and "producer:" not in line
    ]
    assert after_crash, "the helper logged nothing about the broker going away"
    missing, _ = h.coverage(workers, ends)
    assert not missing
    outputs = read_outputs(bootstrap, output, parts)
    assert {key for key, count in outputs.items() if count > 1} == set()  # exactly once
    assert not [(p, o) for p, end in ends.items() for o in range(end) if (p, o) not in outputs]
    assert _committed(bootstrap, group, topic, parts) == ends
    # Workers closed cleanly; a transaction the crash left open is aborted at the latest after
    # the workers' transaction timeout (10 s). One still open after that hangs.
    deadline = time.monotonic() + 40
    while (still_open := _open_transactions(bootstrap, ["__consumer_offsets", output])) and (
        time.monotonic() < deadline
    ):
        time.sleep(1)
    assert still_open == {}, f"transactions left open (records above the last stable offset): {still_open}"


def test_wedged_coordinator_connection_is_replaced(
    proxied: tuple[OwnBroker, WedgeProxy], tmp_path: Path
) -> None:
    """A consumer whose group coordinator stops answering is replaced: a claim's reader after its
    read timed out, the polled consumer after 3 request timeouts.

    The proxy freezes the member's coordinator connection (librdkafka would give it up only after
    its 60 s socket timeout). The member must still claim a new partition well before that,
    keep consuming the one it holds from where it was, and process nothing twice.
    """
    broker, proxy = proxied
    bootstrap = broker.bootstrap
    group, assignments, topic, _ = _topics(bootstrap, 2)
    seed = h.SteadyProducer(bootstrap, topic, 2, rate=1000)
    seed.start()
    time.sleep(0.1)
    seed.finish()
    _publish(bootstrap, group, assignments, {"a": [(topic, 0)]})
    worker = h.start_worker(
        bootstrap, group, "a", assignments, tmp_path / "a.processed", 3.0,
        "--request-timeout", "2", "--commit-interval", "0.2",
    )  # fmt: skip
    try:
        first = h.end_offsets(bootstrap, topic, 2)
        h.wait_for(lambda: not h.coverage([worker], {0: first[0]})[0], 60, "partition 0 consumed")
        assert proxy.wedge() >= 1, "the member's consumer fetched no committed offsets"
        wedged_at = time.monotonic()
        _publish(bootstrap, group, assignments, {"a": [(topic, 0), (topic, 1)]})
        more = h.SteadyProducer(bootstrap, topic, 2, rate=200)
        more.start()
        time.sleep(0.5)
        more.finish()
        ends = h.end_offsets(bootstrap, topic, 2)
        h.wait_for(lambda: not h.coverage([worker], ends)[0], 45, "both partitions consumed")
        recovered = time.monotonic() - wedged_at
        time.sleep(1)  # the last commit
    finally:
        code = worker.stop()
    assert code == 0
    # fenced claims read through consumers lent per read (offset_reads.py): the one whose read
    # timed out is replaced at once; the polled consumer after three request timeouts
    assert "replacing that reader" in worker.log() or "replacing the consumer" in worker.log()
    # without the replacement the member waits for librdkafka's 60 s socket timeout
    assert recovered < 45
    _, seen = h.coverage([worker], ends)
    assert [key for key, count in seen.items() if count > 1] == []
    assert _committed(bootstrap, group, topic, 2) == ends
