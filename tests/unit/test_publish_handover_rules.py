"""Pure parts of publishing: record encoding, the publish decision, the handover rules (exhaustive)."""

from __future__ import annotations

import itertools
import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from rebalance_advisor.adapters.assignment_publisher import normalize_plan, plan_records
from rebalance_advisor.adapters.assignment_topic import TopicState
from rebalance_advisor.errors import AdvisorError
from rebalance_advisor_client.assignment_records import (
    AssignmentRecord,
    MalformedRecord,
    UnsupportedVersion,
    decode_key,
    decode_record,
    encode_key,
)
from rebalance_advisor_client.handover_rules import (
    OWNED,
    RELEASED,
    Claim,
    Claimant,
    OwnerMark,
    claim_decision,
    claim_start,
    commit_offset,
    decode_mark,
    may_commit,
    plan_handover,
)

#: a shared machine: wall-clock deadlines would test the load, not the rules
NO_DEADLINE = settings(deadline=None)

ids = st.text(min_size=1, max_size=12)
partitions = st.lists(
    st.tuples(st.text(min_size=1, max_size=8), st.integers(0, 500)), unique=True, max_size=6
)
records = st.builds(
    AssignmentRecord,
    group=ids,
    member=ids,
    epoch=st.integers(1, 10**12),
    plan_id=ids,
    partitions=partitions.map(lambda ps: tuple(sorted(ps))),
    published_at=st.just("2026-01-01T00:00:00+00:00"),
)


@NO_DEADLINE
@given(records)
def test_record_round_trips(record: AssignmentRecord) -> None:
    assert decode_record(record.key, record.encode_value()) == record


@NO_DEADLINE
@given(ids, ids)
def test_key_is_unambiguous(group: str, member: str) -> None:
    assert decode_key(encode_key(group, member)) == (group, member)
    assert encode_key(group, member).count(b"/") == 1


def test_value_has_exactly_the_documented_fields() -> None:
    record = AssignmentRecord("g", "m", 3, "plan-7", (("t", 0), ("t", 2)), "2026-01-01T00:00:00+00:00")
    assert json.loads(record.encode_value()) == {
        "version": 1, "group": "g", "member": "m", "epoch": 3, "plan_id": "plan-7",
        "partitions": [{"topic": "t", "partition": 0}, {"topic": "t", "partition": 2}],
        "published_at": "2026-01-01T00:00:00+00:00",
    }  # fmt: skip


GOOD = {"group": "g", "member": "m", "epoch": 1, "plan_id": "p", "partitions": [], "published_at": "x"}


@pytest.mark.parametrize(
    ("key", "value", "reason"),
    [
        (b"g/m", None, "tombstone"),
        (b"g/m", b"{not json", "not JSON"),
        (b"g/m", b"[]", "not an object"),
        (b"gm", json.dumps(GOOD).encode(), "not <group>/<member>"),
        (b"\xff/m", json.dumps(GOOD).encode(), "not UTF-8"),
        (b"g/other", json.dumps(GOOD).encode(), "under key"),
        (b"g/m", json.dumps({**GOOD, "epoch": 0}).encode(), "epoch"),
        (b"g/m", json.dumps({**GOOD, "epoch": True}).encode(), "epoch"),
        (b"g/m", json.dumps({**GOOD, "plan_id": 5}).encode(), "plan_id"),
        (b"g/m", json.dumps({**GOOD, "extra": 1}).encode(), "fields"),
        (b"g/m", json.dumps({**GOOD, "partitions": [{"topic": "t", "partition": -1}]}).encode(), "partition"),
        (b"g/m", json.dumps({**GOOD, "partitions": [{"topic": "t", "partition": 1}] * 2}).encode(), "twice"),
        (b"g/m", json.dumps({**GOOD, "version": 0}).encode(), "version"),
        (b"g/m", json.dumps({**GOOD, "version": "1"}).encode(), "version"),
    ],
)
def test_malformed_records_say_why(key: bytes, value: bytes | None, reason: str) -> None:
    with pytest.raises(MalformedRecord, match=reason):
        decode_record(key, value)


def test_topic_state_keeps_last_valid_record_and_reports_malformed() -> None:
    state = TopicState()
    good = AssignmentRecord("g", "m", 1, "p", (("t", 0),), "x")
    state.add(good.key, good.encode_value(), "t-0@0")
    state.add(good.key, b"garbage", "t-0@1")
    assert state.group("g") == {"m": good}
    assert len(state.malformed) == 1 and "t-0@1" in state.malformed[0]


# -- the publish decision ---------------------------------------------------------------------------


def _existing(epoch: int, plan_id: str, plan: dict) -> dict[str, AssignmentRecord]:
    return {m: AssignmentRecord("g", m, epoch, plan_id, tuple(ps), "x") for m, ps in plan.items()}


def test_first_publish_is_epoch_one() -> None:
    plan = normalize_plan({"a": [("t", 1), ("t", 0)], "b": []})
    epoch, written, dropped, changed = plan_records("g", "p1", plan, {}, (), "now")
    assert (epoch, dropped, changed) == (1, (), True)
    assert [(r.member, r.partitions) for r in written] == [("a", (("t", 0), ("t", 1))), ("b", ())]


def test_same_plan_again_is_a_no_op() -> None:
    plan = normalize_plan({"a": [("t", 0)], "b": [("t", 1)]})
    existing = _existing(4, "p1", plan)
    epoch, written, _, changed = plan_records("g", "p1", plan, existing, (), "later")
    assert (epoch, changed) == (4, False)
    assert {r.member: r for r in written} == existing


def test_dropped_members_get_empty_records_and_epoch_increases() -> None:
    old = _existing(2, "p1", {"a": [("t", 0)], "b": [("t", 1)], "gone": []})
    plan = normalize_plan({"a": [("t", 0), ("t", 1)]})
    epoch, written, dropped, changed = plan_records("g", "p2", plan, old, ["c"], "now")
    assert (epoch, dropped, changed) == (3, ("b", "c"), True)
    assert {r.member: r.partitions for r in written} == {"a": (("t", 0), ("t", 1)), "b": (), "c": ()}
    assert {r.epoch for r in written} == {3}


def test_after_epoch_keeps_epochs_increasing_when_the_topic_was_lost() -> None:
    plan = normalize_plan({"a": [("t", 0)]})
    assert plan_records("g", "p9", plan, {}, (), "now", after_epoch=41)[0] == 42


def test_same_plan_id_with_other_content_is_refused() -> None:
    existing = _existing(1, "p1", {"a": [("t", 0)]})
    with pytest.raises(AdvisorError, match="already published .* other assignments"):
        plan_records("g", "p1", normalize_plan({"a": [("t", 1)]}), existing, (), "now")


@pytest.mark.parametrize(
    ("assignments", "message"),
    [
        ({}, "no members"),
        ({"a": [("t", 0)], "b": [("t", 0)]}, "assigned to both a and b"),
        ({"": [("t", 0)]}, "member id"),
        ({"a": [("t", -1)]}, "not a \\(topic, partition\\)"),
    ],
)
def test_invalid_plans_are_refused(assignments: dict, message: str) -> None:
    with pytest.raises(AdvisorError, match=message):
        normalize_plan(assignments)


# -- record versions ------------------------------------------------------------------------------


def test_record_without_version_is_version_one() -> None:
    assert decode_record(b"g/m", json.dumps(GOOD).encode()).epoch == 1


def test_newer_record_version_is_refused_not_consumed() -> None:
    """A helper that does not know a newer format (e.g. key ranges) must not consume whole partitions."""
    newer = {**GOOD, "version": 3, "epoch": 7, "ranges": [{"from": 0, "to": 99}]}
    with pytest.raises(UnsupportedVersion, match="format version 3.*upgrade") as info:
        decode_record(b"g/m", json.dumps(newer).encode())
    assert (info.value.group, info.value.member, info.value.epoch) == ("g", "m", 7)


# -- the handover rules -----------------------------------------------------------------------------

MEMBERS = ["me", "other"]
EPOCHS = [1, 2, 3]
INSTANCES = ["i1", "i2"]
MARKS = [None] + [
    OwnerMark(m, e, s, i) for m in MEMBERS for e in EPOCHS for s in (OWNED, RELEASED) for i in INSTANCES
]


@NO_DEADLINE
@given(
    st.frozensets(st.tuples(st.sampled_from("xy"), st.integers(0, 5))),
    st.frozensets(st.tuples(st.sampled_from("xy"), st.integers(0, 5))),
    st.integers(0, 5),
    st.integers(1, 3),
)
def test_plan_handover_partitions_the_change(old: frozenset, new: frozenset, epoch: int, step: int) -> None:
    change = plan_handover(old, new, epoch, epoch + step)
    assert (
        change.kept | change.reclaim | change.gained == new
        and change.kept | change.reclaim | change.lost == old
    )
    assert not (change.gained & change.lost) and not (change.kept & change.reclaim)
    # Kept without a check only when no epoch was skipped.
    assert (change.kept == (old & new)) is (step == 1 or not old & new)


def test_skipped_epochs_reclaim_instead_of_keep() -> None:
    """Owned p at epoch 4; p went to another member at 5 and came back at 6: not simply "kept"."""
    p = ("t", 0)
    change = plan_handover(frozenset({p}), frozenset({p}), 4, 6)
    assert (change.kept, change.reclaim) == (frozenset(), frozenset({p}))
    assert plan_handover(frozenset({p}), frozenset({p}), 4, 5).kept == frozenset({p})


def test_member_that_skipped_epochs_does_not_overwrite_the_owner() -> None:
    """The issue's logic flaw: claimed p at 4, p moved to B at 5 and stayed at 6; A resumes at 6.

    A's release (or commit) is judged by the epoch of its claim (4), not its latest (6), so B's
    mark at 5 wins; the old rule compared 5 < 6 and let A write "released at 6" over B.
    """
    b_owns = OwnerMark("b", 5, OWNED, "ib")
    assert may_commit("a", "ia", 4, b_owns) is False
    # B is then never refused by A's history, and A at 6 (p not assigned to it) cannot claim it back.
    assert may_commit("b", "ib", 5, b_owns) is True
    assert claim_decision(Claimant("a", "ia", 4), b_owns, 99.0, 1.0) is Claim.STALE


@pytest.mark.parametrize(
    ("mark", "epoch", "waited", "fenced"),
    itertools.product(MARKS, EPOCHS, [0.0, 9.9, 10.0], [False, True]),
)
def test_claim_decision_exhaustively(mark: OwnerMark | None, epoch: int, waited: float, fenced: bool) -> None:
    decision = claim_decision(Claimant("me", "i1", epoch, fenced), mark, waited, takeover_timeout=10.0)
    if mark is None:
        expected = Claim.TAKE
    elif mark.epoch > epoch:
        expected = Claim.STALE  # a newer epoch touched it: never take, whatever the wait
    elif (mark.member, mark.instance) == ("me", "i1") or mark.state == RELEASED:
        expected = Claim.TAKE
    elif mark.member == "me" and not fenced:
        expected = Claim.TAKE  # an earlier run of this member id: a restart takes its partitions back
    elif mark.epoch == epoch:
        expected = Claim.STALE
    else:
        expected = Claim.TAKE_OVER if waited >= 10.0 else Claim.WAIT
    assert decision is expected
    # Safety, stated independently: another member's claim at our epoch or newer is never taken.
    if mark and mark.member == "other" and mark.state == OWNED and mark.epoch >= epoch:
        assert decision not in (Claim.TAKE, Claim.TAKE_OVER)
    # A fenced instance never takes back what another run of its own member id holds at its epoch.
    if fenced and mark and mark.member == "me" and mark.instance != "i1" and mark.state == OWNED:
        assert decision not in (Claim.TAKE, Claim.TAKE_OVER) or mark.epoch < epoch


@pytest.mark.parametrize(("mark", "claimed_at"), itertools.product(MARKS, EPOCHS))
def test_may_commit_exhaustively(mark: OwnerMark | None, claimed_at: int) -> None:
    allowed = may_commit("me", "i1", claimed_at, mark)
    ours = mark is not None and (mark.member, mark.instance) == ("me", "i1")
    taken_since_our_claim = mark is not None and not ours and mark.epoch >= claimed_at
    assert allowed is not taken_since_our_claim


@NO_DEADLINE
@given(st.integers(0, 10**9), st.one_of(st.none(), st.integers(-1001, 10**9)))
def test_commit_offset_never_goes_backwards(ours: int, committed: int | None) -> None:
    written = commit_offset(ours, committed)
    assert written >= ours and (committed is None or written >= committed)


@pytest.mark.parametrize(
    ("committed", "remembered", "reset", "expected"),
    [
        (None, None, 7, 7),
        (None, None, None, None),
        (10, None, 0, 10),
        (10, 25, 0, 25),
        (30, 25, 0, 30),
        (None, 5, 0, 5),
    ],
)
def test_claim_start_keeps_the_refused_owners_position(committed, remembered, reset, expected) -> None:
    assert claim_start(committed, remembered, reset) == expected


@NO_DEADLINE
@given(
    st.sampled_from(MARKS[1:]), st.one_of(st.none(), st.tuples(st.integers(0, 10**6), st.integers(0, 32767)))
)
def test_mark_round_trips(mark: OwnerMark, producer) -> None:
    mark = OwnerMark(mark.member, mark.epoch, mark.state, mark.instance, producer, mark.epoch + 1)
    assert decode_mark(mark.encode()) == mark


def test_version_one_marks_are_still_read() -> None:
    old = '{"rebalance_advisor":1,"member":"w","epoch":3,"state":"owned"}'
    assert decode_mark(old) == OwnerMark("w", 3, OWNED, "", None)


@pytest.mark.parametrize(
    "metadata",
    [None, "", "checkpoint-7", "{}", '{"rebalance_advisor": 3}', "[1]",
     '{"rebalance_advisor":2,"member":"w","epoch":3,"state":"owned","producer":[1]}'],
)  # fmt: skip
def test_foreign_metadata_is_no_mark(metadata: str | None) -> None:
    assert decode_mark(metadata) is None
