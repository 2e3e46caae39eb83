"""Share groups (KIP-932) for the snapshot, read through Kafka's own Java AdminClient.

confluent-kafka 2.16 has a share consumer but no admin API for share groups: its ListGroups leaves
them out, and it has neither DescribeShareGroups nor DescribeShareGroupOffsets. Kafka's
``kafka-share-groups`` tool reads them with the Java AdminClient, so this adapter does the same: it
runs ``include/kafka/GroupReaders.java`` (mode ``share-groups``, compiled once into the cache) on
the cached Kafka jars, in the background while the rest of the pass runs, and reads one JSON document
back.

Lag is the broker's own figure (DescribeShareGroupOffsets carries it since Kafka 4.2), the one the
tool prints; the start offset (the share-partition start offset) is stored as the group's
committed offset. A partition the group has not started on has no offsets, as in the tool's ``-``
rows: it is kept apart (``unstarted``). The client configuration reaches the JVM on stdin, never on
its command line.
"""

from __future__ import annotations

import json
import subprocess
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from rebalance_advisor.adapters import kafka_jars
from rebalance_advisor.domain.snapshot_model import (
    SHARE_GROUP_TYPE,
    CommittedOffset,
    Group,
    GroupMemberSnapshot,
    SnapshotError,
)

STAGE = "share_groups"
#: the reader of include/kafka/GroupReaders.java this adapter runs
MODE = "share-groups"
#: SASL mechanisms whose credentials map to a JAAS line of Kafka's own login modules
_JAAS_MODULES = {
    "PLAIN": "org.apache.kafka.common.security.plain.PlainLoginModule",
    "SCRAM-SHA-256": "org.apache.kafka.common.security.scram.ScramLoginModule",
    "SCRAM-SHA-512": "org.apache.kafka.common.security.scram.ScramLoginModule",
}
#: librdkafka properties that mean the same in the Java client
_SAME_NAME = ("bootstrap.servers", "security.protocol", "client.id", "ssl.endpoint.identification.algorithm")


class ShareGroupsUnavailable(Exception):
    """Share groups could not be read at all; the message says why (recorded as a snapshot error)."""


@dataclass
class ShareGroupsRead:
    """What the reader found: share groups, their start offsets (as committed offsets) and lags."""

    groups: list[Group] = field(default_factory=list)
    committed: list[CommittedOffset] = field(default_factory=list)
    #: (group, topic, partition) -> the broker's lag, as ``kafka-share-groups --describe`` prints it
    lags: dict[tuple[str, str, int], int | None] = field(default_factory=dict)
    errors: list[SnapshotError] = field(default_factory=list)
    #: (group, topic, partition) of the groups' topics not started on (no offsets: the tool's ``-``)
    unstarted: list[tuple[str, str, int]] = field(default_factory=list)
    #: ids of groups of any type that hold a NUL character, whole (librdkafka lists them cut at it)
    nul_group_ids: list[str] = field(default_factory=list)


def java_config(client_config: dict[str, Any], timeout_s: float) -> dict[str, str]:
    """The Java AdminClient's properties for a librdkafka client config (credentials included).

    Raises :class:`ShareGroupsUnavailable` for a security setting the Java client cannot be given here.
    """
    out = {k: str(client_config[k]) for k in _SAME_NAME if k in client_config}
    mechanism = str(client_config.get("sasl.mechanism") or client_config.get("sasl.mechanisms") or "")
    if mechanism:
        module = _JAAS_MODULES.get(mechanism.upper())
        if module is None:
            raise ShareGroupsUnavailable(
                f"SASL mechanism {mechanism} is not supported by the share-group reader "
                f"(supported: {', '.join(_JAAS_MODULES)})"
            )
        user, password = client_config.get("sasl.username"), client_config.get("sasl.password")
        if user is None or password is None:
            raise ShareGroupsUnavailable("sasl.username and sasl.password are needed with sasl.mechanism")
        out["sasl.mechanism"] = mechanism.upper()
        out["sasl.jaas.config"] = f'{module} required username="{_jaas(user)}" password="{_jaas(password)}";'
    if "ssl.ca.location" in client_config:
        out["ssl.truststore.type"] = "PEM"
        out["ssl.truststore.location"] = str(client_config["ssl.ca.location"])
    if any(
        k in client_config for k in ("ssl.certificate.location", "ssl.key.location", "ssl.keystore.location")
    ):
        raise ShareGroupsUnavailable("TLS client certificates are not supported by the share-group reader")
    timeout_ms = str(max(1000, int(timeout_s * 1000)))
    out["default.api.timeout.ms"] = timeout_ms
    out["request.timeout.ms"] = timeout_ms
    return out


def _jaas(value: Any) -> str:
    return str(value).replace("\\", "\\\\").replace('"', '\\"')


def _properties(config: dict[str, str]) -> str:
    """Java ``.properties`` text; values escaped so that ``=``, ``:``, ``\\`` and newlines survive."""

    def escape(text: str) -> str:
        text = text.replace("\\", "\\\\").replace("\n", "\\n").replace("\r", "\\r")
        return text.replace("=", "\\=").replace(":", "\\:").replace("#", "\\#").replace("!", "\\!")

    return "".join(f"{escape(k)}={escape(v)}\n" for k, v in config.items())


def _command() -> list[str]:
    """The java command line; compiles the reader once per source and Kafka version into the cache."""
    jvm = ("-Xmx128m", "-XX:TieredStopAtLevel=1", "-XX:+UseSerialGC")
    try:
        return kafka_jars.group_reader_command(MODE, jvm)
    except kafka_jars.KafkaJarsError as error:
        raise ShareGroupsUnavailable(f"{error} (or snapshot with --no-share-groups)") from None


class ShareGroupReader:
    """Reads share groups in a background thread; :meth:`result` waits for them, :meth:`close`
    stops the JVM (a pass that aborts or is interrupted leaves none running)."""

    def __init__(self, client_config: dict[str, Any], timeout_s: float) -> None:
        self._timeout_s = timeout_s
        self._raw: dict[str, Any] | None = None
        self._failure: str | None = None
        self._process: subprocess.Popen | None = None
        self._closed = False
        self._lock = threading.Lock()
        try:
            self._input = _properties(java_config(client_config, timeout_s))
        except ShareGroupsUnavailable as error:
            self._failure = str(error)
            self._thread = None
            return
        self._thread = threading.Thread(target=self._run, name="share-groups", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        bound = self._timeout_s * 2 + 60
        try:
            command = _command()
            with self._lock:
                if self._closed:
                    return
                # Its own session: Ctrl-C reaches this process only, which then stops the JVM
                # (close); the JVM also stops by itself when this process goes (kafka_jars).
                self._process = subprocess.Popen(
                    command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                    text=True, encoding="utf-8", start_new_session=True,
                )  # fmt: skip
            out, err = self._process.communicate(self._input, timeout=bound)
        except ShareGroupsUnavailable as error:
            self._failure = str(error)
            return
        except subprocess.TimeoutExpired:
            self._failure = f"the share-group reader did not answer within {bound:.0f} s"
            self.close()
            return
        except OSError as error:
            self._failure = f"the share-group reader could not start: {error.strerror or error}"
            return
        self._read_output(self._process.returncode, out, err)

    def _read_output(self, returncode: int, out: str, err: str) -> None:
        if returncode != 0:
            lines = [line for line in err.splitlines() if line.strip()]
            reason = lines[-1] if lines else f"exit {returncode}"
            if "UnsupportedVersionException" in reason:
                self._raw = {"groups": []}  # a broker without share groups has none to read
                return
            self._failure = f"listing share groups failed: {reason}"
            return
        try:
            self._raw = json.loads(out)
        except ValueError:
            self._failure = "the share-group reader printed no JSON document"

    def close(self) -> None:
        """Stop the JVM if it still runs (the reader's thread then ends at once)."""
        with self._lock:
            self._closed = True
            process = self._process
        if process is not None and process.poll() is None:
            process.kill()
            process.wait(10)

    def result(self, keep_group: Callable[[str], bool], keep_topic: Callable[[str], bool]) -> ShareGroupsRead:
        """The share groups ``keep_group`` accepts, on topics ``keep_topic`` accepts."""
        if self._thread is not None:
            self._thread.join()
        if self._failure is not None:
            return ShareGroupsRead(errors=[SnapshotError(STAGE, f"share groups not read: {self._failure}")])
        return read_document(self._raw or {}, keep_group, keep_topic)


def read_document(
    document: dict[str, Any], keep_group: Callable[[str], bool], keep_topic: Callable[[str], bool]
) -> ShareGroupsRead:
    """The reader's JSON document (include/kafka/GroupReaders.java, share-groups) as :class:`ShareGroupsRead`."""
    read = ShareGroupsRead(nul_group_ids=list(document.get("nul_group_ids", [])))
    for raw in document.get("groups", []):
        group_id = raw["group_id"]
        if not keep_group(group_id) or group_id in read.nul_group_ids:  # refused by the pass
            continue
        if raw.get("error"):
            read.errors.append(SnapshotError(STAGE, raw["error"], group_id))
            continue
        read.groups.append(
            Group(
                group_id=group_id,
                state=str(raw.get("state") or "unknown").lower(),
                group_type=SHARE_GROUP_TYPE,
                assignor=None,
                coordinator_id=raw.get("coordinator_id"),
                coordinator_host=raw.get("coordinator_host"),
                members=_members(raw.get("members", []), keep_topic),
            )
        )
        for o in sorted(raw.get("offsets", []), key=lambda o: (o["topic"], o["partition"])):
            if not keep_topic(o["topic"]):
                continue
            key = (group_id, o["topic"], int(o["partition"]))
            if o.get("start_offset") is None:  # not started on: the tool's "-" row
                read.unstarted.append(key)
                continue
            read.committed.append(CommittedOffset(*key, int(o["start_offset"]), o.get("leader_epoch")))
            read.lags[key] = o.get("lag")
    return read


def _members(
    raw_members: list[dict[str, Any]], keep_topic: Callable[[str], bool]
) -> tuple[GroupMemberSnapshot, ...]:
    members = []
    for position, m in enumerate(raw_members):
        assignment = tuple(sorted((t, int(p)) for t, p in m.get("assignment", []) if keep_topic(t)))
        members.append(
            GroupMemberSnapshot(
                member_id=m["member_id"],
                client_id=m.get("client_id") or "",
                host=m.get("host") or "",
                rack=m.get("rack"),
                subscribed_topics=tuple(sorted({t for t, _ in assignment})),
                assignment=assignment,
                position=position,
            )
        )
    return tuple(members)
