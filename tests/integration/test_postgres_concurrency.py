"""Two advisor runs at once on one PostgreSQL database: nothing duplicated or lost, one recommendation.

Each run is its own OS process with its own Spark (``local[1]``) and the real planner, as two
Airflow workers would be. A file barrier inside the Spark planning step makes the race certain
rather than lucky: both runs have read the plan history (the cool-down reference) before either
writes, so the write path alone must keep them apart.
"""

from __future__ import annotations

import json
import multiprocessing
import traceback
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa

pytestmark = [pytest.mark.postgres, pytest.mark.spark, pytest.mark.kafka, pytest.mark.slow]

RUN_TIMEOUT_S = 420


def _barrier_plan_fn(barrier_dir: str, name: str, parties: int):
    """The real per-group planner, entered only once every run has reached Spark planning."""

    # Nested so cloudpickle ships it by value: executors cannot import this test module.
    def plan(doc: dict[str, Any], thresholds: Any, now: Any) -> dict[str, Any]:
        import time
        from pathlib import Path

        from rebalance_advisor.domain.group_planning import plan_group

        folder = Path(barrier_dir)
        (folder / name).touch()
        deadline = time.monotonic() + 300
        while len(list(folder.iterdir())) < parties:
            if time.monotonic() > deadline:
                raise TimeoutError(f"{name}: the other advisor run never reached planning")
            time.sleep(0.05)
        return plan_group(doc, thresholds, now)

    return plan


def _advise(url: str, snapshot_id: int, airflow_run_id: str, barrier_dir: str, name: str, out: str) -> None:
    """Child process: one advisor run (own Spark, real planner); result or traceback to ``out``."""
    from rebalance_advisor.adapters.spark_planner import run_planner
    from rebalance_advisor.adapters.spark_session import spark_session
    from rebalance_advisor.domain.decisions import Thresholds

    try:
        spark = spark_session("local[1]", f"rebalance-advisor-{name}", {"spark.sql.shuffle.partitions": "2"})
        try:
            run = run_planner(
                spark,
                url,
                snapshot_id,
                Thresholds(cooldown_minutes=30),  # the cool-down is what this test is about (off by default)
                airflow_run_id=airflow_run_id,
                created_by=name,
                plan_fn=_barrier_plan_fn(barrier_dir, name, 2),
            )
        finally:
            spark.stop()
        Path(out).write_text(json.dumps({"ok": True, "run": run.to_dict()}))
    except BaseException:
        Path(out).write_text(json.dumps({"ok": False, "error": traceback.format_exc()}))
        raise


def _two_runs_at_once(
    url: str, snapshot_id: int, run_ids: tuple[str, str], work: Path, hold_writes: bool = False
) -> list[dict]:
    """Start both runs in spawned processes, wait, and return their results (failing on any error).

    ``hold_writes``: the test holds ``advisor_runs`` in SHARE mode (reads pass, writes wait) until
    both runs are blocked in their write transactions, then lets them go at once, so their writes
    overlap instead of finishing milliseconds apart.
    """
    ctx = multiprocessing.get_context("spawn")  # no forked JVM/engine state from the test process
    barrier = work / "barrier"
    barrier.mkdir()
    jobs = []
    holder = sa.create_engine(url).connect() if hold_writes else None
    if holder is not None:
        holder.execute(sa.text("LOCK TABLE advisor_runs IN SHARE MODE"))
    for i, airflow_run_id in enumerate(run_ids):
        out = work / f"run-{i}.json"
        proc = ctx.Process(
            target=_advise, args=(url, snapshot_id, airflow_run_id, str(barrier), f"run-{i}", str(out))
        )
        proc.start()
        jobs.append((proc, out))
    results = []
    try:
        if holder is not None:
            _wait_until_both_writers_wait(holder, [p for p, _ in jobs])
            holder.commit()
        for proc, out in jobs:
            proc.join(RUN_TIMEOUT_S)
            assert proc.exitcode is not None, f"advisor run {proc.pid} still running after {RUN_TIMEOUT_S}s"
            result = json.loads(out.read_text()) if out.exists() else {"ok": False, "error": "no output"}
            assert proc.exitcode == 0 and result["ok"], result.get("error")
            results.append(result["run"])
    finally:
        for proc, _ in jobs:  # only on failure: a child still running is stopped (its JVM follows)
            if proc.is_alive():
                proc.kill()
                proc.join(30)
        if holder is not None:
            holder.close()
            holder.engine.dispose()
    return results


def _wait_until_both_writers_wait(holder: sa.Connection, procs: list, timeout: float = RUN_TIMEOUT_S) -> None:
    """Poll pg_stat_activity until two other sessions of this database wait on a lock."""
    import time

    deadline = time.monotonic() + timeout
    query = sa.text(
        "SELECT COUNT(*) FROM pg_stat_activity WHERE datname = current_database() "
        "AND wait_event_type = 'Lock' AND pid <> pg_backend_pid()"
    )
    # Activity is snapshotted per transaction, and the holder stays in one: clear it on every poll.
    while (
        holder.execute(sa.text("SELECT pg_stat_clear_snapshot()")) and holder.execute(query).scalar_one() < 2
    ):
        assert all(p.is_alive() for p in procs), "an advisor run ended before reaching its write"
        assert time.monotonic() < deadline, "the advisor runs never both reached their writes"
        time.sleep(0.2)


def _rows(url: str, sql: str) -> list[tuple]:
    from rebalance_advisor.store import db

    with db.connect(url) as conn:
        return [tuple(r) for r in conn.execute(sa.text(sql))]


def _demo_db(postgres_server, kafka_bootstrap: str, name: str) -> tuple[str, int, list[str]]:
    """A fresh PostgreSQL plan database with one real snapshot of the demo workload."""
    from rebalance_advisor.adapters.kafka_snapshot import collect
    from rebalance_advisor.domain.spec_documents import build_group_docs
    from rebalance_advisor.store import db
    from rebalance_advisor.store.snapshots import load_snapshot, write_snapshot

    url = postgres_server.create_database(name)
    db.upgrade(url)
    snapshot_id = write_snapshot(collect(kafka_bootstrap), url)
    groups = sorted(d["group_id"] for d in build_group_docs(load_snapshot(snapshot_id, url)))
    return url, snapshot_id, groups


def _check_run_whole(url: str, run_id: int, groups: list[str]) -> dict[str, dict]:
    """One outcome per group, one plan per planned group, each plan with its assignments and first transition."""
    outcomes = _rows(url, f"SELECT group_id, outcome, plan_id FROM group_outcomes WHERE run_id = {run_id}")
    assert sorted(g for g, _, _ in outcomes) == groups, "every group has exactly one outcome per run"
    plans = {
        pid: (g, status)
        for pid, g, status in _rows(url, f"SELECT id, group_id, status FROM plans WHERE run_id = {run_id}")
    }
    assert sorted(pid for _, _, pid in outcomes if pid is not None) == sorted(plans), (
        "outcomes name the run's plans"
    )
    for group, _, pid in outcomes:
        if pid is not None:
            assert plans[pid][0] == group
    by_group: dict[str, dict] = {}
    for pid, (group, status) in plans.items():
        parts = _rows(url, f"SELECT topic, partition FROM plan_assignments WHERE plan_id = {pid}")
        assert parts and len(parts) == len(set(parts)), f"plan {pid}: assignments missing or duplicated"
        history = _rows(url, f"SELECT from_status, to_status FROM plan_transitions WHERE plan_id = {pid}")
        assert history == [(None, status)], f"plan {pid}: one first transition, got {history}"
        by_group[group] = {"plan_id": pid, "status": status, "assignments": sorted(parts)}
    outcome_of = {g: o for g, o, _ in outcomes}
    for group in by_group:
        by_group[group]["outcome"] = outcome_of[group]
    return by_group


def test_two_runs_at_once_record_everything_and_one_recommendation(
    postgres_server, kafka_bootstrap: str, demo_groups, tmp_path: Path
) -> None:
    url, snapshot_id, groups = _demo_db(postgres_server, kafka_bootstrap, "concurrent_runs")
    _two_runs_at_once(url, snapshot_id, ("scheduled__a", "manual__b"), tmp_path)

    runs = _rows(url, "SELECT id, airflow_run_id FROM advisor_runs ORDER BY id")
    assert sorted(r for _, r in runs) == ["manual__b", "scheduled__a"]
    first, second = (_check_run_whole(url, run_id, groups) for run_id, _ in runs)
    # Cool-down: per group, exactly one recommendation was ever made (no second one, none superseded).
    recommended = Counter(
        g
        for (g,) in _rows(
            url,
            "SELECT p.group_id FROM plan_transitions t JOIN plans p ON p.id = t.plan_id "
            "WHERE t.to_status = 'recommended'",
        )
    )
    assert recommended, "the demo workload must flag at least one group (kip-example)"
    assert "kip-example" in recommended
    assert max(recommended.values()) == 1, (
        f"two recommendations for one group in one cool-down: {recommended}"
    )
    assert _rows(url, "SELECT COUNT(*) FROM plan_transitions WHERE to_status = 'superseded'") == [(0,)]
    (first_run, _), (second_run, _) = runs
    for group in recommended:
        # the run that lost the race keeps the decision and its reason, not a second plan
        holders = [
            (plans, other) for plans, other in ((first, second_run), (second, first_run)) if group in plans
        ]
        assert len(holders) == 1, (group, first.get(group), second.get(group))
        ((plans, loser_run),) = holders
        winner = plans[group]
        assert (winner["status"], winner["outcome"]) == ("recommended", "recommended")
        [(outcome, plan_id, reason)] = _rows(
            url,
            f"SELECT outcome, plan_id, reason FROM group_outcomes WHERE run_id = {loser_run} AND group_id = '{group}'",
        )
        assert (outcome, plan_id) == ("held_by_cooldown", None), group
        assert reason.startswith(f"cool-down: plan {winner['plan_id']} (recommended)"), reason


def test_two_attempts_of_one_airflow_run_leave_one_run(
    postgres_server, kafka_bootstrap: str, demo_groups, tmp_path: Path
) -> None:
    """A retry racing a still-running attempt (same run id): the later write replaces, nothing doubles."""
    from rebalance_advisor.adapters.spark_planner import run_planner

    from tests._planner import live_spark

    url, snapshot_id, groups = _demo_db(postgres_server, kafka_bootstrap, "concurrent_attempts")
    results = _two_runs_at_once(
        url, snapshot_id, ("scheduled__same", "scheduled__same"), tmp_path, hold_writes=True
    )
    surviving = _rows(url, "SELECT id FROM advisor_runs WHERE airflow_run_id = 'scheduled__same'")
    assert len(surviving) == 1 and _rows(url, "SELECT COUNT(*) FROM advisor_runs") == [(1,)]
    assert surviving[0][0] in {r["run_id"] for r in results}
    plans = _check_run_whole(url, surviving[0][0], groups)

    def totals() -> tuple:
        return tuple(
            _rows(url, f"SELECT COUNT(*) FROM {table}")[0][0]
            for table in ("advisor_runs", "plans", "plan_assignments", "plan_transitions", "group_outcomes")
        )

    # Nothing of the replaced attempt is left behind.
    counted = totals()
    assert counted == (
        1,
        len(plans),
        sum(len(p["assignments"]) for p in plans.values()),
        len(plans),
        len(groups),
    ), counted
    assert [s for s in (p["status"] for p in plans.values()) if s == "recommended"], (
        "kip-example is recommended"
    )

    # A third attempt, after both: replaces again, same totals and the same outcomes (its own
    # earlier attempt does not hold it back in cool-down).
    outcomes = sorted(_rows(url, "SELECT group_id, outcome FROM group_outcomes"))
    again = run_planner(live_spark(), url, snapshot_id, airflow_run_id="scheduled__same", created_by="retry")
    assert totals() == counted
    assert sorted(_rows(url, "SELECT group_id, outcome FROM group_outcomes")) == outcomes
    assert sorted((o.group_id, o.outcome) for o in again.outcomes) == outcomes
