"""The planner job: one snapshot -> every group planned in Spark -> one transaction makes it visible.

Two paths, one result (tests/integration/test_planner_pipeline.py compares them):

- the pipeline (default; adapters/spark_pipeline.py): executors read their own groups' rows, build
  the documents, plan and stage the results; the driver only cuts the snapshot into scopes and makes
  the run visible in one transaction, so its memory does not grow with the fleet;
- the driver path (:func:`plan_documents`; runs that let ``key_range`` share keys, whose key sampling
  picks the heaviest partitions of the whole run within one budget): the driver reads the snapshot
  and the plan history, builds one document per group, and hands them to Spark as rows
  ``(bucket, group_id, doc)``; ``groupBy("bucket").applyInPandas`` runs
  :func:`~rebalance_advisor.domain.group_planning.plan_group` a few hundred groups per call
  (:func:`bucket_count` says why); the results come back to the driver, which writes the run in ONE
  transaction.

Either way a Spark failure raises before anything becomes visible: a run lands whole or not at all.
Both use Arrow, and the package reaches the executors as a py-file zip (no shared disk).
Entry point: :func:`run_planner` (takes a SparkSession: the DAG's ``@task.pyspark`` session, the
CLI's ``local[2]`` one, or a cluster's).
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from rebalance_advisor.adapters.spark_pipeline import (  # noqa: F401 - PlannerFailed: callers catch it here
    OutcomeTally,
    PlannerFailed,
    planner_documents,
    shipped_document,
    spark_cause,
)
from rebalance_advisor.domain.advice import GroupAdvice, OutcomeLine
from rebalance_advisor.domain.decisions import Thresholds
from rebalance_advisor.domain.group_planning import plan_group
from rebalance_advisor.errors import AdvisorError
from rebalance_advisor.gcpause import gc_paused

if TYPE_CHECKING:  # pragma: no cover
    from pyspark.sql import SparkSession


log = logging.getLogger(__name__)

RESULT_SCHEMA = "group_id string, result string"
PlanFn = Callable[[dict[str, Any], Thresholds, datetime], GroupAdvice]


@dataclass
class PlannerRun:
    """What a run did: the ids, how many groups it planned, the flagged ones and the recommended
    plans, where the time went, and one compact outcome row per group unless there were more than
    ``spark_pipeline.KEPT_OUTCOME_LINES`` (``outcomes`` None: read them with
    ``store.plans.run_outcomes(run_id)``; a dry run keeps them all)."""

    snapshot_id: int
    run_id: int | None  # None for a dry run (nothing written)
    outcomes: list[OutcomeLine] | None
    timings: dict[str, float] = field(default_factory=dict)
    dry_run: bool = False
    group_count: int = 0
    flagged: list[str] = field(default_factory=list)
    recommended_plan_ids: list[int] = field(default_factory=list)

    @classmethod
    def of(
        cls,
        snapshot_id: int,
        run_id: int | None,
        tally: OutcomeTally,
        timings: dict[str, float],
        dry_run: bool,
    ) -> PlannerRun:
        return cls(snapshot_id, run_id, tally.lines, timings, dry_run, tally.group_count, tally.flagged,
                   tally.recommended_plan_ids)  # fmt: skip

    def to_dict(self) -> dict[str, Any]:
        """JSON-able (the DAG passes it on through XCom)."""
        return asdict(self)


def _group_planner(thresholds: dict[str, Any], now_iso: str, plan_fn: PlanFn):
    """The applyInPandas function; a closure so cloudpickle ships it (and its settings) by value."""

    def plan_batch(pdf):
        import pandas as pd

        from rebalance_advisor.domain.decisions import Thresholds as _Thresholds

        settings = _Thresholds.from_dict(thresholds)
        now = datetime.fromisoformat(now_iso)
        results = [plan_fn(json.loads(doc), settings, now).to_json() for doc in pdf["doc"]]
        return pd.DataFrame({"group_id": pdf["group_id"].astype(str), "result": results})

    return plan_batch


def bucket_count(groups: int, parallelism: int) -> int:
    """How many ``applyInPandas`` calls share the groups: four per core, at most one per group.

    Why not one call per group (``groupBy("group_id")``): Spark's grouped map costs about a
    millisecond per key in the Python worker (a pandas frame in, an Arrow batch out) — measured
    8.5 s for 10,000 trivial groups under ``local[2]`` against 0.5 s for 8 keys — more than most
    groups take to plan. Each group is still planned on its own by the same function; a bucket is
    only how many of them travel together. Four per core leaves room to balance uneven groups.
    """
    return max(1, min(groups, 4 * max(parallelism, 1)))


def plan_documents(
    spark: SparkSession,
    docs: Sequence[dict[str, Any]],
    thresholds: Thresholds,
    now: datetime,
    plan_fn: PlanFn = plan_group,
) -> list[GroupAdvice]:
    """Plan every document in Spark (groups bucketed, see :func:`bucket_count`); results sorted by group."""
    import pandas as pd

    from rebalance_advisor.adapters.spark_session import add_package

    if not docs:
        return []
    add_package(spark)
    spark.conf.set("spark.sql.execution.arrow.pyspark.enabled", "true")
    buckets = bucket_count(len(docs), spark.sparkContext.defaultParallelism)
    frame = pd.DataFrame(
        {
            "bucket": [i % buckets for i in range(len(docs))],
            "group_id": [d["group_id"] for d in docs],
            "doc": [shipped_document(d) for d in docs],
        }
    )
    try:
        df = spark.createDataFrame(frame, schema="bucket int, group_id string, doc string")
        # repartition by number: one task per bucket, which adaptive execution does not coalesce
        # (it would merge small shuffle partitions into one task, on one core).
        planned = (
            df.repartition(buckets, "bucket")
            .groupBy("bucket")
            .applyInPandas(
                _group_planner(thresholds.to_dict(), now.isoformat(), plan_fn), schema=RESULT_SCHEMA
            )
        )
        rows = planned.toPandas()
    except Exception as error:  # Py4J/Spark errors have no common base class
        raise PlannerFailed(f"Spark planning failed, nothing written: {spark_cause(error)}") from error
    results = [GroupAdvice.from_json(r) for r in rows["result"]]
    if len(results) != len(docs):
        raise PlannerFailed(f"Spark returned {len(results)} results for {len(docs)} groups; nothing written")
    return sorted(results, key=lambda r: r.group_id)


def run_planner(
    spark: SparkSession,
    url: str | None = None,
    snapshot: str | int | None = "latest",
    thresholds: Thresholds | None = None,
    *,
    group_pattern: str | None = None,
    reset: str | None = None,
    airflow_run_id: str | None = None,
    created_by: str = "cli",
    dry_run: bool = False,
    publish_mode: str = "recommend",
    now: datetime | None = None,
    plan_fn: PlanFn = plan_group,
    kafka_config: Mapping[str, Any] | None = None,
    pipeline: bool = True,
) -> PlannerRun:
    """Plan one snapshot (``latest`` or an id) and store the run; see the module docstring.

    ``plan_fn`` is the per-group function (tests pass one that fails mid-job to prove nothing
    lands). ``reset`` is the lag module's reset policy (``"latest"``, ``"orders-.*=earliest,..."``).
    Unknown snapshots raise AdvisorError; an empty snapshot gives a run with no outcomes.
    ``kafka_config`` (client settings with ``bootstrap.servers``) is needed only when the run lets
    ``key_range`` share keys: the driver then samples the candidate partitions' keys (driver path).
    ``pipeline=False`` takes the driver path for any run (bench/pipeline.py compares the two).
    """
    from rebalance_advisor.settings import database_url

    thresholds = thresholds or Thresholds()
    sharing = _key_sharing(thresholds, kafka_config)
    params = {**thresholds.to_dict(), "group_pattern": group_pattern, "reset": reset,
              "publish_mode": publish_mode, "dry_run": dry_run}  # fmt: skip
    started_at = now or datetime.now(UTC)
    if (
        pipeline and not sharing
    ):  # GC stays on in this driver: it holds one page at a time (executors pause it)
        from rebalance_advisor.adapters.spark_pipeline import run_pipeline

        done = run_pipeline(
            spark, url or database_url(), snapshot, thresholds, params=params, airflow_run_id=airflow_run_id,
            created_by=created_by, dry_run=dry_run, now=started_at, plan_fn=plan_fn,
        )  # fmt: skip
        run = PlannerRun.of(done.snapshot_id, done.run_id, done.outcomes, done.timings, dry_run)
    else:
        with gc_paused():
            run = _run_in_driver(
                spark, url, snapshot, thresholds, params, airflow_run_id=airflow_run_id, created_by=created_by,
                now=started_at, plan_fn=plan_fn, kafka_config=kafka_config if sharing else None,
            )  # fmt: skip
    log.info("planned snapshot %s: %d groups, %d flagged, run %s (%.2f s)", run.snapshot_id, run.group_count,
             len(run.flagged), run.run_id, run.timings["total_s"])  # fmt: skip
    return run


def _key_sharing(thresholds: Thresholds, kafka_config: Mapping[str, Any] | None) -> bool:
    """Whether the run lets key_range share keys (then it samples keys: the Kafka settings are needed)."""
    sharing = thresholds.key_sharing and "key_range" in thresholds.strategies
    if sharing and kafka_config is None:
        raise AdvisorError(
            "key sharing (key_range with --key-sharing) samples record keys: give the Kafka "
            "connection (--bootstrap-servers, or the DAG's kafka_conn_id)"
        )
    return sharing


def _run_in_driver(
    spark: SparkSession,
    url: str | None,
    snapshot: str | int | None,
    thresholds: Thresholds,
    params: dict[str, Any],
    *,
    airflow_run_id: str | None,
    created_by: str,
    now: datetime,
    plan_fn: PlanFn,
    kafka_config: Mapping[str, Any] | None,
) -> PlannerRun:
    """The driver path (module docstring): read, build and write in the driver, plan in Spark."""
    started = time.perf_counter()
    dry_run = bool(params["dry_run"])
    snapshot_id, docs = _driver_documents(url, snapshot, thresholds, params, airflow_run_id, kafka_config)
    read_s = time.perf_counter() - started
    results = plan_documents(spark, docs, thresholds, now, plan_fn)
    plan_s = time.perf_counter() - started - read_s
    run_id = None
    plan_ids: dict[str, int] = {}
    if not dry_run:  # unit of work 2 of 2: one write transaction, re-checked under the plan-write lock
        from rebalance_advisor.domain.plan_identity import GroupSituation
        from rebalance_advisor.store import db
        from rebalance_advisor.store import plans as plan_store

        with db.connect(url) as conn:
            run_id, plan_ids, results = plan_store.write_run(
                conn, snapshot_id=snapshot_id, results=results, params=params, started_at=now,
                airflow_run_id=airflow_run_id, created_by=created_by,
                situations={d["group_id"]: GroupSituation.of_document(d) for d in docs},
            )  # fmt: skip
    write_s = time.perf_counter() - started - read_s - plan_s
    outcomes = [OutcomeLine.of(r, plan_ids.get(r.group_id)) for r in results]
    timings = {
        "read_s": read_s,
        "plan_s": plan_s,
        "write_s": write_s,
        "total_s": time.perf_counter() - started,
    }
    return PlannerRun.of(snapshot_id, run_id, OutcomeTally.of(outcomes), timings, dry_run)


def _driver_documents(
    url: str | None,
    snapshot: str | int | None,
    thresholds: Thresholds,
    params: dict[str, Any],
    airflow_run_id: str | None,
    kafka_config: Mapping[str, Any] | None,
) -> tuple[int, list[dict[str, Any]]]:
    """(snapshot id, every group's document) read in the driver, with bounded key samples for
    key_range when ``kafka_config`` is given (domain/key_range_advice.py)."""
    from rebalance_advisor.store import db, static_members_table
    from rebalance_advisor.store.planner_inputs import read_planner_inputs

    # Unit of work 1 of 2: one read transaction (store/planner_inputs.py says why not one for all).
    with db.connect(url) as conn:
        inputs = read_planner_inputs(conn, snapshot, airflow_run_id)
        key_sharers = static_members_table.key_sharing_members_by_group(conn) if kafka_config else {}
    docs = planner_documents(inputs, thresholds, params["group_pattern"], params["reset"])
    if kafka_config is not None:
        from rebalance_advisor.adapters.key_sampling import attach_key_samples

        attach_key_samples(docs, thresholds, key_sharers, kafka_config)
    return inputs.snapshot_id, docs
