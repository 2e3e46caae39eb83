"""The ``plan`` JSON for ``--strategy key_range``: the group document plus key-sharing inputs (pure).

On top of the group document (``group_spec.parse_group_spec``), a key_range input may hold::

    "key_sharing": {"enabled": true, "topics": ["orders"], "topic_pattern": null,
                    "members": ["w-0", "w-1"]},
    "key_samples": [{"topic": "orders", "partition": 0, "keys": ["k1", "k2", ...]},
                    {"topic": "orders", "partition": 1, "hashes": [123, 456, ...]}],
    "capacity": 5000,
    "key_ranges": [{"member_id": "w-0", "topic": "orders", "partition": 0,
                    "hash_lo": 0, "hash_hi": 1073741824}, ...]

``key_sharing`` is the three-level opt-in (run, topics, members); ``key_samples`` the observed
keys of a partition's recent records (UTF-8 strings, hashed as Kafka's partitioner does, or
ready hashes, 0 <= h < 2**31); ``capacity`` one member's load in the lag's unit; ``key_ranges``
the group's current ranged ownership, written by hand or taken from a published plan: it is
checked (opt-in at all levels, no overlap, no gap, one member per range) and refused with the
reason when wrong. Ranges are half-open ``[hash_lo, hash_hi)`` of the positive murmur2 hash.

The output adds ``key_ranges`` (each range, its member and estimated load), ``hot_keys`` and the
``reason``; ``assignment`` lists a member's whole partitions as ``[topic, partition]`` and its
ranges as ``[topic, partition, hash_lo, hash_hi]``.
"""

from __future__ import annotations

from typing import Any

from rebalance_advisor.domain.assignors.key_range import (
    KeySample,
    KeySharingPolicy,
    check_ranged_assignment,
    plan,
)
from rebalance_advisor.domain.group_spec import GROUP_KEYS, parse_group_spec
from rebalance_advisor.errors import AdvisorError

KEY_RANGE_KEYS = ("key_sharing", "key_samples", "capacity", "key_ranges")
SHARING_KEYS = ("enabled", "topics", "topic_pattern", "members")
SAMPLE_KEYS = ("topic", "partition", "keys", "hashes")
RANGE_KEYS = ("member_id", "topic", "partition", "hash_lo", "hash_hi")


def _check_keys(obj: Any, allowed: tuple[str, ...], where: str) -> dict[str, Any]:
    if not isinstance(obj, dict):
        raise AdvisorError(f"{where} must be an object with {', '.join(allowed)}")
    unknown = [k for k in obj if k not in allowed]
    if unknown:
        raise AdvisorError(f"{where}: unknown key {unknown[0]!r} (allowed: {', '.join(allowed)})")
    return obj


def _int(value: Any, where: str) -> int:
    if not isinstance(value, int) or isinstance(value, bool):
        raise AdvisorError(f"{where} must be an integer, got {value!r}")
    return value


def _strings(value: Any, where: str) -> list[str]:
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise AdvisorError(f"{where} must be a list of strings")
    return value


def _sharing(raw: Any) -> KeySharingPolicy:
    if raw is None:
        return KeySharingPolicy()
    obj = _check_keys(raw, SHARING_KEYS, "key_sharing")
    enabled = obj.get("enabled", False)
    if not isinstance(enabled, bool):
        raise AdvisorError("key_sharing.enabled must be true or false")
    pattern = obj.get("topic_pattern")
    if pattern is not None and not isinstance(pattern, str):
        raise AdvisorError("key_sharing.topic_pattern must be a regular expression or null")
    return KeySharingPolicy(
        allowed=enabled,
        topics=frozenset(_strings(obj.get("topics", []), "key_sharing.topics")),
        topic_pattern=pattern or None,
        members=frozenset(_strings(obj.get("members", []), "key_sharing.members")),
    )


def _samples(raw: Any) -> dict[tuple[str, int], KeySample]:
    if raw is None:
        return {}
    if not isinstance(raw, list):
        raise AdvisorError("key_samples must be a list of {topic, partition, keys | hashes}")
    out: dict[tuple[str, int], KeySample] = {}
    for j, item in enumerate(raw):
        obj = _check_keys(item, SAMPLE_KEYS, f"key_samples[{j}]")
        topic = obj.get("topic")
        if not isinstance(topic, str) or not topic:
            raise AdvisorError(f"key_samples[{j}]: topic must be a non-empty string")
        partition = _int(obj.get("partition"), f"key_samples[{j}].partition")
        if ("keys" in obj) == ("hashes" in obj):
            raise AdvisorError(f"key_samples[{j}] ({topic}-{partition}): give either keys or hashes")
        if "keys" in obj:
            keys = obj["keys"]
            if not isinstance(keys, list) or not all(k is None or isinstance(k, str) for k in keys):
                raise AdvisorError(
                    f"key_samples[{j}].keys must be a list of strings (or null for a null key)"
                )
            sample = KeySample.from_keys([None if k is None else k.encode() for k in keys])
        else:
            hashes = [_int(h, f"key_samples[{j}].hashes[]") for h in obj["hashes"] or []]
            sample = KeySample.from_hashes(hashes)
        if (topic, partition) in out:
            raise AdvisorError(f"key_samples: {topic}-{partition} listed twice")
        out[topic, partition] = sample
    return out


def _current_ranges(raw: Any) -> dict[str, list[tuple[str, int, int, int]]]:
    if raw is None:
        return {}
    if not isinstance(raw, list):
        raise AdvisorError("key_ranges must be a list of {member_id, topic, partition, hash_lo, hash_hi}")
    out: dict[str, list[tuple[str, int, int, int]]] = {}
    for j, item in enumerate(raw):
        obj = _check_keys(item, RANGE_KEYS, f"key_ranges[{j}]")
        member, topic = obj.get("member_id"), obj.get("topic")
        if not isinstance(member, str) or not member or not isinstance(topic, str) or not topic:
            raise AdvisorError(f"key_ranges[{j}]: member_id and topic must be non-empty strings")
        where = f"key_ranges[{j}] ({topic})"
        out.setdefault(member, []).append(
            (
                topic,
                _int(obj.get("partition"), f"{where}.partition"),
                _int(obj.get("hash_lo"), f"{where}.hash_lo"),
                _int(obj.get("hash_hi"), f"{where}.hash_hi"),
            )
        )
    return out


def build_key_range_plan(data: Any) -> dict[str, Any]:
    """The ``plan`` output document for a key_range input (see the module docs)."""
    if not isinstance(data, dict):
        raise AdvisorError("input must be a JSON object with group_id, members and partitions")
    _check_keys(data, GROUP_KEYS + KEY_RANGE_KEYS, f"group {data.get('group_id')!r}")
    spec = parse_group_spec({k: v for k, v in data.items() if k in GROUP_KEYS})
    sharing = _sharing(data.get("key_sharing"))
    samples = _samples(data.get("key_samples"))
    capacity = data.get("capacity")
    if capacity is not None and (
        isinstance(capacity, bool) or not isinstance(capacity, int | float) or capacity <= 0
    ):
        raise AdvisorError(f"capacity must be a number > 0 or null, got {capacity!r}")
    current = _current_ranges(data.get("key_ranges"))
    if current:
        whole = {m.member_id: [(t, p, None, None) for t, p in m.owned] for m in spec.members}
        for member, ranges in current.items():
            whole.setdefault(member, []).extend(ranges)
        check_ranged_assignment(spec, whole, sharing)
    result = plan(spec, sharing=sharing, samples=samples, capacity=capacity)
    return {
        "group_id": spec.group_id,
        "strategy": "key_range",
        "assignment": {
            member: [[t, p] if lo is None else [t, p, lo, hi] for t, p, lo, hi in parts]
            for member, parts in result.member_ranges().items()
        },
        "key_ranges": [
            {
                "member_id": r.member_id,
                "topic": r.topic,
                "partition": r.partition,
                "hash_lo": r.hash_lo,
                "hash_hi": r.hash_hi,
                "load": round(r.load, 3),
            }
            for r in result.ranges
        ],
        "hot_keys": [
            {"topic": h.topic, "partition": h.partition, "key_hash": h.key_hash, "share": round(h.share, 6)}
            for h in result.hot_keys
        ],
        "member_load": {
            m: round(float(x), 3) for m, x in zip(spec.member_ids, result.member_load, strict=True)
        },
        "reason": result.reason,
    }
