"""The one way to get a SparkSession: ``local[*]`` or a cluster master, the package shipped as py-files.

Executors never rely on a shared disk or on the package being installed where they run: the
driver zips the ``rebalance_advisor`` package (:func:`package_zip`) and adds it with
``addPyFile``, so ``import rebalance_advisor`` inside ``applyInPandas`` resolves to that zip.
pyspark is imported lazily, Airflow only by :func:`connection_settings`.
"""

from __future__ import annotations

import hashlib
import logging
import os
import re
import sys
import threading
import zipfile
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

from rebalance_advisor import settings
from rebalance_advisor.errors import AdvisorError

if TYPE_CHECKING:  # pragma: no cover
    from pyspark.sql import SparkSession

#: Conf every session gets unless the caller overrides it: small-machine friendly, Arrow on.
DEFAULT_CONF: dict[str, str] = {
    "spark.sql.execution.arrow.pyspark.enabled": "true",
    "spark.sql.execution.arrow.pyspark.fallback.enabled": "false",
    "spark.sql.shuffle.partitions": "4",
    "spark.default.parallelism": "4",
    "spark.driver.memory": "1g",
    "spark.executor.memory": "512m",
    "spark.ui.enabled": "false",
    "spark.ui.showConsoleProgress": "false",
    "spark.sql.session.timeZone": "UTC",
}

#: Added only when the master runs on this machine (``local[...]`` or a loopback host):
#: a driver bound to 127.0.0.1 would be unreachable for executors elsewhere.
LOOPBACK_CONF: dict[str, str] = {
    "spark.driver.host": "127.0.0.1",
    "spark.driver.bindAddress": "127.0.0.1",
}

#: Keys of the Airflow ``spark`` connection's extra that are spark-submit options, not Spark conf.
_SUBMIT_ONLY_EXTRA = {"deploy-mode", "spark-binary", "spark-home", "principal", "keytab"}
_EXTRA_ALIASES = {"queue": "spark.yarn.queue", "namespace": "spark.kubernetes.namespace"}

_ZIP_TIMESTAMP = (1980, 1, 1, 0, 0, 0)

#: a log4j line at ERROR or FATAL ("26/11/22 19:21:56 ERROR Executor: ..."), or a Python/Java failure
_ERROR_LINE = re.compile(
    r"\b(ERROR|FATAL|SEVERE)\b|^Traceback |^Exception in thread |^\S+(Error|Exception)\b"
)
#: continuation of a stack trace: indented frames, "Caused by", "... 12 more"
_CONTINUATION = re.compile(r"^(\s+\S|Caused by:|\s*\.\.\. \d+ more)")
_jvm_stderr_routed = False
_route_lock = threading.Lock()


def package_dir() -> Path:
    """Folder of the ``rebalance_advisor`` package this process imported."""
    import rebalance_advisor

    return Path(rebalance_advisor.__file__).resolve().parent


def _package_files(root: Path) -> Iterator[Path]:
    for path in sorted(root.rglob("*")):
        if path.is_file() and "__pycache__" not in path.parts and path.suffix not in {".pyc", ".pyo"}:
            yield path


def package_zip(cache_dir: Path | None = None) -> Path:
    """Zip the package for ``addPyFile``; cached by content hash, so a changed source gives a new zip.

    The zip holds ``rebalance_advisor/...`` (importable straight from the zip) and is written
    atomically under ``cache_dir`` (default: ``<REBALANCE_ADVISOR_CACHE>/spark``).
    """
    root = package_dir()
    files = list(_package_files(root))
    digest = hashlib.sha256()
    for path in files:
        digest.update(path.relative_to(root).as_posix().encode() + b"\0" + path.read_bytes() + b"\0")
    target_dir = Path(cache_dir) if cache_dir is not None else settings.cache_dir() / "spark"
    target_dir.mkdir(parents=True, exist_ok=True)
    target = target_dir / f"rebalance_advisor-{digest.hexdigest()[:16]}.zip"
    if target.exists():
        return target
    partial = target.with_name(f".{target.name}.{os.getpid()}.partial")
    with zipfile.ZipFile(partial, "w", compression=zipfile.ZIP_DEFLATED) as archive:
        for path in files:
            info = zipfile.ZipInfo(f"{root.name}/{path.relative_to(root).as_posix()}", _ZIP_TIMESTAMP)
            info.compress_type = zipfile.ZIP_DEFLATED
            info.external_attr = 0o644 << 16
            archive.writestr(info, path.read_bytes())
    os.replace(partial, target)
    return target


def is_loopback_master(master: str) -> bool:
    """True for ``local``/``local[...]`` and for ``spark://127.0.0.1:...`` / ``localhost`` masters."""
    if master.startswith("local"):
        return True
    host = urlsplit(master).hostname if "://" in master else None
    return host in {"127.0.0.1", "localhost", "::1"}


def _prepare_python_env(conf: Mapping[str, str]) -> None:
    """Executors start the python the driver names in ``PYSPARK_PYTHON``; default to this one.

    ``spark.pyspark.python`` in ``conf`` wins. The interpreter's bin folder goes on PATH so that
    ``spark-submit`` from the same virtualenv is found.
    """
    python = conf.get("spark.pyspark.python") or os.environ.get("PYSPARK_PYTHON") or sys.executable
    os.environ["PYSPARK_PYTHON"] = python
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    bin_dir = str(Path(sys.executable).parent)
    path = os.environ.get("PATH", "")
    if bin_dir not in path.split(os.pathsep):
        os.environ["PATH"] = bin_dir + os.pathsep + path if path else bin_dir


def session_conf(master: str, conf: Mapping[str, Any] | None = None) -> dict[str, str]:
    """The effective conf: defaults, loopback binding for local masters, then the caller's conf."""
    merged = dict(DEFAULT_CONF)
    if is_loopback_master(master):
        merged.update(LOOPBACK_CONF)
    merged.update({key: str(value) for key, value in (conf or {}).items()})
    return merged


def spark_session(
    master: str = "local[*]",
    app_name: str = "rebalance-advisor",
    conf: Mapping[str, Any] | None = None,
    ship_package: bool = True,
) -> SparkSession:
    """A SparkSession on ``master`` with Arrow on and the package shipped to executors as a zip.

    ``master`` is anything ``spark-submit --master`` takes: ``local[*]``, ``spark://host:7077``,
    ``yarn``, ``k8s://https://...``. An active session on the same master is reused (its static
    conf stays) and still gets the package zip; one on another master is an error, so a
    ``local[*]`` run is never mistaken for a cluster run.
    """
    from pyspark import SparkContext
    from pyspark.sql import SparkSession

    active = SparkContext._active_spark_context
    if active is not None and active.master != master:
        raise AdvisorError(
            f"a SparkContext on {active.master!r} is already running in this process; "
            f"stop it (spark.stop() or sparkutil.stop_active_session()) before asking for one on {master!r}"
        )
    effective = session_conf(master, conf)
    _prepare_python_env(effective)
    builder = SparkSession.builder.master(master).appName(app_name)
    for key, value in effective.items():
        builder = builder.config(key, value)
    try:
        session = builder.getOrCreate()
    except Exception as error:  # py4j and JVM start-up errors carry no common base class
        raise AdvisorError(f"could not start Spark on {master!r}: {error}") from error
    if ship_package:
        add_package(session)
    return session


def stop_active_session() -> str | None:
    """Stop this process's SparkContext, if any, and return the master it ran on.

    Needed before switching masters (e.g. ``local[*]`` then a cluster) in one process.
    """
    from pyspark import SparkContext

    active = SparkContext._active_spark_context
    if active is None:
        return None
    master = active.master
    active.stop()
    return master


def add_package(session: SparkSession) -> Path:
    """Ship the package zip to the session's executors (once per zip and SparkContext)."""
    archive = package_zip()
    context = session.sparkContext
    if archive.name not in (context._python_includes or []):
        context.addPyFile(str(archive))
    return archive


def master_from_connection(host: str | None, port: int | None) -> str:
    """The master URL from a ``spark`` connection's host and port (as the Spark provider reads them)."""
    if not host:
        return "local[*]"
    if port and not host.startswith(("local", "yarn")):
        return f"{host}:{port}"
    return host


def conf_from_extra(extra: Mapping[str, Any]) -> dict[str, str]:
    """Spark conf from a connection's extra: every key is conf, except spark-submit-only options."""
    conf: dict[str, str] = {}
    for key, value in extra.items():
        if key in _SUBMIT_ONLY_EXTRA or value is None or value == "":
            continue
        conf[_EXTRA_ALIASES.get(key, key)] = str(value)
    return conf


def connection_settings(conn_id: str = "spark_default") -> tuple[str, dict[str, str]]:
    """Master URL and Spark conf of Airflow connection ``conn_id`` (Airflow imported lazily)."""
    try:
        from airflow.sdk import BaseHook
    except ImportError:  # pragma: no cover - Airflow 2 layout
        from airflow.hooks.base import BaseHook

    connection = BaseHook.get_connection(conn_id)
    return master_from_connection(connection.host, connection.port), conf_from_extra(
        connection.extra_dejson or {}
    )


def jvm_line_level(line: str, previous: int = logging.INFO) -> int:
    """The log level of one line a Spark JVM wrote to stderr.

    ERROR/FATAL lines, exceptions and their stack traces stay errors; everything else Spark prints
    (its log4j profile notice, WARN lines about the hostname or native Hadoop, the JDK's incubator
    module warning) is start-up chatter and becomes INFO.
    """
    if _ERROR_LINE.search(line):
        return logging.ERROR
    if previous == logging.ERROR and _CONTINUATION.match(line):
        return logging.ERROR
    return logging.INFO


def route_jvm_stderr(logger_name: str = "rebalance_advisor.spark.jvm") -> bool:
    """Send what a Spark JVM started from this process writes to stderr through a logger.

    Why: under Airflow a task's stderr is logged at ERROR, so Spark's harmless chatter showed as red
    ``[error]`` lines in every plan task. The JVM inherits file descriptor 2; this points fd 2 at a
    pipe whose lines a daemon thread logs at :func:`jvm_line_level`. Only for a process that
    logs through handlers not writing to fd 2 (an Airflow task, whose logs go over their own
    channel). Once per process; False when already routed.
    """
    global _jvm_stderr_routed
    with _route_lock:
        if _jvm_stderr_routed:
            return False
        _jvm_stderr_routed = True
        sys.stderr.flush()
        read_end, write_end = os.pipe()
        os.dup2(write_end, 2)
        os.close(write_end)
    logger = logging.getLogger(logger_name)

    def pump() -> None:
        level = logging.INFO
        with os.fdopen(read_end, "r", encoding="utf-8", errors="replace") as lines:
            for line in lines:
                text = line.rstrip()
                if text:
                    level = jvm_line_level(text, level)
                    logger.log(level, "%s", text)

    threading.Thread(target=pump, name="spark-jvm-stderr", daemon=True).start()
    return True
