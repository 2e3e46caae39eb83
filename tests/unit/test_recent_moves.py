"""Recent moves in production (domain/recent_moves.py) and the hysteresis rule on an orphan.

Hand-worked: p0 moved a -> b at 12:00 (b took it from a). At 12:10 b has left the group: p0 has no
owner. The only member that can take it is a, which it left 10 minutes ago, within the 30-minute
window; handing it back to a must not count as a move back, or the rule holds an orphan (a member
left: 180 s with 309,000 records unowned in the traced runs).
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from rebalance_advisor.domain.decisions import Thresholds
from rebalance_advisor.domain.group_planning import plan_group
from rebalance_advisor.domain.group_spec import RecentMove
from rebalance_advisor.domain.recent_moves import moves_document, owner_changes, recent_moves

T0 = datetime(2026, 1, 1, 12, 0, tzinfo=UTC)


def test_owner_changes_and_the_window():
    first = {("g", "t", 0): "a", ("g", "t", 1): "a", ("h", "u", 0): "x"}
    second = {("g", "t", 0): "b", ("g", "t", 1): "a", ("h", "u", 0): "x"}
    third = {("g", "t", 0): "b", ("g", "t", 1): "b"}
    assert owner_changes(first, second, T0) == {"g": [RecentMove("t", 0, "a", "b", T0)]}
    history = [(T0 - timedelta(hours=1), first), (T0, second), (T0 + timedelta(minutes=5), third)]
    # seen by both histories: counted once; the first change is outside a 20-minute window at 12:15
    moves = recent_moves([history, history[1:]], T0 + timedelta(minutes=15), 1200)
    assert moves == {
        "g": (RecentMove("t", 0, "a", "b", T0), RecentMove("t", 1, "a", "b", T0 + timedelta(minutes=5)))
    }
    assert recent_moves([history], T0 + timedelta(minutes=15), 60) == {}


def _doc(moves, owned_b=True):
    members = [{"member_id": "a", "topics": ["t"], "owned": [["t", 1]], "capacity": 100.0}]
    if owned_b:
        members.append({"member_id": "b", "topics": ["t"], "owned": [["t", 0]], "capacity": 100.0})
    return {
        "group_id": "g",
        "members": members,
        "partitions": [
            {"topic": "t", "partition": 0, "lag": 5_000, "produce_rate": 10.0},
            {"topic": "t", "partition": 1, "lag": 0, "produce_rate": 10.0},
        ],
        "recent_moves": moves_document(moves),
    }


def test_hysteresis_never_holds_a_partition_whose_owner_left():
    moved = [RecentMove("t", 0, "a", "b", T0)]
    now = T0 + timedelta(minutes=10)
    advice = plan_group(_doc(moved, owned_b=False), Thresholds(), now)
    assert advice.outcome == "recommended", advice.reason
    assert "assigns every unowned partition" in advice.reason
    assert all(c.moves_back == 0 for c in advice.candidates)
    assert ("a", "t", 0, 5_000) in advice.plan.assignments
