"""Alembic environment: runs on the connection ``rebalance_advisor.store.db.upgrade`` hands in."""

from __future__ import annotations

from alembic import context
from sqlalchemy import engine_from_config, pool

from rebalance_advisor.store.models import Base

config = context.config
target_metadata = Base.metadata


def _run(connection) -> None:
    context.configure(
        connection=connection,
        target_metadata=target_metadata,
        render_as_batch=connection.dialect.name == "sqlite",
        compare_type=True,
    )
    with context.begin_transaction():
        context.run_migrations()


connection = config.attributes.get("connection")
if connection is not None:
    _run(connection)
else:  # plain `alembic` command line with sqlalchemy.url set
    engine = engine_from_config(config.get_section(config.config_ini_section, {}), poolclass=pool.NullPool)
    with engine.connect() as conn:
        _run(conn)
