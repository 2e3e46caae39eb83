"""Plan tables: what the advisor decided, per run and per group (schema: migration ``0002_plans``).

- ``advisor_runs``: one planner run over one snapshot; ``airflow_run_id`` unique when set, so
  re-running the same Airflow run replaces its rows instead of adding a second set.
- ``plans``: the chosen candidate of a group (status ``recommended``); a run that arrives at the
  same assignment again refreshes the standing plan's numbers and ``last_confirmed_at`` instead of
  adding a plan (domain/plan_identity.py); a candidate held back by
  the cool-down is not stored, its outcome row keeps the decision and the reason (``skipped`` rows
  remain only from older versions); metrics before/after as columns for SQL, in full in ``metrics``.
- ``plan_assignments``: one row per (plan, member, topic, partition), the partition's lag and an
  optional key-hash range (for key-range plans).
- ``group_outcomes``: exactly one row per group per run, with the reason and the numbers.
- ``plan_transitions``: every status change of a plan (the first is ``None -> recommended``).

Views (SQL in the migration, portable between SQLite and PostgreSQL): ``latest_plan_per_group``
(newest non-skipped plan of every group) and ``imbalanced_groups`` (groups whose newest outcome
was flagged, in the newest planned snapshot).
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import JSON, BigInteger, DateTime, Float, ForeignKey, Index, Integer, String, Text
from sqlalchemy.orm import Mapped, mapped_column

from rebalance_advisor.store.models import Base

PLAN_STATUSES = ("recommended", "approved", "published", "superseded", "rejected", "skipped")


class AdvisorRun(Base):
    __tablename__ = "advisor_runs"

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    snapshot_id: Mapped[int] = mapped_column(Integer, index=True)
    airflow_run_id: Mapped[str | None] = mapped_column(String(250), unique=True)
    started_at: Mapped[datetime] = mapped_column(DateTime(timezone=True))
    finished_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))
    status: Mapped[str] = mapped_column(String(20))
    params: Mapped[dict[str, Any]] = mapped_column(JSON)


class Plan(Base):
    __tablename__ = "plans"
    __table_args__ = (
        Index("ix_plans_group_created", "group_id", "created_at"),
        Index("ix_plans_run_group", "run_id", "group_id"),  # migration 0018: the finalize's joins
    )

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    run_id: Mapped[int] = mapped_column(ForeignKey("advisor_runs.id", ondelete="CASCADE"), index=True)
    snapshot_id: Mapped[int] = mapped_column(Integer)
    group_id: Mapped[str] = mapped_column(Text)
    strategy: Mapped[str] = mapped_column(String(40))
    status: Mapped[str] = mapped_column(String(20), index=True)
    epoch: Mapped[int | None] = mapped_column(Integer)
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True))
    created_by: Mapped[str] = mapped_column(String(250))
    max_lag_before: Mapped[int] = mapped_column(BigInteger)
    max_lag_after: Mapped[int] = mapped_column(BigInteger)
    imbalance_before: Mapped[float] = mapped_column(Float)
    imbalance_after: Mapped[float] = mapped_column(Float)
    spread_before: Mapped[int] = mapped_column(Integer)
    spread_after: Mapped[int] = mapped_column(Integer)
    moves: Mapped[int] = mapped_column(Integer)
    lower_bound: Mapped[int] = mapped_column(BigInteger)
    gap: Mapped[float] = mapped_column(Float)
    reason: Mapped[str] = mapped_column(Text)
    metrics: Mapped[dict[str, Any]] = mapped_column(JSON)
    #: how the plan reaches the consumers (domain/apply_mode.py; migration 0011_plan_apply_mode)
    apply_mode: Mapped[str] = mapped_column(String(24), server_default="advice only")
    # migration 0012: the newest run that arrived at the same assignment (domain/plan_identity.py)
    last_confirmed_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))
    last_confirmed_run_id: Mapped[int | None] = mapped_column(Integer)
    situation: Mapped[dict[str, Any] | None] = mapped_column(JSON)
    # migration 0013: the load prediction and unowned lag as columns (docs/reference/plan-table.md)
    predicted_catch_up_before_s: Mapped[float | None] = mapped_column(Float)
    predicted_catch_up_after_s: Mapped[float | None] = mapped_column(Float)
    overloaded_members_before: Mapped[int | None] = mapped_column(Integer)
    overloaded_members_after: Mapped[int | None] = mapped_column(Integer)
    unowned_lag_before: Mapped[int | None] = mapped_column(BigInteger)
    unowned_lag_after: Mapped[int | None] = mapped_column(BigInteger)
    group_max_time_lag_s: Mapped[float | None] = mapped_column(Float)


class PlanAssignment(Base):
    __tablename__ = "plan_assignments"

    plan_id: Mapped[int] = mapped_column(ForeignKey("plans.id", ondelete="CASCADE"), primary_key=True)
    member_id: Mapped[str] = mapped_column(Text, primary_key=True)
    topic: Mapped[str] = mapped_column(String(255), primary_key=True)
    partition: Mapped[int] = mapped_column(Integer, primary_key=True)
    lag: Mapped[int] = mapped_column(BigInteger)
    key_hash_start: Mapped[int | None] = mapped_column(BigInteger)
    key_hash_end: Mapped[int | None] = mapped_column(BigInteger)


class GroupOutcome(Base):
    __tablename__ = "group_outcomes"

    run_id: Mapped[int] = mapped_column(ForeignKey("advisor_runs.id", ondelete="CASCADE"), primary_key=True)
    group_id: Mapped[str] = mapped_column(Text, primary_key=True, index=True)
    outcome: Mapped[str] = mapped_column(String(20))
    reason: Mapped[str] = mapped_column(Text)
    total_lag: Mapped[int] = mapped_column(BigInteger)
    max_lag_before: Mapped[int | None] = mapped_column(BigInteger)
    max_lag_after: Mapped[int | None] = mapped_column(BigInteger)
    imbalance_before: Mapped[float | None] = mapped_column(Float)
    imbalance_after: Mapped[float | None] = mapped_column(Float)
    moves: Mapped[int | None] = mapped_column(Integer)
    best_strategy: Mapped[str | None] = mapped_column(String(40))
    plan_id: Mapped[int | None] = mapped_column(ForeignKey("plans.id", ondelete="SET NULL"))


class PlanTransition(Base):
    __tablename__ = "plan_transitions"

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    plan_id: Mapped[int] = mapped_column(ForeignKey("plans.id", ondelete="CASCADE"), index=True)
    from_status: Mapped[str | None] = mapped_column(String(20))
    to_status: Mapped[str] = mapped_column(String(20))
    actor: Mapped[str] = mapped_column(String(250))
    airflow_run_id: Mapped[str | None] = mapped_column(String(250))
    at: Mapped[datetime] = mapped_column(DateTime(timezone=True))
    note: Mapped[str | None] = mapped_column(Text)


class PlannerStaging(Base):
    """One group's result, staged by the executor that planned it, for a run not yet made visible
    (migration ``0014_planner_staging``; docs/architecture.md, "One planner run").

    Nothing reads it but the run's own finalizing transaction, which moves its rows into the plan
    tables and deletes them; a failed run's rows stay invisible and are deleted by the next run.
    ``group_id`` compares byte-wise (COLLATE "C" on PostgreSQL, SQLite's default) so the finalize
    pages through the groups in the same order as ``sorted()``, hence the same plan ids as before.
    """

    __tablename__ = "planner_staging"

    run_key: Mapped[str] = mapped_column(String(36), primary_key=True)
    group_id: Mapped[str] = mapped_column(Text, primary_key=True)
    scope: Mapped[int] = mapped_column(Integer)
    #: GroupAdvice.to_json(): only for a recommended plan (migration 0017), the one kind of result
    #: the finalize may re-check and write row by row (its plan in final form: PlannerStagedPlan)
    result: Mapped[str | None] = mapped_column(Text)
    #: no longer written (migration 0018: PlannerStagedPlan holds the situation and plan numbers)
    situation: Mapped[Any | None] = mapped_column(JSON)
    plan_numbers: Mapped[Any | None] = mapped_column(JSON)
    staged_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), index=True)
    # the group's outcome row as planned (OutcomeLine): the finalize copies the rows of groups without
    # a recommended plan into group_outcomes with one INSERT ... SELECT (migration 0017)
    outcome: Mapped[str | None] = mapped_column(String(20))
    reason: Mapped[str | None] = mapped_column(Text)
    total_lag: Mapped[int | None] = mapped_column(BigInteger)
    max_lag_before: Mapped[int | None] = mapped_column(BigInteger)
    max_lag_after: Mapped[int | None] = mapped_column(BigInteger)
    imbalance_before: Mapped[float | None] = mapped_column(Float)
    imbalance_after: Mapped[float | None] = mapped_column(Float)
    moves: Mapped[int | None] = mapped_column(Integer)
    best_strategy: Mapped[str | None] = mapped_column(String(40))
    plan_status: Mapped[str | None] = mapped_column(String(20))


class PlannerStagedPlan(Base):
    """One recommended plan as the executor that planned it will have it stored: the ``plans`` row's
    own columns (migration ``0018_staged_plans``). The finalize inserts the plans no rule re-checks
    with one ``INSERT ... SELECT`` (store/plans.write_staged_run), the rest from the staged advice."""

    __tablename__ = "planner_staged_plans"
    __table_args__ = (Index("ix_planner_staged_plans_scope", "run_key", "scope"),)

    run_key: Mapped[str] = mapped_column(String(36), primary_key=True)
    group_id: Mapped[str] = mapped_column(Text, primary_key=True)
    scope: Mapped[int] = mapped_column(Integer)
    staged_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), index=True)
    strategy: Mapped[str | None] = mapped_column(String(40))
    status: Mapped[str | None] = mapped_column(String(20))
    apply_mode: Mapped[str | None] = mapped_column(String(24))
    situation: Mapped[Any | None] = mapped_column(JSON)
    max_lag_before: Mapped[int | None] = mapped_column(BigInteger)
    max_lag_after: Mapped[int | None] = mapped_column(BigInteger)
    imbalance_before: Mapped[float | None] = mapped_column(Float)
    imbalance_after: Mapped[float | None] = mapped_column(Float)
    spread_before: Mapped[int | None] = mapped_column(Integer)
    spread_after: Mapped[int | None] = mapped_column(Integer)
    moves: Mapped[int | None] = mapped_column(Integer)
    lower_bound: Mapped[int | None] = mapped_column(BigInteger)
    gap: Mapped[float | None] = mapped_column(Float)
    reason: Mapped[str | None] = mapped_column(Text)
    metrics: Mapped[Any | None] = mapped_column(JSON)
    predicted_catch_up_before_s: Mapped[float | None] = mapped_column(Float)
    predicted_catch_up_after_s: Mapped[float | None] = mapped_column(Float)
    overloaded_members_before: Mapped[int | None] = mapped_column(Integer)
    overloaded_members_after: Mapped[int | None] = mapped_column(Integer)
    unowned_lag_before: Mapped[int | None] = mapped_column(BigInteger)
    unowned_lag_after: Mapped[int | None] = mapped_column(BigInteger)


class PlannerStagedAssignment(Base):
    """One assignment row of a staged plan (:class:`PlannerStagedPlan`), ``plan_assignments``' columns
    but the plan id, which the finalize joins in (migration ``0018_staged_plans``)."""

    __tablename__ = "planner_staged_assignments"
    __table_args__ = (Index("ix_planner_staged_assignments_scope", "run_key", "scope"),)

    run_key: Mapped[str] = mapped_column(String(36), primary_key=True)
    group_id: Mapped[str] = mapped_column(Text, primary_key=True)
    member_id: Mapped[str] = mapped_column(Text, primary_key=True)
    topic: Mapped[str] = mapped_column(String(255), primary_key=True)
    partition: Mapped[int] = mapped_column(Integer, primary_key=True)
    lag: Mapped[int] = mapped_column(BigInteger)
    key_hash_start: Mapped[int | None] = mapped_column(BigInteger)
    key_hash_end: Mapped[int | None] = mapped_column(BigInteger)
    scope: Mapped[int] = mapped_column(Integer)
    staged_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), index=True)
