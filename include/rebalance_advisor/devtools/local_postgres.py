"""A local PostgreSQL cluster on 127.0.0.1 (Debian's server binaries): ``initdb`` + ``pg_ctl``.

The local Airflow stack keeps Airflow's metadata here rather than in SQLite: SQLite takes one
writer at a time, and a scheduler that met ``database is locked`` after a restart shut down and
stayed down (docs/operations/local-airflow.md, "Why PostgreSQL"). The test suite's throwaway clusters use the same
functions (``tests/support/postgres.py``).

PostgreSQL refuses to run as root, so as root the server runs as the ``postgres`` user; its data
directory must then be reachable by that user (see :func:`server_dir`).
"""

from __future__ import annotations

import glob
import hashlib
import os
import shutil
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path

from rebalance_advisor.errors import AdvisorError

SERVER_USER = "postgres"
START_TIMEOUT_S = 120.0


class PostgresError(AdvisorError):
    """The local PostgreSQL could not be found, initialised, started or stopped (the message says why)."""


def bin_dir() -> Path:
    """The newest installed server version's ``bin`` (``initdb``, ``pg_ctl``)."""
    found = sorted(glob.glob("/usr/lib/postgresql/*/bin/initdb"), key=lambda p: int(p.split("/")[4]))
    if found:
        return Path(found[-1]).parent
    initdb = shutil.which("initdb")
    if initdb:
        return Path(initdb).parent
    raise PostgresError(
        "PostgreSQL server binaries not found: run `make system-deps` (apt-get install postgresql)"
    )


def as_server_user(command: list[str]) -> list[str]:
    """``command`` run as the ``postgres`` user when we are root (PostgreSQL refuses root)."""
    return ["runuser", "-u", SERVER_USER, "--", *command] if os.geteuid() == 0 else command


def _server_can_reach(path: Path) -> bool:
    if os.geteuid() != 0:
        return True
    probe = subprocess.run(as_server_user(["test", "-x", str(path)]), capture_output=True, timeout=30)
    return probe.returncode == 0


def server_dir(home: Path) -> Path:
    """Where the stack's cluster lives: ``<home>/airflow-postgres`` when the server user can reach
    it; as root with a home the ``postgres`` user cannot enter (``/root`` is 0700), a directory of
    its own under the system temp dir, named after the home so each home keeps its one cluster."""
    wanted = home / "airflow-postgres"
    if _server_can_reach(home):
        return wanted
    digest = hashlib.sha1(str(home).encode()).hexdigest()[:12]
    return Path(tempfile.gettempdir()) / f"rebalance-advisor-airflow-pg-{digest}"


@dataclass(frozen=True)
class Cluster:
    """One cluster: its directory (``data/``, ``server.log``, the socket) and TCP port."""

    base_dir: Path
    port: int

    @property
    def data_dir(self) -> Path:
        return self.base_dir / "data"

    @property
    def log_file(self) -> Path:
        return self.base_dir / "server.log"

    def url(self, database: str, driver: str = "psycopg") -> str:
        return f"postgresql+{driver}://{SERVER_USER}@127.0.0.1:{self.port}/{database}"

    def _connect(self):
        import psycopg

        return psycopg.connect(
            f"host=127.0.0.1 port={self.port} user={SERVER_USER} dbname=postgres", autocommit=True
        )

    def ensure_database(self, name: str) -> None:
        """Create database ``name`` unless it exists."""
        with self._connect() as conn:
            if conn.execute("SELECT 1 FROM pg_database WHERE datname = %s", (name,)).fetchone() is None:
                conn.execute(f'CREATE DATABASE "{name}"')

    def running(self) -> bool:
        if not self.data_dir.exists():
            return False
        done = subprocess.run(
            as_server_user([str(bin_dir() / "pg_ctl"), "-D", str(self.data_dir), "status"]),
            capture_output=True,
            timeout=30,
        )
        return done.returncode == 0


def init(base_dir: Path) -> None:
    """``initdb`` into ``base_dir/data`` unless it holds a cluster already (trust auth, UTF8)."""
    if (base_dir / "data" / "PG_VERSION").exists():
        return
    base_dir.mkdir(parents=True, exist_ok=True)
    base_dir.chmod(0o777 if os.geteuid() == 0 else 0o700)
    data_dir = base_dir / "data"
    data_dir.mkdir(exist_ok=True)
    if os.geteuid() == 0:
        shutil.chown(data_dir, SERVER_USER, SERVER_USER)
        shutil.chown(base_dir, SERVER_USER, SERVER_USER)
    _run(
        [str(bin_dir() / "initdb"), "-D", str(data_dir), "-U", SERVER_USER, "--auth=trust", "-E", "UTF8"],
        "initdb",
    )


def start(
    base_dir: Path,
    port: int,
    fsync: bool = True,
    max_connections: int = 100,
    env: dict[str, str] | None = None,
) -> Cluster:
    """Start the cluster in ``base_dir`` (``init`` first) on 127.0.0.1:``port``; wait until it
    accepts connections. ``fsync=False`` only for throwaway test clusters; ``env`` is the server's
    environment (default: ours)."""
    init(base_dir)
    cluster = Cluster(base_dir, port)
    options = (
        f"-p {port} -c listen_addresses=127.0.0.1 -k {base_dir} -c max_connections={max_connections}"
        + ("" if fsync else " -c fsync=off")
    )
    command = [str(bin_dir() / "pg_ctl"), "-D", str(cluster.data_dir), "-o", options,
               "-l", str(cluster.log_file), "-w", "-t", str(int(START_TIMEOUT_S)), "start"]  # fmt: skip
    _run(command, f"PostgreSQL on port {port}", log=cluster.log_file, env=env)
    return cluster


def stop(base_dir: Path) -> bool:
    """Stop the cluster (fast shutdown: open sessions are ended); True if it was running."""
    data_dir = base_dir / "data"
    if not (data_dir / "postmaster.pid").exists():
        return False
    done = subprocess.run(
        as_server_user([str(bin_dir() / "pg_ctl"), "-D", str(data_dir), "-m", "fast", "-w", "stop"]),
        capture_output=True,
        timeout=120,
    )
    return done.returncode == 0


def _run(command: list[str], what: str, log: Path | None = None, env: dict[str, str] | None = None) -> None:
    try:
        done = subprocess.run(
            as_server_user(command), capture_output=True, text=True, timeout=START_TIMEOUT_S + 30, env=env
        )
    except subprocess.TimeoutExpired:
        raise PostgresError(f"{what} did not finish within {START_TIMEOUT_S:.0f} s") from None
    if done.returncode != 0:
        tail = log.read_text(errors="replace").splitlines()[-10:] if log and log.exists() else []
        detail = " | ".join([*done.stderr.strip().splitlines()[-3:], *tail])
        raise PostgresError(f"{what} failed: {detail}")
