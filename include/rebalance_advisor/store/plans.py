"""Plan-table I/O: what the planner reads before a run, the one-transaction write after it, and the
queries the CLI, the DAG summary and the UI share.

A run is written by :func:`write_run` in one transaction: the run row, every plan with its
assignments and first transition (``None -> recommended``), one outcome per group (a candidate
held back by the cool-down or a standing rejection keeps only its outcome row: decision, reason,
numbers), and ``recommended -> superseded`` for the group's older recommended plans. A
recommendation with the assignment of the group's standing plan confirms that plan instead of
adding one (domain/plan_identity.py). Re-writing the same
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
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from rebalance_advisor.domain.advice import GroupAdvice, OutcomeLine
from rebalance_advisor.domain.decisions import STANDING_STATUSES, StandingPlan, Thresholds
from rebalance_advisor.domain.group_planning import hold_back
from rebalance_advisor.domain.plan_identity import (
    GroupSituation,
    RejectedPlan,
    advice_assignment_key,
    assignment_key,
    hold_by_rejection,
)
from rebalance_advisor.store import db, staged_plans
from rebalance_advisor.store.group_protocols import apply_modes_in
from rebalance_advisor.store.models import CommittedOffsetRow, StaticMemberRow
from rebalance_advisor.store.plan_models import (
    AdvisorRun,
    GroupOutcome,
    Plan,
    PlanAssignment,
    PlannerStagedAssignment,
    PlannerStagedPlan,
    PlannerStaging,
    PlanTransition,
)
from rebalance_advisor.store.plan_records import (
    AdvisorRunRecord,
    PlanAssignmentRecord,
    PlanListing,
    PlanTransitionRecord,
    StoredPlan,
    record,
)
from rebalance_advisor.store.planner_scope import GroupScope, scoped

_INSERT_CHUNK = 5_000

#: Key of the PostgreSQL advisory lock that serializes plan writes (any constant 64-bit value;
#: this one is "rbadvise" in ASCII). One key, not one per group: a run may touch 10,000 groups,
#: more than PostgreSQL's lock table holds per transaction.
PLAN_WRITE_LOCK_KEY = 0x7262616476697365

#: statuses of a standing plan a run may keep (same assignment); a published plan is in force, so
#: the planner measures against it and never recommends it again
KEEPABLE_STATUSES = ("recommended", "approved")


def published_assignments(
    conn: Connection, scope: GroupScope | None = None
) -> dict[str, dict[str, list[tuple[str, int]]]]:
    """Per manual-assign group, its latest ``published`` plan as {member: [(topic, partition)]},
    whole partitions only (the key ranges of split partitions: :func:`published_key_ranges`).

    Why: the snapshot cannot see what ``assign()`` consumers hold; what they were last told to run
    is what they own (``planner.specs``), so the planner measures and moves against it.
    """
    out: dict[str, dict[str, list[tuple[str, int]]]] = {}
    for group_id, _, member_id, topic, partition, lo, _ in _published_rows(conn, scope):
        if lo is None:
            out.setdefault(group_id, {}).setdefault(member_id, []).append((topic, partition))
    return out


def published_key_ranges(
    conn: Connection, scope: GroupScope | None = None
) -> dict[str, list[tuple[str, str, int, int, int]]]:
    """Per manual-assign group, the key ranges of its latest ``published`` plan as
    [(member, topic, partition, hash_lo, hash_hi)]: the current ranges the planner measures (domain/key_range_advice.py)."""
    out: dict[str, list[tuple[str, str, int, int, int]]] = {}
    for group_id, _, member_id, topic, partition, lo, hi in _published_rows(conn, scope):
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


def _published_rows(conn: Connection, scope: GroupScope | None = None) -> sa.Result:
    """The rows of each registered group's latest published plan, key-hash bounds included (of the
    groups of ``scope`` only, when given: store/planner_scope.py)."""
    registered = scoped(sa.select(StaticMemberRow.group_id).distinct(), StaticMemberRow.group_id, scope)
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


def standing_plans(
    conn: Connection, replacing_airflow_run_id: str | None = None, scope: GroupScope | None = None
) -> dict[str, StandingPlan]:
    """Per group, its newest recommended/approved/published plan (the cool-down reference).

    Plans of the run being replaced (same Airflow run id) do not count: a re-run must not be
    held back by its own earlier attempt.
    """
    newest = sa.select(sa.func.max(Plan.id)).where(Plan.status.in_(STANDING_STATUSES)).group_by(Plan.group_id)
    newest = scoped(newest, Plan.group_id, scope)
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
    (the decision rules' cool-down, measured from this run's start). Before the identity rule, as
    in the planner: during a cool-down even the same assignment is held, not confirmed.
    """
    if cooldown_minutes <= 0:
        return list(results)
    thresholds = Thresholds(cooldown_minutes=cooldown_minutes)
    recommended = _recommended_groups(results)
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


def _recommended_groups(results: Sequence[GroupAdvice]) -> list[str]:
    return sorted(r.group_id for r in results if r.plan is not None and r.plan.status == "recommended")


def rejected_plans(conn: Connection, groups: Sequence[str]) -> dict[str, RejectedPlan]:
    """Per group, its newest rejected plan with the reason given at the rejection."""
    found: dict[str, RejectedPlan] = {}
    for start in range(0, len(groups), _INSERT_CHUNK):
        chunk = list(groups[start : start + _INSERT_CHUNK])
        newest = (
            sa.select(sa.func.max(Plan.id))
            .where(Plan.group_id.in_(chunk), Plan.status == "rejected")
            .group_by(Plan.group_id)
        )
        note = (
            sa.select(PlanTransition.note)
            .where(PlanTransition.plan_id == Plan.id, PlanTransition.to_status == "rejected")
            .order_by(PlanTransition.id.desc())
            .limit(1)
            .scalar_subquery()
        )
        rows = conn.execute(
            sa.select(Plan.id, Plan.group_id, Plan.max_lag_before, Plan.max_lag_after, Plan.situation, note)
            .where(Plan.id.in_(newest))
        )  # fmt: skip
        for plan_id, group_id, before, after, situation, text in rows:
            found[group_id] = RejectedPlan(
                plan_id, int(before), int(after), GroupSituation.from_record(situation), text
            )
    return found


def _apply_rejections(
    conn: Connection, results: Sequence[GroupAdvice], situations: Mapping[str, GroupSituation]
) -> list[GroupAdvice]:
    """The results with recommendations that a standing rejection holds back (the rule:
    :func:`rebalance_advisor.domain.plan_identity.hold_by_rejection`)."""
    rejected = rejected_plans(conn, _recommended_groups(results))
    return [
        hold_by_rejection(r, rejected[r.group_id], situations.get(r.group_id))
        if r.group_id in rejected
        else r
        for r in results
    ]


def _same_assignment_plans(conn: Connection, results: Sequence[GroupAdvice]) -> dict[str, int]:
    """{group: id of its standing recommended/approved plan with the very assignment this run
    recommends} (domain/plan_identity.py: such a run keeps that plan)."""
    wanted = {
        r.group_id: advice_assignment_key(r) for r in results if r.plan and r.plan.status == "recommended"
    }
    groups = sorted(wanted)
    kept: dict[str, int] = {}
    for start in range(0, len(groups), _INSERT_CHUNK):
        chunk = groups[start : start + _INSERT_CHUNK]
        standing = sa.select(Plan.id).where(Plan.group_id.in_(chunk), Plan.status.in_(KEEPABLE_STATUSES))
        rows = conn.execute(
            sa.select(Plan.id, Plan.group_id, Plan.status, PlanAssignment.member_id, PlanAssignment.topic,
                      PlanAssignment.partition, PlanAssignment.key_hash_start, PlanAssignment.key_hash_end)
            .join(PlanAssignment, PlanAssignment.plan_id == Plan.id)
            .where(Plan.id.in_(standing))
        )  # fmt: skip
        held: dict[tuple[int, str, str], list[tuple]] = {}
        for plan_id, group_id, status, *row in rows:
            held.setdefault((plan_id, group_id, status), []).append(tuple(row))
        # an approved plan before a recommended one, then the newest
        for (plan_id, group_id, _), rows_of in sorted(
            held.items(), key=lambda kv: (kv[0][2] != "approved", -kv[0][0])
        ):
            if group_id not in kept and assignment_key(rows_of) == wanted[group_id]:
                kept[group_id] = plan_id
    return kept


def _insert_run(
    conn: Connection,
    snapshot_id: int,
    airflow_run_id: str | None,
    started_at: datetime,
    now: datetime,
    params,
) -> int:
    return conn.execute(
        sa.insert(AdvisorRun)
        .values(snapshot_id=snapshot_id, airflow_run_id=airflow_run_id, started_at=started_at,
                finished_at=now, status="success", params=params)
        .returning(AdvisorRun.id)
    ).scalar_one()  # fmt: skip


def write_run(
    conn: Connection,
    *,
    snapshot_id: int,
    results: Sequence[GroupAdvice],
    params: dict[str, Any],
    started_at: datetime,
    airflow_run_id: str | None,
    created_by: str,
    situations: Mapping[str, GroupSituation] | None = None,
) -> tuple[int, dict[str, int], list[GroupAdvice]]:
    """Insert one planner run (caller owns the transaction).

    Returns (advisor run id, {group: plan id}, the advice as stored). Under the plan-write lock:
    standing rejections hold recommendations back, a recommendation with the assignment of the
    group's standing plan confirms that plan (domain/plan_identity.py), and
    ``params["cooldown_minutes"]`` (the run's thresholds) drives the concurrent cool-down re-check.
    ``situations`` (per group, what it was planned against) is stored with each plan for the
    rejection rule.
    """
    run = _begin_run(conn, snapshot_id, params, started_at, airflow_run_id, created_by)
    plan_ids, stored = _write_results(conn, run, results, situations or {})
    return run.run_id, plan_ids, stored


def write_staged_run(
    conn: Connection,
    *,
    run_key: str,
    snapshot_id: int,
    params: dict[str, Any],
    started_at: datetime,
    airflow_run_id: str | None,
    created_by: str,
    on_outcome: Callable[[OutcomeLine], None],
) -> int:
    """:func:`write_run` on the results executors staged under ``run_key`` (caller owns the
    transaction), then the staged rows are deleted. Returns the run id; ``on_outcome`` gets one
    outcome line per group, in group order (the driver need not hold them all).

    The plans no rule of this write can change land first, staged in their final form, with a few
    ``INSERT ... SELECT`` statements (store/staged_plans.py says which and why). The other
    recommended plans meet the rules this write re-checks (rejections, the concurrent cool-down, the
    identity rule): those groups are parsed page by page in group order (:data:`STAGED_PAGE` at a
    time). Every group without a recommended plan has its outcome row final as staged and lands with
    one more ``INSERT ... SELECT`` (docs/architecture.md, "One planner run")."""
    run = _begin_run(conn, snapshot_id, params, started_at, airflow_run_id, created_by)
    stamp = staged_plans.RunStamp(
        run.run_id, snapshot_id, run.now, created_by, airflow_run_id, run.cooldown_minutes
    )
    staged_plans.insert_unruled(conn, run_key, stamp)
    written: dict[str, OutcomeLine] = {}
    for page in staged_pages(conn, run_key, run_id=run.run_id):
        plan_ids, stored = _write_results(
            conn, run, page.results, page.situations, page.numbers, page.records
        )
        written.update((r.group_id, OutcomeLine.of(r, plan_ids.get(r.group_id))) for r in stored)
    _insert_staged_outcomes(conn, run.run_id, run_key)
    for line in staged_outcomes(conn, run_key, written, run_id=run.run_id):
        on_outcome(line)
    drop_staged(conn, run_key)
    return run.run_id


#: staged recommended plans the finalizing driver holds at a time (bench/pipeline.py measures its
#: memory): a page of 1,000 plans held 1.4x what a page of 1,000 mixed groups did before the other
#: outcomes were staged as rows
STAGED_PAGE = 500

STAGED_OUTCOME_COLUMNS = staged_plans.STAGED_OUTCOME_COLUMNS


def staged_pages(
    conn: Connection, run_key: str, page: int = STAGED_PAGE, run_id: int | None = None
) -> Iterator[StagedPage]:
    """The recommended plans staged under ``run_key`` (with ``run_id``: those that run has no plan
    for yet), ``page`` groups at a time in byte-wise group order (keyset paging: each page one indexed
    query, no cursor held open across the writes), with their situations and plan numbers as staged."""
    st, sp = PlannerStaging.__table__, PlannerStagedPlan.__table__
    last: str | None = None
    while True:
        query = (
            sa.select(st.c.group_id, st.c.result, sp.c.situation, *(sp.c[c] for c in staged_plans.PLAN_NUMBER_COLUMNS))
            .join(sp, sa.and_(sp.c.run_key == st.c.run_key, sp.c.group_id == st.c.group_id))
            .where(st.c.run_key == run_key, st.c.result.is_not(None))
        )  # fmt: skip
        if run_id is not None:
            query = query.where(staged_plans.ruled_filter(st, run_id))
        if last is not None:
            query = query.where(st.c.group_id > last)
        rows = conn.execute(query.order_by(st.c.group_id).limit(page)).mappings().all()
        if not rows:
            return
        last = rows[-1]["group_id"]
        results = [GroupAdvice.from_json(row["result"]) for row in rows]
        records = {row["group_id"]: row["situation"] for row in rows if row["situation"]}
        numbers = {
            r.group_id: (r, staged_plans.numbers_of(row)) for r, row in zip(results, rows, strict=True)
        }
        situations = {g: GroupSituation.from_record(record) for g, record in records.items()}
        yield StagedPage(results, situations, numbers, records)


@dataclass(frozen=True)
class StagedPage:
    """One page of staged recommended plans: the advice, {group: situation}, {group: (advice, plan
    numbers)}, and {group: situation record} as staged (what the plan row stores: its
    ``to_record()``, not made again)."""

    results: list[GroupAdvice]
    situations: dict[str, GroupSituation]
    numbers: dict[str, tuple[GroupAdvice, dict[str, Any]]]
    records: dict[str, dict[str, Any]]


def _insert_staged_outcomes(conn: Connection, run_id: int, run_key: str) -> None:
    """The outcome rows of the groups staged without a recommended plan, as staged, in one statement."""
    st = PlannerStaging.__table__
    columns = ("group_id", *STAGED_OUTCOME_COLUMNS)
    rows = sa.select(sa.literal(run_id, sa.Integer), *(st.c[c] for c in columns)).where(
        st.c.run_key == run_key, st.c.result.is_(None)
    )
    conn.execute(GroupOutcome.__table__.insert().from_select(["run_id", *columns], rows))


def staged_outcomes(
    conn: Connection,
    run_key: str,
    written: Mapping[str, OutcomeLine] | None = None,
    run_id: int | None = None,
) -> Iterator[OutcomeLine]:
    """One line per group staged under ``run_key``, in byte-wise group order: the line ``written``
    holds for a group (a recommended plan the rules re-checked, as this run stored it), else the
    staged outcome with the plan run ``run_id`` inserted for the group from its staged plan, if any."""
    st, plans = PlannerStaging.__table__, Plan.__table__
    plan_id = plans.c.id if run_id is not None else sa.null()
    query = sa.select(
        st.c.group_id, *(st.c[c] for c in STAGED_OUTCOME_COLUMNS), st.c.plan_status, plan_id.label("plan_id")
    )
    if run_id is not None:
        query = query.outerjoin(plans, sa.and_(plans.c.run_id == run_id, plans.c.group_id == st.c.group_id))
    query = query.where(st.c.run_key == run_key).order_by(st.c.group_id)
    written = written or {}
    for row in conn.execute(query.execution_options(yield_per=5_000)):
        line = written.get(row[0])
        yield line if line is not None else OutcomeLine(**row._mapping)


def needs_finalize(advice: GroupAdvice) -> bool:
    """Whether the advice recommends a plan: staged with its plan in final form and its advice JSON
    (the finalize re-checks it when a rule may apply). Every other outcome row is final as the
    executor planned it (held-back candidates keep only that row)."""
    return advice.plan is not None and advice.plan.status == "recommended"


@dataclass(frozen=True)
class StagedGroup:
    """What an executor stages for one planned group: its outcome line, and for a recommended plan
    the advice JSON, the situation record, the plan numbers (:func:`plan_numbers`) and the
    assignment rows (member, topic, partition, lag, key-hash start, key-hash end)."""

    line: OutcomeLine
    result: str | None = None
    situation: dict[str, Any] | None = None
    numbers: dict[str, Any] | None = None
    assignments: tuple[tuple, ...] = ()


def staged_row(advice: GroupAdvice, situation: GroupSituation | None) -> StagedGroup:
    """:class:`StagedGroup` of one planned group (``situation``: what it was planned against, read
    only for a recommended plan)."""
    line = OutcomeLine.of(advice)
    if not needs_finalize(advice):
        return StagedGroup(line)
    record_ = None if situation is None else situation.to_record()
    return StagedGroup(line, advice.to_json(), record_, plan_numbers(advice), _plan_rows(advice))


def stage_results(
    conn: Connection, run_key: str, scope: int, rows: Sequence[StagedGroup], snapshot_id: int
) -> None:
    """Stage one scope's :func:`staged_row` rows, a recommended plan as its final rows with the apply
    mode of snapshot ``snapshot_id`` and the registry now; a retried scope replaces its earlier
    attempt's rows (caller owns the transaction)."""
    st = PlannerStaging.__table__
    conn.execute(sa.delete(st).where(st.c.run_key == run_key, st.c.scope == scope))
    staged_plans.delete_scope(conn, run_key, scope)
    now = datetime.now(UTC)
    staged = [
        {"run_key": run_key, "group_id": r.line.group_id, "scope": scope, "result": r.result,
         "situation": None, "plan_numbers": None, "staged_at": now,
         "plan_status": r.line.plan_status, **{c: getattr(r.line, c) for c in STAGED_OUTCOME_COLUMNS}}
        for r in rows
    ]  # fmt: skip
    _insert_rows(conn, PlannerStaging, staged)
    planned = [r for r in rows if r.numbers is not None]
    modes = apply_modes_in(conn, snapshot_id, (r.line.group_id for r in planned))
    columns = (
        (r.line.group_id, {"status": r.line.plan_status, "apply_mode": modes[r.line.group_id],
                           "situation": r.situation, **r.numbers})
        for r in planned
    )  # fmt: skip
    _insert_rows(conn, PlannerStagedPlan, staged_plans.staged_plan_rows(run_key, scope, now, columns))
    head = {"run_key": run_key, "scope": scope, "staged_at": now}
    assignments = [
        {**head, "group_id": r.line.group_id, **row}
        for r in planned
        for row in staged_plans.assignment_values(r.assignments)
    ]
    _insert_rows(conn, PlannerStagedAssignment, assignments)


def drop_staged(conn: Connection, run_key: str, older_than: datetime | None = None) -> None:
    """Delete a run's staged rows, and with ``older_than`` every run's staged before it (what runs
    that failed or were killed left behind: nobody reads them)."""
    st = PlannerStaging.__table__
    conn.execute(sa.delete(st).where(st.c.run_key == run_key))
    if older_than is not None:
        conn.execute(sa.delete(st).where(st.c.staged_at < older_than))
    staged_plans.drop(conn, run_key, older_than)


def _begin_run(
    conn: Connection,
    snapshot_id: int,
    params: dict[str, Any],
    started_at: datetime,
    airflow_run_id: str | None,
    created_by: str,
) -> _RunWrite:
    """Take the plan-write lock, drop an earlier attempt of the same Airflow run, insert the run row."""
    _lock_plan_writes(conn)
    if airflow_run_id is not None:
        _delete_run(conn, airflow_run_id)
    now = datetime.now(UTC)
    run_id = _insert_run(conn, snapshot_id, airflow_run_id, started_at, now, params)
    cooldown = float(params.get("cooldown_minutes") or 0)
    return _RunWrite(run_id, snapshot_id, now, created_by, airflow_run_id, {}, started_at, cooldown)


def _write_results(
    conn: Connection,
    run: _RunWrite,
    results: Sequence[GroupAdvice],
    situations: Mapping[str, GroupSituation],
    staged_numbers: Mapping[str, tuple[GroupAdvice, dict[str, Any]]] | None = None,
    situation_records: Mapping[str, dict[str, Any]] | None = None,
) -> tuple[dict[str, int], list[GroupAdvice]]:
    """Plans, confirmations, supersessions and outcomes of ``results`` (groups no other call of the
    same run touches); {group: plan id} and the advice as stored."""
    run = dataclasses.replace(
        run, situations=situations, staged_numbers=staged_numbers or {}, records=situation_records or {}
    )
    results = _apply_rejections(conn, results, situations)
    results = _apply_concurrent_cooldown(conn, run.run_id, results, run.started_at, run.cooldown_minutes)
    kept = _same_assignment_plans(conn, results)
    # A held-back candidate (cool-down, rejection) keeps only its outcome row (decision, reason,
    # numbers): a full plan per flagged group per run grew the table by ~860 rows a day on the demo.
    planned = [r for r in results if r.plan is not None and r.plan.status != "skipped"]
    plan_ids = _insert_plans(conn, run, [r for r in planned if r.group_id not in kept])
    _confirm_plans(conn, run, [r for r in planned if r.group_id in kept], kept)
    plan_ids.update({r.group_id: kept[r.group_id] for r in planned if r.group_id in kept})
    _supersede_older(conn, run, [r.group_id for r in planned if r.plan.status == "recommended"], plan_ids)
    _set_group_time_lags(conn, run.snapshot_id, [plan_ids[r.group_id] for r in planned])
    outcomes = [
        {**_stored(OutcomeLine.of(r, plan_ids.get(r.group_id))), "run_id": run.run_id} for r in results
    ]
    for chunk in _chunks(outcomes):
        conn.execute(sa.insert(GroupOutcome.__table__), chunk)
    return plan_ids, list(results)


@dataclass(frozen=True)
class _RunWrite:
    """What every row of one run's write shares."""

    run_id: int
    snapshot_id: int
    now: datetime
    created_by: str
    airflow_run_id: str | None
    situations: Mapping[str, GroupSituation]
    started_at: datetime
    cooldown_minutes: float
    #: group -> (the staged advice, its plan numbers computed by the executor that planned it)
    staged_numbers: Mapping[str, tuple[GroupAdvice, dict[str, Any]]] = dataclasses.field(default_factory=dict)
    #: group -> its situation's record as staged (the executor's ``to_record()``)
    records: Mapping[str, dict[str, Any]] = dataclasses.field(default_factory=dict)

    def situation(self, group_id: str) -> dict[str, Any] | None:
        staged = self.records.get(group_id)
        if staged is not None:
            return staged
        found = self.situations.get(group_id)
        return None if found is None else found.to_record()

    def numbers(self, r: GroupAdvice) -> dict[str, Any]:
        """:func:`plan_numbers` of ``r``: the executor's when this write keeps its advice unchanged."""
        staged = self.staged_numbers.get(r.group_id)
        return staged[1] if staged is not None and staged[0] is r else plan_numbers(r)


def plan_numbers(r: GroupAdvice) -> dict[str, Any]:
    """The plan columns a run computes: what a confirmation refreshes (executors compute them for
    the staged results: most of the finalize's work otherwise)."""
    after = r.plan.metrics
    metrics = r.metrics_record()
    return {
        "strategy": r.plan.strategy,
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
        "metrics": metrics,
        **plan_columns_from_metrics(metrics, r.plan.strategy),
    }


def _plan_rows(r: GroupAdvice) -> tuple[tuple, ...]:
    """The chosen plan's (member, topic, partition, lag, key-hash start, key-hash end) rows."""
    whole = ((m, t, p, lag, None, None) for m, t, p, lag in r.plan.assignments)
    return tuple(itertools.chain(whole, r.plan.key_ranges))


def _assignment_rows(plan_id: int, r: GroupAdvice) -> list[dict[str, Any]]:
    # every row names the same columns: an executemany takes its columns from the first row
    return [
        {"plan_id": plan_id, "member_id": m, "topic": t, "partition": p, "lag": lag,
         "key_hash_start": lo, "key_hash_end": hi}
        for m, t, p, lag, lo, hi in _plan_rows(r)
    ]  # fmt: skip


def _insert_plans(conn: Connection, run: _RunWrite, fresh: Sequence[GroupAdvice]) -> dict[str, int]:
    """New plans, their assignments and first transitions; {group: new plan id}."""
    modes = apply_modes_in(conn, run.snapshot_id, (r.group_id for r in fresh))
    plan_rows = [
        {"run_id": run.run_id, "snapshot_id": run.snapshot_id, "group_id": r.group_id, "status": r.plan.status,
         "epoch": None, "created_at": run.now, "created_by": run.created_by, "situation": run.situation(r.group_id),
         "apply_mode": modes[r.group_id], **run.numbers(r)}
        for r in fresh
    ]  # fmt: skip
    # One multi-row INSERT ... RETURNING per chunk instead of one statement per plan (10,000 plans
    # took seconds); the ids come back in parameter order, so they pair with ``fresh``.
    new_plan_ids: list[int] = []
    table = Plan.__table__
    for chunk in _chunks(plan_rows):
        inserted = conn.execute(table.insert().returning(table.c.id, sort_by_parameter_order=True), chunk)
        new_plan_ids.extend(inserted.scalars())
    assignments: list[dict[str, Any]] = []
    transitions: list[dict[str, Any]] = []
    for r, plan_id in zip(fresh, new_plan_ids, strict=True):
        assignments.extend(_assignment_rows(plan_id, r))
        transitions.append(
            {"plan_id": plan_id, "from_status": None, "to_status": r.plan.status, "actor": run.created_by,
             "airflow_run_id": run.airflow_run_id, "at": run.now, "note": r.reason}
        )  # fmt: skip
    _insert_rows(conn, PlanAssignment, assignments)
    _insert_rows(conn, PlanTransition, transitions)
    return {r.group_id: plan_id for r, plan_id in zip(fresh, new_plan_ids, strict=True)}


def _confirm_plans(
    conn: Connection, run: _RunWrite, confirmed: Sequence[GroupAdvice], kept: Mapping[str, int]
) -> None:
    """Standing plans this run arrived at again: same id and status, the numbers, the snapshot, the
    situation and the assignment rows' lags of this run, and when it confirmed them."""
    for r in confirmed:
        plan_id = kept[r.group_id]
        conn.execute(
            sa.update(Plan)
            .where(Plan.id == plan_id)
            .values(snapshot_id=run.snapshot_id, last_confirmed_at=run.now, last_confirmed_run_id=run.run_id,
                    situation=run.situation(r.group_id), **run.numbers(r))
        )  # fmt: skip
    ids = [kept[r.group_id] for r in confirmed]
    for start in range(0, len(ids), _INSERT_CHUNK):
        conn.execute(
            sa.delete(PlanAssignment).where(PlanAssignment.plan_id.in_(ids[start : start + _INSERT_CHUNK]))
        )
    _insert_rows(
        conn, PlanAssignment, [row for r in confirmed for row in _assignment_rows(kept[r.group_id], r)]
    )


def _set_group_time_lags(conn: Connection, snapshot_id: int, plan_ids: Sequence[int]) -> None:
    """``group_max_time_lag_s`` of the run's plans: the furthest-behind partition of the group in the
    run's snapshot (the snapshot store's time lags, docs/architecture.md "Lag")."""
    c = CommittedOffsetRow
    furthest = (
        sa.select(sa.func.max(c.time_lag_s))
        .where(c.snapshot_id == snapshot_id, c.group_id == Plan.group_id)
        .scalar_subquery()
    )
    for start in range(0, len(plan_ids), _INSERT_CHUNK):
        chunk = list(plan_ids[start : start + _INSERT_CHUNK])
        conn.execute(sa.update(Plan).where(Plan.id.in_(chunk)).values(group_max_time_lag_s=furthest))


def _supersede_older(
    conn: Connection, run: _RunWrite, groups: Sequence[str], plan_ids: Mapping[str, int]
) -> None:
    """``recommended -> superseded`` for the groups' other recommended plans (this run's stand)."""
    keep = set(plan_ids.values())
    transitions: list[dict[str, Any]] = []
    for start in range(0, len(groups), _INSERT_CHUNK):
        chunk = list(groups[start : start + _INSERT_CHUNK])
        older = conn.execute(
            sa.select(Plan.id).where(Plan.group_id.in_(chunk), Plan.status == "recommended")
        ).scalars()
        older_ids = [pid for pid in older if pid not in keep]
        if not older_ids:
            continue
        conn.execute(sa.update(Plan).where(Plan.id.in_(older_ids)).values(status="superseded"))
        transitions.extend(
            {"plan_id": pid, "from_status": "recommended", "to_status": "superseded", "actor": run.created_by,
             "airflow_run_id": run.airflow_run_id, "at": run.now, "note": f"superseded by advisor run {run.run_id}"}
            for pid in older_ids
        )  # fmt: skip
    _insert_rows(conn, PlanTransition, transitions)


def _insert_rows(conn: Connection, model: type, rows: list[dict[str, Any]]) -> None:
    for chunk in _chunks(rows):  # the Core table, not the ORM entity: no per-row ORM bulk work
        conn.execute(sa.insert(model.__table__), chunk)


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
    "last_confirmed_at",
    "predicted_catch_up_before_s",
    "predicted_catch_up_after_s",
    "overloaded_members_before",
    "overloaded_members_after",
    "unowned_lag_before",
    "unowned_lag_after",
    "group_max_time_lag_s",
)


def list_plans(
    url: str | None = None,
    *,
    group: str | None = None,
    status: str | None = None,
    run_id: int | None = None,
    limit: int | None = None,
) -> list[PlanListing]:
    """Plans newest first (without the metrics JSON), filtered by group, status or run."""
    query = sa.select(*(getattr(Plan, c) for c in PLAN_COLUMNS)).order_by(Plan.id.desc())
    if group is not None:
        query = query.where(Plan.group_id == group)
    if status is not None:
        query = query.where(Plan.status == status)
    if run_id is not None:
        query = query.where(Plan.run_id == run_id)
    if limit is not None:
        query = query.limit(limit)
    with db.connect(url) as conn:
        return [record(PlanListing, row) for row in conn.execute(query).mappings()]


def plan_columns_from_metrics(metrics: Mapping[str, Any] | None, strategy: str) -> dict[str, Any]:
    """The load-prediction and unowned-lag columns of a plan (migration 0013) from its ``metrics``
    JSON: the current assignment's load (``load_before``), the plan's (its strategy's candidate), and
    the lag no member owns before (``before.unowned_lag``) and after (the group's lag the plan's
    members do not hold). Absent numbers are None."""
    metrics = metrics or {}
    before = metrics.get("load_before") or {}
    after = next(
        (c.get("load") or {} for c in metrics.get("candidates", ()) if c.get("strategy") == strategy), {}
    )
    owned_before = (metrics.get("before") or {}).get("member_lag")
    unowned_before = (metrics.get("before") or {}).get("unowned_lag")
    owned_after = (metrics.get("after") or {}).get("member_lag")
    unowned_after = None
    if unowned_before is not None and owned_before is not None and owned_after is not None:
        total = sum(owned_before.values()) + int(unowned_before)
        unowned_after = max(total - sum(owned_after.values()), 0)
    return {
        "overloaded_members_before": before.get("overloaded"),
        "overloaded_members_after": after.get("overloaded"),
        "predicted_catch_up_before_s": before.get("max_catch_up_s"),
        "predicted_catch_up_after_s": after.get("max_catch_up_s"),
        "unowned_lag_before": None if unowned_before is None else int(unowned_before),
        "unowned_lag_after": unowned_after,
    }


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


def plans_moves_and_unknown_capacities(
    plan_ids: Sequence[int], url: str | None = None
) -> list[tuple[int, str, int, int]]:
    """(plan id, group, moves, members planned without a known capacity) of the stored ``plan_ids``,
    by id; a plan stored before its metrics counted them has 0."""
    if not plan_ids:
        return []
    with db.connect(url) as conn:
        rows = conn.execute(
            sa.select(Plan.id, Plan.group_id, Plan.moves, Plan.metrics)
            .where(Plan.id.in_(sorted(set(plan_ids))))
            .order_by(Plan.id)
        ).all()
    return [
        (i, g, int(moves), int((metrics or {}).get("unknown_capacities") or 0))
        for i, g, moves, metrics in rows
    ]


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
