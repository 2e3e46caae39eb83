"""Engines and schema: one cached engine per URL, Alembic run programmatically.

Bad URLs and unreachable databases become one clear :class:`AdvisorError` line (password hidden);
connectivity failures are the :class:`DatabaseUnavailable` kind (worth a retry, unlike bad input).
"""

from __future__ import annotations

import functools
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import sqlalchemy as sa
from sqlalchemy.engine import Connection, Engine
from sqlalchemy.orm import Session

from rebalance_advisor.errors import AdvisorError, InfrastructureUnavailable
from rebalance_advisor.polling import poll_until
from rebalance_advisor.settings import database_url

MIGRATIONS_DIR = Path(__file__).resolve().parent / "migrations"


class DatabaseUnavailable(InfrastructureUnavailable):
    """The database could not be reached or failed mid-statement (transient: callers may retry)."""


def _safe(url: str) -> str:
    try:
        return sa.make_url(url).render_as_string(hide_password=True)
    except Exception:  # noqa: BLE001 - the URL is already known to be bad
        return url


@functools.lru_cache(maxsize=16)
def _engine(url: str) -> Engine:
    try:
        parsed = sa.make_url(url)
    except Exception as error:
        raise AdvisorError(f"bad database URL {url!r}: {error}") from error
    kwargs: dict = {"future": True}
    if parsed.get_backend_name() == "sqlite":
        if not parsed.database or parsed.database == ":memory:" or parsed.query.get("mode") == "memory":
            raise AdvisorError(
                f"database URL {url!r} is an in-memory SQLite database, gone when the command ends: "
                "give a file, e.g. sqlite:////var/lib/advisor/advisor.db"
            )
        directory = Path(parsed.database).expanduser().parent
        try:
            directory.mkdir(parents=True, exist_ok=True)
        except OSError as error:
            why = "a file is in the way" if isinstance(error, FileExistsError) else error.strerror or error
            raise AdvisorError(
                f"database URL {url!r}: cannot create the directory {directory}: {why}"
            ) from error
        kwargs["connect_args"] = {"timeout": 30}
    else:
        kwargs["pool_pre_ping"] = True
    try:
        engine = sa.create_engine(parsed, **kwargs)
    except Exception as error:  # unknown dialect, missing driver
        raise AdvisorError(f"bad database URL {_safe(url)}: {error}") from error
    if parsed.get_backend_name() == "sqlite":
        sa.event.listen(engine, "handle_error", _roll_back_sqlite_on_interrupt)
    return engine


def _roll_back_sqlite_on_interrupt(context: sa.engine.ExceptionContext) -> None:
    """Ctrl-C inside a SQLite statement: close its cursor and roll back, keeping the connection.

    Why: SQLAlchemy treats a KeyboardInterrupt as a lost connection and closes it at once, but the
    driver only marks a connection with a live statement for closing, so the interrupted write
    kept its lock until garbage collection and the command's next read ("was anything stored?")
    waited out the 30 s busy timeout, then failed with "database is locked". SQLite itself is
    intact after an interrupted statement, so the usual rollback applies.
    """
    if not isinstance(context.original_exception, Exception):
        context.is_disconnect = False


def engine_for(url: str | None = None) -> Engine:
    """The engine for ``url`` (default: ``REBALANCE_ADVISOR_DB_URL`` or the SQLite file)."""
    return _engine(url or database_url())


def dispose(url: str | None = None) -> None:
    """Close the pooled connections of ``url``'s engine (tests drop databases afterwards)."""
    engine = engine_for(url)
    engine.dispose()
    _engine.cache_clear()


def unavailable(url: str | sa.URL, error: BaseException) -> DatabaseUnavailable:
    """The one clear message for a failed database (password hidden); ``raise unavailable(...) from error``."""
    cause = getattr(error, "orig", None) or error
    return DatabaseUnavailable(f"database {_safe(str(url))} failed: {cause}")


def dbapi_errors(conn: Connection) -> tuple[type[BaseException], ...]:
    """The driver's own connectivity exceptions (raw-cursor code sees these, not SQLAlchemy's)."""
    dbapi = conn.dialect.dbapi
    return tuple(
        e for e in (getattr(dbapi, "OperationalError", None), getattr(dbapi, "InterfaceError", None)) if e
    )


@contextmanager
def connect(url: str | None = None) -> Iterator[Connection]:
    """A connection in a transaction; connection failures become :class:`DatabaseUnavailable`."""
    engine = engine_for(url)
    try:
        with engine.begin() as conn:
            yield conn
    except (sa.exc.OperationalError, sa.exc.InterfaceError) as error:
        raise unavailable(engine.url, error) from error
    except sa.exc.DatabaseError as error:
        if "file is not a database" in str(error):  # SQLite on some other file
            raise AdvisorError(
                f"{_safe(str(engine.url))} is not a SQLite database file: {error.orig}"
            ) from error
        raise


@contextmanager
def session(url: str | None = None) -> Iterator[Session]:
    """An ORM session in one transaction (commit on success, roll back on error)."""
    with connect(url) as conn, Session(bind=conn) as s:
        yield s
        s.flush()


def _alembic_config(conn: Connection):
    from alembic.config import Config

    config = Config()
    config.set_main_option("script_location", str(MIGRATIONS_DIR))
    config.attributes["connection"] = conn
    return config


def upgrade(url: str | None = None, revision: str = "head") -> str:
    """Bring the schema to ``revision`` (idempotent); return the revision now current."""
    from alembic import command

    with connect(url) as conn:
        command.upgrade(_alembic_config(conn), revision)
    return current_revision(url) or ""


def current_revision(url: str | None = None) -> str | None:
    from alembic.runtime.migration import MigrationContext

    with connect(url) as conn:
        return MigrationContext.configure(conn).get_current_revision()


def _missing_sqlite_file(url: str) -> Path | None:
    """The SQLite file ``url`` names when it does not exist yet (connecting would create it)."""
    try:
        parsed = sa.make_url(url)
    except Exception:  # noqa: BLE001 - _engine reports a bad URL
        return None
    if parsed.get_backend_name() != "sqlite" or not parsed.database or parsed.query.get("uri"):
        return None
    path = Path(parsed.database).expanduser()
    return None if parsed.database == ":memory:" or path.exists() else path


def require_schema(url: str | None = None, *, to_write: bool = False) -> None:
    """Fail clearly when the database has not been upgraded yet; a read never creates a SQLite file.

    Waits out another process's SQLite lock first: one that keeps readers out, or (``to_write``,
    for a command about to write) any write lock, so the write follows at once.
    """
    if missing := _missing_sqlite_file(url or database_url()):
        raise AdvisorError(
            f"database file {missing} does not exist: take a snapshot first (`rebalance-advisor snapshot`) "
            "or check --db / $REBALANCE_ADVISOR_DB_URL"
        )
    wait_for_sqlite_writer(url, to_read=not to_write)  # waited out where Ctrl-C works
    if current_revision(url) is None:
        raise AdvisorError(
            f"database {_safe(url or database_url())} has no advisor tables: run `rebalance-advisor db upgrade`"
        )


#: Seconds a command waits for another SQLite writer before giving up.
SQLITE_LOCK_WAIT_S = 30.0


def wait_for_sqlite_writer(
    url: str | None = None, bound_s: float = SQLITE_LOCK_WAIT_S, *, to_read: bool = False
) -> None:
    """On SQLite, wait until no other process holds the write lock (``to_read``: a lock that keeps
    readers out too, EXCLUSIVE), in short interruptible steps.

    Why: SQLite's own busy wait (the driver's ``timeout``) sleeps inside C, where Python sees no
    Ctrl-C until it gives up. Probing with ``BEGIN IMMEDIATE`` at a 50 ms busy timeout, with Python
    sleeps between, keeps Ctrl-C working and the wait bounded; the write follows at once (another
    writer could still slip in between, and then the driver's own wait applies).
    """
    import sqlite3

    engine = engine_for(url)
    if engine.dialect.name != "sqlite":
        return
    path = engine.url.database
    probes = 0

    def free() -> bool:
        nonlocal probes
        probe = sqlite3.connect(path, timeout=0.05, isolation_level=None)
        try:
            if to_read:
                probe.execute("SELECT count(*) FROM sqlite_master")
                return True
            probe.execute("BEGIN IMMEDIATE")
            probe.execute("ROLLBACK")
            return True
        except sqlite3.OperationalError as error:
            if "locked" not in str(error) and "busy" not in str(error):
                raise unavailable(engine.url, error) from error
        except sqlite3.DatabaseError:
            return True  # not a lock (e.g. not a SQLite file): the command's own open says what is wrong
        finally:
            probe.close()
        probes += 1
        if probes == 1:
            print(  # the command would otherwise look hung
                f"waiting up to {bound_s:.0f} s for another process to finish writing {path} (Ctrl-C to stop)",
                file=sys.stderr,
                flush=True,
            )
        return False

    if not poll_until(free, timeout=bound_s, interval=0.1):
        raise DatabaseUnavailable(
            f"database {_safe(str(engine.url))} is locked by another writer for {bound_s:.0f} s: "
            "nothing was stored; try again when the other process is done"
        )
