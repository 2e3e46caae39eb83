"""The client helper with real consumer processes on a real broker: handover, dead owner, late member.

Each test runs ``tests.support.assigned_worker`` processes (one per member) that record every
processed (partition, offset) to a file, while a producer writes continuously and a watcher samples
the group's committed offsets and ownership marks.
"""

from __future__ import annotations

import signal
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from rebalance_advisor.adapters.assignment_publisher import publish_assignments

from tests.support import handover as h

pytestmark = [pytest.mark.kafka, pytest.mark.slow]
PARTITIONS = 6


class Scenario:
    """One group on a fresh data topic and a fresh assignment topic; cleans up its processes."""

    def __init__(self, bootstrap: str, tmp_path: Path) -> None:
        self.bootstrap, self.tmp_path = bootstrap, tmp_path
        self.group = f"pub-{uuid.uuid4().hex[:10]}"
        self.assignments = f"{self.group}-assignments"
        self.topic = h.create_topic(bootstrap, PARTITIONS)
        self.workers: dict[str, h.Worker] = {}
        self.producer = h.SteadyProducer(bootstrap, self.topic, PARTITIONS)
        self.watch = h.OffsetWatch(bootstrap, self.group, self.topic, PARTITIONS)

    def publish(self, plan_id: str, plan: dict[str, list[int]]):
        members = {m: [(self.topic, p) for p in parts] for m, parts in plan.items()}
        return publish_assignments(
            {"bootstrap.servers": self.bootstrap},
            self.group,
            plan_id,
            members,
            topic=self.assignments,
            timeout=20,
        )

    def start(self, members: list[str], takeover_timeout: float, fenced: bool = True) -> None:
        extra = [] if fenced else ["--unfenced"]
        for member in members:
            out = self.tmp_path / f"{member}.processed"
            self.workers[member] = h.start_worker(
                self.bootstrap, self.group, member, self.assignments, out, takeover_timeout, *extra
            )
        self.watch.start()
        self.producer.start()

    def lines(self) -> list[h.Processed]:
        return h.processed(list(self.workers.values()))

    def wait_progress(self, members: list[str], partitions: list[int], timeout: float = 20.0) -> None:
        """Until each member processed something new on each of the given partitions."""
        since = time.time()
        wanted = {(m, p) for m in members for p in partitions}

        def done() -> bool:
            got = {(x.member, x.partition) for x in self.lines() if x.at >= since}
            return not wanted - got

        h.wait_for(done, timeout, f"progress of {sorted(wanted)}")

    def drain(self, timeout: float = 30.0) -> tuple[set, dict]:
        """Stop producing, wait until every produced record was processed, stop the workers."""
        self.producer.finish()
        ends = h.end_offsets(self.bootstrap, self.topic, PARTITIONS)
        assert sum(ends.values()) == self.producer.sent
        alive = [w for w in self.workers.values() if w.process.poll() is None]
        try:
            h.wait_for(
                lambda: not h.coverage(alive + self.dead(), ends)[0], timeout, "every record processed"
            )
        except AssertionError as error:
            missing = h.coverage(list(self.workers.values()), ends)[0]
            summary = {p: (min(o for q, o in missing if q == p), ends[p]) for p in {q for q, _ in missing}}
            logs = "\n".join(w.log()[-3000:] for w in self.workers.values())
            raise AssertionError(f"{error}; missing (partition: first, end): {summary}\n{logs}") from None
        codes = {w.member: w.stop() for w in alive}
        assert codes == {w.member: 0 for w in alive}, "a worker failed: see its .log"
        self.watch.finish()
        return h.coverage(list(self.workers.values()), ends)

    def dead(self) -> list[h.Worker]:
        return [w for w in self.workers.values() if w.process.poll() is not None]

    def close(self) -> None:
        self.producer.halt.set()
        for worker in self.workers.values():
            worker.stop()
        self.watch.halt.set()


@pytest.fixture
def scenario(kafka_bootstrap: str, tmp_path: Path) -> Iterator[Scenario]:
    current = Scenario(kafka_bootstrap, tmp_path)
    try:
        yield current
    finally:
        current.close()


@pytest.mark.parametrize("fenced", [True, False], ids=["fenced", "unfenced"])
def test_normal_handover_moves_partitions_without_double_processing(scenario: Scenario, fenced: bool) -> None:
    # A long takeover timeout: only releases can make this handover finish within the test.
    scenario.publish("p1", {"a": [0, 1], "b": [2, 3], "c": [4, 5]})
    scenario.start(["a", "b", "c"], takeover_timeout=60, fenced=fenced)
    scenario.wait_progress(["a"], [0, 1])
    scenario.wait_progress(["b"], [2, 3])
    scenario.wait_progress(["c"], [4, 5])
    assert scenario.publish("p2", {"a": [2, 3], "b": [4, 5], "c": [0, 1]}).epoch == 2
    scenario.wait_progress(["a"], [2, 3])
    scenario.wait_progress(["b"], [4, 5])
    scenario.wait_progress(["c"], [0, 1])
    assert scenario.publish("p3", {"a": [0, 1, 2], "b": [3, 4], "c": [5]}).epoch == 3
    scenario.wait_progress(["a"], [0, 1, 2])
    scenario.wait_progress(["b"], [3, 4])
    scenario.wait_progress(["c"], [5])

    missing, seen = scenario.drain()
    assert not missing
    assert [pair for pair, count in seen.items() if count > 1] == []
    assert h.out_of_order(scenario.lines()) == []
    assert h.owners(scenario.lines()) == {
        0: ["a", "c", "a"], 1: ["a", "c", "a"], 2: ["b", "a"], 3: ["b", "a", "b"], 4: ["c", "b"], 5: ["c", "b", "c"],
    }  # fmt: skip
    assert scenario.watch.backwards() == []
    logs = "".join(w.log() for w in scenario.workers.values())
    assert "taking over" not in logs and "not committing" not in logs
    assert logs.count("released") >= 6
    # The final marks say who holds each partition at the last epoch.
    final = {p: seen_[-1][2] for p, seen_ in scenario.watch.history.items()}
    assert {p: (m.member, m.state) for p, m in final.items()} == {
        0: ("a", "released"), 1: ("a", "released"), 2: ("a", "released"),
        3: ("b", "released"), 4: ("b", "released"), 5: ("c", "released"),
    }  # fmt: skip


def test_killed_member_is_taken_over_after_the_timeout(scenario: Scenario) -> None:
    timeout = 3.0
    scenario.publish("p1", {"a": [0, 1], "b": [2, 3], "c": [4, 5]})
    scenario.start(["a", "b", "c"], takeover_timeout=timeout)
    scenario.wait_progress(["a", "b", "c"][:1], [0, 1])
    scenario.wait_progress(["c"], [4, 5])
    scenario.workers["c"].signal(signal.SIGKILL)
    scenario.workers["c"].process.wait(10)
    published_at = time.time()
    scenario.publish("p2", {"a": [0, 1, 4], "b": [2, 3, 5]})
    scenario.wait_progress(["a"], [4], timeout=20)
    scenario.wait_progress(["b"], [5], timeout=20)

    missing, seen = scenario.drain()
    assert not missing
    duplicates = {pair: count for pair, count in seen.items() if count > 1}
    # Duplicates only where the dead member had processed past its last commit.
    assert {p for p, _ in duplicates} <= {4, 5}
    print(f"duplicates after the crash: {len(duplicates)}")
    first_takeover = min(x.at for x in scenario.lines() if x.member in "ab" and x.partition in (4, 5))
    assert first_takeover >= published_at + timeout * 0.9
    assert scenario.watch.backwards() == []
    assert "taking over" in scenario.workers["a"].log() + scenario.workers["b"].log()


@pytest.mark.parametrize("fenced", [True, False], ids=["fenced", "unfenced"])
def test_late_member_does_not_commit_partitions_it_lost(scenario: Scenario, fenced: bool) -> None:
    timeout = 2.0
    scenario.publish("p1", {"a": [0, 1, 2], "b": [3, 4, 5]})
    scenario.start(["a", "b"], takeover_timeout=timeout, fenced=fenced)
    scenario.wait_progress(["a"], [0, 1, 2])
    a = scenario.workers["a"]
    a.signal(signal.SIGSTOP)  # a pause (GC, network): a learns of the next epoch late
    scenario.publish("p2", {"a": [0], "b": [1, 2, 3, 4, 5]})
    scenario.wait_progress(["b"], [1, 2], timeout=20)
    h.wait_for(
        lambda: all(any(m and m.member == "b" for _, _, m in scenario.watch.history[p]) for p in (1, 2)),
        10,
        "b's marks on partitions 1 and 2",
    )
    a.signal(signal.SIGCONT)
    scenario.wait_progress(["a"], [0])
    missing, seen = scenario.drain()

    assert not missing
    for partition in (1, 2):
        marks = [m for _, _, m in scenario.watch.history[partition]]
        first_b = next(i for i, m in enumerate(marks) if m and m.member == "b")
        assert [m for m in marks[first_b:] if m and m.member == "a"] == [], marks
    # Unfenced: its checked commit is refused. Fenced: the broker refuses it (or, back from a pause
    # longer than half the timeout, it checks ownership before handing out what its fetch returned).
    assert ("fenced on" if fenced else "not committing") in a.log() or "dropping it" in a.log()
    assert scenario.watch.backwards() == []
    assert h.out_of_order([x for x in scenario.lines() if x.partition in (0, 3, 4, 5)]) == []
