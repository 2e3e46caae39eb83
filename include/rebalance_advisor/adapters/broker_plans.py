"""Write a group's plan record for the broker's ``advised`` assignor, whole or not at all.

The record (docs/reference/broker-plan-record.md) goes to its own compacted topic, keyed by group:
this module reads the topic's state for the group (the epoch and the no-op check), resolves topic
names to the topic ids the assignor sees, and writes the record in one Kafka transaction under the
group's publisher transactional id (the same id as static publishes of the group: one publisher per
group at a time, an unfinished one is fenced and aborted). Making the broker *apply* it is
:mod:`rebalance_advisor.adapters.broker_reassign`.
"""

from __future__ import annotations

import base64
import contextlib
import logging
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from typing import Any

from rebalance_advisor_client.access import Grant

from rebalance_advisor.adapters import LIBRDKAFKA_LOG, assignment_topic
from rebalance_advisor.adapters.assignment_publisher import (
    PublishStep,
    publish_failed,
    transactional_producer,
    write_transaction,
)
from rebalance_advisor.domain.broker_plan_record import (
    BROKER_PLAN_TOPIC,
    BrokerPlanRecord,
    MalformedBrokerPlan,
    PlannedMember,
    decode_value,
    needs_refresh,
    next_epoch,
    planned_members,
)

log = logging.getLogger(__name__)
WHAT = "broker plan topic"


@dataclass(frozen=True)
class BrokerPublishResult:
    """What a publish wrote (``changed``) or found already written (``changed`` False: a no-op)."""

    topic: str
    group_id: str
    plan_id: str
    epoch: int
    record: BrokerPlanRecord
    changed: bool
    malformed: tuple[str, ...] = ()


@dataclass
class BrokerPlans:
    """The topic's current state: the newest record per group (``None``: withdrawn), and what was skipped."""

    plans: dict[str, BrokerPlanRecord | None] = field(default_factory=dict)
    malformed: list[str] = field(default_factory=list)

    def add(self, key: bytes | None, value: bytes | None, where: str) -> None:
        try:
            record = decode_value(key, value)
        except MalformedBrokerPlan as error:
            self.malformed.append(f"{where}: {error}")
            log.warning("ignoring malformed broker plan record at %s: %s", where, error)
            return
        if key is not None:
            self.plans[key.decode("utf-8", "replace")] = record


def java_topic_id(uuid: Any) -> str:
    """A confluent-kafka ``Uuid`` as Kafka's Java ``Uuid.toString()`` prints it (URL-safe base64, no
    padding): librdkafka's own string is standard base64 (``+``, ``/``), which the assignor would not match."""
    bits = (uuid.get_most_significant_bits() % 2**64, uuid.get_least_significant_bits() % 2**64)
    raw = bits[0].to_bytes(8, "big") + bits[1].to_bytes(8, "big")
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


def topic_ids(config: Mapping[str, Any], topics: Iterable[str], timeout: float = 30.0) -> dict[str, str]:
    """Topic name -> topic id for the topics that exist (a deleted topic is left out)."""
    from confluent_kafka import KafkaException, TopicCollection
    from confluent_kafka.admin import AdminClient

    names = sorted(set(topics))
    if not names:
        return {}
    admin = AdminClient(assignment_topic.connection_config(config), logger=LIBRDKAFKA_LOG)
    futures = admin.describe_topics(TopicCollection(names), request_timeout=timeout)
    out = {}
    for name, future in futures.items():
        try:
            out[name] = java_topic_id(future.result(timeout=timeout).topic_id)
        except TimeoutError as error:
            raise KafkaException(f"no answer within {timeout:.0f} s") from error
        except KafkaException as error:
            if "UNKNOWN_TOPIC" in str(error):
                continue
            assignment_topic.refused(
                f"describing topic {name}", config, error, Grant("DESCRIBE", "Topic", name)
            )
            raise assignment_topic.KafkaUnavailable(f"describing topic {name} failed: {error}") from error
    return out


def read_plans(
    config: Mapping[str, Any], topic: str = BROKER_PLAN_TOPIC, timeout: float = 30.0
) -> BrokerPlans:
    """Every group's current plan record on ``topic`` (read_committed, from the beginning)."""
    state = BrokerPlans()
    assignment_topic.read_records(config, topic, state.add, timeout=timeout, what=WHAT)
    return state


def publish_broker_plan(
    config: Mapping[str, Any],
    group_id: str,
    plan_id: str,
    assignments: Mapping[str, Iterable[tuple]],
    identities: Mapping[str, tuple[str, str | None]],
    *,
    topic: str = BROKER_PLAN_TOPIC,
    after_epoch: int = 0,
    timeout: float = 30.0,
    now: Callable[[], datetime] | None = None,
) -> BrokerPublishResult:
    """Write ``group_id``'s plan record (see :func:`~rebalance_advisor.domain.broker_plan_record.planned_members`
    for ``assignments`` and ``identities``) in one transaction; a no-op when the topic holds it already.

    Raises KafkaUnavailable when the broker cannot be reached or the transaction fails (nothing was
    written; calling again completes it), AdvisorError for a plan that cannot be written (a deleted
    topic, key ranges).
    """
    from confluent_kafka import KafkaException

    plan_id, producer = str(plan_id), transactional_producer(config, group_id, timeout)
    step = PublishStep()
    try:
        ids = topic_ids(config, {item[0] for items in assignments.values() for item in items}, timeout)
        members = planned_members(assignments, identities, ids)
        assignment_topic.ensure_topic(config, topic, timeout=timeout, what=WHAT)
        producer.init_transactions(timeout)  # fences an unfinished publish of the group, then read
        state = read_plans(config, topic, timeout)
        step.needed = (Grant("WRITE", "Topic", topic),)
        epoch, changed, record = _next_record(state, group_id, plan_id, members, after_epoch, now)
        if changed:
            write_transaction(producer, topic, (record,), timeout, step)
    except (KafkaException, assignment_topic.KafkaUnavailable) as error:
        action = f"publishing plan {plan_id} for group {group_id} to {topic}"
        raise publish_failed(producer, config, action, error, step) from error
    finally:
        with contextlib.suppress(KafkaException):
            producer.flush(0)
        del producer
    log.info(
        "broker plan %s for group %s: epoch %d, %s",
        plan_id,
        group_id,
        epoch,
        "written" if changed else "no-op",
    )
    return BrokerPublishResult(topic, group_id, plan_id, epoch, record, changed, tuple(state.malformed))


def _next_record(
    state: BrokerPlans,
    group_id: str,
    plan_id: str,
    members: tuple[PlannedMember, ...],
    after_epoch: int,
    now: Callable[[], datetime] | None,
) -> tuple[int, bool, BrokerPlanRecord | None]:
    """(epoch, changed, the group's record): a new record at the next epoch, or the one the topic
    holds when it is this plan already (``next_epoch``)."""
    existing = state.plans.get(group_id)
    epoch, changed = next_epoch(existing, plan_id, members, after_epoch)
    stamp = int((now or (lambda: datetime.now(UTC)))().timestamp() * 1000)
    return epoch, changed, BrokerPlanRecord(group_id, plan_id, epoch, stamp, members) if changed else existing


def refresh_broker_plans(
    config: Mapping[str, Any],
    in_force: Mapping[str, str],
    after_s: float,
    *,
    topic: str = BROKER_PLAN_TOPIC,
    timeout: float = 30.0,
    now: Callable[[], datetime] | None = None,
) -> list[str]:
    """Write again, with a new ``published_at_ms``, each record of ``in_force`` (group -> the store's
    published plan id) that is ``after_s`` old or more, so the assignor's plan age bound never drops
    a plan the advisor still stands by. Same plan, same epoch: the broker re-assigns nothing. Returns
    the groups refreshed; raises KafkaUnavailable (naming the group) when a write fails."""
    from confluent_kafka import KafkaException

    state = read_plans(config, topic, timeout)
    now_ms = int((now or (lambda: datetime.now(UTC)))().timestamp() * 1000)
    stale = [
        g
        for g, plan_id in sorted(in_force.items())
        if needs_refresh(state.plans.get(g), plan_id, now_ms, after_s)
    ]
    for group_id in stale:
        record = replace(state.plans[group_id], published_at_ms=now_ms)
        producer, step = transactional_producer(config, group_id, timeout), PublishStep()
        try:
            producer.init_transactions(timeout)
            step.needed = (Grant("WRITE", "Topic", topic),)
            write_transaction(producer, topic, (record,), timeout, step)
        except KafkaException as error:
            raise publish_failed(
                producer, config, f"refreshing group {group_id}'s plan on {topic}", error, step
            ) from error
        log.info("broker plan %s for group %s: refreshed (epoch %d)", record.plan_id, group_id, record.epoch)
    return stale


def withdraw_broker_plan(
    config: Mapping[str, Any], group_id: str, topic: str = BROKER_PLAN_TOPIC, timeout: float = 30.0
) -> bool:
    """Write the group's tombstone (its plan withdrawn: the group goes back to ``uniform``) when the
    topic holds a plan for it; True if one was written."""
    from confluent_kafka import KafkaException

    if read_plans(config, topic, timeout).plans.get(group_id) is None:
        return False
    producer = transactional_producer(config, group_id, timeout)
    try:
        producer.init_transactions(timeout)
        producer.begin_transaction()
        producer.produce(topic, None, group_id.encode())
        producer.commit_transaction(timeout)
    except KafkaException as error:
        assignment_topic.refused(
            f"withdrawing group {group_id}'s plan", config, error, Grant("WRITE", "Topic", topic)
        )
        raise assignment_topic.KafkaUnavailable(
            f"withdrawing group {group_id}'s plan from {topic} failed: {error}"
        ) from error
    finally:
        del producer
    return True
