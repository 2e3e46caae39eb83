"""Spark's stderr under Airflow: chatter becomes INFO, real errors stay errors (adapters/spark_session.py)."""

from __future__ import annotations

import logging
import subprocess
import sys
import textwrap
from pathlib import Path

from rebalance_advisor.adapters.spark_session import jvm_line_level

# lines copied from a real plan task's log under `airflow standalone` (Spark 4.2, JDK 17)
CHATTER = [
    "WARNING: Using incubator modules: jdk.incubator.vector",
    "Using Spark's default log4j profile: org/apache/spark/log4j2-defaults.properties",
    "26/11/22 19:21:56 WARN Utils: Your hostname, vm, resolves to a loopback address: 127.0.0.1; "
    "using 192.0.2.2 instead (on interface eth0)",
    'Setting default log level to "WARN".',
    "To adjust logging level use sc.setLogLevel(newLevel). For SparkR, use setLogLevel(newLevel).",
    "26/11/22 19:21:59 WARN NativeCodeLoader: Unable to load native-hadoop library for your platform... "
    "using builtin-java classes where applicable",
]
FAILURE = [
    "26/11/22 19:30:01 ERROR Executor: Exception in task 0.0 in stage 3.0 (TID 7)",
    "org.apache.spark.api.python.PythonException: Traceback (most recent call last):",
    "\tat org.apache.spark.api.python.BasePythonRunner.handlePythonException(PythonRunner.scala:612)",
    "Caused by: java.lang.OutOfMemoryError: Java heap space",
    "\t... 12 more",
]


def test_chatter_is_info_and_a_failure_with_its_trace_is_error() -> None:
    assert [jvm_line_level(line) for line in CHATTER] == [logging.INFO] * len(CHATTER)
    level = logging.INFO
    levels = []
    for line in FAILURE:
        level = jvm_line_level(line, level)
        levels.append(level)
    assert levels == [logging.ERROR] * len(FAILURE)
    # an indented line after chatter is chatter, not an error
    assert jvm_line_level("\tat some.Frame(File.java:1)", logging.INFO) == logging.INFO


def test_a_child_process_stderr_goes_through_the_logger(tmp_path: Path) -> None:
    """The real mechanism: fd 2 rerouted, a child (as the JVM is) inherits it, lines land in the log."""
    log_file = tmp_path / "task.log"
    script = textwrap.dedent(
        f"""
        import logging, subprocess, sys, time
        logging.basicConfig(filename={str(log_file)!r}, level=logging.INFO, format="%(levelname)s %(message)s")
        from rebalance_advisor.adapters.spark_session import route_jvm_stderr
        assert route_jvm_stderr() and not route_jvm_stderr()
        lines = {CHATTER[0]!r} + chr(10) + {FAILURE[0]!r} + chr(10) + {FAILURE[2]!r} + chr(10)
        subprocess.run(["sh", "-c", "printf '%s' \\"$0\\" >&2", lines], check=True)
        time.sleep(0.5)
        """
    )
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stderr == ""  # nothing reached the real stderr
    assert log_file.read_text().splitlines() == [
        f"INFO {CHATTER[0]}",
        f"ERROR {FAILURE[0]}",
        f"ERROR {FAILURE[2]}",
    ]
