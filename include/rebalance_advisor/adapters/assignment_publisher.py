"""Publish one plan's per-member assignments to the assignment topic, whole or not at all.

The caller (the plan lifecycle) passes plain data; this module owns only the Kafka side:
the next epoch (derived from what the topic holds for the group), idempotence, empty records for
dropped members, and one transaction per publish. A transactional id per group also fences a
concurrent or crashed publisher of the same group: its unfinished transaction is aborted.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from rebalance_advisor_client.access import Grant
from rebalance_advisor_client.assignment_records import AssignmentRecord, KeyRangeKey, TopicPartitionKey
from rebalance_advisor_client.key_hash import range_cover_problem

from rebalance_advisor.adapters import LIBRDKAFKA_LOG, assignment_topic
from rebalance_advisor.errors import AdvisorError

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class PublishResult:
    """What a publish wrote (``changed``) or found already written (``changed`` False: a no-op)."""

    topic: str
    group_id: str
    plan_id: str
    epoch: int
    #: every record of the plan's epoch: the plan's members, then the dropped members (empty)
    records: tuple[AssignmentRecord, ...]
    #: members that held partitions before and are not in this plan: they got ``partitions: []``
    dropped: tuple[str, ...]
    changed: bool
    #: malformed records met on the topic while reading the group's state (skipped)
    malformed: tuple[str, ...] = ()


#: every publisher's transactional id starts with this: grant WRITE and DESCRIBE on it as a prefix
TRANSACTIONAL_ID_PREFIX = "rebalance-advisor-publisher."


def transactional_id(group_id: str) -> str:
    """One id per group: publishers of one group fence each other, different groups never do."""
    return f"{TRANSACTIONAL_ID_PREFIX}{group_id}"


#: a member's holding in a plan: a whole partition (topic, partition) or a key range
#: (topic, partition, hash_lo, hash_hi) of a split partition
Holding = TopicPartitionKey | KeyRangeKey


def normalize_plan(
    assignments: Mapping[str, Iterable[tuple]],
) -> dict[str, tuple[Holding, ...]]:
    """Validate a plan's assignments and sort them: each whole partition to at most one member; the
    key ranges of a split partition tile the hash space, one member each; no partition both."""
    if not assignments:
        raise AdvisorError("the plan assigns no members: nothing to publish")
    owners: dict[TopicPartitionKey, str] = {}
    split: dict[TopicPartitionKey, list[tuple[int, int, str]]] = {}
    result = {}
    for member, holdings in assignments.items():
        if not isinstance(member, str) or not member:
            raise AdvisorError(f"member id {member!r} is not a non-empty string")
        parts: list[Holding] = []
        for item in holdings:
            topic, partition = item[0], item[1]
            if not isinstance(topic, str) or not topic or not isinstance(partition, int) or partition < 0:
                raise AdvisorError(f"member {member}: ({topic!r}, {partition!r}) is not a (topic, partition)")
            if len(item) == 4:
                lo, hi = item[2], item[3]
                if any(r[2] == member for r in split.get((topic, partition), ())):
                    raise AdvisorError(f"member {member} holds two key ranges of {topic}-{partition}")
                split.setdefault((topic, partition), []).append((lo, hi, member))
                parts.append((topic, partition, lo, hi))
                continue
            if len(item) != 2:
                raise AdvisorError(f"member {member}: {item!r} is neither (topic, partition) nor a key range")
            if (topic, partition) in owners:
                raise AdvisorError(
                    f"{topic}-{partition} is assigned to both {owners[(topic, partition)]} and {member}"
                )
            owners[(topic, partition)] = member
            parts.append((topic, partition))
        result[member] = tuple(sorted(parts, key=lambda h: (len(h) == 4, h)))  # as AssignmentRecord.holdings
    for (topic, partition), ranges in split.items():
        if (topic, partition) in owners:
            raise AdvisorError(f"{topic}-{partition} is both split into key ranges and assigned whole")
        problem = range_cover_problem([(lo, hi) for lo, hi, _ in ranges])
        if problem:
            raise AdvisorError(f"key ranges of {topic}-{partition}: {problem}")
    return result


def _record(
    group_id: str, member: str, epoch: int, plan_id: str, holdings: Iterable[Holding], published_at: str
) -> AssignmentRecord:
    whole = tuple(h for h in holdings if len(h) == 2)
    ranges = tuple(h for h in holdings if len(h) == 4)
    return AssignmentRecord(group_id, member, epoch, plan_id, whole, published_at, ranges)  # type: ignore[arg-type]


def plan_records(
    group_id: str,
    plan_id: str,
    plan: Mapping[str, tuple[Holding, ...]],
    existing: Mapping[str, AssignmentRecord],
    previous_members: Iterable[str],
    published_at: str,
    after_epoch: int = 0,
) -> tuple[int, tuple[AssignmentRecord, ...], tuple[str, ...], bool]:
    """Pure core of a publish: (epoch, records, dropped members, changed) given the group's records.

    No-op when the group's latest epoch already is this plan with these partitions; refused when
    that plan id is the latest with other partitions. An older plan published again is a new
    epoch: compaction forgets old plan ids, so refusing superseded plans is the plan table's job.
    """
    latest = max((r.epoch for r in existing.values()), default=0)
    at_latest = {m: r for m, r in existing.items() if r.epoch == latest}
    if at_latest and all(r.plan_id == plan_id for r in at_latest.values()):
        published = {m: r.holdings for m, r in at_latest.items() if r.holdings or m in plan}
        if published == dict(plan):
            return (
                latest,
                tuple(sorted(at_latest.values(), key=_order(plan))),
                _dropped_of(at_latest, plan),
                False,
            )
        raise AdvisorError(
            f"plan {plan_id} is already published for group {group_id} at epoch {latest} with other "
            "assignments: a changed plan needs a new plan id"
        )
    epoch = max(latest, after_epoch) + 1
    holders = {m for m, r in existing.items() if r.holdings} | set(previous_members)
    dropped = tuple(sorted(holders - set(plan)))
    records = [_record(group_id, m, epoch, plan_id, plan[m], published_at) for m in sorted(plan)]
    records += [AssignmentRecord(group_id, m, epoch, plan_id, (), published_at) for m in dropped]
    return epoch, tuple(records), dropped, True


def _order(plan: Mapping[str, object]) -> Callable[[AssignmentRecord], tuple[bool, str]]:
    return lambda r: (r.member not in plan, r.member)


def _dropped_of(at_latest: Mapping[str, AssignmentRecord], plan: Mapping[str, object]) -> tuple[str, ...]:
    return tuple(sorted(m for m in at_latest if m not in plan))


#: what :func:`plan_records` gives: (epoch, records, dropped members, changed)
_Records = tuple[int, tuple[AssignmentRecord, ...], tuple[str, ...], bool]


def publish_assignments(
    config: Mapping[str, Any],
    group_id: str,
    plan_id: str,
    assignments: Mapping[str, Iterable[tuple]],
    previous_members: Iterable[str] = (),
    *,
    topic: str = assignment_topic.DEFAULT_TOPIC,
    after_epoch: int = 0,
    timeout: float = 30.0,
    now: Callable[[], datetime] | None = None,
) -> PublishResult:
    """Write a plan's assignments for ``group_id`` to the assignment topic in one transaction.

    ``config`` is a librdkafka config (``bootstrap.servers`` and security settings; group settings
    are ignored). ``previous_members`` are members the caller knows held partitions (e.g. of the
    previously published plan); members holding partitions on the topic are found anyway.
    ``after_epoch`` keeps epochs increasing should the topic ever be lost (pass the last epoch
    the plan table knows). Raises AdvisorError when the broker cannot be reached or the
    transaction fails: then nothing was published and calling again completes it.
    """
    plan = normalize_plan(assignments)
    plan_id = str(plan_id)
    stamp = now or (lambda: datetime.now(UTC))

    def records_from(state: assignment_topic.TopicState) -> _Records:
        """The records of this publish (``plan_records``), given what the topic holds now."""
        existing = state.group(group_id)
        return plan_records(
            group_id, plan_id, plan, existing, previous_members, stamp().isoformat(), after_epoch
        )

    state, (epoch, records, dropped, changed) = _in_transaction(
        config, group_id, plan_id, topic, timeout, records_from
    )
    log.info(
        "plan %s for group %s: epoch %d, %s", plan_id, group_id, epoch, "published" if changed else "no-op"
    )
    return PublishResult(topic, group_id, plan_id, epoch, records, dropped, changed, tuple(state.malformed))


def _in_transaction(
    config: Mapping[str, Any],
    group_id: str,
    plan_id: str,
    topic: str,
    timeout: float,
    records_from: Callable[[assignment_topic.TopicState], _Records],
) -> tuple[assignment_topic.TopicState, _Records]:
    """Read the topic under the group's transactional id, then write the records ``records_from``
    makes of it, if they change anything, in one transaction: (what was read, the records).
    KafkaUnavailable when a step fails: nothing was published."""
    from confluent_kafka import KafkaException

    producer, step = transactional_producer(config, group_id, timeout), PublishStep()
    try:
        assignment_topic.ensure_topic(config, topic, timeout=timeout)
        # Then: fences (and aborts) any earlier unfinished publish of this group, and waits for a
        # committed one to settle, so the read below sees every committed record of the group.
        producer.init_transactions(timeout)
        state = assignment_topic.read_topic(config, topic, timeout=timeout)
        step.needed = (Grant("WRITE", "Topic", topic),)
        made = records_from(state)
        if made[3]:
            write_transaction(producer, topic, made[1], timeout, step)
    except (KafkaException, assignment_topic.KafkaUnavailable) as error:
        action = f"publishing plan {plan_id} for group {group_id} to {topic}"
        raise publish_failed(producer, config, action, error, step) from error
    finally:
        with contextlib.suppress(KafkaException):  # a fatal producer error re-raises here: already handled
            producer.flush(0)
        # A raised error's traceback keeps this frame: without the producer, so that its connections
        # and threads end here, not whenever the caller drops the error (tests keep them for long).
        del producer
    return state, made


def transactional_producer(config: Mapping[str, Any], group_id: str, timeout: float) -> Any:
    """A producer under the group's publisher transactional id (:func:`transactional_id`): static
    and broker-applied publishes of one group fence each other."""
    from confluent_kafka import Producer

    return Producer(
        {
            **assignment_topic.connection_config(config),
            "transactional.id": transactional_id(group_id),
            "transaction.timeout.ms": max(int(timeout * 1000) * 2, 10_000),
            "message.timeout.ms": int(timeout * 1000),
        },
        logger=LIBRDKAFKA_LOG,
    )


@dataclass
class PublishStep:
    """Where a publish is: the grants the step under way needs (named when the broker refuses it;
    WRITE implies DESCRIBE on a TransactionalId, READ and WRITE imply it on a topic), and whether a
    transaction is open."""

    needed: tuple[Grant, ...] = (Grant("WRITE", "TransactionalId", TRANSACTIONAL_ID_PREFIX, prefixed=True),)
    began: bool = False


def write_transaction(
    producer: Any, topic: str, records: Iterable[Any], timeout: float, step: PublishStep
) -> None:
    """``records`` (each with ``key`` and ``encode_value()``) to ``topic`` in one transaction."""
    try:
        producer.begin_transaction()
        step.began = True
        for record in records:
            producer.produce(topic, record.encode_value(), record.key)
        producer.commit_transaction(timeout)
    finally:
        del producer  # an error's traceback keeps this frame: not the producer (see _in_transaction)


def publish_failed(
    producer: Any, config: Mapping[str, Any], action: str, error: BaseException, step: PublishStep
) -> Exception:
    """The one-line error of a failed publish, an open transaction aborted first: KafkaAccessRefused
    (raised) naming the grant the step needed when the broker refused it, else KafkaUnavailable."""
    if step.began:
        _abort_quietly(producer)
    del producer  # refused() raises from this frame, which the traceback keeps: not the producer
    assignment_topic.refused(action, config, error, *step.needed)
    reason = error.args[0] if error.args else error
    return assignment_topic.KafkaUnavailable(
        f"{action} on {config.get('bootstrap.servers', '?')} failed: {reason}. "
        "Nothing was published; retry when the broker is reachable."
    )


def _abort_quietly(producer: Any) -> None:
    """Abort an open transaction if the producer still can; otherwise the broker times it out."""
    from confluent_kafka import KafkaException

    with contextlib.suppress(KafkaException):
        producer.abort_transaction(5)
