"""Where an executor's CPU goes: the planner's scope work on a stored fleet, in one Python process.

``bench/pipeline.py`` times the planner end to end under Spark; on a shared machine its wall time
is mostly waiting for a core, and Spark's JVM and Python workers blur what the per-group work costs.
This runs what one executor does for its scopes (adapters/spark_pipeline.plan_scope: read the
scope's rows, build the documents, plan each group, make its staged row, stage them), on a copy of
the same stored fleet, and reports the process CPU (user + system) of each step, per group;
``--profile`` adds cProfile's top functions of the planning step, ``--dump`` writes what each group
stages (outcome line, advice JSON, situation, plan numbers; one line per group, in group order) to
compare two builds seed for seed. CPU seconds still grow with the machine's load (on two shared
cores, 20 s for the 10k fleet at load 4.5, 35 s at load 12-20): compare two builds run at the same
time (docs/benchmarks/sizing.md).

    .venv/bin/python bench/planner_cpu.py --size 10000                 # every scope of the 10k fleet
    .venv/bin/python bench/planner_cpu.py --size 10000 --scopes 2 --profile
    .venv/bin/python bench/planner_cpu.py --size 10000 --dump /tmp/a.jsonl   # then diff two dumps

Writes ``bench/results/planner_cpu.json`` (``--out``).
"""

from __future__ import annotations

import argparse
import contextlib
import cProfile
import inspect
import io
import json
import os
import pstats
import shutil
import sys
import tempfile
import time
import uuid
from datetime import timedelta
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "bench"))

STEPS = ("read", "documents", "plan", "staged_rows", "stage", "finalize")


class Steps:
    """Process CPU seconds per step (``time.process_time``: this process, every thread)."""

    def __init__(self) -> None:
        self.cpu = dict.fromkeys(STEPS, 0.0)
        self._at = time.process_time()

    def start(self) -> None:
        self._at = time.process_time()

    def mark(self, step: str) -> None:
        now = time.process_time()
        self.cpu[step] += now - self._at
        self._at = now


def newest_scopes(url: str):
    """The newest snapshot's id, its time and its scopes, cut as bench/pipeline.py's ``local[2]`` run cuts them."""
    import sqlalchemy as sa
    from rebalance_advisor.domain.timestamps import assume_utc
    from rebalance_advisor.store import db
    from rebalance_advisor.store.models import SnapshotRow
    from rebalance_advisor.store.planner_scope import planner_scopes

    with db.connect(url) as conn:
        snapshot_id, taken_at = conn.execute(
            sa.select(SnapshotRow.id, SnapshotRow.taken_at).order_by(SnapshotRow.id.desc()).limit(1)
        ).one()
        return snapshot_id, assume_utc(taken_at), planner_scopes(conn, snapshot_id, 2)


def run_scopes(
    url: str, scopes: int | None, profiler: cProfile.Profile | None, dump, finalize: bool = False
) -> tuple[Steps, dict]:
    """Plan the newest snapshot's scopes (all, or the first ``scopes``) as an executor does, step by
    step (adapters/spark_pipeline.plan_scope's steps), then with ``finalize`` make the run visible as
    the driver does (spark_pipeline._finalize); returns the step times and the outcome counts."""
    from rebalance_advisor.adapters import spark_pipeline as sp
    from rebalance_advisor.domain.decisions import Thresholds
    from rebalance_advisor.domain.group_planning import plan_group
    from rebalance_advisor.gcpause import gc_paused
    from rebalance_advisor.store import db
    from rebalance_advisor.store import plans as plan_store

    snapshot_id, taken_at, cut = newest_scopes(url)
    thresholds, now, run_key = Thresholds(), taken_at + timedelta(seconds=30), uuid.uuid4().hex
    steps, outcomes, profiler = Steps(), {}, profiler or _NoProfile()
    with gc_paused():  # as plan_scope runs
        for index, scope in enumerate(cut[:scopes]):
            steps.start()
            inputs = sp.read_scope(url, snapshot_id, scope, None)
            steps.mark("read")
            docs = sp.planner_documents(inputs, thresholds, None, None)
            steps.mark("documents")
            profiler.enable()
            advices = sp.advise_documents(docs, thresholds, now, plan_group)
            profiler.disable()
            steps.mark("plan")
            rows = sp.staged_rows(docs, advices)
            steps.mark("staged_rows")
            with db.connect(url) as conn:
                _stage(plan_store, conn, run_key, index, rows, snapshot_id)
            steps.mark("stage")
            _note(rows, outcomes, dump)
    if finalize:
        steps.start()
        with _profiled(profiler):  # the profile then holds both: plan_group's and _finalize's subtrees
            params = {**thresholds.to_dict(), "group_pattern": None, "reset": None}
            sp._finalize(url, run_key, sum(outcomes.values()), snapshot_id, params, now, None, "bench", False)
        steps.mark("finalize")
    return steps, outcomes


@contextlib.contextmanager
def _profiled(profiler):
    profiler.enable()
    try:
        yield
    finally:
        profiler.disable()


def _stage(plan_store, conn, run_key: str, index: int, rows, snapshot_id: int) -> None:
    """``stage_results`` of this build (builds before staged plans took no snapshot id: compared side
    by side with PYTHONPATH pointing at an older build's include/)."""
    if "snapshot_id" in inspect.signature(plan_store.stage_results).parameters:
        plan_store.stage_results(conn, run_key, index, rows, snapshot_id)
    else:
        plan_store.stage_results(conn, run_key, index, rows)


class _NoProfile:
    def enable(self) -> None:
        return None

    def disable(self) -> None:
        return None


def _note(rows, outcomes: dict, dump) -> None:
    """Count the outcomes; with ``dump``, one JSON line per group (what it stages)."""
    for row in rows:
        outcomes[row.line.outcome] = outcomes.get(row.line.outcome, 0) + 1
        if dump is not None:
            line = [row.line.to_dict(), row.result, row.situation, row.numbers]
            dump.write(json.dumps(line, sort_keys=True, default=str) + "\n")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--size", type=int, default=10000, help="stored fleet of bench/pipeline.py")
    parser.add_argument("--scopes", type=int, default=None, help="only the first N scopes (default: all)")
    parser.add_argument("--profile", action="store_true", help="cProfile the planning step")
    parser.add_argument("--finalize", action="store_true", help="then finalize the run as the driver does")
    parser.add_argument("--dump", default=None, help="write each group's results here (JSON lines)")
    parser.add_argument("--cache", default=None, help="where the stored fleets are (bench/pipeline.py)")
    parser.add_argument("--fleet", default=None, help="a stored fleet's SQLite file instead of --size's")
    parser.add_argument("--out", default="planner_cpu.json", help="file name under bench/results")
    args = parser.parse_args(argv)
    import pipeline

    home = Path(os.environ.get("REBALANCE_ADVISOR_HOME", Path.home() / ".rebalance-advisor"))
    cache = Path(args.cache) if args.cache else home / "bench-fleets"
    cache.mkdir(parents=True, exist_ok=True)
    fleet = Path(args.fleet) if args.fleet else pipeline.stored_fleet(args.size, cache)
    profiler = cProfile.Profile() if args.profile else None
    with tempfile.TemporaryDirectory(prefix="rebalance-advisor-cpu-") as tmp:
        work = Path(tmp) / "fleet.db"
        shutil.copy(fleet, work)  # staging writes into a copy: the stored fleet stays as built
        url = f"sqlite:///{work}"
        from rebalance_advisor import store

        store.upgrade(url)
        before = load_average()
        with open(args.dump, "w") if args.dump else _nothing() as dump:
            steps, outcomes = run_scopes(url, args.scopes, profiler, dump, args.finalize)
        after = load_average()
    groups = sum(outcomes.values())
    report(args, steps, outcomes, groups, before, after, profiler)
    return 0


def load_average() -> str:
    """The 1, 5 and 15 minute load averages (``uptime``'s), read without a child process."""
    return ", ".join(f"{x:.2f}" for x in os.getloadavg())


class _nothing:
    def __enter__(self):
        return None

    def __exit__(self, *exc) -> None:
        return None


def report(args, steps: Steps, outcomes: dict, groups: int, before: str, after: str, profiler) -> None:
    """Print the table (and the profile), write the JSON."""
    total = sum(steps.cpu.values())
    print(
        f"planner scope work in one process, {args.fleet or f'the {args.size}-group fleet'}: {groups} groups planned"
    )
    print(f"{'step':>12} {'CPU s':>8} {'ms/group':>9} {'share':>6}")
    for step, cpu in [*steps.cpu.items(), ("total", total)]:
        print(f"{step:>12} {cpu:>8.2f} {1000 * cpu / max(groups, 1):>9.3f} {cpu / max(total, 1e-9):>6.1%}")
    print("outcomes:", dict(sorted(outcomes.items())))
    print(
        "load before:",
        before.split("load average:")[-1].strip(),
        "after:",
        after.split("load average:")[-1].strip(),
    )
    top = None
    if profiler is not None:
        text = io.StringIO()
        stats = pstats.Stats(profiler, stream=text)
        stats.sort_stats("tottime").print_stats(30)
        stats.sort_stats("cumulative").print_stats(40)
        top = text.getvalue()
        print(top)
    out = ROOT / "bench" / "results" / args.out
    out.parent.mkdir(parents=True, exist_ok=True)
    doc = {"fleet": args.fleet or args.size, "groups": groups, "cpu_s": steps.cpu, "total_cpu_s": total, "outcomes": outcomes,
           "load_before": before, "load_after": after}  # fmt: skip
    out.write_text(json.dumps(doc, indent=2) + "\n")
    print(f"wrote {out}")


if __name__ == "__main__":
    sys.exit(main())
