"""A plan database holding real planner output for the demo workload (shared by the UI tests).

Built once per session and per backend: two real snapshots of the session broker (demo workload
loaded) written with the store, each planned by the real Spark planner (``local[2]``), so the
database has two advisor runs, recommended plans (``kip-example`` among them) and an imbalance
history. Tests that change plans take :func:`copy_of`, a private copy, so order never matters.
"""

from __future__ import annotations

import shutil
import uuid
from dataclasses import dataclass
from pathlib import Path

import pytest


@dataclass(frozen=True)
class PlannedDb:
    url: str
    backend: str
    snapshot_ids: tuple[int, ...]
    run_ids: tuple[int | None, ...]


def build(url: str, bootstrap: str, snapshots: int = 2) -> tuple[tuple[int, ...], tuple[int | None, ...]]:
    """Snapshot the broker and run the planner ``snapshots`` times into ``url``."""
    from rebalance_advisor.adapters.kafka_snapshot import collect
    from rebalance_advisor.adapters.spark_planner import run_planner
    from rebalance_advisor.domain.decisions import Thresholds
    from rebalance_advisor.store import db
    from rebalance_advisor.store.snapshots import write_snapshot

    from tests._planner import live_spark

    db.upgrade(url)
    snap_ids, run_ids = [], []
    for _ in range(snapshots):
        snap_ids.append(write_snapshot(collect(bootstrap), url))
        # a cool-down (off by default) keeps the first run's plan standing
        thresholds = Thresholds(cooldown_minutes=30)
        run_ids.append(run_planner(live_spark(), url, snap_ids[-1], thresholds, created_by="ui-tests").run_id)
    return tuple(snap_ids), tuple(run_ids)


def _pg_copy(server, source_url: str) -> str:
    """A new PostgreSQL database cloned from ``source_url``'s (CREATE DATABASE ... TEMPLATE)."""
    import psycopg
    import sqlalchemy as sa
    from rebalance_advisor.store import db

    db.dispose(source_url)  # a template must have no open connections
    source = sa.make_url(source_url).database
    name = f"t_{uuid.uuid4().hex[:12]}"
    with psycopg.connect(
        f"host=127.0.0.1 port={server.port} user=postgres dbname=postgres", autocommit=True
    ) as conn:
        conn.execute(f'CREATE DATABASE "{name}" TEMPLATE "{source}"')
    return f"postgresql+psycopg://postgres@127.0.0.1:{server.port}/{name}"


@pytest.fixture(scope="session", params=["sqlite", "postgresql"])
def planned_demo_db(
    request: pytest.FixtureRequest,
    tmp_path_factory: pytest.TempPathFactory,
    kafka_bootstrap: str,
    demo_groups,
) -> PlannedDb:
    """The shared, read-only planned database of one backend (do not change it: use copy_of)."""
    if request.param == "sqlite":
        url = f"sqlite:///{tmp_path_factory.mktemp('planned') / 'advisor.db'}"
    else:
        url = request.getfixturevalue("postgres_server").create_database(f"planned_{uuid.uuid4().hex[:8]}")
    snaps, runs = build(url, kafka_bootstrap)
    return PlannedDb(url, request.param, snaps, runs)


def copy_of(request: pytest.FixtureRequest, planned: PlannedDb, tmp_path: Path) -> str:
    """A private writable copy of the planned database, same backend."""
    import sqlalchemy as sa

    if planned.backend == "sqlite":
        target = tmp_path / "advisor-copy.db"
        shutil.copy(sa.make_url(planned.url).database, target)
        return f"sqlite:///{target}"
    return _pg_copy(request.getfixturevalue("postgres_server"), planned.url)
