"""Plan-table I/O: what the planner reads before a run, the one-transaction write after it, and the
queries the CLI, the DAG summary and the UI share.

A run is written by :func:`write_run` in one transaction: the run row, every plan with its
assignments and first transition (``None -> recommended``), one outcome per group (a candidate
held back by the cool-down keeps only its outcome row: decision, reason, numbers),
and ``recommended -> superseded`` for the group's older recommended plans. Re-writing the same
Airflow run id first deletes that run's rows (explicitly: SQLite does not cascade by default).

Concurrent runs: a run decides its cool-downs from the plan history it read *before* Spark, so two
runs planning at once would both recommend for the same group. :func:`write_run` therefore
serializes writers (PostgreSQL: one transaction-scoped advisory lock; SQLite: its database write
lock, taken by the first write) and, under that lock, re-checks every recommendation against the
standing plans committed meanwhile (:func:`_apply_concurrent_cooldown`).
"""

from __future__ import annotations

import dataclasses
import itertools
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from rebalance_advisor.domain.advice import GroupAdvice, OutcomeLine
from rebalance_advisor.domain.decisions import STANDING_STATUSES, StandingPlan, Thresholds
from rebalance_advisor.domain.group_planning import hold_back
from rebalance_advisor.store import db
from rebalance_advisor.store.group_protocols import apply_modes_in
from rebalance_advisor.store.models import StaticMemberRow
from rebalance_advisor.store.plan_models import (
    AdvisorRun,
    GroupOutcome,
    Plan,
    PlanAssignment,
    PlanTransition,
)
from rebalance_advisor.store.plan_records import (
    AdvisorRunRecord,
    PlanAssignmentRecord,
    PlanListing,
    PlanLoad,
    PlanTransitionRecord,
    StoredPlan,
    record,
)

_INSERT_CHUNK = 5_000

#: Key of the PostgreSQL advisory lock that serializes plan writes (any constant 64-bit value;
#: this one is "rbadvise" in ASCII). One key, not one per group: a run may touch 10,000 groups,
#: more than PostgreSQL's lock table holds per transaction.
PLAN_WRITE_LOCK_KEY = 0x7262616476697365


def published_assignments(conn: Connection) -> dict[str, dict[str, list[tuple[str, int]]]]:
    """Per manual-assign group, its latest ``published`` plan as {member: [(topic, partition)]},
    whole partitions only (the key ranges of split partitions: :func:`published_key_ranges`).

    Why: the snapshot cannot see what ``assign()`` consumers hold; what they were last told to run
    is what they own (``planner.specs``), so the planner measures and moves against it.
    """
    out: dict[str, dict[str, list[tuple[str, int]]]] = {}
    for group_id, _, member_id, topic, partition, lo, _ in _published_rows(conn):
        if lo is None:
            out.setdefault(group_id, {}).setdefault(member_id, []).append((topic, partition))
    return out


def published_key_ranges(conn: Connection) -> dict[str, list[tuple[str, str, int, int, int]]]:
    """Per manual-assign group, the key ranges of its latest ``published`` plan as
    [(member, topic, partition, hash_lo, hash_hi)]: the current ranges the planner measures (domain/key_range_advice.py)."""
    out: dict[str, list[tuple[str, str, int, int, int]]] = {}
    for group_id, _, member_id, topic, partition, lo, hi in _published_rows(conn):
        if lo is not None:
            out.setdefault(group_id, []).append((member_id, topic, partition, lo, hi))
    return out


def published_plans(conn: Connection) -> dict[str, tuple[int, dict[str, list[tuple[str, int]]]]]:
    """:func:`published_assignments` with each plan's id (snapshots measure capacities against it);
    here a key range counts as its partition (its member reads the whole partition)."""
    result: dict[str, tuple[int, dict[str, list[tuple[str, int]]]]] = {}
    for group_id, plan_id, member_id, topic, partition, _, _ in _published_rows(conn):
        result.setdefault(group_id, (plan_id, {}))[1].setdefault(member_id, []).append((topic, partition))
    return result


def _published_rows(conn: Connection) -> sa.Result:
    """The rows of each registered group's latest published plan, key-hash bounds included."""
    registered = sa.select(StaticMemberRow.group_id).distinct()
    latest = (
        sa.select(sa.func.max(Plan.id))
        .where(Plan.status == "published", Plan.group_id.in_(registered))
        .group_by(Plan.group_id)
    )
    return conn.execute(
        sa.select(
            Plan.group_id,
            Plan.id,
            PlanAssignment.member_id,
            PlanAssignment.topic,
            PlanAssignment.partition,
            PlanAssignment.key_hash_start,
            PlanAssignment.key_hash_end,
        )
        .join(PlanAssignment, PlanAssignment.plan_id == Plan.id)
        .where(Plan.id.in_(latest))
        .order_by(
            Plan.group_id,
            PlanAssignment.member_id,
            PlanAssignment.topic,
            PlanAssignment.partition,
            PlanAssignment.key_hash_start,
        )
    )


def standing_plans(conn: Connection, replacing_airflow_run_id: str | None = None) -> dict[str, StandingPlan]:
    """Per group, its newest recommended/approved/published plan (the cool-down reference).

    Plans of the run being replaced (same Airflow run id) do not count: a re-run must not be
    held back by its own earlier attempt.
    """
    newest = sa.select(sa.func.max(Plan.id)).where(Plan.status.in_(STANDING_STATUSES)).group_by(Plan.group_id)
    if replacing_airflow_run_id is not None:
        replaced = sa.select(AdvisorRun.id).where(AdvisorRun.airflow_run_id == replacing_airflow_run_id)
        newest = newest.where(Plan.run_id.not_in(replaced))
    rows = conn.execute(
        sa.select(Plan.id, Plan.group_id, Plan.status, Plan.created_at).where(Plan.id.in_(newest))
    )
    return {g: StandingPlan(i, s, c) for i, g, s, c in rows}


def _delete_run(conn: Connection, airflow_run_id: str) -> None:
    run_ids = sa.select(AdvisorRun.id).where(AdvisorRun.airflow_run_id == airflow_run_id)
    plan_ids = sa.select(Plan.id).where(Plan.run_id.in_(run_ids))
    conn.execute(sa.delete(GroupOutcome).where(GroupOutcome.run_id.in_(run_ids)))
    conn.execute(sa.delete(PlanTransition).where(PlanTransition.plan_id.in_(plan_ids)))
    conn.execute(sa.delete(PlanAssignment).where(PlanAssignment.plan_id.in_(plan_ids)))
    conn.execute(sa.delete(Plan).where(Plan.run_id.in_(run_ids)))
    conn.execute(sa.delete(AdvisorRun).where(AdvisorRun.id.in_(run_ids)))


def _lock_plan_writes(conn: Connection) -> None:
    """Serialize plan writers until this transaction ends (see the module docstring)."""
    if conn.dialect.name == "postgresql":
        conn.execute(sa.text("SELECT pg_advisory_xact_lock(:key)"), {"key": PLAN_WRITE_LOCK_KEY})
    # SQLite: the run's first DELETE/INSERT takes the database write lock, which serializes writers.


def _apply_concurrent_cooldown(
    conn: Connection,
    run_id: int,
    results: Sequence[GroupAdvice],
    started_at: datetime,
    cooldown_minutes: float,
) -> list[GroupAdvice]:
    """The results with recommendations that a concurrent run's committed plan now holds back.

    Runs under the write lock; the rule is :func:`rebalance_advisor.domain.group_planning.hold_back`
    (the decision rules' cool-down, measured from this run's start).
    """
    if cooldown_minutes <= 0:
        return list(results)
    thresholds = Thresholds(cooldown_minutes=cooldown_minutes)
    recommended = sorted(r.group_id for r in results if r.plan is not None and r.plan.status == "recommended")
    standing: dict[str, StandingPlan] = {}
    for start in range(0, len(recommended), _INSERT_CHUNK):
        chunk = recommended[start : start + _INSERT_CHUNK]
        newest = (
            sa.select(sa.func.max(Plan.id))
            .where(Plan.group_id.in_(chunk), Plan.status.in_(STANDING_STATUSES), Plan.run_id != run_id)
            .group_by(Plan.group_id)
        )
        rows = conn.execute(
            sa.select(Plan.id, Plan.group_id, Plan.status, Plan.created_at).where(Plan.id.in_(newest))
        )
        standing.update({g: StandingPlan(i, s, c) for i, g, s, c in rows})
    return [
        hold_back(r, standing[r.group_id], started_at, thresholds) if r.group_id in standing else r
        for r in results
    ]


def _chunks(rows: list[dict[str, Any]]) -> Iterable[list[dict[str, Any]]]:
    for start in range(0, len(rows), _INSERT_CHUNK):
        yield rows[start : start + _INSERT_CHUNK]


def write_run(
    conn: Connection,
    *,
    snapshot_id: int,
    results: Sequence[GroupAdvice],
    params: dict[str, Any],
    started_at: datetime,
    airflow_run_id: str | None,
    created_by: str,
) -> tuple[int, dict[str, int], list[GroupAdvice]]:
    """Insert one planner run (caller owns the transaction).

    Returns (advisor run id, {group: plan id}, the advice as stored). ``params["cooldown_minutes"]``
    (the run's thresholds) drives the concurrent cool-down re-check, which may hold advice back.
    """
    _lock_plan_writes(conn)
    if airflow_run_id is not None:
        _delete_run(conn, airflow_run_id)
    now = datetime.now(UTC)
    run_id = conn.execute(
        sa.insert(AdvisorRun)
        .values(
            snapshot_id=snapshot_id,
            airflow_run_id=airflow_run_id,
            started_at=started_at,
            finished_at=now,
            status="success",
            params=params,
        )
        .returning(AdvisorRun.id)
    ).scalar_one()
    results = _apply_concurrent_cooldown(
        conn, run_id, results, started_at, float(params.get("cooldown_minutes") or 0)
    )
    # A held-back candidate (cool-down) keeps only its outcome row (decision, reason, numbers):
    # a full plan per flagged group per run grew the table by ~860 rows a day on the demo alone.
    planned = [r for r in results if r.plan is not None and r.plan.status != "skipped"]
    modes = apply_modes_in(conn, snapshot_id, (r.group_id for r in planned))
    plan_rows = []
    for r in planned:
        plan = r.plan
        after = plan.metrics
        plan_rows.append(
            {
                "run_id": run_id,
                "snapshot_id": snapshot_id,
                "group_id": r.group_id,
                "strategy": plan.strategy,
                "status": plan.status,
                "epoch": None,
                "created_at": now,
                "created_by": created_by,
                "max_lag_before": r.max_lag_before,
                "max_lag_after": after.max_member_lag,
                "imbalance_before": r.imbalance_before,
                "imbalance_after": after.imbalance,
                "spread_before": r.spread_before,
                "spread_after": after.partition_count_spread,
                "moves": after.moves,
                "lower_bound": after.lower_bound_max_lag,
                "gap": after.gap,
                "reason": r.reason,
                "metrics": r.metrics_record(),
                "apply_mode": modes[r.group_id],
            }
        )
    # One multi-row INSERT ... RETURNING per chunk instead of one statement per plan (10,000 plans
    # took seconds); the ids come back in parameter order, so they pair with ``planned``.
    new_plan_ids: list[int] = []
    table = Plan.__table__
    for chunk in _chunks(plan_rows):
        inserted = conn.execute(table.insert().returning(table.c.id, sort_by_parameter_order=True), chunk)
        new_plan_ids.extend(inserted.scalars())
    plan_ids: dict[str, int] = {}
    assignments: list[dict[str, Any]] = []
    transitions: list[dict[str, Any]] = []
    recommended_groups: list[str] = []
    for r, plan_id in zip(planned, new_plan_ids, strict=True):
        plan = r.plan
        plan_ids[r.group_id] = plan_id
        if plan.status == "recommended":
            recommended_groups.append(r.group_id)
        # every row names the same columns: an executemany takes its columns from the first row
        whole = ((m, t, p, lag, None, None) for m, t, p, lag in plan.assignments)
        assignments.extend(
            {
                "plan_id": plan_id,
                "member_id": m,
                "topic": t,
                "partition": p,
                "lag": lag,
                "key_hash_start": lo,
                "key_hash_end": hi,
            }
            for m, t, p, lag, lo, hi in itertools.chain(whole, plan.key_ranges)
        )
        transitions.append(
            {
                "plan_id": plan_id,
                "from_status": None,
                "to_status": plan.status,
                "actor": created_by,
                "airflow_run_id": airflow_run_id,
                "at": now,
                "note": r.reason,
            }
        )
    new_ids = set(plan_ids.values())
    for start in range(0, len(recommended_groups), _INSERT_CHUNK):
        groups = recommended_groups[start : start + _INSERT_CHUNK]
        older = conn.execute(
            sa.select(Plan.id).where(Plan.group_id.in_(groups), Plan.status == "recommended")
        ).scalars()
        older_ids = [pid for pid in older if pid not in new_ids]
        if not older_ids:
            continue
        conn.execute(sa.update(Plan).where(Plan.id.in_(older_ids)).values(status="superseded"))
        transitions.extend(
            {
                "plan_id": pid,
                "from_status": "recommended",
                "to_status": "superseded",
                "actor": created_by,
                "airflow_run_id": airflow_run_id,
                "at": now,
                "note": f"superseded by advisor run {run_id}",
            }
            for pid in older_ids
        )
    outcomes = [{**_stored(OutcomeLine.of(r, plan_ids.get(r.group_id))), "run_id": run_id} for r in results]
    for model, rows in (
        (PlanAssignment, assignments),
        (PlanTransition, transitions),
        (GroupOutcome, outcomes),
    ):
        for chunk in _chunks(rows):  # the Core table, not the ORM entity: no per-row ORM bulk work
            conn.execute(sa.insert(model.__table__), chunk)
    return run_id, plan_ids, results


# ---- queries (CLI ``plans``, DAG summary, UI) -----------------------------------------------

PLAN_COLUMNS = (
    "id",
    "run_id",
    "snapshot_id",
    "group_id",
    "strategy",
    "status",
    "epoch",
    "created_at",
    "created_by",
    "max_lag_before",
    "max_lag_after",
    "imbalance_before",
    "imbalance_after",
    "spread_before",
    "spread_after",
    "moves",
    "lower_bound",
    "gap",
    "reason",
    "apply_mode",
)


def list_plans(
    url: str | None = None,
    *,
    group: str | None = None,
    status: str | None = None,
    run_id: int | None = None,
    limit: int | None = None,
) -> list[PlanListing]:
    """Plans newest first (without the metrics JSON), filtered by group, status or run, each with
    its stored load prediction (:class:`PlanLoad`)."""
    from rebalance_advisor.store.models import CommittedOffsetRow

    c = CommittedOffsetRow
    max_time_lag = (
        sa.select(sa.func.max(c.time_lag_s))
        .where(c.snapshot_id == Plan.snapshot_id, c.group_id == Plan.group_id)
        .scalar_subquery()
        .label("max_time_lag_s")
    )
    query = sa.select(*(getattr(Plan, c) for c in PLAN_COLUMNS), Plan.metrics, max_time_lag)
    query = query.order_by(Plan.id.desc())
    if group is not None:
        query = query.where(Plan.group_id == group)
    if status is not None:
        query = query.where(Plan.status == status)
    if run_id is not None:
        query = query.where(Plan.run_id == run_id)
    if limit is not None:
        query = query.limit(limit)
    with db.connect(url) as conn:
        rows = list(conn.execute(query).mappings())
    return [
        record(PlanListing, row, **dataclasses.asdict(plan_load(row["metrics"], row["strategy"])))
        for row in rows
    ]


def plan_load(metrics: dict[str, Any] | None, strategy: str) -> PlanLoad:
    """A plan's :class:`PlanLoad` from its ``metrics`` JSON: the current assignment's load
    (``load_before``) and the plan's (its strategy's candidate)."""
    metrics = metrics or {}
    before = metrics.get("load_before") or {}
    after = next(
        (c.get("load") or {} for c in metrics.get("candidates", ()) if c.get("strategy") == strategy), {}
    )
    return PlanLoad(
        overloaded_before=before.get("overloaded"),
        overloaded_after=after.get("overloaded"),
        catch_up_before_s=before.get("max_catch_up_s"),
        catch_up_after_s=after.get("max_catch_up_s"),
    )


def get_plan(plan_id: int, url: str | None = None) -> StoredPlan | None:
    """One plan with its metrics JSON, its assignments and its transitions."""
    with db.connect(url) as conn:
        row = conn.execute(sa.select(Plan.__table__).where(Plan.id == plan_id)).mappings().first()
        if row is None:
            return None
        assignments = tuple(
            PlanAssignmentRecord(**a)
            for a in conn.execute(
                sa.select(
                    PlanAssignment.member_id,
                    PlanAssignment.topic,
                    PlanAssignment.partition,
                    PlanAssignment.lag,
                    PlanAssignment.key_hash_start,
                    PlanAssignment.key_hash_end,
                )
                .where(PlanAssignment.plan_id == plan_id)
                .order_by(PlanAssignment.member_id, PlanAssignment.topic, PlanAssignment.partition)
            ).mappings()
        )
        transitions = tuple(
            PlanTransitionRecord(**t)
            for t in conn.execute(
                sa.select(
                    PlanTransition.from_status,
                    PlanTransition.to_status,
                    PlanTransition.actor,
                    PlanTransition.airflow_run_id,
                    PlanTransition.at,
                    PlanTransition.note,
                )
                .where(PlanTransition.plan_id == plan_id)
                .order_by(PlanTransition.id)
            ).mappings()
        )
    return record(StoredPlan, row, assignments=assignments, transitions=transitions)


def plan_assignment_map(plan_id: int, url: str | None = None) -> dict[str, list[tuple]]:
    """{member: sorted holdings} of one plan (what publishing and tests compare): a whole partition
    as (topic, partition), a key range of a split partition as (topic, partition, hash_lo, hash_hi)."""
    with db.connect(url) as conn:
        rows = conn.execute(
            sa.select(
                PlanAssignment.member_id,
                PlanAssignment.topic,
                PlanAssignment.partition,
                PlanAssignment.key_hash_start,
                PlanAssignment.key_hash_end,
            )
            .where(PlanAssignment.plan_id == plan_id)
            .order_by(PlanAssignment.member_id, PlanAssignment.topic, PlanAssignment.partition)
        )
        result: dict[str, list[tuple]] = {}
        for member, topic, partition, hash_start, hash_end in rows:
            held = (topic, partition) if hash_start is None else (topic, partition, hash_start, hash_end)
            result.setdefault(member, []).append(held)
    return result


def run_outcomes(run_id: int | None = None, url: str | None = None) -> list[OutcomeLine]:
    """One line per group of an advisor run (default: the newest run), by group id."""
    with db.connect(url) as conn:
        if run_id is None:
            run_id = conn.execute(sa.select(sa.func.max(AdvisorRun.id))).scalar_one_or_none()
            if run_id is None:
                return []
        table = GroupOutcome.__table__
        query = sa.select(table).where(table.c.run_id == run_id).order_by(table.c.group_id)
        return [OutcomeLine.from_dict(dict(row)) for row in conn.execute(query).mappings()]


def _stored(line: OutcomeLine) -> dict[str, Any]:
    """The ``group_outcomes`` columns of ``line`` (the plan's status lives on the plan row)."""
    row = line.to_dict()
    del row["plan_status"]
    return row


def advisor_runs(url: str | None = None, limit: int = 20) -> list[AdvisorRunRecord]:
    """The newest advisor runs, newest first."""
    with db.connect(url) as conn:
        rows = conn.execute(sa.select(AdvisorRun.__table__).order_by(AdvisorRun.id.desc()).limit(limit))
        return [record(AdvisorRunRecord, r) for r in rows.mappings()]


# ---- retention (``db prune``, the snapshot DAG) -------------------------------------------------


@dataclass(frozen=True)
class PrunedPlans:
    """What :func:`prune_plans` deleted."""

    runs: int
    plans: int
    outcomes: int


def prune_plans(retention: timedelta, url: str | None = None, now: datetime | None = None) -> PrunedPlans:
    """Delete advisor runs started before ``now - retention`` with their outcomes and their plans.

    Standing plans (recommended, approved, published) stay, and so does the run that made them;
    the newest run is always kept (the UI's "latest outcome"). A plan's assignments and
    transitions go with it, in one transaction, under the plan write lock.
    """
    cutoff = (now or datetime.now(UTC)) - retention
    with db.connect(url) as conn:
        _lock_plan_writes(conn)
        newest = conn.execute(sa.select(sa.func.max(AdvisorRun.id))).scalar_one_or_none()
        if newest is None:
            return PrunedPlans(0, 0, 0)
        old_runs = sa.select(AdvisorRun.id).where(AdvisorRun.started_at < cutoff, AdvisorRun.id != newest)
        old_plans = sa.select(Plan.id).where(Plan.run_id.in_(old_runs), Plan.status.not_in(STANDING_STATUSES))
        conn.execute(sa.delete(PlanTransition).where(PlanTransition.plan_id.in_(old_plans)))
        conn.execute(sa.delete(PlanAssignment).where(PlanAssignment.plan_id.in_(old_plans)))
        conn.execute(  # the FK says SET NULL, but SQLite enforces no foreign keys by default
            sa.update(GroupOutcome).where(GroupOutcome.plan_id.in_(old_plans)).values(plan_id=None)
        )
        plans = conn.execute(sa.delete(Plan).where(Plan.id.in_(old_plans))).rowcount
        outcomes = conn.execute(sa.delete(GroupOutcome).where(GroupOutcome.run_id.in_(old_runs))).rowcount
        kept = sa.select(Plan.run_id).where(Plan.run_id.is_not(None))
        runs = conn.execute(
            sa.delete(AdvisorRun).where(AdvisorRun.id.in_(old_runs), AdvisorRun.id.not_in(kept))
        ).rowcount
    return PrunedPlans(runs, plans, outcomes)
