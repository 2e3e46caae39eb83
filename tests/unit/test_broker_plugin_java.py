"""The broker plugin's own Java unit tests (broker-plugin/src/test), run by Maven from `make test`,
and the build facts the Python side relies on."""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
from rebalance_advisor.adapters import kafka_jars


def test_the_plugin_compiles_against_the_brokers_kafka_version() -> None:
    plugin_pom = (kafka_jars.PLUGIN_DIR / "pom.xml").read_text()
    match = re.search(r"<kafka\.version>([^<]+)</kafka\.version>", plugin_pom)
    assert match, "broker-plugin/pom.xml names no <kafka.version>"
    assert match.group(1) == kafka_jars.kafka_version(), "the plugin must be built against the broker's Kafka"


@pytest.mark.slow
def test_the_java_unit_tests_pass(tmp_path: Path) -> None:
    try:
        kafka_jars.java_executable()
        result = kafka_jars.run_plugin_maven(["test"], tmp_path / "build", timeout=600)
    except kafka_jars.KafkaJarsError as error:
        pytest.skip(f"no Java or Maven: {error}")
    reports = list((tmp_path / "build" / "surefire-reports").glob("TEST-*.xml"))
    suites = [ET.parse(report).getroot() for report in reports]
    ran = sum(int(s.get("tests", 0)) for s in suites)
    failed = sum(int(s.get("failures", 0)) + int(s.get("errors", 0)) for s in suites)
    print(f"broker plugin Java tests: {ran} ran, {failed} failed, in {len(suites)} classes")
    assert result.returncode == 0, (result.stdout + result.stderr)[-4000:]
    assert ran >= 30 and failed == 0, f"{ran} Java tests ran, {failed} failed"
