"""Kafka's own jars and the Java that runs them: the cache both the local broker and the share-group reader use.

It also builds the project's broker plugin (``broker-plugin/``, the ``advised`` assignor of
docs/operations/broker-plugin.md) into the same cache, once per version of its sources.

No registry here ships a Kafka server package, so the jars come from Maven Central
(``include/kafka/pom.xml``) into a cache outside git. A fetch lands in a temporary folder and is
renamed into place only when complete (the marker file), so a broken download is never mistaken
for a cache. Shipped code (``adapters/share_groups.py``) only reads the cache; the fetch is run by
``rebalance-advisor dev kafka fetch`` and by the local broker (``devtools/local_kafka.py``).
"""

from __future__ import annotations

import hashlib
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
#: the Maven module of the broker plugin (its own pom; provided-scope Kafka dependencies)
PLUGIN_DIR = INCLUDE_DIR.parent / "broker-plugin"
PLUGIN_JAR = "rebalance-advisor-broker-plugin.jar"
#: the class a broker lists in ``group.consumer.assignors`` (clients ask for it by ``name()``: advised)
ADVISED_ASSIGNOR_CLASS = "io.rebalanceadvisor.broker.assignor.AdvisedAssignor"
#: the plugin's KIP-714 client-telemetry receiver, listed in ``metric.reporters`` (docs/operations/telemetry.md)
TELEMETRY_RECEIVER_CLASS = "io.rebalanceadvisor.broker.telemetry.TelemetryReceiver"


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


def _require_maven() -> str:
    mvn = shutil.which("mvn")
    if not mvn:
        raise KafkaJarsError(
            "Maven (mvn) not found: it fetches the Kafka jars from Maven Central and builds the broker "
            "plugin. Install it (apt-get install -y maven) and run again."
        )
    return mvn


def _maven_options(quiet: bool) -> list[str]:
    options = ["-B", "-q"] if quiet else ["-B"]
    if settings := os.environ.get("REBALANCE_ADVISOR_MAVEN_SETTINGS"):
        options += ["-s", settings]  # a mirror or proxy of Maven Central
    return options


def fetch_jars(quiet: bool = True) -> Path:
    """Copy the broker, tools and logging jars into the cache (once); return the folder."""
    target = jar_dir()
    if (target / COMPLETE_MARKER).exists():
        return target
    java_executable()
    mvn = _require_maven()
    target.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=".libs-partial-", dir=target.parent))
    options = _maven_options(quiet)
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


def plugin_source_hash() -> str:
    """A digest of the plugin's pom and main sources: a new version of them is built anew."""
    digest = hashlib.sha256()
    files = [PLUGIN_DIR / "pom.xml", *sorted((PLUGIN_DIR / "src" / "main").rglob("*"))]
    for file in files:
        if file.is_file():
            digest.update(file.relative_to(PLUGIN_DIR).as_posix().encode() + b"\0")
            digest.update(file.read_bytes() + b"\0")
    return digest.hexdigest()[:16]


def broker_plugin_jar(quiet: bool = True) -> Path:
    """The broker plugin's jar in the cache, built from ``broker-plugin/`` (tests skipped) when missing.

    The build runs in a staging folder beside its final place and is renamed into place whole, so a
    failed or concurrent build never leaves a half-written jar where a broker would load it.
    """
    target = cache_dir() / f"broker-plugin-{plugin_source_hash()}"
    if (target / PLUGIN_JAR).exists():
        return target / PLUGIN_JAR
    java_executable()
    target.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=".broker-plugin-partial-", dir=target.parent))
    try:
        result = run_plugin_maven(["package", "-DskipTests"], staging / "build", quiet=quiet, timeout=900)
        built = staging / "build" / PLUGIN_JAR
        if result.returncode != 0 or not built.exists():
            tail = "\n".join((result.stdout + result.stderr).strip().splitlines()[-20:])
            raise KafkaJarsError(
                f"could not build the broker plugin (mvn exit {result.returncode}) from {PLUGIN_DIR}. "
                f"Check the network or proxy settings (~/.m2/settings.xml) and the output:\n{tail}"
            )
        built.rename(staging / PLUGIN_JAR)
        shutil.rmtree(staging / "build")
        try:
            staging.rename(target)
        except OSError:  # another process put the same version in place first: keep theirs
            if not (target / PLUGIN_JAR).exists():
                raise
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return target / PLUGIN_JAR


def run_plugin_maven(
    goals: list[str], build_dir: Path, quiet: bool = True, timeout: float = 900
) -> subprocess.CompletedProcess[str]:
    """Maven on the plugin's pom with its output in ``build_dir`` (never inside the work tree)."""
    command = [
        _require_maven(), *_maven_options(quiet), "-f", str(PLUGIN_DIR / "pom.xml"),
        f"-Dplugin.build.directory={build_dir}", *goals,
    ]  # fmt: skip
    try:
        return subprocess.run(command, capture_output=True, text=True, timeout=timeout, check=False)
    except subprocess.TimeoutExpired as error:
        raise KafkaJarsError(
            f"building the broker plugin with Maven timed out after {timeout:.0f} s"
        ) from error


#: the system property naming the process a group reader outlives by no more than 0.2 s
PARENT_PROPERTY = "rebalance.advisor.parent"


#: include/kafka/<READERS_CLASS>.java: the Java readers, one single-file program (one mode each)
READERS_CLASS = "GroupReaders"


def group_reader_command(mode: str, jvm_options: tuple[str, ...]) -> list[str]:
    """The java command line of ``include/kafka/GroupReaders.java`` in reader ``mode`` on the cached jars,
    compiled once per source and Kafka version into the cache (Java's single-file source launcher when
    no javac, which takes one file: hence one program for every reader).

    Shipped code only reads the jar cache: a missing cache or Java is a :class:`KafkaJarsError`.
    The program is told this process's id (:data:`PARENT_PROPERTY`) and stops when its parent goes,
    however this process ended (the callers start it in a session of its own).
    """
    libs = jar_dir()
    if not (libs / COMPLETE_MARKER).exists():
        raise KafkaJarsError("the Kafka jars are not cached; run `rebalance-advisor dev kafka fetch`")
    java = java_executable()
    source_file = KAFKA_FILES / f"{READERS_CLASS}.java"
    digest = hashlib.sha256(source_file.read_bytes() + kafka_version().encode()).hexdigest()[:16]
    classes = libs.parent / f"group-readers-{digest}"
    classpath = f"{libs}/*"
    if not (classes / f"{READERS_CLASS}.class").exists():
        _compile(Path(java).with_name("javac"), classpath, source_file, classes)
    jvm = [java, *jvm_options, log4j_option(), f"-D{PARENT_PROPERTY}={os.getpid()}"]
    if (classes / f"{READERS_CLASS}.class").exists():
        return [*jvm, "-cp", f"{classes}{os.pathsep}{classpath}", READERS_CLASS, mode]
    return [*jvm, "-cp", classpath, str(source_file), mode]


def _compile(javac: Path, classpath: str, source_file: Path, classes: Path) -> None:
    """Compile into a staging folder renamed into place whole (a concurrent build keeps its copy)."""
    if not javac.exists():
        return
    staging = Path(tempfile.mkdtemp(prefix=f".{classes.name}-", dir=classes.parent))
    try:
        built = subprocess.run(
            [str(javac), "-nowarn", "-cp", classpath, "-d", str(staging), str(source_file)],
            capture_output=True, text=True, timeout=300,
        )  # fmt: skip
        if built.returncode == 0:
            staging.rename(classes)
    except OSError:  # another process renamed first: use that copy
        pass
    finally:
        shutil.rmtree(staging, ignore_errors=True)


def log4j_option() -> str:
    """The JVM option that points Kafka's logging at our quiet log4j2 config."""
    return f"-Dlog4j2.configurationFile={KAFKA_FILES / 'log4j2.properties'}"


def java_command(
    main_class: str, *args: str, heap: str = "-Xmx256m", extra_jars: tuple[Path, ...] = ()
) -> list[str]:
    """A command line that runs ``main_class`` from the cached jars (fetched first if missing),
    with ``extra_jars`` (the broker plugin) on the class path too."""
    libs = fetch_jars()
    classpath = os.pathsep.join([f"{libs}/*", *map(str, extra_jars)])
    return [
        java_executable(),
        heap,
        "-XX:+UseG1GC",
        "-Djava.awt.headless=true",
        log4j_option(),
        "-cp",
        classpath,
        main_class,
        *args,
    ]
