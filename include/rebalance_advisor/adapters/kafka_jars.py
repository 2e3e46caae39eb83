"""Kafka's own jars and the Java that runs them: the cache both the local broker and the share-group reader use.

No registry here ships a Kafka server package, so the jars come from Maven Central
(``include/kafka/pom.xml``) into a cache outside git. A fetch lands in a temporary folder and is
renamed into place only when complete (the marker file), so a broken download is never mistaken
for a cache. Shipped code (``adapters/share_groups.py``) only reads the cache; the fetch is run by
``rebalance-advisor dev kafka fetch`` and by the local broker (``devtools/local_kafka.py``).
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import tempfile
from pathlib import Path

from rebalance_advisor.errors import AdvisorError
from rebalance_advisor.settings import INCLUDE_DIR, cache_dir

KAFKA_FILES = INCLUDE_DIR / "kafka"
POM = KAFKA_FILES / "pom.xml"
COMPLETE_MARKER = "FETCH-COMPLETE"


class KafkaJarsError(AdvisorError):
    """The Kafka jars could not be fetched or Java was not found; the message says what to do."""


def kafka_version() -> str:
    match = re.search(r"<kafka\.version>([^<]+)</kafka\.version>", POM.read_text())
    if not match:
        raise KafkaJarsError(f"{POM} names no <kafka.version>")
    return match.group(1)


def jar_dir() -> Path:
    return cache_dir() / f"kafka-{kafka_version()}" / "libs"


def java_executable() -> str:
    """The ``java`` to run: ``$JAVA_HOME/bin/java`` when set, else the one on PATH."""
    java_home = os.environ.get("JAVA_HOME")
    candidate = Path(java_home, "bin", "java") if java_home else None
    java = str(candidate) if candidate and candidate.exists() else shutil.which("java")
    if not java:
        raise KafkaJarsError(
            "Java not found: Kafka needs Java 17 or newer. Install it (apt-get install -y "
            "openjdk-17-jre-headless) or set JAVA_HOME."
        )
    return java


def fetch_jars(quiet: bool = True) -> Path:
    """Copy the broker, tools and logging jars into the cache (once); return the folder."""
    target = jar_dir()
    if (target / COMPLETE_MARKER).exists():
        return target
    java_executable()
    mvn = shutil.which("mvn")
    if not mvn:
        raise KafkaJarsError(
            "Maven (mvn) not found: it fetches the Kafka jars from Maven Central. "
            "Install it (apt-get install -y maven) and run again."
        )
    target.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=".libs-partial-", dir=target.parent))
    options = ["-B", "-q"] if quiet else ["-B"]
    if settings := os.environ.get("REBALANCE_ADVISOR_MAVEN_SETTINGS"):
        options += ["-s", settings]  # a mirror or proxy of Maven Central
    command = [
        mvn, *options, "-f", str(POM), "dependency:copy-dependencies",
        f"-DoutputDirectory={staging}", "-DincludeScope=runtime",
    ]  # fmt: skip
    try:
        result = subprocess.run(command, capture_output=True, text=True, timeout=900)
        jars = list(staging.glob("*.jar"))
        if result.returncode != 0 or not any(j.name.startswith("kafka_2.13-") for j in jars):
            tail = "\n".join((result.stdout + result.stderr).strip().splitlines()[-15:])
            raise KafkaJarsError(
                f"could not fetch the Kafka {kafka_version()} jars from Maven Central "
                f"(mvn exit {result.returncode}). Check the network or proxy settings "
                f"(~/.m2/settings.xml) and run again.\n{tail}"
            )
        (staging / COMPLETE_MARKER).write_text(f"kafka {kafka_version()}\n")
        if target.exists():  # an older, incomplete copy from before markers existed
            shutil.rmtree(target)
        staging.rename(target)
    except subprocess.TimeoutExpired as error:
        raise KafkaJarsError("fetching the Kafka jars from Maven Central timed out after 900 s") from error
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return target


def log4j_option() -> str:
    """The JVM option that points Kafka's logging at our quiet log4j2 config."""
    return f"-Dlog4j2.configurationFile={KAFKA_FILES / 'log4j2.properties'}"


def java_command(main_class: str, *args: str, heap: str = "-Xmx256m") -> list[str]:
    """A command line that runs ``main_class`` from the cached jars (fetched first if missing)."""
    libs = fetch_jars()
    return [
        java_executable(),
        heap,
        "-XX:+UseG1GC",
        "-Djava.awt.headless=true",
        log4j_option(),
        "-cp",
        f"{libs}/*",
        main_class,
        *args,
    ]
