"""A throwaway PostgreSQL cluster on 127.0.0.1 in a temp dir (Debian's server binaries).

``make test`` installs the ``postgresql`` package when missing (scripts/system-deps.sh). The
cluster is started by the same code as the local Airflow stack's (``devtools/local_postgres.py``),
without fsync: it is thrown away after the session.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from rebalance_advisor.devtools import local_postgres
from rebalance_advisor.devtools.local_kafka import free_port


@dataclass
class Server:
    base_dir: Path
    port: int

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
        local_postgres.stop(self.base_dir)


def start(base_dir: Path) -> Server:
    cluster = local_postgres.start(base_dir, free_port(), fsync=False, max_connections=200)
    return Server(base_dir=cluster.base_dir, port=cluster.port)
