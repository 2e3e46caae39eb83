"""The assignment topic: one compacted record per (group, member) holding that member's partitions.

Record format (documented in the README, section "Static assignments: the handover protocol"):

- key: ``<group>/<member>`` in UTF-8, each part percent-encoded (``/`` and ``%`` escaped), so
  group and member ids containing ``/`` stay unambiguous
- value: UTF-8 JSON, exactly
  ``{"group", "member", "epoch", "plan_id", "partitions": [{"topic", "partition"}], "published_at"}``
  with ``epoch`` a positive integer, ``plan_id`` a string, ``published_at`` ISO-8601 UTC

Compaction keeps the latest record per key, so the topic always holds every member's current
assignment; a member dropped from a plan gets a record with ``partitions: []``.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import quote, unquote

from rebalance_advisor.errors import AdvisorError, InfrastructureUnavailable

log = logging.getLogger(__name__)

DEFAULT_TOPIC = "_rebalance_advisor_assignments"
#: one partition: a total order over all records, and reading a group's state stays trivial
DEFAULT_PARTITIONS = 1
_FIELDS = {"group", "member", "epoch", "plan_id", "partitions", "published_at"}
#: consumer settings that belong to a consumer group, never copied to the topic's own clients
_GROUP_KEYS = {
    "group.id",
    "group.instance.id",
    "group.protocol",
    "group.remote.assignor",
    "partition.assignment.strategy",
    "session.timeout.ms",
    "heartbeat.interval.ms",
    "max.poll.interval.ms",
    "enable.auto.commit",
    "auto.commit.interval.ms",
    "enable.auto.offset.store",
    "auto.offset.reset",
    "isolation.level",
    "enable.partition.eof",
    "on_commit",
    "transactional.id",
}

TopicPartitionKey = tuple[str, int]


class KafkaUnavailable(InfrastructureUnavailable):
    """The broker could not be reached or refused a request: retrying later may succeed."""


class MalformedRecord(ValueError):
    """A record on the assignment topic that does not follow the format: reported, then skipped."""


@dataclass(frozen=True)
class AssignmentRecord:
    """One member's assignment at one epoch, as written to (and read from) the topic."""

    group: str
    member: str
    epoch: int
    plan_id: str
    partitions: tuple[TopicPartitionKey, ...]
    published_at: str

    @property
    def key(self) -> bytes:
        return encode_key(self.group, self.member)

    def encode_value(self) -> bytes:
        value = {
            "group": self.group,
            "member": self.member,
            "epoch": self.epoch,
            "plan_id": self.plan_id,
            "partitions": [{"topic": t, "partition": p} for t, p in self.partitions],
            "published_at": self.published_at,
        }
        return json.dumps(value, separators=(",", ":")).encode()


def encode_key(group: str, member: str) -> bytes:
    return f"{quote(group, safe='')}/{quote(member, safe='')}".encode()


def decode_key(key: bytes | None) -> tuple[str, str]:
    """(group, member) of a record key; MalformedRecord when it is not ``<group>/<member>``."""
    try:
        text = (key or b"").decode()
    except UnicodeDecodeError as error:
        raise MalformedRecord(f"key is not UTF-8: {key!r}") from error
    parts = text.split("/")
    if len(parts) != 2 or not all(parts):
        raise MalformedRecord(f"key {text!r} is not <group>/<member>")
    return unquote(parts[0]), unquote(parts[1])


def _partitions(raw: object) -> tuple[TopicPartitionKey, ...]:
    if not isinstance(raw, list):
        raise MalformedRecord("partitions is not a list")
    result = []
    for item in raw:
        if not isinstance(item, dict) or set(item) != {"topic", "partition"}:
            raise MalformedRecord(f"partition entry {item!r} is not {{topic, partition}}")
        topic, partition = item["topic"], item["partition"]
        if not isinstance(topic, str) or not topic:
            raise MalformedRecord(f"partition entry {item!r} has no topic name")
        if not isinstance(partition, int) or isinstance(partition, bool) or partition < 0:
            raise MalformedRecord(f"partition entry {item!r} has no valid partition number")
        result.append((topic, partition))
    if len(set(result)) != len(result):
        raise MalformedRecord("a partition is listed twice")
    return tuple(sorted(result))


def decode_record(key: bytes | None, value: bytes | None) -> AssignmentRecord:
    """Parse and validate one record; MalformedRecord says what is wrong with it."""
    group, member = decode_key(key)
    if value is None:
        raise MalformedRecord(f"tombstone for {group}/{member} (no assignment in it)")
    try:
        data = json.loads(value)
    except (ValueError, UnicodeDecodeError) as error:
        raise MalformedRecord(f"value of {group}/{member} is not JSON: {error}") from error
    if not isinstance(data, dict) or set(data) != _FIELDS:
        fields = sorted(data) if isinstance(data, dict) else type(data).__name__
        raise MalformedRecord(f"value of {group}/{member} has fields {fields}, expected {sorted(_FIELDS)}")
    if (data["group"], data["member"]) != (group, member):
        raise MalformedRecord(f"value names {data['group']}/{data['member']} under key {group}/{member}")
    epoch = data["epoch"]
    if not isinstance(epoch, int) or isinstance(epoch, bool) or epoch < 1:
        raise MalformedRecord(f"epoch {epoch!r} of {group}/{member} is not a positive integer")
    if not isinstance(data["plan_id"], str) or not data["plan_id"]:
        raise MalformedRecord(f"plan_id of {group}/{member} is not a non-empty string")
    if not isinstance(data["published_at"], str):
        raise MalformedRecord(f"published_at of {group}/{member} is not a string")
    return AssignmentRecord(
        group, member, epoch, data["plan_id"], _partitions(data["partitions"]), data["published_at"]
    )


def connection_config(config: Mapping[str, Any]) -> dict[str, Any]:
    """The connection part of a client config (servers, security): what the topic's clients reuse."""
    return {k: v for k, v in config.items() if k not in _GROUP_KEYS}


def _kafka_error(action: str, config: Mapping[str, Any], error: BaseException) -> KafkaUnavailable:
    servers = config.get("bootstrap.servers", "?")
    reason = error.args[0] if error.args else error
    return KafkaUnavailable(f"{action} failed on {servers}: {reason}")


def ensure_topic(
    config: Mapping[str, Any],
    topic: str = DEFAULT_TOPIC,
    timeout: float = 30.0,
    partitions: int = DEFAULT_PARTITIONS,
    replication_factor: int = -1,
) -> bool:
    """Create the compacted topic when missing (True if created); refuse an existing non-compacted one.

    Without compaction retention would delete members' assignments; ``-1`` replication takes
    the broker's default.
    """
    from confluent_kafka import KafkaException
    from confluent_kafka.admin import AdminClient, ConfigResource, NewTopic, ResourceType

    admin = AdminClient(connection_config(config))
    try:
        existing = admin.list_topics(timeout=timeout).topics
        if topic not in existing:
            futures = admin.create_topics(
                [NewTopic(topic, partitions, replication_factor, config={"cleanup.policy": "compact"})],
                operation_timeout=timeout,
                request_timeout=timeout,
            )
            try:
                futures[topic].result(timeout=timeout)
                return True
            except KafkaException as error:
                if "TOPIC_ALREADY_EXISTS" not in str(error) and "already exists" not in str(error):
                    raise
        resource = ConfigResource(ResourceType.TOPIC, topic)
        described = admin.describe_configs([resource], request_timeout=timeout)[resource].result(
            timeout=timeout
        )
    except KafkaException as error:
        raise _kafka_error(f"checking assignment topic {topic}", config, error) from error
    policy = described["cleanup.policy"].value or ""
    if "compact" not in policy.split(","):
        raise AdvisorError(
            f"assignment topic {topic} exists with cleanup.policy={policy}: retention would delete "
            "assignments. Set cleanup.policy=compact on it (kafka-configs --alter) or choose another topic."
        )
    return False


@dataclass
class TopicState:
    """What the topic holds now: the latest valid record per (group, member), and what was skipped."""

    records: dict[tuple[str, str], AssignmentRecord] = field(default_factory=dict)
    malformed: list[str] = field(default_factory=list)

    def add(self, key: bytes | None, value: bytes | None, where: str) -> AssignmentRecord | None:
        """Apply one record in log order; a malformed one is logged and kept out (earlier records stand)."""
        try:
            record = decode_record(key, value)
        except MalformedRecord as error:
            self.malformed.append(f"{where}: {error}")
            log.warning("ignoring malformed assignment record at %s: %s", where, error)
            return None
        self.records[(record.group, record.member)] = record
        return record

    def group(self, group_id: str) -> dict[str, AssignmentRecord]:
        return {member: r for (group, member), r in self.records.items() if group == group_id}


def reader_consumer(config: Mapping[str, Any]):
    """A consumer for reading the topic: no group membership, committed (transactional) records only."""
    from confluent_kafka import Consumer

    return Consumer(
        {
            **connection_config(config),
            # required by the Python client; never joined nor committed to (assign() only)
            "group.id": "_rebalance_advisor_reader",
            "enable.auto.commit": False,
            "enable.partition.eof": True,
            "isolation.level": "read_committed",
        }
    )


def read_topic(config: Mapping[str, Any], topic: str = DEFAULT_TOPIC, timeout: float = 30.0) -> TopicState:
    """Read the whole topic up to its last stable offset: the current assignments of every group.

    A missing topic reads as empty. Aborted transactions (a publish that failed half-way) are
    invisible here because the reader is ``read_committed``.
    """
    from confluent_kafka import KafkaError, KafkaException, TopicPartition

    consumer = reader_consumer(config)
    state = TopicState()
    try:
        metadata = consumer.list_topics(topic, timeout=timeout).topics.get(topic)
        if metadata is None or metadata.error is not None:
            return state
        pending = set(metadata.partitions)
        consumer.assign([TopicPartition(topic, p, -2) for p in pending])  # -2: from the beginning
        deadline = time.monotonic() + timeout
        while pending:
            if time.monotonic() > deadline:
                raise KafkaUnavailable(
                    f"reading assignment topic {topic} did not finish within {timeout:.0f} s"
                )
            message = consumer.poll(min(0.5, max(deadline - time.monotonic(), 0.01)))
            if message is None:
                continue
            if message.error():
                if message.error().code() == KafkaError._PARTITION_EOF:
                    pending.discard(message.partition())
                    continue
                raise KafkaException(message.error())
            state.add(message.key(), message.value(), f"{topic}-{message.partition()}@{message.offset()}")
    except KafkaException as error:
        raise _kafka_error(f"reading assignment topic {topic}", config, error) from error
    finally:
        consumer.close()
    return state
