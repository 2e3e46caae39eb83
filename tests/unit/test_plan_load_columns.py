"""The load prediction ``plans`` lists for each plan: read from the stored metrics JSON."""

from __future__ import annotations

import re

from rebalance_advisor.services.outcome_report import format_plans
from rebalance_advisor.store.plan_records import PlanListing, PlanLoad
from rebalance_advisor.store.plans import plan_load


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
    assert plan_load(metrics, "rate_aware_sticky") == PlanLoad(
        overloaded_before=1, overloaded_after=0, catch_up_before_s=None, catch_up_after_s=201.4
    )
    assert plan_load(None, "range") == PlanLoad(None, None, None, None)


def _row(**load) -> PlanListing:
    return PlanListing(
        id=7, run_id=1, snapshot_id=1, group_id="g", strategy="rate_aware", status="recommended", epoch=None,
        created_at="t", created_by="me", max_lag_before=8656, max_lag_after=3850, imbalance_before=2.0,
        imbalance_after=1.0, spread_before=0, spread_after=0, moves=8, lower_bound=0, gap=0.0, reason="r",
        **load,
    )  # fmt: skip


def test_plans_table_says_never_for_an_overloaded_side_and_dash_when_unknown() -> None:
    overloaded = _row(overloaded_before=1, overloaded_after=0, catch_up_before_s=None,
                      catch_up_after_s=201.4, max_time_lag_s=117.25)  # fmt: skip
    unknown = _row(overloaded_before=0, overloaded_after=0, catch_up_before_s=None,
                   catch_up_after_s=None, max_time_lag_s=None)  # fmt: skip
    header, _, first, second = (
        re.split(r"\s{2,}", line.strip()) for line in format_plans([overloaded, unknown]).splitlines()
    )
    assert header[5:9] == ["moves", "overloaded", "catch-up", "time lag s"]
    assert first[5:9] == ["8", "1 -> 0", "never -> 201 s", "117.2"]
    assert second[5:9] == ["8", "0 -> 0", "- -> -", "-"]
