"""SQLAlchemy 2 models of the snapshot tables (docs/architecture.md, "Data").

Keys are natural ones (snapshot id + group/topic/partition) so SQL users can join without surrogate
ids. Child rows are deleted explicitly by ``store`` (portable: SQLite does not enforce cascades
unless asked per connection). The Alembic revision ``0001_snapshot`` creates these tables,
``0004_snapshot_rates`` adds the rate, time-lag and capacity columns, ``0005_long_ids`` makes ids
and names TEXT (as long as Kafka takes them; topics stay 249, Kafka's limit), ``0015_long_member_ids``
keeps member ids over the key limit whole beside their key.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

import sqlalchemy as sa
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column

NAMING = {
    "ix": "ix_%(table_name)s_%(column_0_N_name)s",
    "uq": "uq_%(table_name)s_%(column_0_N_name)s",
    "ck": "ck_%(table_name)s_%(constraint_name)s",
    "fk": "fk_%(table_name)s_%(column_0_name)s_%(referred_table_name)s",
    "pk": "pk_%(table_name)s",
}


class Base(DeclarativeBase):
    metadata = sa.MetaData(naming_convention=NAMING)


def _snapshot_fk() -> Any:
    return sa.ForeignKey("snapshots.id", ondelete="CASCADE")


class SnapshotRow(Base):
    """One pass over the cluster. ``airflow_run_id`` is unique when set: a re-run replaces its row."""

    __tablename__ = "snapshots"
    # Ids only grow (also on SQLite): "latest" is the highest id, and plans keep pointing at theirs.
    __table_args__ = {"sqlite_autoincrement": True}

    id: Mapped[int] = mapped_column(sa.Integer, primary_key=True, autoincrement=True)
    taken_at: Mapped[datetime] = mapped_column(sa.DateTime(timezone=True), index=True)
    cluster_id: Mapped[str | None] = mapped_column(sa.String(64))
    bootstrap_servers: Mapped[str] = mapped_column(sa.Text)
    duration_s: Mapped[float] = mapped_column(sa.Float)
    status: Mapped[str] = mapped_column(sa.String(16))  # complete | partial
    isolation_level: Mapped[str] = mapped_column(sa.String(20), default="read_uncommitted")
    group_count: Mapped[int] = mapped_column(sa.Integer)
    member_count: Mapped[int] = mapped_column(sa.Integer)
    partition_count: Mapped[int] = mapped_column(sa.Integer)
    committed_count: Mapped[int] = mapped_column(sa.Integer)
    error_count: Mapped[int] = mapped_column(sa.Integer)
    airflow_run_id: Mapped[str | None] = mapped_column(sa.String(250), unique=True)
    #: why no rates could be derived for the whole snapshot (first of its cluster, interval, ...)
    rates_note: Mapped[str | None] = mapped_column(sa.Text)
    #: seconds since the previous snapshot of the cluster, when the rates come from that interval
    #: (``SnapshotRates.interval_s``; migration 0009_snapshot_rate_interval)
    rate_interval_s: Mapped[float | None] = mapped_column(sa.Float)


class PartitionOffsetRow(Base):
    __tablename__ = "partition_offsets"

    snapshot_id: Mapped[int] = mapped_column(_snapshot_fk(), primary_key=True)
    topic: Mapped[str] = mapped_column(sa.String(249), primary_key=True)
    partition: Mapped[int] = mapped_column(sa.Integer, primary_key=True)
    log_start_offset: Mapped[int | None] = mapped_column(sa.BigInteger)
    log_end_offset: Mapped[int | None] = mapped_column(sa.BigInteger)
    last_stable_offset: Mapped[int | None] = mapped_column(sa.BigInteger)
    leader: Mapped[int | None] = mapped_column(sa.Integer)
    #: records/s appended, smoothed (``rebalance_advisor.domain.estimates.step``)
    produce_rate: Mapped[float | None] = mapped_column(sa.Float)
    #: why ``produce_rate`` is unknown
    produce_rate_unknown: Mapped[str | None] = mapped_column(sa.Text)


class ConsumerGroupRow(Base):
    __tablename__ = "consumer_groups"
    __table_args__ = (sa.Index("ix_consumer_groups_group_history", "group_id", "snapshot_id"),)

    snapshot_id: Mapped[int] = mapped_column(_snapshot_fk(), primary_key=True)
    group_id: Mapped[str] = mapped_column(sa.Text, primary_key=True)
    state: Mapped[str] = mapped_column(sa.String(32))
    group_type: Mapped[str] = mapped_column(sa.String(16))  # classic | consumer | simple | share
    assignor: Mapped[str | None] = mapped_column(sa.Text)
    coordinator_id: Mapped[int | None] = mapped_column(sa.Integer)
    coordinator_host: Mapped[str | None] = mapped_column(sa.Text)
    member_count: Mapped[int] = mapped_column(sa.Integer)
    #: the averaged evidence that the group's telemetry reads as records at a steady spacing
    #: (``domain.telemetry.arrivals_evidence``), carried to the next snapshot; NULL: none yet
    arrivals_evidence: Mapped[float | None] = mapped_column(sa.Float)


class GroupMemberRow(Base):
    __tablename__ = "group_members"

    snapshot_id: Mapped[int] = mapped_column(_snapshot_fk(), primary_key=True)
    group_id: Mapped[str] = mapped_column(sa.Text, primary_key=True)
    #: the member id, or its key when it is over the store's limit (store/id_limits.py)
    member_id: Mapped[str] = mapped_column(sa.Text, primary_key=True)
    #: the whole member id when ``member_id`` holds its key, else NULL (migration 0015_long_member_ids)
    member_id_full: Mapped[str | None] = mapped_column(sa.Text)
    position: Mapped[int] = mapped_column(sa.Integer)  # the coordinator's order
    group_instance_id: Mapped[str | None] = mapped_column(sa.Text)
    client_id: Mapped[str] = mapped_column(sa.Text)
    host: Mapped[str] = mapped_column(sa.Text)
    rack: Mapped[str | None] = mapped_column(sa.Text)
    #: inferred from the assigned/target partitions (GroupMemberSnapshot.subscribed_topics): not the subscription
    subscribed_topics: Mapped[list[str]] = mapped_column(sa.JSON)
    #: records/s the member can consume, and where that came from (measured | group_median |
    #: configured | equal: unknown, capacities taken as equal)
    capacity: Mapped[float | None] = mapped_column(sa.Float)
    capacity_source: Mapped[str | None] = mapped_column(sa.String(16))
    capacity_measured_at: Mapped[datetime | None] = mapped_column(sa.DateTime(timezone=True))
    #: why a capacity source the member has was not used (``MemberCapacity.note``), e.g. distrusted
    #: telemetry
    capacity_note: Mapped[str | None] = mapped_column(sa.Text)
    #: its telemetry read at a consume rate (``domain.telemetry.TelemetryReference``), carried to the
    #: next snapshot: that rate and the capacity under each arrival model; NULL: none
    telemetry_reference_consumed: Mapped[float | None] = mapped_column(sa.Float)
    telemetry_reference_random: Mapped[float | None] = mapped_column(sa.Float)
    telemetry_reference_steady: Mapped[float | None] = mapped_column(sa.Float)
    #: its proven rate (``domain.snapshot_model.ProvenRate``), carried to the next snapshot: the most
    #: it consumed over an interval it kept up through, and when; NULL: none
    proven_rate: Mapped[float | None] = mapped_column(sa.Float)
    proven_rate_at: Mapped[datetime | None] = mapped_column(sa.DateTime(timezone=True))
    #: the samples its measured capacity is the plain mean of while they are few
    #: (``domain.estimates.CarriedCapacity.sample_count``); NULL: settled, or none
    capacity_sample_count: Mapped[int | None] = mapped_column(sa.Integer)


class AssignedCapacityRow(Base):
    """Capacity of a registered manual-assign (``assign()``) member, per snapshot.

    Why not a ``group_members`` row: the broker lists no members for such a group, and ``lag`` and the
    member counts show what the broker lists. ``plan_id``: the published plan whose owners the
    capacity was measured against; a sample needs the same plan in force at both snapshots.
    """

    __tablename__ = "assigned_capacities"

    snapshot_id: Mapped[int] = mapped_column(_snapshot_fk(), primary_key=True)
    group_id: Mapped[str] = mapped_column(sa.Text, primary_key=True)
    member_id: Mapped[str] = mapped_column(sa.Text, primary_key=True)
    plan_id: Mapped[int] = mapped_column(sa.Integer)
    capacity: Mapped[float | None] = mapped_column(sa.Float)
    capacity_source: Mapped[str] = mapped_column(sa.String(16))
    capacity_measured_at: Mapped[datetime | None] = mapped_column(sa.DateTime(timezone=True))
    #: its proven rate and capacity sample count, as in ``group_members``
    proven_rate: Mapped[float | None] = mapped_column(sa.Float)
    proven_rate_at: Mapped[datetime | None] = mapped_column(sa.DateTime(timezone=True))
    capacity_sample_count: Mapped[int | None] = mapped_column(sa.Integer)


class MemberAssignmentRow(Base):
    __tablename__ = "member_assignments"
    __table_args__ = (sa.Index("ix_member_assignments_partition", "snapshot_id", "topic", "partition"),)

    snapshot_id: Mapped[int] = mapped_column(_snapshot_fk(), primary_key=True)
    group_id: Mapped[str] = mapped_column(sa.Text, primary_key=True)
    member_id: Mapped[str] = mapped_column(sa.Text, primary_key=True)
    topic: Mapped[str] = mapped_column(sa.String(249), primary_key=True)
    partition: Mapped[int] = mapped_column(sa.Integer, primary_key=True)


class CommittedOffsetRow(Base):
    __tablename__ = "committed_offsets"
    __table_args__ = (sa.Index("ix_committed_offsets_group_history", "group_id", "snapshot_id"),)

    snapshot_id: Mapped[int] = mapped_column(_snapshot_fk(), primary_key=True)
    group_id: Mapped[str] = mapped_column(sa.Text, primary_key=True)
    topic: Mapped[str] = mapped_column(sa.String(249), primary_key=True)
    partition: Mapped[int] = mapped_column(sa.Integer, primary_key=True)
    committed_offset: Mapped[int] = mapped_column(sa.BigInteger)
    leader_epoch: Mapped[int | None] = mapped_column(sa.Integer)
    metadata_: Mapped[str | None] = mapped_column("metadata", sa.Text)
    #: records/s committed by the group on this partition, smoothed
    consume_rate: Mapped[float | None] = mapped_column(sa.Float)
    consume_rate_unknown: Mapped[str | None] = mapped_column(sa.Text)
    #: timestamp (ms) of the first record at or after the committed offset, read from the broker
    record_timestamp_ms: Mapped[int | None] = mapped_column(sa.BigInteger)
    #: seconds behind, and how (record_timestamp | rate_estimate | caught_up)
    time_lag_s: Mapped[float | None] = mapped_column(sa.Float)
    time_lag_method: Mapped[str | None] = mapped_column(sa.String(32))
    #: share groups only: the broker's lag (``committed_offset`` is then the share-partition start)
    share_lag: Mapped[int | None] = mapped_column(sa.BigInteger)


class ShareUnstartedRow(Base):
    """A partition of a share group's topics the group has not started on: the broker holds no
    start offset and no lag for it yet, and ``kafka-share-groups --describe`` prints it with ``-``
    (migration 0016_share_unstarted)."""

    __tablename__ = "share_unstarted_partitions"

    snapshot_id: Mapped[int] = mapped_column(_snapshot_fk(), primary_key=True)
    group_id: Mapped[str] = mapped_column(sa.Text, primary_key=True)
    topic: Mapped[str] = mapped_column(sa.String(249), primary_key=True)
    partition: Mapped[int] = mapped_column(sa.Integer, primary_key=True)


class SnapshotErrorRow(Base):
    __tablename__ = "snapshot_errors"

    id: Mapped[int] = mapped_column(sa.Integer, primary_key=True, autoincrement=True)
    snapshot_id: Mapped[int] = mapped_column(_snapshot_fk(), index=True)
    stage: Mapped[str] = mapped_column(sa.String(32))
    group_id: Mapped[str | None] = mapped_column(sa.Text)
    topic: Mapped[str | None] = mapped_column(sa.String(249))
    partition: Mapped[int | None] = mapped_column(sa.Integer)
    error_code: Mapped[str | None] = mapped_column(sa.String(64))
    reason: Mapped[str] = mapped_column(sa.Text)


class StaticMemberRow(Base):
    """Registry of manual-assign consumer instances (not per snapshot; Kafka cannot list them)."""

    __tablename__ = "static_members"

    group_id: Mapped[str] = mapped_column(sa.Text, primary_key=True)
    member_id: Mapped[str] = mapped_column(sa.Text, primary_key=True)
    topics: Mapped[list[str]] = mapped_column(sa.JSON)
    created_at: Mapped[datetime] = mapped_column(sa.DateTime(timezone=True))
    #: opted in to key-range sharing (domain/assignors/key_range.py; migration 0003_share_keys)
    share_keys: Mapped[bool] = mapped_column(sa.Boolean, server_default=sa.false(), default=False)


#: Child tables of ``snapshots``, in delete order.
SNAPSHOT_CHILDREN = (
    AssignedCapacityRow,
    MemberAssignmentRow,
    GroupMemberRow,
    CommittedOffsetRow,
    ShareUnstartedRow,
    ConsumerGroupRow,
    PartitionOffsetRow,
    SnapshotErrorRow,
)
