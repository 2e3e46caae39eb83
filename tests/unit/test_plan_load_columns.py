"""The load prediction and unowned lag ``plans`` stores as columns: taken from the metrics JSON."""

from __future__ import annotations

import re

from rebalance_advisor.services.outcome_report import format_plans
from rebalance_advisor.store.plan_records import PlanListing
from rebalance_advisor.store.plans import plan_columns_from_metrics


def _metrics(before: dict, candidates: dict[str, dict]) -> dict:
    return {
        "load_before": before,
        "candidates": [{"strategy": name, "load": load} for name, load in candidates.items()],
    }


def test_plan_load_takes_the_current_load_and_the_plans_own_candidate() -> None:
    metrics = _metrics(
        {"overloaded": 1, "max_catch_up_s": None},
        {
            "lag_aware": {"overloaded": 0, "max_catch_up_s": 497.0},
            "rate_aware_sticky": {"overloaded": 0, "max_catch_up_s": 201.4},
        },
    )
    metrics |= {"before": {"member_lag": {"w0": 0, "w1": 0}, "unowned_lag": 30_000},
                "after": {"member_lag": {"w0": 16_000, "w1": 14_000}}}  # fmt: skip
    assert plan_columns_from_metrics(metrics, "rate_aware_sticky") == {
        "overloaded_members_before": 1, "overloaded_members_after": 0, "predicted_catch_up_before_s": None,
        "predicted_catch_up_after_s": 201.4, "unowned_lag_before": 30_000, "unowned_lag_after": 0,
    }  # fmt: skip
    assert set(plan_columns_from_metrics(None, "range").values()) == {None}


def _row(**load) -> PlanListing:
    return PlanListing(
        id=7, run_id=1, snapshot_id=1, group_id="g", strategy="rate_aware", status="recommended", epoch=None,
        created_at="t", created_by="me", max_lag_before=8656, max_lag_after=3850, imbalance_before=2.0,
        imbalance_after=1.0, spread_before=0, spread_after=0, moves=8, lower_bound=0, gap=0.0, reason="r",
        apply_mode="broker assignor", **load,
    )  # fmt: skip


def test_plans_table_says_never_for_an_overloaded_side_and_dash_when_unknown() -> None:
    overloaded = _row(overloaded_members_before=1, overloaded_members_after=0, predicted_catch_up_before_s=None,
                      predicted_catch_up_after_s=201.4, group_max_time_lag_s=117.25)  # fmt: skip
    unknown = _row(overloaded_members_before=0, overloaded_members_after=0, predicted_catch_up_before_s=None,
                   predicted_catch_up_after_s=None, group_max_time_lag_s=None)  # fmt: skip
    header, _, first, second = (
        re.split(r"\s{2,}", line.strip()) for line in format_plans([overloaded, unknown]).splitlines()
    )
    assert header[3:5] == ["status", "applied by"] and first[3:5] == ["recommended", "broker assignor"]
    assert header[6:10] == ["moves", "overloaded", "catch-up", "time lag s"]
    assert first[6:10] == ["8", "1 -> 0", "never -> 201 s", "117.2"]
    assert second[6:10] == ["8", "0 -> 0", "- -> -", "-"]
