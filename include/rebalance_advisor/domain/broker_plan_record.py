"""The broker plan record: one group's whole plan, as the broker's ``advised`` assignor reads it.

The format is the contract of docs/reference/broker-plan-record.md (key = group id, UTF-8 JSON value,
version 1, an empty value withdraws the plan). The assignor sees members and topic ids, never the
group id nor topic names, so each member carries its KIP-848 member id and its ``group.instance.id``
and each partition its topic id. Pure: building, encoding, decoding and the publish's epoch rule.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from rebalance_advisor.errors import AdvisorError

VERSION = 1
#: the compacted topic the publisher writes and the plugin follows (the contract's name)
BROKER_PLAN_TOPIC = "_rebalance_advisor_broker_plans"


#: a plan record still in force is written again (same plan, same epoch, a new ``published_at_ms``)
#: once it is this old: a third of the plugin's default ``plan.max.age.ms`` (1 h), past which the
#: assignor stops following a plan whose advisor stopped confirming it
#: (docs/operations/broker-applied-plans.md, "A plan stays fresh while the advisor runs")
REFRESH_AFTER_S = 20 * 60


class MalformedBrokerPlan(AdvisorError):
    """A record on the plan topic that is not a version-1 plan (the message says what is wrong)."""


@dataclass(frozen=True)
class PlannedPartition:
    topic: str
    topic_id: str
    partition: int


@dataclass(frozen=True)
class PlannedMember:
    """A member as the assignor matches it: by ``instance_id`` when set, else by ``member_id``."""

    member_id: str
    instance_id: str | None
    partitions: tuple[PlannedPartition, ...]


@dataclass(frozen=True)
class BrokerPlanRecord:
    group: str
    plan_id: str
    epoch: int
    published_at_ms: int
    members: tuple[PlannedMember, ...]

    @property
    def key(self) -> bytes:
        return self.group.encode()

    def encode_value(self) -> bytes:
        members = [
            {
                "member_id": m.member_id,
                "instance_id": m.instance_id,
                "partitions": [
                    {"topic": p.topic, "topic_id": p.topic_id, "partition": p.partition} for p in m.partitions
                ],
            }
            for m in self.members
        ]
        document = {
            "version": VERSION,
            "group": self.group,
            "plan_id": self.plan_id,
            "epoch": self.epoch,
            "published_at_ms": self.published_at_ms,
            "members": members,
        }
        return json.dumps(document, separators=(",", ":")).encode()

    def owners(self) -> dict[tuple[str, int], str]:
        """(topic, partition) -> the member's key as plans name it (instance id, else member id)."""
        return {
            (p.topic, p.partition): m.instance_id or m.member_id for m in self.members for p in m.partitions
        }


def decode_value(key: bytes | None, value: bytes | None) -> BrokerPlanRecord | None:
    """A record read back from the topic; ``None`` for a tombstone (the plan was withdrawn)."""
    if not value:
        return None
    try:
        doc = json.loads(value)
        if doc.get("version") != VERSION:
            raise MalformedBrokerPlan(f"version {doc.get('version')!r}, not {VERSION}")
        members = tuple(
            PlannedMember(
                str(m["member_id"]),
                m.get("instance_id"),
                tuple(
                    PlannedPartition(p["topic"], p["topic_id"], int(p["partition"])) for p in m["partitions"]
                ),
            )
            for m in doc["members"]
        )
        group = str(doc["group"])
        record = BrokerPlanRecord(
            group, str(doc["plan_id"]), int(doc["epoch"]), int(doc["published_at_ms"]), members
        )
    except (ValueError, KeyError, TypeError, AttributeError) as error:
        raise MalformedBrokerPlan(f"not a broker plan record: {type(error).__name__}: {error}") from None
    if key is not None and key != record.key:
        raise MalformedBrokerPlan(f"key {key!r} is not the record's group {group!r}")
    return record


def planned_members(
    assignments: Mapping[str, Iterable[tuple]],
    identities: Mapping[str, tuple[str, str | None]],
    topic_ids: Mapping[str, str],
) -> tuple[PlannedMember, ...]:
    """The record's members from a plan's assignments (member key -> (topic, partition) pairs).

    ``identities``: plan member key -> (member id, instance id) from the plan's snapshot; a key the
    snapshot does not know is written as a member id (the assignor falls back for members it cannot
    find). ``topic_ids``: topic name -> Kafka topic id. Raises AdvisorError for key ranges (the
    broker assigns whole partitions), a partition planned twice or a topic with no id (deleted).
    """
    seen: dict[tuple[str, int], str] = {}
    out = []
    for key in sorted(assignments):
        partitions = [_partition(key, item, seen, topic_ids) for item in assignments[key]]
        member_id, instance_id = identities.get(key, (key, None))
        ordered = tuple(sorted(partitions, key=lambda p: (p.topic, p.partition)))
        out.append(PlannedMember(member_id, instance_id, ordered))
    return tuple(out)


def _partition(
    key: str, item: tuple, seen: dict[tuple[str, int], str], topic_ids: Mapping[str, str]
) -> PlannedPartition:
    """One planned (topic, partition) of member ``key`` with its topic id; ``seen`` catches doubles."""
    if len(item) != 2:
        raise AdvisorError(
            f"member {key} holds a key range of {item[0]}-{item[1]}: the broker assigns whole "
            "partitions only, so key-range plans are for manual-assign groups"
        )
    topic, partition = item
    if (topic, partition) in seen:
        raise AdvisorError(f"{topic}-{partition} is planned for both {seen[(topic, partition)]} and {key}")
    seen[(topic, partition)] = key
    if topic not in topic_ids:
        raise AdvisorError(
            f"topic {topic} of the plan no longer exists on the cluster: the plan is stale; "
            "take a new snapshot and plan the group again"
        )
    return PlannedPartition(topic, topic_ids[topic], int(partition))


def next_epoch(
    existing: BrokerPlanRecord | None, plan_id: str, members: tuple[PlannedMember, ...], after_epoch: int
) -> tuple[int, bool]:
    """(epoch, changed) of a publish: a no-op when the topic already holds this plan with these
    members; refused when it holds this plan id with other members (a changed plan needs a new id);
    else one above both the topic's epoch and ``after_epoch`` (the plan table's last epoch)."""
    if existing is not None and existing.plan_id == plan_id:
        if existing.members == members:
            return existing.epoch, False
        raise AdvisorError(
            f"plan {plan_id} is already on {BROKER_PLAN_TOPIC} for group {existing.group} at epoch "
            f"{existing.epoch} with other members or partitions: a changed plan needs a new plan id"
        )
    return max(existing.epoch if existing else 0, after_epoch) + 1, True


def needs_refresh(record: BrokerPlanRecord | None, plan_id: str, now_ms: int, after_s: float) -> bool:
    """Whether the topic's record is the store's published plan ``plan_id`` and ``after_s`` old or more.

    Another plan's record (a newer publish in flight, a withdrawn group) is never refreshed: only the
    plan the store says is in force is kept alive."""
    return (
        record is not None and record.plan_id == plan_id and now_ms - record.published_at_ms >= after_s * 1000
    )
