"""What the DAGs share: the snapshot Asset and connection resolution.

Airflow is imported lazily so the library works without it; ``SNAPSHOT_ASSET`` is created on first
access. Connections:
- Kafka: the Kafka provider's ``kafka`` connection (default ``kafka_default``); its ``extra`` JSON
  is the librdkafka config and must hold ``bootstrap.servers``.
- Database: connection ``rebalance_advisor_db``; ``extra.sqlalchemy_url`` wins, else the URL is
  built from the connection's fields. Without that connection: ``REBALANCE_ADVISOR_DB_URL`` or the
  SQLite default.
"""

from __future__ import annotations

from typing import Any

from rebalance_advisor.domain.parameters import SNAPSHOT_DAG_ID, SnapshotParams
from rebalance_advisor.errors import AdvisorError

#: the Asset the snapshot DAG emits, named after it
SNAPSHOT_ASSET_NAME = SNAPSHOT_DAG_ID
#: ``x-`` schemes are the ones Airflow accepts as-is (no normaliser, no warning).
SNAPSHOT_ASSET_URI = f"x-rebalance-advisor://snapshots/{SNAPSHOT_DAG_ID}"
#: the connection ids' defaults, from the one parameter model
DEFAULT_KAFKA_CONN_ID: str = SnapshotParams.model_fields["kafka_conn_id"].default
DEFAULT_DB_CONN_ID: str = SnapshotParams.model_fields["db_conn_id"].default


def snapshot_asset() -> Any:
    """The Asset the snapshot DAG emits and the advisor DAG is scheduled on."""
    from airflow.sdk import Asset

    return Asset(name=SNAPSHOT_ASSET_NAME, uri=SNAPSHOT_ASSET_URI)


def __getattr__(name: str) -> Any:  # PEP 562: SNAPSHOT_ASSET without importing Airflow up front
    if name == "SNAPSHOT_ASSET":
        return snapshot_asset()
    raise AttributeError(name)


def _get_connection(conn_id: str) -> Any | None:
    from airflow.sdk import BaseHook

    try:
        return BaseHook.get_connection(conn_id)
    except Exception as error:  # AirflowNotFoundException lives in different modules across versions
        if type(error).__name__ == "AirflowNotFoundException":
            return None
        raise


def kafka_client_config(conn_id: str = DEFAULT_KAFKA_CONN_ID) -> dict[str, Any]:
    """The librdkafka config from a ``kafka`` connection's extra (``bootstrap.servers`` required)."""
    conn = _get_connection(conn_id)
    if conn is None:
        raise AdvisorError(
            f"Airflow connection {conn_id!r} does not exist: create a 'kafka' connection whose extra is "
            'the librdkafka config, e.g. {"bootstrap.servers": "broker:9092"}'
        )
    config = dict(conn.extra_dejson or {})
    if not config.get("bootstrap.servers"):
        raise AdvisorError(f"Airflow connection {conn_id!r}: its extra must set 'bootstrap.servers'")
    return config


def database_url_from_connection(conn_id: str = DEFAULT_DB_CONN_ID) -> str:
    """The advisor DB's SQLAlchemy URL from connection ``conn_id``, else the settings default."""
    import sqlalchemy as sa

    from rebalance_advisor import settings

    conn = _get_connection(conn_id)
    if conn is None:
        return settings.database_url()
    extra = conn.extra_dejson or {}
    if extra.get("sqlalchemy_url"):
        return str(extra["sqlalchemy_url"])
    conn_type = (conn.conn_type or "").lower()
    if conn_type == "sqlite":
        return f"sqlite:///{conn.host}"
    if conn_type in ("postgres", "postgresql"):
        return sa.URL.create(
            "postgresql+psycopg",
            username=conn.login or None,
            password=conn.password or None,
            host=conn.host or None,
            port=conn.port or None,
            database=conn.schema or None,
        ).render_as_string(hide_password=False)
    return conn.get_uri()
