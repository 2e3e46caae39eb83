"""The assignment topic's record format, shared by the advisor's publisher and this helper.

One compacted record per (group, member) holds that member's partitions at an epoch:

- key: ``<group>/<member>`` in UTF-8, each part percent-encoded (``/`` and ``%`` escaped), so
  group and member ids containing ``/`` stay unambiguous
- value: UTF-8 JSON, exactly ``{"version", "group", "member", "epoch", "plan_id",
  "partitions": [{"topic", "partition"}], "published_at"}`` with ``version`` the format version
  (1; absent in records written before it existed), ``epoch`` a positive integer, ``plan_id`` a
  string, ``published_at`` ISO-8601 UTC

A record of a newer version than :data:`RECORD_VERSION` (for instance one carrying key ranges)
raises :class:`UnsupportedVersion`: a helper must not consume whole partitions that a newer plan
split. Compaction keeps the latest record per key; a member dropped from a plan gets ``[]``.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from urllib.parse import quote, unquote

DEFAULT_TOPIC = "_rebalance_advisor_assignments"
#: the newest record format this package reads and the one it writes
RECORD_VERSION = 1
_FIELDS = {"group", "member", "epoch", "plan_id", "partitions", "published_at"}

TopicPartitionKey = tuple[str, int]


class MalformedRecord(ValueError):
    """A record on the assignment topic that does not follow the format: reported, then skipped."""


class UnsupportedVersion(MalformedRecord):
    """A well-formed record of a newer format version: this helper refuses to act on it."""

    def __init__(self, message: str, group: str, member: str, epoch: int | None) -> None:
        super().__init__(message)
        self.group, self.member, self.epoch = group, member, epoch


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
            "version": RECORD_VERSION,
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


def _version(data: dict, group: str, member: str) -> int:
    version = data.pop("version", 1)
    if not isinstance(version, int) or isinstance(version, bool) or version < 1:
        raise MalformedRecord(f"version {version!r} of {group}/{member} is not a positive integer")
    if version > RECORD_VERSION:
        epoch = data.get("epoch")
        raise UnsupportedVersion(
            f"record of {group}/{member} has format version {version}, this helper reads up to "
            f"{RECORD_VERSION}: upgrade rebalance-advisor-client",
            group,
            member,
            epoch if isinstance(epoch, int) and not isinstance(epoch, bool) and epoch > 0 else None,
        )
    return version


def decode_record(key: bytes | None, value: bytes | None) -> AssignmentRecord:
    """Parse and validate one record; MalformedRecord (or UnsupportedVersion) says what is wrong."""
    group, member = decode_key(key)
    if value is None:
        raise MalformedRecord(f"tombstone for {group}/{member} (no assignment in it)")
    try:
        data = json.loads(value)
    except (ValueError, UnicodeDecodeError) as error:
        raise MalformedRecord(f"value of {group}/{member} is not JSON: {error}") from error
    if not isinstance(data, dict):
        raise MalformedRecord(f"value of {group}/{member} is a {type(data).__name__}, not an object")
    _version(data, group, member)
    if set(data) != _FIELDS:
        raise MalformedRecord(
            f"value of {group}/{member} has fields {sorted(data)}, expected {sorted(_FIELDS | {'version'})}"
        )
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


#: consumer settings that belong to a consumer group, never copied to the topic's own clients
GROUP_SETTING_KEYS = frozenset(
    {
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
)


def connection_settings(config: dict) -> dict:
    """The connection part of a client config (servers, security): what the topic's clients reuse."""
    return {k: v for k, v in config.items() if k not in GROUP_SETTING_KEYS}


def reader_settings(config: dict) -> dict:
    """Config of a consumer that reads the topic: no group membership, committed records only.

    Publishes are transactions, so ``read_committed`` hides a publish that failed half-way.
    """
    return {
        **connection_settings(config),
        # required by the Python client; never joined nor committed to (assign() only)
        "group.id": "_rebalance_advisor_reader",
        "enable.auto.commit": False,
        "enable.partition.eof": True,
        "isolation.level": "read_committed",
        # a topic deleted and created again starts below the offsets read before: read it whole
        "auto.offset.reset": "earliest",
    }
