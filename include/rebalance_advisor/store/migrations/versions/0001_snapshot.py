"""Snapshot tables: snapshots, partition offsets, groups, members, assignments, committed offsets,
errors, and the static-member registry (docs/architecture.md, "Data").

Revision ID: 0001_snapshot
Revises: (none)
Create Date: 2026-11-21 04:56:45.892980
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0001_snapshot"
down_revision = None
branch_labels = None
depends_on = None


def upgrade() -> None:
    _snapshots()
    _static_members()
    _committed_offsets()
    _consumer_groups()
    _group_members()
    _member_assignments()
    _partition_offsets()
    _snapshot_errors()


def _snapshots() -> None:
    """One row per pass over a cluster: when, which cluster, counts, status."""
    op.create_table(
        "snapshots",
        sa.Column("id", sa.Integer(), autoincrement=True, nullable=False),
        sa.Column("taken_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("cluster_id", sa.String(length=64), nullable=True),
        sa.Column("bootstrap_servers", sa.Text(), nullable=False),
        sa.Column("duration_s", sa.Float(), nullable=False),
        sa.Column("status", sa.String(length=16), nullable=False),
        sa.Column("isolation_level", sa.String(length=20), nullable=False),
        sa.Column("group_count", sa.Integer(), nullable=False),
        sa.Column("member_count", sa.Integer(), nullable=False),
        sa.Column("partition_count", sa.Integer(), nullable=False),
        sa.Column("committed_count", sa.Integer(), nullable=False),
        sa.Column("error_count", sa.Integer(), nullable=False),
        sa.Column("airflow_run_id", sa.String(length=250), nullable=True),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_snapshots")),
        sa.UniqueConstraint("airflow_run_id", name=op.f("uq_snapshots_airflow_run_id")),
        sqlite_autoincrement=True,
    )
    with op.batch_alter_table("snapshots", schema=None) as batch_op:
        batch_op.create_index(batch_op.f("ix_snapshots_taken_at"), ["taken_at"], unique=False)


def _static_members() -> None:
    """The manual-assign registry: not per snapshot (Kafka cannot list these consumers)."""
    op.create_table(
        "static_members",
        sa.Column("group_id", sa.String(length=255), nullable=False),
        sa.Column("member_id", sa.String(length=255), nullable=False),
        sa.Column("topics", sa.JSON(), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("group_id", "member_id", name=op.f("pk_static_members")),
    )


def _committed_offsets() -> None:
    """A group's committed offset per partition, per snapshot."""
    op.create_table(
        "committed_offsets",
        sa.Column("snapshot_id", sa.Integer(), nullable=False),
        sa.Column("group_id", sa.String(length=255), nullable=False),
        sa.Column("topic", sa.String(length=249), nullable=False),
        sa.Column("partition", sa.Integer(), nullable=False),
        sa.Column("committed_offset", sa.BigInteger(), nullable=False),
        sa.Column("leader_epoch", sa.Integer(), nullable=True),
        sa.Column("metadata", sa.Text(), nullable=True),
        sa.ForeignKeyConstraint(
            ["snapshot_id"],
            ["snapshots.id"],
            name=op.f("fk_committed_offsets_snapshot_id_snapshots"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint(
            "snapshot_id", "group_id", "topic", "partition", name=op.f("pk_committed_offsets")
        ),
    )
    with op.batch_alter_table("committed_offsets", schema=None) as batch_op:
        batch_op.create_index("ix_committed_offsets_group_history", ["group_id", "snapshot_id"], unique=False)


def _consumer_groups() -> None:
    """Each group a snapshot saw: state, type, assignor, coordinator."""
    op.create_table(
        "consumer_groups",
        sa.Column("snapshot_id", sa.Integer(), nullable=False),
        sa.Column("group_id", sa.String(length=255), nullable=False),
        sa.Column("state", sa.String(length=32), nullable=False),
        sa.Column("group_type", sa.String(length=16), nullable=False),
        sa.Column("assignor", sa.String(length=255), nullable=True),
        sa.Column("coordinator_id", sa.Integer(), nullable=True),
        sa.Column("coordinator_host", sa.String(length=255), nullable=True),
        sa.Column("member_count", sa.Integer(), nullable=False),
        sa.ForeignKeyConstraint(
            ["snapshot_id"],
            ["snapshots.id"],
            name=op.f("fk_consumer_groups_snapshot_id_snapshots"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("snapshot_id", "group_id", name=op.f("pk_consumer_groups")),
    )
    with op.batch_alter_table("consumer_groups", schema=None) as batch_op:
        batch_op.create_index("ix_consumer_groups_group_history", ["group_id", "snapshot_id"], unique=False)


def _group_members() -> None:
    """Each member of a group, per snapshot."""
    op.create_table(
        "group_members",
        sa.Column("snapshot_id", sa.Integer(), nullable=False),
        sa.Column("group_id", sa.String(length=255), nullable=False),
        sa.Column("member_id", sa.String(length=255), nullable=False),
        sa.Column("position", sa.Integer(), nullable=False),
        sa.Column("group_instance_id", sa.String(length=255), nullable=True),
        sa.Column("client_id", sa.String(length=255), nullable=False),
        sa.Column("host", sa.String(length=255), nullable=False),
        sa.Column("rack", sa.String(length=255), nullable=True),
        sa.Column("subscribed_topics", sa.JSON(), nullable=False),
        sa.ForeignKeyConstraint(
            ["snapshot_id"],
            ["snapshots.id"],
            name=op.f("fk_group_members_snapshot_id_snapshots"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("snapshot_id", "group_id", "member_id", name=op.f("pk_group_members")),
    )


def _member_assignments() -> None:
    """The partitions each member held, per snapshot."""
    op.create_table(
        "member_assignments",
        sa.Column("snapshot_id", sa.Integer(), nullable=False),
        sa.Column("group_id", sa.String(length=255), nullable=False),
        sa.Column("member_id", sa.String(length=255), nullable=False),
        sa.Column("topic", sa.String(length=249), nullable=False),
        sa.Column("partition", sa.Integer(), nullable=False),
        sa.ForeignKeyConstraint(
            ["snapshot_id"],
            ["snapshots.id"],
            name=op.f("fk_member_assignments_snapshot_id_snapshots"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint(
            "snapshot_id", "group_id", "member_id", "topic", "partition", name=op.f("pk_member_assignments")
        ),
    )
    with op.batch_alter_table("member_assignments", schema=None) as batch_op:
        batch_op.create_index(
            "ix_member_assignments_partition", ["snapshot_id", "topic", "partition"], unique=False
        )


def _partition_offsets() -> None:
    """Log-start and log-end offsets per partition, per snapshot."""
    op.create_table(
        "partition_offsets",
        sa.Column("snapshot_id", sa.Integer(), nullable=False),
        sa.Column("topic", sa.String(length=249), nullable=False),
        sa.Column("partition", sa.Integer(), nullable=False),
        sa.Column("log_start_offset", sa.BigInteger(), nullable=True),
        sa.Column("log_end_offset", sa.BigInteger(), nullable=True),
        sa.Column("last_stable_offset", sa.BigInteger(), nullable=True),
        sa.Column("leader", sa.Integer(), nullable=True),
        sa.ForeignKeyConstraint(
            ["snapshot_id"],
            ["snapshots.id"],
            name=op.f("fk_partition_offsets_snapshot_id_snapshots"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("snapshot_id", "topic", "partition", name=op.f("pk_partition_offsets")),
    )


def _snapshot_errors() -> None:
    """What a pass could not read, and why."""
    op.create_table(
        "snapshot_errors",
        sa.Column("id", sa.Integer(), autoincrement=True, nullable=False),
        sa.Column("snapshot_id", sa.Integer(), nullable=False),
        sa.Column("stage", sa.String(length=32), nullable=False),
        sa.Column("group_id", sa.String(length=255), nullable=True),
        sa.Column("topic", sa.String(length=249), nullable=True),
        sa.Column("partition", sa.Integer(), nullable=True),
        sa.Column("error_code", sa.String(length=64), nullable=True),
        sa.Column("reason", sa.Text(), nullable=False),
        sa.ForeignKeyConstraint(
            ["snapshot_id"],
            ["snapshots.id"],
            name=op.f("fk_snapshot_errors_snapshot_id_snapshots"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_snapshot_errors")),
    )
    with op.batch_alter_table("snapshot_errors", schema=None) as batch_op:
        batch_op.create_index(batch_op.f("ix_snapshot_errors_snapshot_id"), ["snapshot_id"], unique=False)


def downgrade() -> None:
    with op.batch_alter_table("snapshot_errors", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_snapshot_errors_snapshot_id"))

    op.drop_table("snapshot_errors")
    op.drop_table("partition_offsets")
    with op.batch_alter_table("member_assignments", schema=None) as batch_op:
        batch_op.drop_index("ix_member_assignments_partition")

    op.drop_table("member_assignments")
    op.drop_table("group_members")
    with op.batch_alter_table("consumer_groups", schema=None) as batch_op:
        batch_op.drop_index("ix_consumer_groups_group_history")

    op.drop_table("consumer_groups")
    with op.batch_alter_table("committed_offsets", schema=None) as batch_op:
        batch_op.drop_index("ix_committed_offsets_group_history")

    op.drop_table("committed_offsets")
    op.drop_table("static_members")
    with op.batch_alter_table("snapshots", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_snapshots_taken_at"))

    op.drop_table("snapshots")
