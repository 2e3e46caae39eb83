-- Queries on the plan table (docs/reference/plan-table.md); tests/docs/test_examples.py runs each
-- statement on SQLite and PostgreSQL after an advisor run stored a plan.
-- --8<-- [start:queries]
SELECT group_id, strategy, status, max_lag_before, max_lag_after, moves FROM latest_plan_per_group;
SELECT group_id, outcome, reason FROM imbalanced_groups;
-- --8<-- [end:queries]
