"""A real single-node KRaft Kafka broker on loopback, for the demo and the tests.

The broker's jars come from the cache of ``adapters/kafka_jars.py`` (fetched from Maven Central once).
The broker runs in its own process group; stopping it kills that group, so no JVM is left behind.
"""

from __future__ import annotations

import base64
import contextlib
import json
import os
import resource
import shutil
import signal
import socket
import subprocess
import time
import uuid
from dataclasses import asdict, dataclass, field
from pathlib import Path

from rebalance_advisor.adapters.kafka_jars import (
    ADVISED_ASSIGNOR_CLASS,
    KAFKA_FILES,
    TELEMETRY_RECEIVER_CLASS,
    broker_plugin_jar,
    fetch_jars,
    java_command,
    java_executable,
)
from rebalance_advisor.errors import AdvisorError
from rebalance_advisor.polling import poll_until
from rebalance_advisor.settings import home_dir

START_TIMEOUT_S = 90.0
STOP_TIMEOUT_S = 30.0
JVM_HEAP = "-Xmx768m"
#: The broker keeps one open file per log segment, so a cluster of 20,000 partitions needs more
#: descriptors than a typical 20,000 limit allows; raised (as far as permitted) for the broker only.
BROKER_OPEN_FILES = 262_144


class LocalKafkaError(AdvisorError):
    """The local broker could not be fetched, started or stopped; the message says why."""


def consumer_groups_command(bootstrap_servers: str, *args: str) -> list[str]:
    """Kafka's reference lag tool (``kafka-consumer-groups``) against ``bootstrap_servers``."""
    return java_command(
        "org.apache.kafka.tools.consumer.group.ConsumerGroupCommand",
        "--bootstrap-server",
        bootstrap_servers,
        *args,
    )


def run_consumer_groups(bootstrap_servers: str, *args: str, timeout: float = 300) -> str:
    """Run the reference tool and return what it printed; raise with its output when it fails."""
    result = subprocess.run(
        consumer_groups_command(bootstrap_servers, *args), capture_output=True, text=True, timeout=timeout
    )
    if result.returncode != 0:
        raise LocalKafkaError(f"kafka-consumer-groups failed (exit {result.returncode}):\n{result.stderr}")
    return result.stdout


@dataclass
class BrokerInfo:
    pid: int
    port: int
    controller_port: int
    bootstrap_servers: str
    cluster_id: str
    state_dir: str
    #: the SASL_SSL listener of a broker started with ``tls=`` (None: no TLS listener)
    tls_bootstrap_servers: str | None = None


def default_state_dir() -> Path:
    return home_dir() / "kafka"


def _state_file(state_dir: Path) -> Path:
    return state_dir / "broker.json"


def _port_free(port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def free_port() -> int:
    """A TCP port on 127.0.0.1 nothing listens on right now (the one helper; tests use it too)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    # A zombie child still answers kill(0); look at its state.
    try:
        return Path(f"/proc/{pid}/stat").read_text().split()[2] != "Z"
    except OSError:
        return False


def status(state_dir: Path | None = None) -> BrokerInfo | None:
    """The broker recorded in ``state_dir`` if its process is alive, else None."""
    state_file = _state_file(state_dir or default_state_dir())
    if not state_file.exists():
        return None
    info = BrokerInfo(**json.loads(state_file.read_text()))
    return info if _alive(info.pid) else None


#: SASL mechanism of a secured local broker (``start(secured=...)``)
SCRAM_MECHANISM = "SCRAM-SHA-512"


@dataclass(frozen=True)
class ScramSuperUser:
    """The super user a secured local broker is formatted with (it runs the broker's own traffic)."""

    name: str
    password: str = field(repr=False)

    def client_config(self) -> dict[str, str]:
        """librdkafka settings that log in as this user."""
        return scram_client_config(self.name, self.password)


def scram_client_config(user: str, password: str, ca_pem: Path | None = None) -> dict[str, str]:
    """librdkafka settings for a SASL/SCRAM login on the secured local broker's listener; with
    ``ca_pem`` (the throwaway CA of ``make_tls``), on its SASL_SSL listener."""
    config = {
        "security.protocol": "SASL_SSL" if ca_pem else "SASL_PLAINTEXT",
        "sasl.mechanism": SCRAM_MECHANISM,
        "sasl.username": user,
        "sasl.password": password,
    }
    if ca_pem:
        config["ssl.ca.location"] = str(ca_pem)
    return config


@dataclass(frozen=True)
class BrokerTls:
    """A throwaway CA and a broker keystore it signed (made by ``make_tls`` at run time, never kept)."""

    ca_pem: Path
    keystore: Path
    password: str = field(repr=False)


def keytool_executable() -> str:
    """``keytool`` of the JDK that runs the broker (beside ``java``)."""
    beside = Path(java_executable()).resolve().with_name("keytool")
    keytool = str(beside) if beside.exists() else shutil.which("keytool")
    if not keytool:
        raise LocalKafkaError(
            "keytool (part of a JDK) was not found beside java nor on PATH; install a JDK 17+"
        )
    return keytool


def make_tls(directory: Path, days: int = 2) -> BrokerTls:
    """A CA and a PKCS12 broker keystore for 127.0.0.1/localhost, signed by it, in ``directory``.

    Only keytool is used; the store password reaches it through the environment, not argv.
    """
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    password = uuid.uuid4().hex
    env = {**os.environ, "RA_TLS_PASS": password}
    ca_store, keystore = directory / "ca.p12", directory / "broker.p12"
    ca_pem, csr, cert = directory / "ca.pem", directory / "broker.csr", directory / "broker.pem"
    san = "SAN=ip:127.0.0.1,dns:localhost"
    secret = ["-storepass:env", "RA_TLS_PASS"]
    steps = [
        ["-genkeypair", "-alias", "ca", "-keystore", ca_store, "-dname", "CN=rebalance-advisor throwaway CA",
         "-ext", "bc:c", "-keyalg", "RSA", "-keysize", "2048", "-validity", days],
        ["-exportcert", "-rfc", "-alias", "ca", "-keystore", ca_store, "-file", ca_pem],
        ["-genkeypair", "-alias", "broker", "-keystore", keystore, "-dname", "CN=localhost", "-ext", san,
         "-keyalg", "RSA", "-keysize", "2048", "-validity", days],
        ["-certreq", "-alias", "broker", "-keystore", keystore, "-file", csr],
        ["-gencert", "-alias", "ca", "-keystore", ca_store, "-infile", csr, "-outfile", cert, "-rfc",
         "-ext", san, "-validity", days],
        ["-importcert", "-noprompt", "-alias", "ca", "-keystore", keystore, "-file", ca_pem],
        ["-importcert", "-alias", "broker", "-keystore", keystore, "-file", cert],
    ]  # fmt: skip
    for step in steps:
        command = [keytool_executable(), *map(str, step), "-storetype", "PKCS12", *secret]
        done = subprocess.run(command, capture_output=True, text=True, env=env, timeout=120)
        if done.returncode != 0:
            raise LocalKafkaError(f"keytool {step[0]} failed: {(done.stdout + done.stderr).strip()}")
    for file in (ca_store, keystore, csr, cert):
        file.chmod(0o600)
    return BrokerTls(ca_pem, keystore, password)


def _secured_properties(text: str, admin: ScramSuperUser, tls: BrokerTls | None, tls_port: int) -> str:
    """``server.properties`` with the client listener on SASL/SCRAM and the standard ACL authorizer;
    with ``tls`` a second client listener, SASL_SSL on ``tls_port``, with the same logins.

    The controller listener stays PLAINTEXT on loopback (its principal is ANONYMOUS, a super user
    so the node can talk to itself); every client must log in, and ACLs decide what it may do.
    """
    tls_listener = f",SASL_SSL://127.0.0.1:{tls_port}" if tls else ""
    lines = []
    for line in text.splitlines():
        if line.startswith("listeners="):
            line = line.replace("PLAINTEXT://", "SASL_PLAINTEXT://", 1).replace(
                ",CONTROLLER://", f"{tls_listener},CONTROLLER://", 1
            )
        elif line.startswith("advertised.listeners="):
            line = line.replace("PLAINTEXT://", "SASL_PLAINTEXT://", 1) + tls_listener
        elif line.startswith("inter.broker.listener.name="):
            line = "inter.broker.listener.name=SASL_PLAINTEXT"
        elif line.startswith("listener.security.protocol.map="):
            line = "listener.security.protocol.map=SASL_PLAINTEXT:SASL_PLAINTEXT,SASL_SSL:SASL_SSL,CONTROLLER:PLAINTEXT"
        lines.append(line)
    jaas = (
        "org.apache.kafka.common.security.scram.ScramLoginModule required "
        f'username="{admin.name}" password="{admin.password}";'
    )
    mechanism = SCRAM_MECHANISM.lower()
    lines += [
        f"sasl.enabled.mechanisms={SCRAM_MECHANISM}",
        f"sasl.mechanism.inter.broker.protocol={SCRAM_MECHANISM}",
        f"listener.name.sasl_plaintext.{mechanism}.sasl.jaas.config={jaas}",
        "authorizer.class.name=org.apache.kafka.metadata.authorizer.StandardAuthorizer",
        f"super.users=User:{admin.name};User:ANONYMOUS",
        "allow.everyone.if.no.acl.found=false",
    ]
    if tls:
        lines += [
            f"listener.name.sasl_ssl.{mechanism}.sasl.jaas.config={jaas}",
            "listener.name.sasl_ssl.ssl.keystore.type=PKCS12",
            f"listener.name.sasl_ssl.ssl.keystore.location={tls.keystore}",
            f"listener.name.sasl_ssl.ssl.keystore.password={tls.password}",
            f"listener.name.sasl_ssl.ssl.key.password={tls.password}",
        ]
    return "\n".join(lines) + "\n"


def _answers_metadata(
    bootstrap_servers: str, timeout: float, client_config: dict[str, str] | None = None
) -> bool:
    from confluent_kafka.admin import AdminClient

    admin = AdminClient({**(client_config or {}), "bootstrap.servers": bootstrap_servers, "log_level": 0})
    try:
        metadata = admin.list_topics(timeout=timeout)
    except Exception:  # noqa: BLE001 - any failure means "not yet"
        return False
    return bool(metadata.brokers)


def _log_tail(log_file: Path, lines: int = 25) -> str:
    if not log_file.exists():
        return "(no broker log)"
    return "\n".join(log_file.read_text(errors="replace").splitlines()[-lines:])


def start(
    state_dir: Path | None = None,
    port: int | None = None,
    timeout: float = START_TIMEOUT_S,
    heap: str = JVM_HEAP,
    secured: ScramSuperUser | None = None,
    tls: BrokerTls | None = None,
    extra_properties: dict[str, str] | None = None,
) -> BrokerInfo:
    """Format KRaft storage and start one broker+controller on 127.0.0.1; wait until it answers.

    ``heap`` is the broker JVM's ``-Xmx`` option: big clusters (the benchmark's) need more.
    ``secured``: the client listener takes SASL/SCRAM logins only and ACLs apply; this super user's
    SCRAM credential is written at format time (its password goes into the broker's own
    ``server.properties`` in ``state_dir``, never into a log line). ``tls`` (with ``secured``): a
    second client listener, SASL_SSL, with the keystore of ``make_tls`` (``tls_bootstrap_servers``).
    ``extra_properties``: more broker settings (such as the broker plugin's own keys), added last.
    """
    state_dir = _startable(Path(state_dir or default_state_dir()), port, secured, tls)
    fetch_jars()
    # the format step validates group.consumer.assignors by loading the classes: it needs the plugin too
    plugin = broker_plugin_jar()
    port, controller_port, tls_port = _ports(port, tls)
    properties = _write_properties(state_dir, port, controller_port, tls_port, secured, tls, extra_properties)
    cluster_id = _format_storage(properties, secured, plugin)
    process = _launch(state_dir, properties, heap, append_log=False)
    info = BrokerInfo(
        pid=process.pid,
        port=port,
        controller_port=controller_port,
        bootstrap_servers=f"127.0.0.1:{port}",
        cluster_id=cluster_id,
        state_dir=str(state_dir),
        tls_bootstrap_servers=f"127.0.0.1:{tls_port}" if tls else None,
    )
    return _await_broker(process, info, timeout, secured.client_config() if secured else None)


def _startable(
    state_dir: Path, port: int | None, secured: ScramSuperUser | None, tls: BrokerTls | None
) -> Path:
    """``state_dir`` when a broker may start from it: refused (the reason and what to do) when TLS is
    asked without logins, its files lie in the folder start() empties, a broker already runs from
    the folder, or ``port`` is taken."""
    if tls and not secured:
        raise LocalKafkaError("a TLS listener is only offered on a secured broker: pass secured= as well")
    if tls and state_dir.resolve() in Path(tls.keystore).resolve().parents:
        raise LocalKafkaError(f"make the TLS files outside {state_dir}: start() empties that folder first")
    running = status(state_dir)
    if running:
        raise LocalKafkaError(
            f"a broker is already running from {state_dir} (pid {running.pid}, "
            f"{running.bootstrap_servers}); stop it first with `rebalance-advisor dev kafka stop`"
        )
    if port is not None and not _port_free(port):
        raise LocalKafkaError(
            f"port {port} on 127.0.0.1 is already taken; choose another with --port or omit it"
        )
    return state_dir


def _ports(port: int | None, tls: BrokerTls | None) -> tuple[int, int, int]:
    """(client port, controller port, TLS port or 0): three different free ports, ``port`` if given."""
    port = port or free_port()
    controller_port = free_port()
    while controller_port == port:
        controller_port = free_port()
    tls_port = free_port() if tls else 0
    while tls and tls_port in (port, controller_port):
        tls_port = free_port()
    return port, controller_port, tls_port


def _write_properties(
    state_dir: Path, port: int, controller_port: int, tls_port: int, secured: ScramSuperUser | None,
    tls: BrokerTls | None, extra_properties: dict[str, str] | None,
) -> Path:  # fmt: skip
    """An emptied ``state_dir`` with its data folder and ``server.properties`` (readable by the owner
    only: a secured broker's holds the super user's password)."""
    if state_dir.exists():
        shutil.rmtree(state_dir)
    log_dir = state_dir / "data"
    log_dir.mkdir(parents=True)
    properties = state_dir / "server.properties"
    template = (KAFKA_FILES / "server.properties.template").read_text()
    text = template.format(
        port=port,
        controller_port=controller_port,
        log_dir=log_dir,
        advised_assignor=ADVISED_ASSIGNOR_CLASS,
        telemetry_receiver=TELEMETRY_RECEIVER_CLASS,
    )
    text = _secured_properties(text, secured, tls, tls_port) if secured else text
    text += "".join(f"{key}={value}\n" for key, value in (extra_properties or {}).items())
    properties.write_text(text)
    properties.chmod(0o600)
    return properties


def _format_storage(properties: Path, secured: ScramSuperUser | None, plugin: Path) -> str:
    """Format the KRaft storage (``kafka-storage format --standalone``) under a new cluster id, with
    the super user's SCRAM credential when ``secured``; return the cluster id."""
    scram = []
    if secured:
        scram = ["--add-scram", f"{SCRAM_MECHANISM}=[name={secured.name},password={secured.password}]"]
    cluster_id = "-"
    while cluster_id.startswith("-"):  # kafka-storage reads an id starting with '-' as an option
        cluster_id = base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")
    formatted = subprocess.run(
        java_command(
            "kafka.tools.StorageTool", "format", "--standalone", "-t", cluster_id, "-c", str(properties),
            *scram, extra_jars=(plugin,),
        ),
        capture_output=True,
        text=True,
        timeout=120,
    )  # fmt: skip
    if formatted.returncode != 0:
        output = formatted.stdout + formatted.stderr
        if secured:
            output = output.replace(secured.password, "***")
        raise LocalKafkaError(f"formatting KRaft storage failed:\n{output}")
    return cluster_id


#: what the broker plugin's telemetry writer logs once it has set the client-metrics subscription
SUBSCRIPTION_LOGGED = "client-metrics subscription"


def await_telemetry_subscription(state_dir: Path, timeout: float = 60.0) -> None:
    """Until the local broker's plugin has set the client-metrics subscription (a few seconds after
    start): a client that asks before it is told to push nothing, and asks again only after the
    broker's default push interval (5 minutes) — docs/operations/telemetry.md."""
    log = Path(state_dir) / "broker.log"

    def subscribed() -> bool:
        return log.exists() and SUBSCRIPTION_LOGGED in log.read_text(errors="replace")

    if not poll_until(subscribed, timeout, 0.5):
        raise LocalKafkaError(
            f"the broker set no client-metrics subscription within {timeout:.0f} s: see {log}"
        )


def broker_command(properties: Path, heap: str = JVM_HEAP) -> list[str]:
    """The broker's command line: Kafka's jars and the project's broker plugin on its class path
    (``server.properties`` lists the plugin's assignor, so the broker does not start without it)."""
    return java_command("kafka.Kafka", str(properties), heap=heap, extra_jars=(broker_plugin_jar(),))


def _launch(state_dir: Path, properties: Path, heap: str, append_log: bool) -> subprocess.Popen:
    """The broker JVM in a process group of its own, its output in ``state_dir/broker.log``."""
    with (state_dir / "broker.log").open("ab" if append_log else "wb") as log:
        return subprocess.Popen(
            broker_command(properties, heap),
            stdout=log,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            start_new_session=True,
            preexec_fn=_raise_open_files_limit,
            cwd=state_dir,
        )


def _await_broker(
    process: subprocess.Popen, info: BrokerInfo, timeout: float, login: dict[str, str] | None
) -> BrokerInfo:
    """Record ``info`` and wait until the broker answers; stop it and raise with its log if it does not."""
    state_dir = Path(info.state_dir)
    log_file = state_dir / "broker.log"
    _state_file(state_dir).write_text(json.dumps(asdict(info)))
    deadline = time.monotonic() + timeout

    def answers() -> bool:
        if process.poll() is not None:
            _state_file(state_dir).unlink(missing_ok=True)
            raise LocalKafkaError(
                f"the broker exited with code {process.returncode} while starting; its log ends:\n"
                f"{_log_tail(log_file)}"
            )
        # each probe waits at most what is left of the bound: a 2 s probe let a broker that came up
        # within it pass a shorter bound (timeout=0 answered on a quiet machine with warm caches)
        wait = min(2.0, max(deadline - time.monotonic(), 0.05))
        return _answers_metadata(info.bootstrap_servers, wait, login)

    if poll_until(answers, timeout=timeout, interval=0.5):
        return info
    _kill_group(process.pid, grace=5.0)
    _state_file(state_dir).unlink(missing_ok=True)
    raise LocalKafkaError(
        f"the broker did not answer a metadata request on {info.bootstrap_servers} within {timeout:.0f} s; "
        f"it was stopped. Its log ends:\n{_log_tail(log_file)}"
    )


def restart(
    state_dir: Path | None = None, timeout: float = START_TIMEOUT_S, login: dict[str, str] | None = None
) -> BrokerInfo:
    """Stop the broker of ``state_dir`` and start it again on the same data and ports (what a broker
    restart keeps: topics, offsets, the plans topic). ``login``: client settings for a secured broker."""
    state_dir = Path(state_dir or default_state_dir())
    state_file = _state_file(state_dir)
    if not state_file.exists():
        raise LocalKafkaError(f"no broker was started from {state_dir}: start one first")
    info = BrokerInfo(**json.loads(state_file.read_text()))
    stop(state_dir)
    process = _launch(state_dir, state_dir / "server.properties", JVM_HEAP, append_log=True)
    return _await_broker(process, BrokerInfo(**{**asdict(info), "pid": process.pid}), timeout, login)


def _raise_open_files_limit() -> None:
    """In the broker's child process: lift RLIMIT_NOFILE to BROKER_OPEN_FILES, or to the hard limit."""
    infinity = resource.RLIM_INFINITY
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft == infinity or soft >= BROKER_OPEN_FILES:
        return
    wanted_hard = hard if hard == infinity else max(hard, BROKER_OPEN_FILES)
    try:
        resource.setrlimit(resource.RLIMIT_NOFILE, (BROKER_OPEN_FILES, wanted_hard))
    except (ValueError, OSError):  # unprivileged: the hard limit cannot go up, but the soft one can
        with contextlib.suppress(ValueError, OSError):
            resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))


def _kill_group(pid: int, grace: float) -> None:
    """SIGTERM the process group, then SIGKILL it after ``grace`` seconds."""
    for sig, wait in ((signal.SIGTERM, grace), (signal.SIGKILL, 5.0)):
        try:
            os.killpg(pid, sig)
        except ProcessLookupError:
            return
        if poll_until(lambda: _reaped(pid), timeout=wait, interval=0.2):
            return


def _reaped(pid: int) -> bool:
    """True once ``pid`` has exited (reaped here if it is our child)."""
    try:
        waited, _ = os.waitpid(pid, os.WNOHANG)
    except ChildProcessError:
        waited = 0
    return waited == pid or not _alive(pid)


def stop(state_dir: Path | None = None, timeout: float = STOP_TIMEOUT_S) -> bool:
    """Stop the broker recorded in ``state_dir``; True if one was running."""
    state_dir = Path(state_dir or default_state_dir())
    state_file = _state_file(state_dir)
    if not state_file.exists():
        return False
    info = BrokerInfo(**json.loads(state_file.read_text()))
    was_running = _alive(info.pid)
    if was_running:
        _kill_group(info.pid, grace=timeout)
    state_file.unlink(missing_ok=True)
    return was_running


def parse_describe_output(text: str) -> list[dict[str, str]]:
    """Rows of ``kafka-consumer-groups --describe`` output as dicts keyed by its column headers.

    Columns are split on runs of whitespace; every column the tool prints is one token
    (``-`` where a value is missing), so this is exact for the offsets view.
    """
    rows: list[dict[str, str]] = []
    header: list[str] | None = None
    for line in text.splitlines():
        if not line.strip() or line.startswith(("Consumer group", "Warning")):
            continue
        tokens = line.split()
        if tokens[0] == "GROUP":
            header = tokens
            continue
        if header and len(tokens) == len(header):
            rows.append(dict(zip(header, tokens, strict=True)))
    return rows
