"""The real scheduler: ``rebalance-advisor dev airflow start``, runs through Airflow's own REST API, ``stop``.

One Airflow (``airflow standalone``, LocalExecutor), a local broker and the demo workload, started
by the CLI into a temporary ``REBALANCE_ADVISOR_HOME`` on free ports, with the live group (``--live``,
what ``make airflow LIVE=1`` passes: its first snapshot must hold the live group's traffic). The snapshot DAG runs on its
schedule (a cron timetable without catchup runs once on unpause); its Asset event must start the
advisor by itself; the advisor is then triggered through ``/api/v2`` with a valid conf and with
bad ones (HTTP 400, no run created); the plan table is read back. Then a stop while an advisor
run plans and a new start: that run is failed at start and a new run completes. The final ``stop``
must leave no process of the stack behind (by process group, by the stack's environment marker in
/proc, and its PostgreSQL stopped). Both tests share one stack (a start costs a minute or more).
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest
import sqlalchemy as sa
from rebalance_advisor.devtools import local_postgres

# the scheduler test: 2 min 42 s on an idle 2-core machine, 6 min at load average 12, 24 min at load
# average 40 (with the stack's start, which the first test's timeout counts); the restart test adds a
# stop, a start and one more advisor run. The limit leaves room for more load.
pytestmark = [
    pytest.mark.airflow_scheduler,
    pytest.mark.kafka,
    pytest.mark.spark,
    pytest.mark.slow,
    pytest.mark.timeout(2400),
]

REPO = Path(__file__).resolve().parents[2]
CLI = [sys.executable, "-m", "rebalance_advisor.cli"]
ADVISOR = "kafka_rebalance_advisor"
SNAPSHOT = "kafka_offsets_snapshot"


def _free_ports(count: int) -> list[int]:
    sockets = [socket.socket() for _ in range(count)]
    try:
        for s in sockets:
            s.bind(("127.0.0.1", 0))
        return [s.getsockname()[1] for s in sockets]
    finally:
        for s in sockets:
            s.close()


def _stack_env(home: Path) -> dict[str, str]:
    from rebalance_advisor import settings

    env = {k: v for k, v in os.environ.items() if not k.startswith(("AIRFLOW", "KAFKA_BOOTSTRAP"))}
    env.pop("REBALANCE_ADVISOR_DB_URL", None)
    env["REBALANCE_ADVISOR_CACHE"] = str(settings.cache_dir())  # the jars are there already
    env["REBALANCE_ADVISOR_HOME"] = str(home)
    return env


def _wait_for(what: str, find, timeout: float, interval: float = 2.0, last: list | None = None):
    deadline = time.monotonic() + timeout
    while (found := find()) is None:
        assert time.monotonic() < deadline, f"{what} did not happen within {timeout:.0f} s; last: {last}"
        time.sleep(interval)
    return found


def _status_up(env: dict[str, str], said: list[str]) -> str | None:
    done = subprocess.run([*CLI, "dev", "airflow", "status"], env=env, capture_output=True, text=True)
    assert done.returncode in (0, 3), done.stderr
    said[:] = [done.stdout]
    return done.stdout if done.returncode == 0 else None


def _manual_runs(api) -> set[str]:
    return {r["dag_run_id"] for r in api.runs(ADVISOR) if r["run_type"] == "manual"}


def _finished(api, dag_id: str, run_type: str):
    runs = [r for r in api.runs(dag_id) if r["run_type"] == run_type]
    done = [r for r in runs if r["state"] in ("success", "failed")]
    return done[0] if done else None


@dataclass
class Stack:
    """The stack one module's tests share (one start costs a minute or more on 2 cores)."""

    home: Path
    env: dict[str, str]
    ports: list[int]
    started: subprocess.CompletedProcess
    timings: dict[str, float] = field(default_factory=dict)

    @property
    def paths(self):
        from rebalance_advisor.devtools import airflow_stack

        return airflow_stack.StackPaths(self.home)

    def start(self) -> subprocess.CompletedProcess:
        api_port, kafka_port, worker_log, trigger_log, pg_port = self.ports
        command = [
            *CLI,
            "dev",
            "airflow",
            "start",
            "--port",
            str(api_port),
            "--kafka-port",
            str(kafka_port),
            "--worker-log-port",
            str(worker_log),
            "--trigger-log-port",
            str(trigger_log),
            "--postgres-port",
            str(pg_port),
            "--live",
            "--timeout",
            "900",
        ]  # fmt: skip  (the default 300 s is short at load average 30)
        return subprocess.run(command, env=self.env, capture_output=True, text=True, timeout=900)

    def stop(self) -> subprocess.CompletedProcess:
        return subprocess.run(
            [*CLI, "dev", "airflow", "stop"], env=self.env, capture_output=True, text=True, timeout=180
        )

    def api(self):
        from rebalance_advisor.devtools import airflow_stack

        state = airflow_stack.read_state(self.paths)
        assert state is not None
        # patient: at load average 35 the API server's one worker left a login unanswered for 3 x 60 s
        password = airflow_stack.admin_password(self.paths)
        return airflow_stack.AirflowApi(state.url, "admin", password, timeout=180.0)


@pytest.fixture(scope="module")
def stack() -> Iterator[Stack]:
    """The stack started by the CLI into a home of its own (not under pytest's basetemp: other
    sessions on this machine rotate it away) on free ports; stopped at the end, which must leave no
    process behind. The home is kept with its logs when a test failed."""
    from rebalance_advisor.devtools import airflow_stack

    home = Path(tempfile.mkdtemp(prefix="ra-airflow-stack-")).resolve()
    env = _stack_env(home)
    with pytest.MonkeyPatch.context() as patch:
        for key in [k for k in os.environ if k.startswith("AIRFLOW")]:
            patch.delenv(key)
        patch.setenv("REBALANCE_ADVISOR_HOME", str(home))
        began = time.monotonic()
        stack = Stack(home, env, _free_ports(5), subprocess.CompletedProcess([], 0))
        stack.started = stack.start()
        stack.timings["start_s"] = round(time.monotonic() - began, 1)
        state = airflow_stack.read_state(stack.paths)
        try:
            yield stack
        finally:
            log = home / "airflow" / "standalone.log"
            if log.exists():
                print(
                    "standalone.log ends:\n" + "\n".join(log.read_text(errors="replace").splitlines()[-40:])
                )
            began_stop = time.monotonic()
            stopped = stack.stop()
            stack.timings["stop_s"] = round(time.monotonic() - began_stop, 1)
            load = "load average " + ", ".join(f"{x:.2f}" for x in os.getloadavg())
            print(f"timings: {stack.timings}; {load}\nstop said:\n{stopped.stdout}{stopped.stderr}")
        assert stopped.returncode == 0, stopped.stdout + stopped.stderr
        assert airflow_stack.marked_pids(home) == []
        # (no state when start failed: start then stopped what it had started itself)
        assert state is None or all(airflow_stack.group_pids(c.pid) == [] for c in state.components)
        assert not stack.paths.state_file.exists()
        assert not local_postgres.Cluster(stack.paths.postgres_dir, stack.ports[4]).running()
    shutil.rmtree(home, ignore_errors=True)
    shutil.rmtree(stack.paths.postgres_dir, ignore_errors=True)


def test_the_stack_under_the_real_scheduler(stack: Stack) -> None:
    from rebalance_advisor.devtools import airflow_stack

    home, env, started, timings = stack.home, stack.env, stack.started, stack.timings
    began = time.monotonic()
    api_port, kafka_port, pg_port = stack.ports[0], stack.ports[1], stack.ports[4]
    state = airflow_stack.read_state(stack.paths)
    assert started.returncode == 0, started.stdout + started.stderr
    assert f"http://127.0.0.1:{api_port}" in started.stdout
    password = airflow_stack.admin_password(stack.paths)
    assert password and f"admin / {password}" in started.stdout
    assert state is not None and state.bootstrap_servers == f"127.0.0.1:{kafka_port}"
    assert state.db_url == f"sqlite:///{home / 'advisor.db'}"  # the CLI's default database
    # Airflow's metadata on the stack's own PostgreSQL, not SQLite
    assert state.metadata_url == f"postgresql+psycopg2://postgres@127.0.0.1:{pg_port}/airflow"
    # status: everything up (on a loaded machine the API server may be restarting its worker: retry)
    said: list[str] = []
    status = _wait_for("status to report the stack up", lambda: _status_up(env, said), 300, 5.0, last=said)
    assert "running: airflow" in status and "running: demo-workload" in status, status
    assert f"metadata postgres: 127.0.0.1:{pg_port}" in status and "scheduler: healthy" in status, status
    _check_env_file(stack, kafka_port)

    api = airflow_stack.AirflowApi(state.url, "admin", password)
    # no trigger: the snapshot DAG's schedule fires on unpause, its Asset starts the advisor
    snap = _wait_for("a scheduled snapshot run", lambda: _finished(api, SNAPSHOT, "scheduled"), 600)
    assert snap["state"] == "success", snap
    timings["first_snapshot_done_s"] = round(time.monotonic() - began, 1)
    _check_live_group(state.db_url)
    # no more */5 snapshots: on a loaded machine their Asset-triggered advisor runs (one at a
    # time) would queue ahead of the REST-triggered run below, each taking minutes
    api.json("PATCH", f"/dags/{SNAPSHOT}", json={"is_paused": True})
    auto = _wait_for(
        "an Asset-triggered advisor run", lambda: _finished(api, ADVISOR, "asset_triggered"), 900
    )
    assert auto["state"] == "success", auto
    timings["first_advisor_done_s"] = round(time.monotonic() - began, 1)

    # bad confs: refused before a run exists
    before = _manual_runs(api)  # the scheduler may add Asset-triggered runs meanwhile
    for number, bad in enumerate(
        ({"strategies": ["no_such_strategy"]}, {"snapshot": "newest"}, {"imbalance_threshold": 0.5})
    ):
        refused = api.trigger(ADVISOR, bad, run_id=f"bad-conf-{number}")
        assert refused.status_code == 400, (bad, refused.status_code, refused.text)
        assert next(iter(bad)) in refused.json()["detail"]
        assert api.request("GET", f"/dags/{ADVISOR}/dagRuns/bad-conf-{number}").status_code == 404
    # in plain words, one line (the plugin registered the forms' validator in the API server)
    assert (
        refused.json()["detail"]
        == "Invalid input for param imbalance_threshold: must be at least 1 (you gave 0.5)"
    )
    assert _manual_runs(api) == before

    valid = {"snapshot": str(_snapshot_of(state.db_url)), "strategies": ["range"]}
    manual = api.trigger(ADVISOR, valid, run_id="rest-trigger-range")
    assert manual.status_code == 200, manual.text
    manual_run = api.wait_for_run(ADVISOR, manual.json()["dag_run_id"], timeout=900)
    timings["rest_run_done_s"] = round(time.monotonic() - began, 1)
    assert manual_run["state"] == "success", manual_run
    assert manual_run["conf"]["strategies"] == ["range"]
    api.close()
    _check_plan_table(state.db_url, auto["dag_run_id"], manual_run["dag_run_id"])


def _check_live_group(db_url: str) -> None:
    """The live group runs in the stack: its four consumers on the broker's ``advised`` assignor,
    and time lags read from record timestamps on the partitions they are behind on."""
    from rebalance_advisor.devtools import demo_workload
    from rebalance_advisor.store.models import CommittedOffsetRow, ConsumerGroupRow

    live = demo_workload.build_live_group()
    engine = sa.create_engine(db_url)
    with engine.connect() as conn:
        group = conn.execute(
            sa.select(ConsumerGroupRow).where(ConsumerGroupRow.group_id == live.group_id)
            .order_by(ConsumerGroupRow.snapshot_id.desc()).limit(1)
        ).one()  # fmt: skip
        methods = conn.execute(
            sa.select(CommittedOffsetRow.time_lag_method).where(
                CommittedOffsetRow.group_id == live.group_id, CommittedOffsetRow.snapshot_id == group.snapshot_id
            )
        ).scalars().all()  # fmt: skip
    engine.dispose()
    assert (group.group_type, group.assignor) == ("consumer", "advised"), group
    assert group.member_count == len(live.capacities), group
    assert len(methods) == len(live.produce_rates) and "record_timestamp" in methods, methods


def _check_env_file(stack: Stack, kafka_port: int) -> None:
    """The ``airflow`` CLI under ``airflow.env`` sees the stack's connections and DAGs folder."""
    script = f"source {stack.paths.env_file} && airflow connections get kafka_default -o json"
    done = subprocess.run(["bash", "-c", script], env=_stack_env(stack.home), capture_output=True, text=True,
                          timeout=300, cwd=stack.home)  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    assert f"127.0.0.1:{kafka_port}" in done.stdout, done.stdout
    assert f"AIRFLOW__CORE__DAGS_FOLDER={REPO / 'dags'}" in stack.paths.env_file.read_text()


def _check_plan_table(db_url: str, auto_run_id: str, manual_run_id: str) -> None:
    from rebalance_advisor.store.plan_models import AdvisorRun, GroupOutcome, Plan

    engine = sa.create_engine(db_url)
    with engine.connect() as conn:
        runs = {r.airflow_run_id: r for r in conn.execute(sa.select(AdvisorRun))}
        assert {auto_run_id, manual_run_id} <= set(runs)
        first = runs[auto_run_id].id
        outcomes = {
            o.group_id: o for o in conn.execute(sa.select(GroupOutcome).where(GroupOutcome.run_id == first))
        }
        # KAFKA-5337's worked example: range gives C0 100,000 + 60,000; moving partition 1 leaves 110,000
        kip = outcomes["kip-example"]
        assert (kip.outcome, kip.max_lag_before, kip.max_lag_after, kip.moves) == (
            "recommended",
            160_000,
            110_000,
            1,
        )
        assert outcomes["idle-group"].outcome == "idle" and outcomes["balanced-group"].outcome == "balanced"
        plan = conn.execute(sa.select(Plan).where(Plan.id == kip.plan_id)).one()
        assert (plan.group_id, plan.created_by) == ("kip-example", auto_run_id)
        # a later Asset-triggered run that arrives at the same assignment keeps this plan standing
        standing = conn.execute(
            sa.select(Plan).where(Plan.group_id == "kip-example", Plan.status == "recommended")
        ).all()
        assert [p.id for p in standing] == [plan.id], standing
        # the manual run only had range, the strategy that made the skew: no better plan, no new plan row
        second = runs[manual_run_id].id
        kip_again = conn.execute(
            sa.select(GroupOutcome).where(
                GroupOutcome.run_id == second, GroupOutcome.group_id == "kip-example"
            )
        ).one()
        assert kip_again.plan_id is None and kip_again.outcome != "recommended"
        assert conn.execute(sa.select(sa.func.count()).where(Plan.status == "skipped")).scalar_one() == 0
    engine.dispose()


def test_a_run_in_flight_at_stop_does_not_hold_the_next_start(stack: Stack) -> None:
    """Stop while an advisor run plans, start again: that run is marked failed at start (it would
    hold ``max_active_runs=1``), the scheduler is healthy, and a new manual run completes."""
    assert stack.started.returncode == 0, stack.started.stdout + stack.started.stderr
    api = stack.api()
    # a snapshot to plan (run alone, this test cannot count on the first test's)
    snap = _wait_for("a scheduled snapshot run", lambda: _finished(api, SNAPSHOT, "scheduled"), 600)
    assert snap["state"] == "success", snap
    api.json("PATCH", f"/dags/{SNAPSHOT}", json={"is_paused": True})
    assert api.trigger(ADVISOR, {}, run_id="in-flight-at-stop").status_code == 200
    _wait_for(
        "the in-flight run's plan task to run", lambda: _task_running(api, "in-flight-at-stop", "plan"), 900
    )
    api.close()
    stopped = stack.stop()
    assert stopped.returncode == 0, stopped.stdout + stopped.stderr
    began = time.monotonic()
    restarted = stack.start()
    assert restarted.returncode == 0, restarted.stdout + restarted.stderr
    assert f"marked run in-flight-at-stop of {ADVISOR} failed" in restarted.stdout
    said: list[str] = []
    _wait_for("status to report the stack up again", lambda: _status_up(stack.env, said), 300, 5.0, last=said)
    api = stack.api()
    try:
        assert api.json("GET", f"/dags/{ADVISOR}/dagRuns/in-flight-at-stop")["state"] == "failed"
        api.json("PATCH", f"/dags/{SNAPSHOT}", json={"is_paused": True})
        assert api.trigger(ADVISOR, {}, run_id="after-restart").status_code == 200
        # at most one Asset-triggered run (the snapshot that fired on unpause) may go first
        after = api.wait_for_run(ADVISOR, "after-restart", timeout=900)
        stack.timings["restart_to_new_run_done_s"] = round(time.monotonic() - began, 1)
        assert after["state"] == "success", after
    finally:
        api.close()


def _task_running(api, run_id: str, task_id: str) -> bool | None:
    tasks = api.json("GET", f"/dags/{ADVISOR}/dagRuns/{run_id}/taskInstances")["task_instances"]
    return True if any(t["task_id"] == task_id and t["state"] == "running" for t in tasks) else None


def _snapshot_of(db_url: str) -> int:
    from rebalance_advisor.store.snapshots import latest_snapshot_id

    snapshot_id = latest_snapshot_id(db_url)
    assert snapshot_id is not None
    return snapshot_id
