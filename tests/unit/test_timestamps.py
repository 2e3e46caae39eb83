"""Timestamps for people: the rules' reason texts read like the pages (UTC named, whole seconds)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone

from rebalance_advisor.domain.decisions import StandingPlan, Thresholds
from rebalance_advisor.domain.group_planning import hold_back, plan_group
from rebalance_advisor.domain.timestamps import timestamp_text

from tests._groups import group

NOW = datetime(2026, 11, 22, 19, 49, 19, 654321, tzinfo=UTC)
KIP = group(
    [("C0", ["t0"], [("t0", 0), ("t0", 1)]), ("C1", ["t0"], [("t0", 2)])],
    {"t0": [100_000, 60_000, 50_000]},
    group_id="kip-example",
)


def test_timestamp_text_names_utc_and_drops_microseconds() -> None:
    tokyo = datetime(2026, 11, 23, 5, 19, 19, 999_999, tzinfo=timezone(timedelta(hours=9)))
    assert timestamp_text(tokyo) == "2026-11-22 20:19:19 UTC"  # 05:19 at +09:00 is 20:19 the day before
    assert timestamp_text("2026-11-22T20:19:19.5+00:00") == "2026-11-22 20:19:19 UTC"
    assert timestamp_text(datetime(2026, 11, 22, 20, 19, 19)) == "2026-11-22 20:19:19 UTC"  # naive: UTC
    assert timestamp_text(None) == "—"


def test_cooldown_reasons_carry_the_zone_and_no_microseconds() -> None:
    # plan 7 stood since 19:49:19.654321; a 30-minute cool-down holds until 20:19:19 (shown whole)
    standing = StandingPlan(7, "recommended", NOW)
    doc = dict(KIP, standing={"plan_id": 7, "status": "recommended", "created_at": NOW.isoformat()})
    thirty = Thresholds(cooldown_minutes=30)
    held = plan_group(doc, thirty, NOW + timedelta(minutes=1))
    assert "still stands until 2026-11-22 20:19:19 UTC;" in held.reason, held.reason
    concurrent = hold_back(plan_group(KIP, thirty, NOW), standing, NOW + timedelta(minutes=1), thirty)
    assert "stands until 2026-11-22 20:19:19 UTC;" in concurrent.reason, concurrent.reason
    assert ", written by a concurrent run, still stands" in concurrent.reason, concurrent.reason
    for reason in (held.reason, concurrent.reason):  # neither claims the candidate is kept: it is not stored
        assert "held back, no plan stored" in reason and "kept" not in reason, reason
    for reason in (held.reason, concurrent.reason):
        assert "+00:00" not in reason and ".654321" not in reason and "T20:19" not in reason
