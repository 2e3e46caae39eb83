"""The rate interval stored with each snapshot: seconds since the previous snapshot of its cluster
when its rates come from that interval (``SnapshotRates.interval_s``), else NULL.

Before, readers queried it again (the previous snapshot of the same cluster, by id); stored
snapshots are filled the same way here, so nothing read changes.

Revision ID: 0009_snapshot_rate_interval
Revises: 0008_flagged_view
"""

from __future__ import annotations

from datetime import datetime

import sqlalchemy as sa
from alembic import op

from rebalance_advisor.domain.timestamps import assume_utc

revision = "0009_snapshot_rate_interval"
down_revision = "0008_flagged_view"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("snapshots") as batch:
        batch.add_column(sa.Column("rate_interval_s", sa.Float(), nullable=True))
    s = sa.table(
        "snapshots",
        sa.column("id", sa.Integer()),
        sa.column("taken_at", sa.DateTime(timezone=True)),
        sa.column("cluster_id", sa.String()),
        sa.column("bootstrap_servers", sa.Text()),
        sa.column("rates_note", sa.Text()),
        sa.column("rate_interval_s", sa.Float()),
    )
    conn = op.get_bind()
    rows = conn.execute(
        sa.select(s.c.id, s.c.taken_at, s.c.cluster_id, s.c.bootstrap_servers, s.c.rates_note).order_by(
            s.c.id
        )
    ).all()
    last: dict[tuple[str, str], datetime] = {}  # cluster -> taken_at of its snapshot stored last so far
    for snapshot_id, taken_at, cluster_id, bootstrap_servers, rates_note in rows:
        cluster = ("id", cluster_id) if cluster_id is not None else ("bootstrap", bootstrap_servers)
        before, last[cluster] = last.get(cluster), assume_utc(taken_at)
        if rates_note is None and before is not None:
            elapsed = (assume_utc(taken_at) - before).total_seconds()
            if elapsed > 0:
                conn.execute(sa.update(s).where(s.c.id == snapshot_id).values(rate_interval_s=elapsed))


def downgrade() -> None:
    with op.batch_alter_table("snapshots") as batch:
        batch.drop_column("rate_interval_s")
