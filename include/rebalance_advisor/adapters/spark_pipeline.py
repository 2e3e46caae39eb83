"""The planner as a Spark data pipeline: executors read, build, plan and stage; the driver finalizes.

Shape (docs/architecture.md, "One planner run"): the driver cuts the snapshot into scopes of
groups (store/planner_scope.py: ranges of group ids, streamed once, only the boundaries kept) and
hands Spark one small row per scope. ``groupBy("scope").applyInPandas`` runs :func:`plan_scope` on
the executors: each reads its own groups' rows from the database
(store/planner_inputs.read_planner_inputs with the scope), builds their documents with the same
pure functions as the driver path, plans each with
:func:`~rebalance_advisor.domain.group_planning.plan_group`, and writes the results to the
``planner_staging`` table in its own transaction. Spark hands back one count per scope. The driver
then makes the run visible in one transaction (store/plans.write_staged_run), which pages through
the staged recommended plans and copies every other staged outcome row with one statement; a failed
job leaves only staged rows, which nothing reads and the driver deletes. The run hands back an
:class:`OutcomeTally`, not a line per group beyond :data:`KEPT_OUTCOME_LINES`.

Why read in the executors rather than export the snapshot to Parquet first: every group table's
primary key starts with (snapshot_id, group_id), so a scope is an index range scan on SQLite and
PostgreSQL alike; an export would be a second full copy of the snapshot written by one process
before any planning starts, and would need storage every executor can reach (bench/pipeline.py).
"""

from __future__ import annotations

import json
import logging
import time
import uuid
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any

import sqlalchemy as sa

from rebalance_advisor.domain.advice import GroupAdvice, OutcomeLine
from rebalance_advisor.domain.decisions import FLAGGED_OUTCOMES, Thresholds
from rebalance_advisor.domain.group_planning import DOCUMENT_KEYS
from rebalance_advisor.domain.spec_documents import build_docs_from_tables
from rebalance_advisor.errors import AdvisorError, InfrastructureUnavailable

if TYPE_CHECKING:  # pragma: no cover
    from pyspark.sql import SparkSession

    from rebalance_advisor.store.planner_inputs import PlannerInputs
    from rebalance_advisor.store.planner_scope import GroupScope
    from rebalance_advisor.store.plans import StagedGroup

log = logging.getLogger(__name__)

PlanFn = Callable[[dict[str, Any], Thresholds, datetime], GroupAdvice]
SCOPE_SCHEMA = "scope int, bounds string"
COUNT_SCHEMA = "scope int, groups int"

#: staged rows older than this belong to a run that died before it could delete them
STALE_STAGING = timedelta(days=1)


class PlannerFailed(InfrastructureUnavailable):
    """Spark could not plan the snapshot; nothing was written."""


def shipped_document(doc: dict[str, Any]) -> str:
    """The JSON that crosses the Spark boundary: only the keys the planner reads (DOCUMENT_KEYS).

    The driver keeps the whole document; ``time_lags`` (per-partition, for people) is most of what
    is left out. ``capacity_sources`` is shipped: the capacity probe reads it.
    """
    return json.dumps({k: doc[k] for k in DOCUMENT_KEYS if k in doc})


def spark_cause(error: BaseException) -> str:
    """The useful line of a Spark/Py4J error (the Python exception raised on an executor)."""
    text = str(error).strip()
    lines = [line for line in text.splitlines() if line.strip()]
    for line in reversed(lines):
        if "Error" in line or "Exception" in line:
            return line.strip()[:500]
    return (lines[-1] if lines else repr(error))[:500]


def planner_documents(
    inputs: PlannerInputs, thresholds: Thresholds, group_pattern: str | None, reset: str | None
) -> list[dict[str, Any]]:
    """The documents of the groups ``inputs`` holds (both paths: the driver's and each executor's),
    each with its standing plan when a cool-down applies."""
    from rebalance_advisor.domain.lag import ResetPolicy

    docs = build_docs_from_tables(  # rows straight into the documents (spec_documents says why)
        inputs.tables,
        inputs.registry,
        group_pattern=group_pattern,
        reset=ResetPolicy.parse(reset),
        published=inputs.published,
        published_ranges=inputs.published_ranges,
    )
    for doc in docs:
        plan = inputs.standing.get(doc["group_id"])
        if plan is not None and thresholds.cooldown_minutes > 0:
            doc["standing"] = {
                "plan_id": plan.plan_id,
                "status": plan.status,
                "created_at": plan.created_at.isoformat(),
            }
    return docs


@dataclass(frozen=True)
class ScopeJob:
    """What every executor needs for its scopes (shipped with the function, by value)."""

    url: str
    snapshot_id: int
    run_key: str
    thresholds: dict[str, Any]
    now: str
    group_pattern: str | None
    reset: str | None
    replacing_airflow_run_id: str | None


def plan_scope(job: ScopeJob, index: int, scope: GroupScope, plan_fn: PlanFn) -> int:
    """Read, build, plan and stage the groups of one scope (on an executor); how many it staged.
    bench/planner_cpu.py runs the same steps in one process and times each."""
    from rebalance_advisor.gcpause import gc_paused
    from rebalance_advisor.store import db
    from rebalance_advisor.store import plans as plan_store

    thresholds = Thresholds.from_dict(job.thresholds)
    now = datetime.fromisoformat(job.now)
    with gc_paused():
        inputs = read_scope(job.url, job.snapshot_id, scope, job.replacing_airflow_run_id)
        docs = planner_documents(inputs, thresholds, job.group_pattern, job.reset)
        rows = staged_rows(docs, advise_documents(docs, thresholds, now, plan_fn))
        with db.connect(job.url) as conn:
            plan_store.stage_results(conn, job.run_key, index, rows, job.snapshot_id)
    return len(rows)


def read_scope(
    url: str, snapshot_id: int, scope: GroupScope, replacing_airflow_run_id: str | None
) -> PlannerInputs:
    """The rows of one scope's groups and their plan history (one read transaction)."""
    from rebalance_advisor.store import db
    from rebalance_advisor.store.planner_inputs import read_planner_inputs

    with db.connect(url) as conn:
        return read_planner_inputs(conn, snapshot_id, replacing_airflow_run_id, scope)


def advise_documents(
    docs: list[dict[str, Any]], thresholds: Thresholds, now: datetime, plan_fn: PlanFn
) -> list[GroupAdvice]:
    """Each document planned on the shipped keys only (:func:`planned_view`), as the driver path
    plans them."""
    return [plan_fn(planned_view(doc), thresholds, now) for doc in docs]


def planned_view(doc: dict[str, Any]) -> dict[str, Any]:
    """What the planner reads of a document: :func:`shipped_document`'s keys, without the trip through
    JSON. Documents hold only JSON's types (lists, dicts, str, int, float, None), so the trip gave the
    same values, at a twelfth of an executor's planning CPU (bench/planner_cpu.py);
    tests/unit/test_bench_pipeline_fleet.py plans a stored fleet's documents both ways."""
    return {k: doc[k] for k in DOCUMENT_KEYS if k in doc}


def staged_rows(docs: list[dict[str, Any]], advices: list[GroupAdvice]) -> list[StagedGroup]:
    """The staged row of each planned group (with its situation when the finalize re-checks it)."""
    from rebalance_advisor.domain.plan_identity import GroupSituation
    from rebalance_advisor.store import plans as plan_store

    return [
        plan_store.staged_row(
            advice, GroupSituation.of_document(doc) if plan_store.needs_finalize(advice) else None
        )
        for doc, advice in zip(docs, advices, strict=True)
    ]


def _scope_planner(job: ScopeJob, plan_fn: PlanFn):
    """The applyInPandas function; a closure so cloudpickle ships the job and ``plan_fn`` by value."""

    def plan_batch(pdf):
        import pandas as pd

        from rebalance_advisor.store import db
        from rebalance_advisor.store.planner_scope import GroupScope

        try:
            counts = [
                plan_scope(job, int(index), GroupScope.from_row(json.loads(bounds)), plan_fn)
                for index, bounds in zip(pdf["scope"], pdf["bounds"], strict=True)
            ]
        finally:
            # Spark reuses its Python workers: a pool left open would hold database sessions between
            # runs (PostgreSQL then refuses to drop the database or copy it as a template).
            db.dispose(job.url)
        return pd.DataFrame({"scope": pdf["scope"].astype("int32"), "groups": counts})

    return plan_batch


def stage_scopes(spark: SparkSession, scopes: list[GroupScope], job: ScopeJob, plan_fn: PlanFn) -> int:
    """Run :func:`plan_scope` for every scope on the executors, one Spark task per scope; groups staged."""
    import pandas as pd

    from rebalance_advisor.adapters.spark_session import add_package

    if not scopes:
        return 0
    add_package(spark)
    spark.conf.set("spark.sql.execution.arrow.pyspark.enabled", "true")
    frame = pd.DataFrame(
        {"scope": list(range(len(scopes))), "bounds": [json.dumps(s.to_row()) for s in scopes]}
    )
    try:
        df = spark.createDataFrame(frame, schema=SCOPE_SCHEMA)
        # repartition by number: one task per scope, which adaptive execution does not coalesce
        counts = (
            df.repartition(len(scopes), "scope")
            .groupBy("scope")
            .applyInPandas(_scope_planner(job, plan_fn), schema=COUNT_SCHEMA)
            .toPandas()
        )
    except Exception as error:  # Py4J/Spark errors have no common base class
        raise PlannerFailed(f"Spark planning failed, nothing written: {spark_cause(error)}") from error
    if len(counts) != len(scopes):
        raise PlannerFailed(f"Spark planned {len(counts)} of {len(scopes)} scopes; nothing written")
    return int(counts["groups"].sum())


#: outcome lines a run hands back with its result, at most (one finalize page): beyond it the run
#: reports its counts, flagged groups and plan ids, and the lines stay in the store
#: (store/plans.run_outcomes), so the driver's memory does not grow with the fleet (bench/pipeline.py)
KEPT_OUTCOME_LINES = 1_000


@dataclass
class OutcomeTally:
    """What a run reports of its outcome lines: how many, the flagged groups, the recommended plans,
    and the lines themselves while there are at most ``keep`` (None: every line)."""

    keep: int | None = KEPT_OUTCOME_LINES
    group_count: int = 0
    flagged: list[str] = field(default_factory=list)
    recommended_plan_ids: list[int] = field(default_factory=list)
    lines: list[OutcomeLine] | None = field(default_factory=list)

    def add(self, line: OutcomeLine) -> None:
        self.group_count += 1
        if line.outcome in FLAGGED_OUTCOMES:
            self.flagged.append(line.group_id)
        if line.outcome == "recommended" and line.plan_id:
            self.recommended_plan_ids.append(line.plan_id)
        if self.lines is not None:
            if self.keep is None or len(self.lines) < self.keep:
                self.lines.append(line)
            else:
                self.lines = None  # too many to hand back: the store has them

    @classmethod
    def of(cls, lines: Iterable[OutcomeLine], keep: int | None = None) -> OutcomeTally:
        tally = cls(keep)
        for line in lines:
            tally.add(line)
        return tally


@dataclass(frozen=True)
class PipelineRun:
    """What :func:`run_pipeline` did (spark_planner.PlannerRun is built from it)."""

    snapshot_id: int
    run_id: int | None
    outcomes: OutcomeTally
    timings: dict[str, float]


def run_pipeline(
    spark: SparkSession,
    url: str,
    snapshot: str | int | None,
    thresholds: Thresholds,
    *,
    params: dict[str, Any],
    airflow_run_id: str | None,
    created_by: str,
    dry_run: bool,
    now: datetime,
    plan_fn: PlanFn,
) -> PipelineRun:
    """One planner run as a pipeline (module docstring); ``params`` is what the run row records."""
    started = time.perf_counter()
    run_key = uuid.uuid4().hex
    snapshot_id, scopes = _cut(url, snapshot, run_key, spark)
    read_s = time.perf_counter() - started
    job = ScopeJob(url, snapshot_id, run_key, thresholds.to_dict(), now.isoformat(), params.get("group_pattern"),
                   params.get("reset"), airflow_run_id)  # fmt: skip
    try:
        staged = stage_scopes(spark, scopes, job, plan_fn)
    except BaseException:
        _drop_quietly(url, run_key)
        raise
    plan_s = time.perf_counter() - started - read_s
    run_id, outcomes = _finalize(
        url, run_key, staged, snapshot_id, params, now, airflow_run_id, created_by, dry_run
    )
    write_s = time.perf_counter() - started - read_s - plan_s
    timings = {
        "read_s": read_s,
        "plan_s": plan_s,
        "write_s": write_s,
        "total_s": time.perf_counter() - started,
    }
    return PipelineRun(snapshot_id, run_id, outcomes, timings)


def _cut(
    url: str, snapshot: str | int | None, run_key: str, spark: SparkSession
) -> tuple[int, list[GroupScope]]:
    """The driver's one short read: the snapshot id and its scopes (for the session's cores); stale
    staged rows go."""
    from rebalance_advisor.store import db
    from rebalance_advisor.store import plans as plan_store
    from rebalance_advisor.store.plan_models import PlannerStaging
    from rebalance_advisor.store.planner_scope import planner_scopes
    from rebalance_advisor.store.snapshots import snapshot_id_in

    with db.connect(url) as conn:
        snapshot_id = snapshot_id_in(conn, snapshot)
        if not sa.inspect(conn).has_table(PlannerStaging.__tablename__):
            shown = sa.make_url(url).render_as_string(hide_password=True)
            raise AdvisorError(
                f"database {shown} predates the planner's staging table: run `rebalance-advisor db upgrade`"
            )
        scopes = planner_scopes(conn, snapshot_id, spark.sparkContext.defaultParallelism)
        plan_store.drop_staged(conn, run_key, older_than=datetime.now(UTC) - STALE_STAGING)
    return snapshot_id, scopes


def _finalize(
    url: str,
    run_key: str,
    staged: int,
    snapshot_id: int,
    params: dict[str, Any],
    started_at: datetime,
    airflow_run_id: str | None,
    created_by: str,
    dry_run: bool,
) -> tuple[int | None, OutcomeTally]:
    """The one transaction that makes the run visible (a dry run only reads its outcomes and drops
    them: it keeps every line, nothing else holds them). A count that disagrees with the executors'
    raises inside it: nothing lands."""
    from rebalance_advisor.store import db
    from rebalance_advisor.store import plans as plan_store

    try:
        with db.connect(url) as conn:
            if dry_run:
                run_id = None
                outcomes = OutcomeTally.of(plan_store.staged_outcomes(conn, run_key))
                plan_store.drop_staged(conn, run_key)
            else:
                outcomes = OutcomeTally(KEPT_OUTCOME_LINES)
                run_id = plan_store.write_staged_run(
                    conn, run_key=run_key, snapshot_id=snapshot_id, params=params, started_at=started_at,
                    airflow_run_id=airflow_run_id, created_by=created_by, on_outcome=outcomes.add,
                )  # fmt: skip
            if outcomes.group_count != staged:
                raise PlannerFailed(
                    f"executors staged {staged} groups, {outcomes.group_count} found; nothing written"
                )
    except BaseException:
        _drop_quietly(url, run_key)
        raise
    return run_id, outcomes


def _drop_quietly(url: str, run_key: str) -> None:
    """Delete a failed run's staged rows; if the database is gone too, the next run does."""
    from rebalance_advisor.store import db
    from rebalance_advisor.store import plans as plan_store

    try:
        with db.connect(url) as conn:
            plan_store.drop_staged(conn, run_key)
    except Exception as error:  # noqa: BLE001 - best effort: the run has already failed
        log.warning("could not delete the staged rows of failed run %s: %s", run_key, error)
