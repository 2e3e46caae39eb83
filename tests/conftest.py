"""Shared fixtures: a real Kafka broker, the demo workload, real SQLite and PostgreSQL databases.

The broker is started from the project's own code once per test session (or taken from
``KAFKA_BOOTSTRAP_SERVERS``) and stopped at the end. PostgreSQL is a throwaway cluster in a temp
dir, started once per session; each test gets a database of its own.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import tempfile
import threading
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import settings

from tests.support import postgres

#: The integration lane's longest files, longest first (a worker's seconds in the lane's
#: ``--durations=0``). ``make test`` runs that lane with ``--no-loadscope-reorder``, so pytest-xdist
#: hands out whole files in collection order: these first, then the many short ones that even out
#: the two workers' ends. xdist's own order (most tests first) leaves these few-test files for last,
#: where the two workers end about 3.5 minutes apart (docs/operations/testing.md, "Test lanes").
LONGEST_FILES = (
    "tests/e2e/test_airflow_scheduler.py",
    "tests/integration/test_postgres_concurrency.py",
    "tests/integration/test_foundation.py",
    "tests/integration/test_telemetry_capacity.py",
    "tests/integration/test_spark_cluster_planner.py",
    "tests/e2e/test_webui_api.py",
    "tests/e2e/test_advisor_dag.py",
    "tests/e2e/test_publish_dags.py",
    "tests/integration/test_client_torture.py",
    "tests/integration/test_bench_txn_restarts_smoke.py",
    "tests/integration/test_demo_live.py",
    "tests/integration/test_capacity_report.py",
)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """The longest files first (:data:`LONGEST_FILES`), every other file after them in its own order;
    the tests of one file keep theirs."""
    rank = {path: place for place, path in enumerate(LONGEST_FILES)}
    items.sort(key=lambda item: rank.get(item.nodeid.split("::", 1)[0], len(LONGEST_FILES)))


@pytest.fixture(autouse=True)
def _python_ctrl_c_handler() -> Iterator[None]:
    """Each test starts with Python's own Ctrl-C handler, unblocked, as a fresh process has it.
    Libraries replace it for the whole test worker (a SparkContext installs its own; Airflow's task
    supervisor sets and forwards SIGINT), and the test worker's disposition passes to every command a
    test starts: in one landing run every Ctrl-C test of the snapshot command, in-process and as a
    child process, saw its SIGINT ignored. The previous handler is restored afterwards."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = signal.getsignal(signal.SIGINT)
    signal.signal(signal.SIGINT, signal.default_int_handler)
    signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT})
    try:
        yield
    finally:
        if previous is not None:  # None: a handler set outside Python, which cannot be put back
            signal.signal(signal.SIGINT, previous)


# Property and fuzz tests take their example count from the profile. `repeatable` (the default: `make
# test`, `make test-fast`) draws the same few examples on every run (CI must not pass or fail by
# chance, and the inner loop stays fast); `HYPOTHESIS_PROFILE=explore make test-fast` draws many fresh
# ones to look for new failures. A test that is slow per example takes a share of the count.
REPEATABLE_EXAMPLES = 50
EXPLORE_EXAMPLES = 1000
settings.register_profile("repeatable", derandomize=True, database=None, max_examples=REPEATABLE_EXAMPLES)
settings.register_profile("explore", derandomize=False, max_examples=EXPLORE_EXAMPLES)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "repeatable"))


@pytest.fixture(scope="session")
def kafka_bootstrap(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """Bootstrap servers of a real broker: ``KAFKA_BOOTSTRAP_SERVERS`` or one started here."""
    external = os.environ.get("KAFKA_BOOTSTRAP_SERVERS")
    if external:
        yield external
        return
    from rebalance_advisor.devtools import local_kafka

    state_dir = tmp_path_factory.mktemp("kafka")
    info = local_kafka.start(state_dir)
    try:
        # telemetry tests: a client that starts before the subscription exists pushes nothing
        local_kafka.await_telemetry_subscription(state_dir)
        yield info.bootstrap_servers
    finally:
        local_kafka.stop(state_dir)


@pytest.fixture(scope="session")
def demo_groups(kafka_bootstrap: str):
    """The demo workload loaded once on the session broker, its members alive for the session."""
    from rebalance_advisor.devtools import demo_workload

    # On a shared cluster (KAFKA_BOOTSTRAP_SERVERS) an earlier run's demo topics and groups are replaced.
    reset = bool(os.environ.get("KAFKA_BOOTSTRAP_SERVERS"))
    with demo_workload.demo_workload(kafka_bootstrap, reset=reset) as groups:
        yield groups


@pytest.fixture(scope="session")
def postgres_server() -> Iterator[postgres.Server]:
    # Not under tmp_path_factory: pytest's temp root is private to root, and the server runs as `postgres`.
    base_dir = Path(tempfile.mkdtemp(prefix="rebalance-advisor-pg-"))
    server = postgres.start(base_dir)
    try:
        yield server
    finally:
        server.stop()
        shutil.rmtree(base_dir, ignore_errors=True)


def _sqlite_url(tmp_path: Path) -> str:
    return f"sqlite:///{tmp_path / 'advisor.db'}"


@pytest.fixture(params=["sqlite", "postgresql"])
def db_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """An empty database of each kind: a SQLite file, or a fresh database on the test PostgreSQL."""
    if request.param == "sqlite":
        return _sqlite_url(tmp_path)
    server: postgres.Server = request.getfixturevalue("postgres_server")
    return server.create_database(f"t_{uuid.uuid4().hex[:12]}")


@pytest.fixture
def sqlite_url(tmp_path: Path) -> str:
    return _sqlite_url(tmp_path)


@pytest.fixture
def url(db_url: str) -> Iterator[str]:
    """``db_url`` migrated to the newest schema revision; its engines are disposed afterwards."""
    from rebalance_advisor.store import db

    db.upgrade(db_url)
    yield db_url
    db.dispose(db_url)


@pytest.fixture(scope="session")
def spark_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """Master URL of a real Spark standalone cluster (one master, one 1-core worker) on 127.0.0.1.

    Started once per session from the pip-installed Spark; both JVMs are killed at the end.
    """
    from tests.support.spark_cluster import spark_cluster as start_cluster

    with start_cluster(tmp_path_factory.mktemp("spark-cluster")) as cluster:
        yield cluster.master_url


@pytest.fixture(scope="session")
def airflow_home(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """A throwaway AIRFLOW_HOME with the repo's dags/, its metadata DB migrated once per session.

    Airflow reads its configuration when first imported, so tests must import airflow only inside
    test functions that use this fixture (never at module level).
    """
    import sys

    home = tmp_path_factory.mktemp("airflow")
    settings = {
        "AIRFLOW_HOME": str(home),
        "AIRFLOW__CORE__DAGS_FOLDER": str(Path(__file__).resolve().parents[1] / "dags"),
        "AIRFLOW__CORE__LOAD_EXAMPLES": "False",
        "AIRFLOW__CORE__PARALLELISM": "4",
        "AIRFLOW__CORE__UNIT_TEST_MODE": "True",
        "AIRFLOW__DATABASE__SQL_ALCHEMY_CONN": f"sqlite:///{home / 'airflow.db'}",
        "AIRFLOW__LOGGING__LOGGING_LEVEL": "WARNING",
    }
    already = [m for m in ("airflow.configuration", "airflow.settings") if m in sys.modules]
    if already:
        raise RuntimeError(
            f"airflow was imported before the airflow_home fixture ({already}): import it lazily"
        )
    previous = {key: os.environ.get(key) for key in settings}
    os.environ.update(settings)
    from airflow.utils import db as airflow_db

    airflow_db.initdb()
    try:
        yield home
    finally:
        for key, value in previous.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value


@pytest.fixture
def connections(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> str:
    """Airflow connections (``AIRFLOW_CONN_*``) for ``dag.test()``; the advisor DB's SQLite URL.

    Always the advisor DB (a SQLite file under ``tmp_path``); Kafka (the session broker) and Spark
    (``local[2]`` on the loopback) only when the test's ``connections`` marker asks, and
    ``upgrade=True`` migrates the DB first (what the DAGs' first task would do).
    """
    marker = request.node.get_closest_marker("connections")
    wanted = dict(marker.kwargs) if marker else {}
    db_file = tmp_path / "advisor.db"
    conns: dict[str, dict] = {"REBALANCE_ADVISOR_DB": {"conn_type": "sqlite", "host": str(db_file)}}
    if wanted.get("kafka"):
        bootstrap = request.getfixturevalue("kafka_bootstrap")
        conns["KAFKA_DEFAULT"] = {"conn_type": "kafka", "extra": {"bootstrap.servers": bootstrap}}
    if wanted.get("spark"):
        conns["SPARK_DEFAULT"] = {
            "conn_type": "spark",
            "host": "local[2]",
            "extra": {"spark.driver.host": "127.0.0.1", "spark.driver.bindAddress": "127.0.0.1"},
        }
    for name, conn in conns.items():
        monkeypatch.setenv(f"AIRFLOW_CONN_{name}", json.dumps(conn))
    url = f"sqlite:///{db_file}"
    if wanted.get("upgrade"):
        from rebalance_advisor.store import db

        db.upgrade(url)
    return url
