"""The assignment topic's record format, shared by the advisor's publisher and this helper.

One compacted record per (group, member) holds that member's partitions at an epoch:

- key: ``<group>/<member>`` in UTF-8, each part percent-encoded (``/`` and ``%`` escaped), so
  group and member ids containing ``/`` stay unambiguous
- value: UTF-8 JSON, exactly ``{"version", "group", "member", "epoch", "plan_id",
  "partitions": [{"topic", "partition"}], "published_at"}`` with ``version`` the format version
  (1; absent in records written before it existed), ``epoch`` a positive integer, ``plan_id`` a
  string, ``published_at`` ISO-8601 UTC

Version 2 (key-range sharing) adds ``"ranges": [{"topic", "partition", "hash_lo",
"hash_hi"}]``: key ranges ``[hash_lo, hash_hi)`` of the positive murmur2 key hash (``key_hash``) of
partitions the plan split; the member reads such a partition and keeps only the records whose key
hash lies in its range. A record without ranges is still written as version 1, so helpers that
predate ranges keep following whole-partition plans; a record with ranges is version 2, which such
a helper refuses (it must not consume a split partition whole).

A record of a newer version than :data:`RECORD_VERSION` raises :class:`UnsupportedVersion`.
Compaction keeps the latest record per key; a member dropped from a plan gets ``[]``.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from urllib.parse import quote, unquote

from rebalance_advisor_client.key_hash import HASH_SPACE

DEFAULT_TOPIC = "_rebalance_advisor_assignments"
#: the newest record format this package reads (it writes 1 without ranges, 2 with them)
RECORD_VERSION = 2
RANGES_VERSION = 2
_FIELDS = {"group", "member", "epoch", "plan_id", "partitions", "published_at"}
_RANGE_FIELDS = {"topic", "partition", "hash_lo", "hash_hi"}

TopicPartitionKey = tuple[str, int]
#: (topic, partition, hash_lo, hash_hi): a key range [hash_lo, hash_hi) of a split partition
KeyRangeKey = tuple[str, int, int, int]


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
    #: key ranges of split partitions (version 2), sorted; a partition is whole or ranged, not both
    ranges: tuple[KeyRangeKey, ...] = ()

    @property
    def key(self) -> bytes:
        return encode_key(self.group, self.member)

    @property
    def holdings(self) -> tuple[TopicPartitionKey | KeyRangeKey, ...]:
        """Whole partitions and key ranges together (what a publish compares)."""
        return (*self.partitions, *self.ranges)

    def encode_value(self) -> bytes:
        value = {
            "version": RANGES_VERSION if self.ranges else 1,
            "group": self.group,
            "member": self.member,
            "epoch": self.epoch,
            "plan_id": self.plan_id,
            "partitions": [{"topic": t, "partition": p} for t, p in self.partitions],
            "published_at": self.published_at,
        }
        if self.ranges:
            value["ranges"] = [
                {"topic": t, "partition": p, "hash_lo": lo, "hash_hi": hi} for t, p, lo, hi in self.ranges
            ]
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


def _ranges(raw: object, whole: tuple[TopicPartitionKey, ...]) -> tuple[KeyRangeKey, ...]:
    if not isinstance(raw, list) or not raw:
        raise MalformedRecord("ranges is not a non-empty list")
    result = []
    for item in raw:
        if not isinstance(item, dict) or set(item) != _RANGE_FIELDS:
            raise MalformedRecord(f"range entry {item!r} is not {{topic, partition, hash_lo, hash_hi}}")
        topic, partition, lo, hi = (item[k] for k in ("topic", "partition", "hash_lo", "hash_hi"))
        if not isinstance(topic, str) or not topic:
            raise MalformedRecord(f"range entry {item!r} has no topic name")
        numbers = (partition, lo, hi)
        if not all(isinstance(n, int) and not isinstance(n, bool) for n in numbers) or partition < 0:
            raise MalformedRecord(f"range entry {item!r} has no valid partition or bounds")
        if not 0 <= lo < hi <= HASH_SPACE:
            raise MalformedRecord(f"range entry {item!r}: need 0 <= hash_lo < hash_hi <= {HASH_SPACE}")
        result.append((topic, partition, lo, hi))
    split = [(t, p) for t, p, _, _ in result]
    if len(set(split)) != len(split):
        raise MalformedRecord("a member holds two key ranges of one partition")
    if set(split) & set(whole):
        raise MalformedRecord("a partition is listed both whole and as a key range")
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
    version = _version(data, group, member)
    raw_ranges = data.pop("ranges", None) if version >= RANGES_VERSION else None
    if set(data) != _FIELDS or (version >= RANGES_VERSION and raw_ranges is None):
        expected = _FIELDS | {"version"} | ({"ranges"} if version >= RANGES_VERSION else set())
        raise MalformedRecord(
            f"value of {group}/{member} has fields {sorted(data)}, expected {sorted(expected)}"
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
    whole = _partitions(data["partitions"])
    ranges = () if raw_ranges is None else _ranges(raw_ranges, whole)
    return AssignmentRecord(group, member, epoch, data["plan_id"], whole, data["published_at"], ranges)


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
