"""The identity and rejection rules on their own (domain/plan_identity.py); the store applies them
in tests/integration/test_plan_identity.py."""

from __future__ import annotations

from rebalance_advisor.domain.plan_identity import (
    GroupSituation,
    RejectedPlan,
    assignment_key,
    rejection_released,
)

DOC = {
    "members": [
        {"member_id": "C1", "topics": ["t0"], "owned": [["t0", 2]]},
        {"member_id": "C0", "topics": ["t0"], "owned": [["t0", 1], ["t0", 0]]},
    ],
    "partitions": [{"topic": "t0", "partition": p} for p in range(3)],
}


def _doc(**changes) -> dict:
    doc = {"members": [dict(m) for m in DOC["members"]], "partitions": list(DOC["partitions"])}
    doc.update(changes)
    return doc


def test_the_assignment_is_the_identity_whatever_the_row_order() -> None:
    a = assignment_key([("C0", "t0", 0, None, None), ("C1", "t0", 1, None, None)])
    b = assignment_key([("C1", "t0", 1, None, None), ("C0", "t0", 0, None, None)])
    assert a == b
    assert a != assignment_key([("C0", "t0", 1, None, None), ("C1", "t0", 0, None, None)])
    assert a != assignment_key([("C0", "t0", 0, 0, 100), ("C1", "t0", 1, None, None)])  # a key range differs


def test_situation_changes_are_named() -> None:
    base = GroupSituation.of_document(DOC)
    assert GroupSituation.from_record(base.to_record()) == base
    assert base.change_from(base) is None
    joined = _doc(members=[*DOC["members"], {"member_id": "C2", "topics": ["t0"], "owned": []}])
    assert GroupSituation.of_document(joined).change_from(base) == "members changed; joined: C2"
    left = _doc(members=DOC["members"][:1])
    assert GroupSituation.of_document(left).change_from(base) == "members changed; left: C0"
    resub = _doc(members=[{**DOC["members"][0], "topics": ["t0", "t1"]}, DOC["members"][1]])
    assert GroupSituation.of_document(resub).change_from(base) == "subscriptions changed for C1"
    grown = _doc(partitions=[*DOC["partitions"], {"topic": "t0", "partition": 3}])
    assert (
        GroupSituation.of_document(grown).change_from(base) == "the group's topics changed their partitions"
    )
    moved = _doc(
        members=[
            {**DOC["members"][0], "owned": []},
            {**DOC["members"][1], "owned": [["t0", p] for p in range(3)]},
        ]
    )
    assert GroupSituation.of_document(moved).change_from(base) == "the assignment in force changed"


def test_benefit_must_exceed_the_rejected_one_by_the_margin() -> None:
    situation = GroupSituation.of_document(DOC)
    rejected = RejectedPlan(1, max_lag_before=160_000, max_lag_after=110_000, situation=situation)  # 50,000
    assert rejection_released(rejected, situation, benefit=50_000) is None
    assert rejection_released(rejected, situation, benefit=75_000) is None  # exactly 1.5x: still held
    released = rejection_released(rejected, situation, benefit=75_001)
    assert released is not None and "75,001" in released and "50,000" in released
    # no recorded situation (a plan from before migration 0009): only the benefit rule applies
    unknown = RejectedPlan(1, 160_000, 110_000, situation=None)
    assert rejection_released(unknown, situation, benefit=50_000) is None
