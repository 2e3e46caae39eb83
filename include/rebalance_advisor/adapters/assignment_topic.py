"""The assignment topic, server side: create it compacted, read every group's current records.

The record format (key, JSON value, versions) belongs to the client package,
``rebalance_advisor_client.assignment_records``, which this module and the publisher import: one
definition shared by the writer and every reader. docs/protocol/index.md, "The assignment topic".
"""

from __future__ import annotations

import logging
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from rebalance_advisor_client.access import Grant, refusal
from rebalance_advisor_client.assignment_records import (
    DEFAULT_TOPIC,
    AssignmentRecord,
    MalformedRecord,
    connection_settings,
    decode_record,
    reader_settings,
)

from rebalance_advisor.adapters import LIBRDKAFKA_LOG
from rebalance_advisor.errors import AdvisorError, InfrastructureUnavailable

log = logging.getLogger(__name__)

__all__ = [
    "DEFAULT_TOPIC",
    "KafkaAccessRefused",
    "KafkaUnavailable",
    "TopicState",
    "connection_config",
    "ensure_topic",
    "read_topic",
]

#: one partition: a total order over all records, and reading a group's state stays trivial
DEFAULT_PARTITIONS = 1


class KafkaUnavailable(InfrastructureUnavailable):
    """The broker could not be reached or refused a request: retrying later may succeed."""


class KafkaAccessRefused(AdvisorError):
    """The broker's ACLs refuse a request: a grant (named in the message) is missing; retrying won't help."""


def refused(action: str, config: Mapping[str, Any], error: BaseException, *grants: Grant) -> None:
    """Raise KafkaAccessRefused naming ``grants`` when ``error`` is an authorization refusal."""
    if hint := refusal(error, *grants):
        raise KafkaAccessRefused(
            f"{action} on {config.get('bootstrap.servers', '?')} refused: {hint}"
        ) from error


def connection_config(config: Mapping[str, Any]) -> dict[str, Any]:
    """The connection part of a client config (servers, security): what the topic's clients reuse."""
    return connection_settings(dict(config))


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

    admin = AdminClient(connection_config(config), logger=LIBRDKAFKA_LOG)
    # without Describe the topic is simply left out of the listing; creating it then says why
    needed = Grant("DESCRIBE", "Topic", topic)
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
                    needed = Grant("CREATE", "Topic", topic)  # or create it beforehand, compacted
                    raise
        needed = Grant("DESCRIBE_CONFIGS", "Topic", topic)
        resource = ConfigResource(ResourceType.TOPIC, topic)
        described = admin.describe_configs([resource], request_timeout=timeout)[resource].result(
            timeout=timeout
        )
    except KafkaException as error:
        refused(f"checking assignment topic {topic}", config, error, needed)
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

    return Consumer(reader_settings(dict(config)), logger=LIBRDKAFKA_LOG)


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
        if metadata is not None and metadata.error is not None:
            # not readable is not empty: an empty read would restart the epochs
            refused(f"reading assignment topic {topic}", config, KafkaException(metadata.error),
                    Grant("READ", "Topic", topic))  # fmt: skip
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
                if message.error().code() == KafkaError.GROUP_AUTHORIZATION_FAILED:
                    continue  # the reader's group is never joined nor committed to: it needs no grant
                refused(f"reading assignment topic {topic}", config, KafkaException(message.error()),
                        Grant("READ", "Topic", topic))  # fmt: skip
                raise KafkaException(message.error())
            state.add(message.key(), message.value(), f"{topic}-{message.partition()}@{message.offset()}")
    except KafkaException as error:
        raise _kafka_error(f"reading assignment topic {topic}", config, error) from error
    finally:
        consumer.close()
    return state
