"""Where the advisor keeps its files, and which environment variables change the defaults.

Everything here is read lazily from the environment so that tests, DAGs and the CLI can point the
same code at other places without code changes.
"""

from __future__ import annotations

import os
from pathlib import Path

#: Root of the checkout's ``include/`` folder (the package lives in ``include/rebalance_advisor``).
INCLUDE_DIR = Path(__file__).resolve().parents[1]


def home_dir() -> Path:
    """State outside git: jar cache, demo database, broker data (``REBALANCE_ADVISOR_HOME``)."""
    return Path(os.environ.get("REBALANCE_ADVISOR_HOME", Path.home() / ".rebalance-advisor")).expanduser()


def cache_dir() -> Path:
    """Downloaded artefacts such as the Kafka jars (``REBALANCE_ADVISOR_CACHE``)."""
    return Path(os.environ.get("REBALANCE_ADVISOR_CACHE", home_dir() / "cache")).expanduser()


def database_url() -> str:
    """SQLAlchemy URL of the plan database (``REBALANCE_ADVISOR_DB_URL``); SQLite file by default."""
    return os.environ.get("REBALANCE_ADVISOR_DB_URL") or f"sqlite:///{home_dir() / 'advisor.db'}"


#: the snapshot DAG's schedule when ``REBALANCE_ADVISOR_SNAPSHOT_SCHEDULE`` is not set: every 5 minutes
DEFAULT_SNAPSHOT_SCHEDULE = "*/5 * * * *"


def snapshot_schedule() -> str:
    """The snapshot DAG's cron schedule (``REBALANCE_ADVISOR_SNAPSHOT_SCHEDULE``); the advisor reads
    it too, to leave out an extra snapshot the scheduled one comes before."""
    return os.environ.get("REBALANCE_ADVISOR_SNAPSHOT_SCHEDULE") or DEFAULT_SNAPSHOT_SCHEDULE


def bootstrap_servers_from_env() -> str | None:
    """An existing cluster to use instead of starting a local broker (``KAFKA_BOOTSTRAP_SERVERS``)."""
    return os.environ.get("KAFKA_BOOTSTRAP_SERVERS") or None
