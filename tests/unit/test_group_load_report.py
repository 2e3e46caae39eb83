"""The live group's text report: stored load JSON read back (null catch-up with inflow >= capacity is never)."""

from __future__ import annotations

import math

from rebalance_advisor.services.group_load_report import MemberPrediction, catch_up_text, member_predictions


def test_member_predictions_read_the_stored_json_and_restore_never() -> None:
    stored = {
        "member_ids": ["m-1", "m-2", "m-3"],
        "inflow": [139.5, 55.0, 0.0],
        "backlog": [5000, 1200, 0],
        "capacity": [100.0, 100.0, 100.0],
        # the database JSON has no Infinity: m-1's inf was stored as null
        "catch_up_s": [None, 1200 / 45, 0.0],
    }
    got = member_predictions(stored, {"m-1": "c0", "m-2": "c1"})
    assert got == [
        MemberPrediction("c0", 139.5, 100.0, 5000, math.inf),
        MemberPrediction("c1", 55.0, 100.0, 1200, 1200 / 45),
        MemberPrediction("m-3", 0.0, 100.0, 0, 0.0),
    ]
    # Capacities unknown: no catch-up can be predicted, and it is shown as unknown, not never.
    unknown = member_predictions(stored | {"capacity": None, "catch_up_s": None}, {})
    assert [m.catch_up_s for m in unknown] == [None, None, None]
    assert member_predictions(None, {}) == []


def test_catch_up_text() -> None:
    assert catch_up_text(math.inf) == "never"
    assert catch_up_text(12.0, overloaded=True) == "never"
    assert catch_up_text(None) == "-"
    assert catch_up_text(1234.4) == "1,234 s"
