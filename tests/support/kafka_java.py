"""Run one of the Java reference programs next to this file against Kafka's own classes."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent


def run_reference(program: str, text: str) -> str:
    """Java 17's single-file source launcher on ``tests/support/<program>.java`` with the cached
    Kafka jars on the class path, ``text`` on stdin; its stdout. Skips without Java or the jars."""
    from rebalance_advisor.adapters import kafka_jars

    try:
        libs = kafka_jars.fetch_jars()
        java = kafka_jars.java_executable()
    except kafka_jars.KafkaJarsError as exc:
        pytest.skip(f"Kafka jars or Java unavailable: {exc}")
    result = subprocess.run(
        [java, "-cp", f"{libs}/*", str(HERE / f"{program}.java")],
        input=text.encode(),
        capture_output=True,
        timeout=120,
        check=False,
    )
    assert result.returncode == 0, result.stderr.decode(errors="replace")[-3000:]
    return result.stdout.decode()
