-- Queries on the plan table (docs/reference/plan-table.md); tests/docs/test_examples.py runs each
-- statement on SQLite and PostgreSQL after an advisor run stored a plan.
-- --8<-- [start:queries]
SELECT group_id, strategy, status, max_lag_before, max_lag_after, moves FROM latest_plan_per_group;
SELECT group_id, outcome, reason FROM imbalanced_groups;
SELECT group_id, status, max_lag_before, unowned_lag_before, max_lag_after, unowned_lag_after,
       overloaded_members_before, overloaded_members_after,
       predicted_catch_up_before_s, predicted_catch_up_after_s, group_max_time_lag_s
FROM plans WHERE status IN ('recommended', 'approved', 'published') ORDER BY id DESC;
-- --8<-- [end:queries]
