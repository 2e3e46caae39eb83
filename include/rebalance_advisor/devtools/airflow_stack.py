"""``rebalance-advisor dev airflow start|stop|status``: a real Airflow 3 with the project's DAGs, one command.

What ``start`` brings up, each part in its own process group, all state under
``$REBALANCE_ADVISOR_HOME`` (default ``~/.rebalance-advisor``):

- the local Kafka broker (``kafka/``) on a fixed port (:data:`DEFAULT_KAFKA_PORT`), so the
  ``kafka_default`` connection stays right across restarts; an already running local broker is
  reused and left running by ``stop``;
- the demo workload (topics, skewed lag, live consumers) in the background;
- a local PostgreSQL (``airflow-postgres/``, see :func:`local_postgres.server_dir`) on a port of
  its own holding Airflow's metadata (not SQLite: docs/operations/local-airflow.md); runs a
  ``stop`` left in flight are marked failed before Airflow starts again;
- ``airflow standalone`` (api-server, scheduler, dag-processor, triggerer; LocalExecutor) with
  ``AIRFLOW_HOME=airflow/``, the repository's ``dags/`` and ``plugins/``, example DAGs off,
  parallelism sized for the machine, and the three connections as ``AIRFLOW_CONN_*``: Kafka on the
  broker, Spark ``local[*]``, the plan database the CLI uses;

then it writes ``airflow.env`` (the same settings as ``export`` lines, for the ``airflow`` CLI),
unpauses the project's DAGs (once the demo load is in place: the snapshot DAG's cron
timetable runs at once on unpause, and each snapshot's Asset triggers the advisor) and prints the
URL and the login.
``stop`` ends every process group it recorded (SIGTERM, then SIGKILL), then any process that still
carries the stack's environment marker (:data:`MARKER_ENV`: Spark JVMs and task processes inherit
it), so nothing is left behind. ``standalone`` is used rather than four hand-started components:
it is the verified path, migrates the metadata DB and writes the admin password itself.
"""

from __future__ import annotations

import contextlib
import json
import os
import shlex
import signal
import subprocess
import sys
import time
from collections.abc import Iterator, Mapping
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from rebalance_advisor import settings
from rebalance_advisor.adapters.airflow_connections import DEFAULT_DB_CONN_ID, DEFAULT_KAFKA_CONN_ID
from rebalance_advisor.devtools import local_kafka, local_postgres
from rebalance_advisor.domain.parameters import MODELS
from rebalance_advisor.errors import AdvisorError
from rebalance_advisor.polling import poll_until

DEFAULT_API_PORT = 8080
DEFAULT_KAFKA_PORT = 19092
DEFAULT_POSTGRES_PORT = 19432
METADATA_DB = "airflow"
#: Airflow's own defaults for the log servers of the LocalExecutor workers and the triggerer
DEFAULT_WORKER_LOG_PORT = 8793
DEFAULT_TRIGGER_LOG_PORT = 8794
SPARK_CONN_ID = "spark_default"
#: the DAGs ``start`` unpauses (every DAG file in dags/)
PROJECT_DAGS = tuple(MODELS)
#: every process the stack starts carries this variable (value: the stack's home), so ``stop`` and
#: the tests can find what a process group escaped (a task's Spark JVM, the demo's consumers)
MARKER_ENV = "REBALANCE_ADVISOR_STACK"
START_TIMEOUT_S = 300.0
STOP_GRACE_S = 30.0
WORKLOAD_STOP_GRACE_S = 5.0
WORKLOAD = "demo-workload"
PASSWORD_FILE = "simple_auth_manager_passwords.json.generated"
ADMIN_USER = "admin"
REPO_DIR = settings.INCLUDE_DIR.parent


class StackError(AdvisorError):
    """The local Airflow stack could not be started, reached or stopped (the message says why)."""


@dataclass(frozen=True)
class StackPorts:
    """The TCP ports the stack listens on (127.0.0.1 unless ``host`` says otherwise)."""

    api: int = DEFAULT_API_PORT
    kafka: int = DEFAULT_KAFKA_PORT
    worker_log: int = DEFAULT_WORKER_LOG_PORT
    trigger_log: int = DEFAULT_TRIGGER_LOG_PORT
    postgres: int = DEFAULT_POSTGRES_PORT


@dataclass(frozen=True)
class StackPaths:
    """Where the stack keeps its state: all under the advisor home, nothing in the repository."""

    home: Path

    @property
    def airflow_home(self) -> Path:
        return self.home / "airflow"

    @property
    def kafka_dir(self) -> Path:
        return self.home / "kafka"

    @property
    def state_file(self) -> Path:
        return self.home / "airflow-stack.json"

    @property
    def airflow_log(self) -> Path:
        return self.airflow_home / "standalone.log"

    @property
    def postgres_dir(self) -> Path:
        return local_postgres.server_dir(self.home)

    @property
    def env_file(self) -> Path:
        return self.home / "airflow.env"

    @property
    def workload_log(self) -> Path:
        return self.home / "demo-workload.log"

    @property
    def workload_ready(self) -> Path:
        return self.home / "demo-workload.ready"

    @property
    def password_file(self) -> Path:
        return self.airflow_home / PASSWORD_FILE

    @classmethod
    def current(cls) -> StackPaths:
        return cls(settings.home_dir().resolve())


@dataclass(frozen=True)
class Component:
    """One started process group (its leader's pid is the group id)."""

    name: str
    pid: int
    log: str


@dataclass(frozen=True)
class StackState:
    """What ``start`` recorded for ``stop`` and ``status`` (``airflow-stack.json``)."""

    url: str
    ports: StackPorts
    bootstrap_servers: str
    db_url: str
    broker_started: bool
    components: tuple[Component, ...] = field(default_factory=tuple)
    metadata_url: str = ""

    def to_json(self) -> str:
        return json.dumps(asdict(self), indent=2)

    @classmethod
    def from_json(cls, text: str) -> StackState:
        data = json.loads(text)
        return cls(
            url=data["url"],
            ports=StackPorts(**data["ports"]),
            bootstrap_servers=data["bootstrap_servers"],
            db_url=data["db_url"],
            broker_started=bool(data["broker_started"]),
            components=tuple(Component(**c) for c in data["components"]),
            metadata_url=data.get("metadata_url", ""),
        )


@dataclass(frozen=True)
class StartReport:
    """What ``start`` did and how long each step took (seconds from the start of ``start``)."""

    url: str
    user: str
    password: str | None
    password_file: Path
    bootstrap_servers: str
    db_url: str
    airflow_home: Path
    ui_ready_s: float
    dags_unpaused_s: float
    metadata_url: str
    env_file: Path


# ---- processes ---------------------------------------------------------------------------------


def _proc_stat(pid: int) -> tuple[str, int] | None:
    """(state, process group) of ``pid`` from /proc, None when it is gone."""
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    fields = text[text.rindex(")") + 2 :].split()  # the command name may hold spaces and ')'
    return fields[0], int(fields[2])


def _all_pids() -> Iterator[int]:
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            yield int(entry.name)


def group_pids(pgid: int) -> list[int]:
    """Live (non-zombie) processes of process group ``pgid``."""
    found = []
    for pid in _all_pids():
        stat = _proc_stat(pid)
        if stat and stat[1] == pgid and stat[0] != "Z":
            found.append(pid)
    return found


def marked_pids(home: Path) -> list[int]:
    """Live processes whose environment carries this stack's marker (readable ones: our own user)."""
    needle = f"{MARKER_ENV}={home}".encode() + b"\0"
    found = []
    for pid in _all_pids():
        if pid == os.getpid():
            continue
        try:
            environ = Path(f"/proc/{pid}/environ").read_bytes()
        except OSError:
            continue
        stat = _proc_stat(pid)
        if needle in environ and stat and stat[0] != "Z":
            found.append(pid)
    return found


def _reap(pid: int) -> None:
    with contextlib.suppress(ChildProcessError, OSError):
        os.waitpid(pid, os.WNOHANG)


def _cmdline(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")[:120]
    except OSError:
        return "?"


def stop_groups(
    pgids: set[int], grace: float = STOP_GRACE_S, echo=None, graces: Mapping[int, float] | None = None
) -> set[int]:
    """SIGTERM the process groups at once, SIGKILL each one still there after its grace (``graces``
    by group, else ``grace``); the groups that ran.

    At once, not one by one: the scheduler waits for its running tasks, which sit in groups of
    their own, so stopping Airflow before them only waits out the grace period. ``echo`` is told
    which processes ignored SIGTERM.
    """
    running = {g for g in pgids if group_pids(g)}
    for pgid in running:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(pgid, signal.SIGTERM)
    began = time.monotonic()
    deadline = {g: began + (graces or {}).get(g, grace) for g in running}
    alive, killed = set(running), set()
    while alive and time.monotonic() < max(deadline.values()) + 10.0:
        time.sleep(0.2)
        for pgid in alive:
            _reap(pgid)
        alive = {g for g in alive if group_pids(g)}
        late = {g for g in alive - killed if time.monotonic() >= deadline[g]}
        if late and echo:
            stuck = [f"{pid} {_cmdline(pid)}" for g in late for pid in group_pids(g)]
            echo(
                f"still running {max(deadline[g] for g in late) - began:.0f} s after SIGTERM, killed: "
                + "; ".join(stuck)
            )
        for pgid in late:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(pgid, signal.SIGKILL)
        killed |= late
    return running


def _spawn(name: str, command: list[str], env: Mapping[str, str], log: Path, cwd: Path) -> Component:
    log.parent.mkdir(parents=True, exist_ok=True)
    with log.open("ab") as out:
        process = subprocess.Popen(
            command,
            env=dict(env),
            cwd=cwd,
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,  # its own process group: stopped as one
        )
    return Component(name, process.pid, str(log))


def _log_tail(path: Path | str, lines: int = 30) -> str:
    path = Path(path)
    if not path.exists():
        return f"(no log at {path})"
    return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])


# ---- configuration -----------------------------------------------------------------------------


def parallelism(cpus: int | None = None) -> int:
    """Task slots for the LocalExecutor: two per core, at least 2, at most Airflow's default 32.

    Why: the default 32 starts 32 worker processes, which on 2 cores starves the scheduler.
    """
    cpus = cpus or len(os.sched_getaffinity(0))
    return max(2, min(32, 2 * cpus))


def connection_values(bootstrap_servers: str, db_url: str) -> dict[str, dict[str, Any]]:
    """The three connections of the local stack, by connection id (the ids the DAGs default to)."""
    return {
        DEFAULT_KAFKA_CONN_ID: {"conn_type": "kafka", "extra": {"bootstrap.servers": bootstrap_servers}},
        SPARK_CONN_ID: {"conn_type": "spark", "host": "local[*]"},
        DEFAULT_DB_CONN_ID: {"conn_type": "generic", "extra": {"sqlalchemy_url": db_url}},
    }


def airflow_env(
    paths: StackPaths,
    ports: StackPorts,
    bootstrap_servers: str,
    db_url: str,
    host: str = "127.0.0.1",
    metadata_url: str | None = None,
) -> dict[str, str]:
    """The environment of ``airflow standalone``: its settings and connections as variables.

    Environment variables rather than ``airflow.cfg`` edits or connection rows: they win over any
    config file, need no running Airflow to set, and the next ``start`` sets them afresh.
    """
    bin_dir = str(Path(sys.executable).parent)
    env = {key: value for key, value in os.environ.items() if not key.startswith("AIRFLOW_CONN_")}
    base_url = f"http://{host}:{ports.api}"
    env.update(
        {
            "AIRFLOW_HOME": str(paths.airflow_home),
            "AIRFLOW__CORE__DAGS_FOLDER": str(REPO_DIR / "dags"),
            "AIRFLOW__CORE__PLUGINS_FOLDER": str(REPO_DIR / "plugins"),
            "AIRFLOW__CORE__LOAD_EXAMPLES": "False",
            "AIRFLOW__CORE__PARALLELISM": str(parallelism()),
            "AIRFLOW__CORE__EXECUTOR": "LocalExecutor",
            "AIRFLOW__API__HOST": host,
            "AIRFLOW__API__PORT": str(ports.api),
            "AIRFLOW__API__BASE_URL": base_url,
            "AIRFLOW__CORE__EXECUTION_API_SERVER_URL": f"{base_url}/execution/",
            "AIRFLOW__LOGGING__WORKER_LOG_SERVER_PORT": str(ports.worker_log),
            "AIRFLOW__LOGGING__TRIGGER_LOG_SERVER_PORT": str(ports.trigger_log),
            "REBALANCE_ADVISOR_HOME": str(paths.home),
            "PYSPARK_PYTHON": sys.executable,
            "PYSPARK_DRIVER_PYTHON": sys.executable,
            "PATH": bin_dir + os.pathsep + os.environ.get("PATH", ""),
            MARKER_ENV: str(paths.home),
        }
    )
    if metadata_url:
        env["AIRFLOW__DATABASE__SQL_ALCHEMY_CONN"] = metadata_url
    for conn_id, value in connection_values(bootstrap_servers, db_url).items():
        env[f"AIRFLOW_CONN_{conn_id.upper()}"] = json.dumps(value)
    return env


#: what ``airflow.env`` carries: the stack's Airflow settings and connections, the advisor's home
ENV_FILE_PREFIXES = ("AIRFLOW_HOME", "AIRFLOW__", "AIRFLOW_CONN_", "REBALANCE_ADVISOR_HOME", "PYSPARK_")


def write_env_file(path: Path, env: Mapping[str, str]) -> None:
    """``export`` lines the ``airflow`` CLI can be run under (``set -a; . airflow.env``): the same
    metadata database, DAGs folder and connections as the running stack, and the venv's ``bin``
    first on ``PATH``. Not the stack's marker: what the user runs is not ``stop``'s to end."""
    lines = ["# written by `rebalance-advisor dev airflow start`; use: source " + shlex.quote(str(path))]
    for key in sorted(k for k in env if k.startswith(ENV_FILE_PREFIXES)):
        lines.append(f"export {key}={shlex.quote(env[key])}")
    lines.append(f'export PATH={shlex.quote(str(Path(sys.executable).parent))}:"$PATH"')
    path.write_text("\n".join(lines) + "\n")


def _check_ports_free(ports: StackPorts, broker_running: bool) -> None:
    wanted = {
        "api": ports.api,
        "worker log server": ports.worker_log,
        "trigger log server": ports.trigger_log,
        "postgres": ports.postgres,
    }
    if not broker_running:
        wanted["kafka"] = ports.kafka
    if len(set(wanted.values())) != len(wanted):
        raise StackError(f"the stack's ports must differ, got {wanted}")
    taken = [f"{name} {port}" for name, port in wanted.items() if not local_kafka._port_free(port)]
    if taken:
        raise StackError(
            f"port(s) already taken on this machine: {', '.join(taken)}; stop what uses them or pick others "
            "(--port, --kafka-port, --postgres-port, --worker-log-port, --trigger-log-port)"
        )


# ---- the REST API ------------------------------------------------------------------------------


class AirflowApi:
    """A small client of Airflow's public REST API (``/api/v2``) with a JWT from ``/auth/token``."""

    def __init__(self, base_url: str, user: str, password: str, timeout: float = 60.0) -> None:
        import httpx

        self.base_url = base_url.rstrip("/")
        self.timeout = timeout
        self._user, self._password = user, password
        self._http = httpx.Client(base_url=self.base_url, timeout=timeout)
        self._token: str | None = None

    def close(self) -> None:
        self._http.close()

    def token(self) -> str:
        if self._token is None:
            body = {"username": self._user, "password": self._password}
            response = self._send(
                "POST", "/auth/token", retry=True, json=body
            )  # no side effect: safe to retry
            if response.status_code not in (200, 201):
                raise StackError(f"Airflow refused the login of {self._user!r}: HTTP {response.status_code}")
            self._token = response.json()["access_token"]
        return self._token

    def _send(self, method: str, url: str, retry: bool, **kwargs: Any):
        """One HTTP call; with ``retry``, two more after a timeout or a refused connection (on a
        loaded small machine the API server's one worker can stall, and its monitor restarts it)."""
        import httpx

        attempts = 3 if retry else 1
        for attempt in range(1, attempts + 1):
            try:
                return self._http.request(method, url, **kwargs)
            except httpx.TransportError as error:
                if attempt == attempts:
                    raise StackError(f"{method} {url}: no answer from Airflow ({error})") from None
                time.sleep(2.0)
        raise AssertionError("unreachable")

    def request(self, method: str, path: str, retry: bool | None = None, **kwargs: Any):
        """One call under ``/api/v2``; the raw response (callers check the status they expect).
        Reads and PATCHes (idempotent) are retried (:meth:`_send`); a POST only when the caller
        says it is idempotent (``retry=True``)."""
        headers = {"Authorization": f"Bearer {self.token()}"}
        if retry is None:
            retry = method in ("GET", "PATCH")
        return self._send(method, f"/api/v2{path}", retry=retry, headers=headers, **kwargs)

    def json(self, method: str, path: str, **kwargs: Any) -> dict[str, Any]:
        response = self.request(method, path, **kwargs)
        if response.status_code >= 400:
            raise StackError(f"{method} /api/v2{path}: HTTP {response.status_code}: {response.text[:300]}")
        return response.json()

    def trigger(self, dag_id: str, conf: Mapping[str, Any] | None = None, run_id: str | None = None):
        """POST a DAG run (logical date now); the raw response (400 when the conf breaks the params).

        With ``run_id`` the POST is idempotent, so it is retried after a timeout: if the lost
        attempt had created the run, the retry gets 409 and the run is fetched (never two runs)."""
        body: dict[str, Any] = {"logical_date": None, "conf": dict(conf or {})}
        if run_id is None:
            return self.request("POST", f"/dags/{dag_id}/dagRuns", json=body)
        response = self.request(
            "POST", f"/dags/{dag_id}/dagRuns", retry=True, json=body | {"dag_run_id": run_id}
        )
        if response.status_code == 409:  # a lost attempt went through: answer as the first would have
            return self.request("GET", f"/dags/{dag_id}/dagRuns/{run_id}")
        return response

    def runs(self, dag_id: str) -> list[dict[str, Any]]:
        return self.json("GET", f"/dags/{dag_id}/dagRuns", params={"limit": 100})["dag_runs"]

    def wait_for_run(self, dag_id: str, run_id: str, timeout: float) -> dict[str, Any]:
        """Poll one run until it ends; its final JSON (state ``success`` or ``failed``)."""
        last: dict[str, Any] = {}

        def ended() -> dict[str, Any] | None:
            last.update(self.json("GET", f"/dags/{dag_id}/dagRuns/{run_id}"))
            return dict(last) if last["state"] in ("success", "failed") else None

        run = poll_until(ended, timeout, interval=2.0)
        if run is None:
            raise StackError(f"run {run_id} of {dag_id} is still {last['state']} after {timeout:.0f} s")
        return run


def health(base_url: str, timeout: float = 5.0) -> dict[str, Any] | None:
    """``/api/v2/monitor/health`` (no login needed), None when the API does not answer."""
    import httpx

    try:
        response = httpx.get(f"{base_url}/api/v2/monitor/health", timeout=timeout)
    except httpx.HTTPError:
        return None
    return response.json() if response.status_code == 200 else None


def admin_password(paths: StackPaths) -> str | None:
    """The SimpleAuthManager admin password Airflow generated, None until it exists."""
    try:
        return json.loads(paths.password_file.read_text()).get(ADMIN_USER)
    except (OSError, ValueError):
        return None


# ---- start / stop / status ---------------------------------------------------------------------


def read_state(paths: StackPaths) -> StackState | None:
    try:
        return StackState.from_json(paths.state_file.read_text())
    except (OSError, ValueError, KeyError, TypeError):
        return None


def _running(state: StackState) -> list[Component]:
    return [c for c in state.components if group_pids(c.pid)]


def _wait(what: str, ready, timeout: float, components: list[Component], interval: float = 1.0):
    """Poll ``ready()`` until it returns a truthy value; fail early when a component died."""

    def ready_or_died():
        value = ready()
        if value:
            return value
        for component in components:
            if not group_pids(component.pid):
                raise StackError(f"{component.name} exited while waiting for {what}; its log ends:\n"
                                 f"{_log_tail(component.log)}")  # fmt: skip
        return None

    value = poll_until(ready_or_died, timeout, interval)
    if not value:
        raise StackError(f"{what} did not happen within {timeout:.0f} s")
    return value


def start(
    ports: StackPorts | None = None,
    host: str = "127.0.0.1",
    timeout: float = START_TIMEOUT_S,
    workload: bool = True,
    echo=print,
    live: bool = False,
) -> StartReport:
    """Bring the stack up (see the module docstring); on failure stop what was started and raise."""
    began = time.monotonic()
    paths = StackPaths.current()
    ports = ports or StackPorts()
    _refuse_when_running(paths)
    paths.home.mkdir(parents=True, exist_ok=True)
    local_postgres.stop(paths.postgres_dir)  # left running by a stop that did not finish
    broker = local_kafka.status(paths.kafka_dir)
    _check_ports_free(ports, broker is not None)
    db_url = settings.database_url()
    os.environ[MARKER_ENV] = str(paths.home)  # the broker JVM and the workload inherit the marker
    components: list[Component] = []
    broker_started = broker is None
    try:
        metadata_url = _start_metadata_db(paths, ports, echo)
        if broker is None:
            echo(f"starting the local Kafka broker on 127.0.0.1:{ports.kafka} ...")
            broker = local_kafka.start(paths.kafka_dir, port=ports.kafka, timeout=timeout)
        else:
            echo(f"reusing the local Kafka broker at {broker.bootstrap_servers} (left running by stop)")
        bootstrap = broker.bootstrap_servers
        env = airflow_env(paths, ports, bootstrap, db_url, host, metadata_url)
        write_env_file(paths.env_file, env)
        url = env["AIRFLOW__API__BASE_URL"]
        components += _spawn_parts(paths, env, bootstrap, workload, fresh_broker=broker_started, live=live)
        state = StackState(url, ports, bootstrap, db_url, broker_started, tuple(components), metadata_url)
        paths.state_file.write_text(state.to_json())
        echo(f"starting Airflow (log: {paths.airflow_log}) ...")
        password, ui_ready, unpaused = _wait_until_up(paths, url, timeout, components, workload, began, echo)
    except BaseException:
        _stop_all(components, paths, broker_started, echo=lambda *_: None)
        paths.state_file.unlink(missing_ok=True)
        raise
    return StartReport(url, ADMIN_USER, password, paths.password_file, bootstrap, db_url, paths.airflow_home,
                       round(ui_ready, 1), round(unpaused, 1), metadata_url, paths.env_file)  # fmt: skip


def _refuse_when_running(paths: StackPaths) -> None:
    state = read_state(paths)
    if state is not None and _running(state):
        raise StackError(
            f"the local Airflow stack is already running at {state.url} (state in {paths.state_file}); "
            "stop it first with `rebalance-advisor dev airflow stop`"
        )


def _start_metadata_db(paths: StackPaths, ports: StackPorts, echo) -> str:
    """Start the metadata PostgreSQL, create Airflow's database, fail the runs a stop left in
    flight; the URL Airflow connects with."""
    echo(
        f"starting PostgreSQL for Airflow's metadata on 127.0.0.1:{ports.postgres} ({paths.postgres_dir}) ..."
    )
    unmarked = {k: v for k, v in os.environ.items() if k != MARKER_ENV}  # stopped by pg_ctl, not by signal
    cluster = local_postgres.start(paths.postgres_dir, ports.postgres, env=unmarked)
    cluster.ensure_database(METADATA_DB)
    for dag_id, run_id in fail_runs_left_in_flight(cluster.url(METADATA_DB)):
        echo(f"marked run {run_id} of {dag_id} failed: it was in flight when the stack stopped")
    return cluster.url(METADATA_DB, driver="psycopg2")


#: task instance states of work under way or about to be (Airflow's ``State.unfinished`` minus none)
IN_FLIGHT_TASK_STATES = (
    "running", "queued", "scheduled", "restarting", "up_for_retry", "up_for_reschedule", "deferred",
)  # fmt: skip


def fail_runs_left_in_flight(metadata_url: str) -> list[tuple[str, str]]:
    """Mark failed every DAG run Airflow's metadata holds as running, and its unfinished task
    instances; the (dag id, run id) pairs. Called while no scheduler runs, so every such run lost
    its processes with the last ``stop``: left alone, one holds the advisor's ``max_active_runs=1``
    slot until Airflow's zombie detection and new runs queue behind it. Queued runs stay queued."""
    import sqlalchemy as sa

    engine = sa.create_engine(metadata_url)
    try:
        with engine.begin() as conn:
            if not sa.inspect(conn).has_table("dag_run"):
                return []  # a first start: Airflow has not migrated its database yet
            running = [(r.dag_id, r.run_id) for r in conn.execute(
                sa.text("SELECT dag_id, run_id FROM dag_run WHERE state = 'running'"))]  # fmt: skip
            now = {"now": datetime.now(UTC)}
            conn.execute(
                sa.text(
                    "UPDATE task_instance SET state = 'failed', end_date = :now WHERE state IN :states"
                    " AND (dag_id, run_id) IN (SELECT dag_id, run_id FROM dag_run WHERE state = 'running')"
                ).bindparams(sa.bindparam("states", expanding=True)),
                now | {"states": list(IN_FLIGHT_TASK_STATES)},
            )
            conn.execute(
                sa.text("UPDATE dag_run SET state = 'failed', end_date = :now WHERE state = 'running'"), now
            )
    finally:
        engine.dispose()
    return running


def _spawn_parts(
    paths: StackPaths, env: Mapping[str, str], bootstrap: str, workload: bool, fresh_broker: bool,
    live: bool = False,
):  # fmt: skip
    """Start the demo workload (optional; ``live``: with the live group) and ``airflow standalone``,
    each in its own group."""
    parts = []
    if workload:
        paths.workload_ready.unlink(missing_ok=True)
        command = [sys.executable, "-m", "rebalance_advisor.devtools.airflow_stack", "workload", bootstrap,
                   str(paths.workload_ready), "fresh" if fresh_broker else "reset", *(["live"] if live else [])]  # fmt: skip
        parts.append(_spawn(WORKLOAD, command, env, paths.workload_log, paths.home))
    paths.airflow_home.mkdir(parents=True, exist_ok=True)
    airflow = str(Path(sys.executable).parent / "airflow")
    parts.append(_spawn("airflow", [airflow, "standalone"], env, paths.airflow_log, paths.airflow_home))
    return parts


def _wait_until_up(
    paths: StackPaths, url: str, timeout: float, components, workload: bool, began: float, echo
):
    """Wait for the API, the password, the DAGs and the demo load, then unpause the DAGs;
    (password, seconds until the UI answered, seconds until the DAGs were unpaused)."""
    _wait("the Airflow API to answer", lambda: health(url), timeout, components)
    password = _wait("the admin password file", lambda: admin_password(paths), 60, components)
    ui_ready = time.monotonic() - began
    echo(f"Airflow answers at {url} after {ui_ready:.1f} s")
    api = AirflowApi(url, ADMIN_USER, password)
    try:
        _wait("the project's DAGs to be parsed", lambda: _dags_listed(api), timeout, components, 2.0)
        if workload:
            _wait("the demo workload", paths.workload_ready.exists, timeout, components)
        for dag_id in PROJECT_DAGS:
            api.json("PATCH", f"/dags/{dag_id}", json={"is_paused": False})
    finally:
        api.close()
    return password, ui_ready, time.monotonic() - began


def _dags_listed(api: AirflowApi) -> bool:
    listed = {d["dag_id"] for d in api.json("GET", "/dags", params={"limit": 100})["dags"]}
    return set(PROJECT_DAGS) <= listed


def _marked_groups(paths: StackPaths) -> set[int]:
    """Process groups of the processes carrying the stack's marker (tasks and their Spark JVMs
    run in groups of their own; the demo consumers in a session of their own)."""
    return {stat[1] for pid in marked_pids(paths.home) if (stat := _proc_stat(pid))}


def _stop_all(components, paths: StackPaths, broker_started: bool, echo) -> bool:
    broker = local_kafka.status(paths.kafka_dir) if broker_started else None
    spared = {broker.pid} if broker else set()  # stopped by its own tool, which also clears its state
    names = {c.pid: c.name for c in components}
    # the demo workload holds nothing worth a long wait (its consumers' clean leave is a courtesy)
    quick = {c.pid: WORKLOAD_STOP_GRACE_S for c in components if c.name == WORKLOAD}
    groups = ({c.pid for c in components} | _marked_groups(paths)) - spared
    stopped = stop_groups(groups, echo=echo, graces=quick)
    for pgid in sorted(stopped):
        echo(f"stopped {names.get(pgid, 'left-over process group')} ({pgid})")
    if broker_started and local_kafka.stop(paths.kafka_dir):
        echo("stopped the local Kafka broker")
        stopped.add(-1)
    late = stop_groups(_marked_groups(paths), grace=10.0)  # anything started while we stopped
    if local_postgres.stop(paths.postgres_dir):  # last: Airflow's processes are gone by now
        echo("stopped the metadata PostgreSQL")
        stopped.add(-2)
    return bool(stopped or late)


def stop(echo=print) -> bool:
    """Stop everything ``start`` started; True if anything was running."""
    paths = StackPaths.current()
    state = read_state(paths)
    components = state.components if state else ()
    stopped = _stop_all(components, paths, state.broker_started if state else False, echo)
    paths.state_file.unlink(missing_ok=True)
    paths.workload_ready.unlink(missing_ok=True)
    return stopped


@dataclass(frozen=True)
class StackStatus:
    url: str | None
    api_healthy: bool
    running: tuple[str, ...]
    stopped: tuple[str, ...]
    broker: str | None
    health: dict[str, Any] | None = None
    postgres: str | None = None

    @property
    def unhealthy_parts(self) -> tuple[str, ...]:
        """Airflow's parts (scheduler, triggerer, dag processor, metadata DB) its health report does
        not call healthy: a dead scheduler leaves the API answering."""
        parts = (self.health or {}).items()
        return tuple(
            name for name, part in parts if isinstance(part, dict) and part.get("status") != "healthy"
        )

    @property
    def healthy(self) -> bool:
        """Every process up, the API answering, every part of Airflow healthy, the database up."""
        return bool(
            self.running
            and not self.stopped
            and self.api_healthy
            and not self.unhealthy_parts
            and self.postgres
        )


def status() -> StackStatus:
    """Which parts of the stack run now."""
    paths = StackPaths.current()
    state = read_state(paths)
    broker = local_kafka.status(paths.kafka_dir)
    if state is None:
        return StackStatus(None, False, (), (), broker.bootstrap_servers if broker else None)
    running = _running(state)
    report = health(state.url, timeout=15.0)  # a loaded machine's API can be slow, not down
    cluster = local_postgres.Cluster(paths.postgres_dir, state.ports.postgres)
    return StackStatus(
        state.url,
        report is not None,
        tuple(c.name for c in running),
        tuple(c.name for c in state.components if c not in running),
        broker.bootstrap_servers if broker else None,
        report,
        f"127.0.0.1:{cluster.port}" if cluster.running() else None,
    )


# ---- the background demo workload ----------------------------------------------------------------


def run_workload(bootstrap_servers: str, ready_file: Path, reset: bool, live: bool = False) -> int:
    """Load the demo workload and keep its consumers alive until SIGTERM/SIGINT (then stop them).

    ``reset`` deletes an earlier load first (a reused broker); a fresh broker has nothing to delete.
    ``live`` adds the live group (``demo_workload.build_live_group``: a producer at Zipf rates and
    consumers of limited capacity on the broker plugin's assignor), so snapshots have rates, time
    lags and capacities and the pages show the load view and predicted catch-up.
    """
    from rebalance_advisor.devtools import demo_workload

    def _exit(signum: int, _frame: Any) -> None:
        raise SystemExit(0)

    signal.signal(signal.SIGTERM, _exit)
    live_group = demo_workload.build_live_group() if live else None
    with demo_workload.demo_workload(bootstrap_servers, reset=reset, live=live_group) as groups:
        print(f"demo workload on {bootstrap_servers}: {', '.join(g.group_id for g in groups)}", flush=True)
        ready_file.write_text(str(os.getpid()))
        try:
            while True:
                time.sleep(3600)
        finally:
            ready_file.unlink(missing_ok=True)
    return 0


if (
    __name__ == "__main__"
):  # python -m rebalance_advisor.devtools.airflow_stack workload BOOTSTRAP READY fresh|reset [live]
    usage = (len(sys.argv) not in (5, 6) or sys.argv[1] != "workload" or sys.argv[4] not in ("fresh", "reset")
             or sys.argv[5:] not in ([], ["live"]))  # fmt: skip
    if usage:
        sys.exit(
            "usage: python -m rebalance_advisor.devtools.airflow_stack workload BOOTSTRAP READY_FILE fresh|reset [live]"
        )
    sys.exit(
        run_workload(
            sys.argv[2], Path(sys.argv[3]), reset=sys.argv[4] == "reset", live=sys.argv[5:] == ["live"]
        )
    )
