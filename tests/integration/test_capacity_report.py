"""A member's own capacity report on a real broker (docs/protocol/index.md, "Capacity reports"): the client helper measures records per
second spent outside ``poll()``, writes it into its commits' marks, and the snapshot stores it as
the member's capacity, at a load where nothing else could measure it.

The truth is what the member did while it had a backlog (saturated, its consume rate is its
capacity), timed by the test itself; the report is read later, while the member runs at about a
quarter of that, caught up.
"""

from __future__ import annotations

import os
import threading
import time
import uuid
from dataclasses import dataclass

import pytest
from confluent_kafka import Producer
from rebalance_advisor import store
from rebalance_advisor.adapters.assignment_publisher import publish_assignments
from rebalance_advisor.domain.snapshot_model import MemberCapacity
from rebalance_advisor.services import static_members
from rebalance_advisor.store import db
from rebalance_advisor.store.plans import published_assignments
from rebalance_advisor_client.capacity_report import decode_capacity_report
from rebalance_advisor_client.consumer import AssignedConsumer

from tests._plans import mark_published, record_plan
from tests.support.kafka_offsets import new_topic, stored_snapshot

pytestmark = pytest.mark.kafka

HANDLING_S = 0.004  # the application's work per record: about 250 records/s at most
BACKLOG = 2500
AFTER_BACKLOG = 1200


class _Member(threading.Thread):
    """An AssignedConsumer that handles each record in ``HANDLING_S`` and commits twice a second;
    it logs (monotonic time, records handled so far) after each record."""

    def __init__(self, bootstrap: str, group: str, assignments: str) -> None:
        super().__init__(daemon=True)
        self.consumer = AssignedConsumer(
            {"bootstrap.servers": bootstrap, "auto.offset.reset": "earliest"},
            group,
            "m1",
            topic=assignments,
            fenced=False,
            capacity_window_s=10.0,
        )
        self.handled: list[float] = []
        self.stop = threading.Event()
        self.error: BaseException | None = None

    def run(self) -> None:
        try:
            next_commit = time.monotonic() + 0.5
            while not self.stop.is_set():
                if self.consumer.poll(0.2) is not None:
                    end = time.perf_counter() + HANDLING_S  # busy work, not a sleep: a real handler
                    while time.perf_counter() < end:
                        pass
                    self.handled.append(time.monotonic())
                if time.monotonic() >= next_commit:
                    self.consumer.commit()
                    next_commit = time.monotonic() + 0.5
            self.consumer.commit()
        except BaseException as error:  # noqa: BLE001 - reported by the test
            self.error = error
        finally:
            self.consumer.close()


def _saturated_rate(handled: list[float]) -> float:
    """Records per second over a backlog's handling times, from its 200th record to its last
    (warm-up left out)."""
    assert len(handled) > 400, len(handled)
    return (len(handled) - 200) / (handled[-1] - handled[199])


@dataclass
class _Measured:
    """One run: the stored snapshots, the truth before and after the reports, the first snapshot's
    reports, and the machine's highest 1-minute load average seen during the run."""

    url: str
    group: str
    first_id: int
    second_id: int
    truth_before: float
    truth_after: float
    load: float

    def capacities(self) -> list[MemberCapacity]:
        return [
            store.load_snapshot(i, self.url).rates.capacity[(self.group, "m1")]
            for i in (self.first_id, self.second_id)
        ]

    def within(self) -> bool:
        """Each report within the bounds the test holds it to (see the test)."""
        low, high = sorted((self.truth_before, self.truth_after))
        return all(
            c.capacity is not None and 0.5 * low <= c.capacity <= 1.1 * high for c in self.capacities()
        )


#: a run whose reports fall outside the bounds on an overloaded machine (1-minute load above the
#: cores) is measured again, at most this many times in all: under a shared CPU the handler's speed
#: moves between the phases (183.5/s before and 139.2/s after the reports, which read 205.8/s, at
#: load 7-9 beside a whole test suite). On a machine with cores to spare a first miss fails.
ATTEMPTS = 3


def _measure(kafka_bootstrap: str, url: str) -> _Measured:
    """A member with a backlog (the truth before), a quarter of that load for 15 s (the reports),
    two snapshots, and a backlog again (the truth after)."""
    store.upgrade(url)
    load = os.getloadavg()[0]
    group = f"report-{uuid.uuid4().hex[:8]}"
    topic = new_topic(kafka_bootstrap, 4)
    for member in ("m1", "m2"):
        static_members.add(group, member, [topic], url)
    plan_id = record_plan(url, group, ["m1", "m2"], [9000, 500, 400, 300], topic=topic)
    mark_published(url, plan_id, 1)
    with db.connect(url) as conn:
        owners = published_assignments(conn)[group]
    mine = sorted(p for _, p in owners["m1"])
    assert mine, owners
    assignments = f"{group}-assignments"
    publish_assignments(
        {"bootstrap.servers": kafka_bootstrap}, group, str(plan_id), owners, topic=assignments, timeout=30
    )

    producer = Producer({"bootstrap.servers": kafka_bootstrap, "linger.ms": 5})
    for i in range(BACKLOG):
        producer.produce(topic, b"x", partition=mine[i % len(mine)])
    assert producer.flush(30) == 0

    member = _Member(kafka_bootstrap, group, assignments)
    member.start()
    try:
        deadline = time.monotonic() + 90
        while len(member.handled) < BACKLOG and time.monotonic() < deadline and member.error is None:
            time.sleep(0.2)
        assert len(member.handled) >= BACKLOG, (len(member.handled), member.error)
        # The truth: its rate over the backlog.
        truth_before = _saturated_rate(member.handled[:BACKLOG])

        # A quarter of that for 15 s: it keeps up, so its consume rate says nothing about its capacity.
        rate = truth_before / 4
        started = time.monotonic()
        for k in range(int(rate * 15)):
            producer.produce(topic, b"y", partition=mine[k % len(mine)])
            producer.poll(0)
            time.sleep(max(started + (k + 1) / rate - time.monotonic(), 0))
        assert producer.flush(30) == 0
        time.sleep(1.0)  # the last records handled and committed
        assert member.error is None, member.error
        load = max(load, os.getloadavg()[0])
        first_id = stored_snapshot(kafka_bootstrap, group, url)
        time.sleep(6.0)  # past the shortest rate interval (5 s)
        second_id = stored_snapshot(kafka_bootstrap, group, url)
        # The truth again, after the reports: a shared machine's load moves the handler's speed
        # between the phases, and the report is held to what the member could do around it.
        done = len(member.handled)
        for i in range(AFTER_BACKLOG):
            producer.produce(topic, b"z", partition=mine[i % len(mine)])
        assert producer.flush(30) == 0
        deadline = time.monotonic() + 60
        while len(member.handled) < done + AFTER_BACKLOG and time.monotonic() < deadline:
            time.sleep(0.2)
        truth_after = _saturated_rate(member.handled[done : done + AFTER_BACKLOG])
        load = max(load, os.getloadavg()[0])
    finally:
        member.stop.set()
        member.join(30)
    assert member.error is None, member.error
    return _Measured(url, group, first_id, second_id, truth_before, truth_after, load)


def test_the_helper_reports_its_capacity_while_caught_up_and_the_snapshot_stores_it(
    kafka_bootstrap, tmp_path
) -> None:
    runs: list[_Measured] = []
    while len(runs) < ATTEMPTS:
        runs.append(_measure(kafka_bootstrap, f"sqlite:///{tmp_path / f'run-{len(runs)}.db'}"))
        if runs[-1].within() or runs[-1].load <= (os.cpu_count() or 1):
            break
    run = runs[-1]
    first = store.load_snapshot(run.first_id, run.url)
    marks = [decode_capacity_report(c.metadata) for c in first.committed if c.group_id == run.group]
    reports = [r for r in marks if r is not None]
    assert reports, [c.metadata for c in first.committed]
    # the window held only the quarter-load phase: busy about a quarter of the time, not saturated
    assert max(r.busy for r in reports) < 0.6, reports
    for got in run.capacities():
        assert got.source == "reported", (run, got)
    # Its commits count as busy time, and at a quarter of its capacity they weigh four times what
    # they do saturated; with the CPU shared (another test worker, load) the report read low:
    # 176.6/s against 201.9-219.1/s at load 12-20, 162.2/s against 235.1-236.9/s beside another
    # worker at load 2-7; alone and quiet, within 3 %. A report that were the consume rate would
    # read a quarter: the lower bound keeps that apart. Every attempt is in the message.
    assert run.within(), [(r, [c.capacity for c in r.capacities()]) for r in runs]
    # m2 runs nothing: it gets the group median, i.e. m1's reported capacity
    second = store.load_snapshot(run.second_id, run.url).rates.capacity
    assert second[(run.group, "m2")].source == "group_median"
    assert second[(run.group, "m2")].capacity == pytest.approx(second[(run.group, "m1")].capacity)
    for r in runs:
        store.db.dispose(r.url)
