"""The torture run's liveness measures (tests/support/torture_liveness.py) on hand-written logs."""

from __future__ import annotations

import pytest

from tests.support import torture_liveness as live
from tests.support import torture_stalls as stalls

TOPIC = "t-in"


def _run(name: str, member: str, *lines: str) -> live.RunLog:
    return live.parse_run(name, member, "\n".join(lines) + "\n", TOPIC, end=1000.0)


def test_a_fence_under_an_older_epoch_of_a_held_partition_is_counted() -> None:
    owner = _run(
        "a.0.processed", "a",
        "100.000000 INFO a: claimed t-in-0 at epoch 3 (read 0.001 s)",
        "103.000000 INFO a: released t-in-0, t-in-2 at epoch 4 (0.010 s)",
    )  # fmt: skip
    stale = _run(
        "b.0.processed", "b",
        "101.000000 INFO b: fence of t-in-0 by a claim at epoch 2: producer [7, 1] (0.010 s)",
        "101.100000 WARNING b: t-in-0 was claimed by a meanwhile: backing off",
        "104.000000 INFO b: fence of t-in-0 by a claim at epoch 2: producer [7, 2] (0.010 s)",
    )  # fmt: skip
    newer = _run(
        "c.0.processed",
        "c",
        "102.000000 INFO c: fence of t-in-0 by a claim at epoch 4: producer [7, 3] (0.01 s)",
        "102.100000 INFO c: claim of t-in-0 at epoch 4 dropped after its fence: a newer epoch",
    )
    found = live.rightful_fences([owner, stale, newer])
    # only b's first fence: c's epoch is newer than a's claim, b's second came after a released
    assert [(f.run, f.at, h.run, h.epoch) for f, h in found] == [("b.0.processed", 101.0, "a.0.processed", 3)]
    assert owner.holdings == [live.Holding("a.0.processed", 0, 3, 100.0, 103.0)]
    publishes = [(90.0, 3, {}), (101.5, 4, {})]
    assert live.moved_on_fences([owner, stale, newer], publishes) == 2  # b's fences at 2 < 3, 4


def test_a_stall_counts_only_while_the_owner_can_work() -> None:
    plan = {"m": [0], "n": []}
    liveness = live.Liveness([(0.0, 1, plan)], {"m": [(12.0, 14.0)]}, broker_down=[])
    processed = {0: [i / 10 for i in range(101)] + [20.0]}  # 0.0 .. 10.0, then nothing until 20.0
    result = live.stalls(processed, liveness, since=0.0, budget=5.0)
    assert 5.9 <= result["stall_max_s"] <= 6.0  # 14 .. 20: m was stopped from 12 to 14
    assert result["stalls_over_budget"] == 1
    moved = live.Liveness([(0.0, 1, plan), (11.0, 2, {"m": [], "n": []})], {}, broker_down=[])
    assert live.stalls(processed, moved, since=0.0, budget=5.0)["stall_max_s"] <= 1.0  # no owner


def test_a_fence_logged_late_but_handled_first_by_the_broker_is_not_counted() -> None:
    """Producer epochs give the broker's order of two fences; log stamps of two processes may not."""
    owner = _run(
        "a.0.processed", "a",
        "100.000000 INFO a: fence of t-in-0 by a claim at epoch 5: producer [7, 12] (0.010 s)",
        "100.050000 INFO a: claimed t-in-0 at epoch 5 (read 0.001 s)",
    )  # fmt: skip
    logged_late = _run(
        "b.0.processed", "b",
        "100.200000 INFO b: fence of t-in-0 by a claim at epoch 4: producer [7, 11] (0.900 s)",
    )  # fmt: skip
    assert live.rightful_fences([owner, logged_late]) == []
    really_later = _run(
        "c.0.processed", "c",
        "100.300000 INFO c: fence of t-in-0 by a claim at epoch 4: producer [7, 13] (0.010 s)",
    )  # fmt: skip
    found = live.rightful_fences([owner, logged_late, really_later])
    assert [(f.run, h.run, h.producer) for f, h in found] == [("c.0.processed", "a.0.processed", (7, 12))]


def test_a_partition_waits_for_its_own_transaction_coordinator_after_a_restart() -> None:
    """The broker counts as restarting, per partition, until the coordinator its claims need answered."""
    plan = {"m": [0, 1]}
    every, per_partition = live.broker_downtime([(10.0, 12.0)], {"0": [(10.0, 19.0)], "1": [(10.0, 12.5)]})
    liveness = live.Liveness([(0.0, 1, plan)], {}, every, per_partition)
    processed = {p: [i / 10 for i in range(101)] + [30.0] for p in (0, 1)}  # nothing from 10 to 30
    windows = live.stalls(processed, liveness, since=0.0, budget=5.0)["stall_windows"]
    lengths = {w.partition: round(w.length, 1) for w in windows}
    assert lengths == {0: pytest.approx(11.0, abs=0.11), 1: pytest.approx(17.5, abs=0.11)}  # 19..30, 12.5..30
    assert {w.partition: round(w.start, 1) for w in windows} == {0: 19.0, 1: 12.5}


def test_a_stall_is_explained_by_its_owners_stuck_commit_and_the_takeover() -> None:
    from tests.support.torture import Events

    events = Events(
        publishes=[(0.0, 1, {"a": [0], "b": []}), (20.0, 2, {"a": [], "b": [0]})],
        pauses=[(5.0, 6.0, "a", "random"), (7.0, 8.0, "c", "random")],
        broker_restarts=[(3.0, 4.5)],
    )
    logs = {
        "a.0.processed": "\n".join([
            "6.100000 WARNING a: commit of t-in-3 is stuck (send_offsets_to_transaction did not return within 10 s)",
            "6.200000 INFO a: fence of t-in-1 by a claim at epoch 1: producer [1, 1] (0.010 s)",
        ]),
        "b.0.processed": "\n".join([
            "20.100000 INFO b: epoch 1 -> 2 (plan plan-2): keep 0, re-check 0, gain 1, lose 0",
            "23.200000 WARNING b: taking over t-in-0 from a (epoch 1): no release within 3.0 s",
            "23.400000 INFO b: claimed t-in-0 at epoch 2 (read 0.1 s)",
        ]),
    }  # fmt: skip
    stall = live.Stall(partition=0, last=2.0, next=23.5, start=6.0, length=17.5)
    timeline = "\n".join(stalls.explain(stall, TOPIC, events, logs))
    assert "plan epoch 1 gives it to a" in timeline and "plan epoch 2 gives it to b" in timeline
    assert "a stopped (random) for 1.0 s" in timeline and "c stopped" not in timeline  # c never owned it
    assert "broker restart; group coordinator answered again at 4.50" in timeline
    assert "commit of t-in-3 is stuck" in timeline  # the owner's run, though another partition
    assert "fence of t-in-1" not in timeline  # neither this partition nor the run's own state
    assert timeline.index("taking over t-in-0") < timeline.index("first record after the gap")
    tags = stalls.causes(stall, TOPIC, events, logs)
    assert tags == ["owner commit stuck", "takeover", "2 owners", "after broker restart"]


def test_a_transactional_id_maps_to_its_coordinator_as_in_kafka() -> None:
    """Java's String.hashCode values (its documentation's formula; known constants)."""
    from tests.support.torture import transaction_partition

    assert transaction_partition("hello", 1 << 30) == 99162322
    assert transaction_partition("abc", 50) == 96354 % 50
    assert transaction_partition("polygenelubricants", 50) == 0  # hashCode is Integer.MIN_VALUE


def test_a_partition_that_never_resumes_stalls_until_the_end_of_the_run() -> None:
    liveness = live.Liveness([(0.0, 1, {"m": [0]})], {}, broker_down=[])
    processed = {0: [i / 10 for i in range(101)]}  # 0.0 .. 10.0, then nothing: no record ends the gap
    assert live.stalls(processed, liveness, since=0.0, budget=5.0)["stall_max_s"] == 0.0
    found = live.stalls(processed, liveness, since=0.0, budget=5.0, unfinished={0: 40.0})
    assert 29.9 <= found["stall_max_s"] <= 30.0 and found["stalls_over_budget"] == 1


def test_an_owner_fenced_while_every_plan_gave_it_the_partition_is_counted_with_its_fencer() -> None:
    """From the victim's side: a stopped fence logs no "fence of" line, yet its producer's retry can
    still fence the owner; a fence logged under the next producer epoch is named as the fencer."""
    plans = [
        (90.0, 3, {"a": [0, 2], "b": [1], "c": []}),
        (101.5, 4, {"a": [0, 2], "b": [], "c": [1]}),  # partition 1 moves: b's drop is not counted
        (120.0, 5, {"a": [0, 2], "b": [], "c": [1]}),
    ]
    owner = _run(
        "a.0.processed", "a",
        "100.000000 INFO a: fence of t-in-0 by a claim at epoch 3: producer [7, 4] (0.010 s)",
        "100.010000 INFO a: claimed t-in-0 at epoch 3 (read 0.001 s)",
        "100.020000 INFO a: fence of t-in-2 by a claim at epoch 3: producer [9, 5] (0.010 s)",
        "100.030000 INFO a: claimed t-in-2 at epoch 3 (read 0.001 s)",
        "105.000000 WARNING a: fenced on t-in-0 (another member claimed it): dropping it, nothing committed",
        "106.000000 WARNING a: fenced on t-in-2 (another member claimed it): dropping it, nothing committed",
        "105.100000 INFO a: fence of t-in-0 by a claim at epoch 3: producer [7, 6] (0.010 s)",
    )  # fmt: skip
    moved = _run(
        "b.0.processed", "b",
        "95.000000 INFO b: fence of t-in-1 by a claim at epoch 3: producer [8, 1] (0.010 s)",
        "95.010000 INFO b: claimed t-in-1 at epoch 3 (read 0.001 s)",
        "104.000000 WARNING b: fenced on t-in-1 (another member claimed it): dropping it, nothing committed",
    )  # fmt: skip
    fencer = _run(
        "c.0.processed", "c",
        "103.900000 INFO c: fence of t-in-1 by a claim at epoch 4: producer [8, 2] (0.010 s)",
        "104.500000 WARNING c: cannot fence t-in-0 yet: KafkaError{code=CONCURRENT_TRANSACTIONS}",
        "106.500000 INFO c: fence of t-in-2 by a claim at epoch 2: producer [9, 6] (0.010 s)",
    )  # fmt: skip
    found = live.owners_fenced_while_rightful([owner, moved, fencer], plans)
    assert [(o.held.partition, o.dropped, o.fencer.run if o.fencer else None) for o in found] == [
        (0, 105.0, None),  # c's stopped fence logged nothing; a's own re-claim after its drop is not it
        (2, 106.0, "c.0.processed"),  # logged 0.5 s after a noticed it: still c's
    ]
    assert owner.fenced == [(105.0, 0), (106.0, 2)]
    assert "no logged fence" in live.describe_fenced_owner(found[0])
