"""A throwaway PostgreSQL cluster on 127.0.0.1 in a temp dir (Debian's server binaries).

``make test`` installs the ``postgresql`` package when missing (scripts/system-deps.sh).
PostgreSQL refuses to run as root, so as root the cluster runs as the ``postgres`` user.
"""

from __future__ import annotations

import glob
import os
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

from rebalance_advisor.devtools.local_kafka import free_port


def _bin_dir() -> Path:
    candidates = sorted(glob.glob("/usr/lib/postgresql/*/bin/initdb"), key=lambda p: int(p.split("/")[4]))
    if candidates:
        return Path(candidates[-1]).parent
    initdb = shutil.which("initdb")
    if initdb:
        return Path(initdb).parent
    raise RuntimeError(
        "PostgreSQL server binaries not found: run `make system-deps` (apt-get install postgresql)"
    )


def _as_server_user(command: list[str]) -> list[str]:
    return ["runuser", "-u", "postgres", "--", *command] if os.geteuid() == 0 else command


@dataclass
class Server:
    data_dir: Path
    port: int
    bin_dir: Path

    @property
    def admin_url(self) -> str:
        return f"postgresql+psycopg://postgres@127.0.0.1:{self.port}/postgres"

    def create_database(self, name: str) -> str:
        import psycopg

        with psycopg.connect(
            f"host=127.0.0.1 port={self.port} user=postgres dbname=postgres", autocommit=True
        ) as conn:
            conn.execute(f'CREATE DATABASE "{name}"')
        return f"postgresql+psycopg://postgres@127.0.0.1:{self.port}/{name}"

    def stop(self) -> None:
        subprocess.run(
            _as_server_user(
                [str(self.bin_dir / "pg_ctl"), "-D", str(self.data_dir), "-m", "fast", "-w", "stop"]
            ),
            capture_output=True,
            timeout=60,
        )


def start(base_dir: Path) -> Server:
    bin_dir = _bin_dir()
    base_dir.chmod(0o777)
    data_dir = base_dir / "data"
    data_dir.mkdir()
    if os.geteuid() == 0:
        shutil.chown(data_dir, "postgres", "postgres")
        shutil.chown(base_dir, "postgres", "postgres")
    subprocess.run(
        _as_server_user(
            [str(bin_dir / "initdb"), "-D", str(data_dir), "-U", "postgres", "--auth=trust", "-E", "UTF8"]
        ),
        check=True,
        capture_output=True,
        timeout=120,
    )
    port = free_port()
    options = f"-p {port} -c listen_addresses=127.0.0.1 -k {base_dir} -c fsync=off -c max_connections=200"
    subprocess.run(
        _as_server_user(
            [
                str(bin_dir / "pg_ctl"),
                "-D",
                str(data_dir),
                "-o",
                options,
                "-l",
                str(base_dir / "server.log"),
                "-w",
                "start",
            ]
        ),
        check=True,
        capture_output=True,
        timeout=120,
    )
    return Server(data_dir=data_dir, port=port, bin_dir=bin_dir)
