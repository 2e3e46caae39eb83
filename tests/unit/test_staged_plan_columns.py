"""The staged plan table carries the plan table's number columns, name for name and type for type
(store/staged_plans: the finalize copies them with one ``INSERT ... SELECT``)."""

from rebalance_advisor.store import staged_plans
from rebalance_advisor.store.plan_models import Plan, PlannerStagedPlan


def test_every_staged_number_is_a_plan_column_of_the_same_type() -> None:
    plan_columns = Plan.__table__.columns
    staged_columns = PlannerStagedPlan.__table__.columns
    mismatched = [
        name
        for name in staged_plans.PLAN_NUMBER_COLUMNS
        if name not in plan_columns or type(plan_columns[name].type) is not type(staged_columns[name].type)
    ]
    assert mismatched == []


def test_the_numbers_are_the_ones_a_run_computes() -> None:
    # store/plans.plan_numbers' keys, as docs/reference/plan-table.md lists a plan's numbers
    assert set(staged_plans.PLAN_NUMBER_COLUMNS) == {
        "strategy", "max_lag_before", "max_lag_after", "imbalance_before", "imbalance_after",
        "spread_before", "spread_after", "moves", "lower_bound", "gap", "reason", "metrics",
        "predicted_catch_up_before_s", "predicted_catch_up_after_s", "overloaded_members_before",
        "overloaded_members_after", "unowned_lag_before", "unowned_lag_after",
    }  # fmt: skip
