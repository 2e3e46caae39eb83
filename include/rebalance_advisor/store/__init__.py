"""The advisor's SQL store: models, engines and migrations, and snapshot read/write helpers.

``write_snapshot`` stores one :class:`rebalance_advisor.domain.snapshot_model.Snapshot` in one transaction;
``load_snapshot`` gives it back for planning; ``prune`` applies retention.
"""

from rebalance_advisor.store.db import current_revision, engine_for, session, upgrade, wait_for_sqlite_writer
from rebalance_advisor.store.snapshots import (
    latest_snapshot_id,
    load_snapshot,
    prune,
    resolve_snapshot_id,
    stored_snapshot_after,
    write_snapshot,
)

__all__ = [
    "current_revision",
    "engine_for",
    "latest_snapshot_id",
    "load_snapshot",
    "prune",
    "resolve_snapshot_id",
    "session",
    "stored_snapshot_after",
    "upgrade",
    "wait_for_sqlite_writer",
    "write_snapshot",
]
