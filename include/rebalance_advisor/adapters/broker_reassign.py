"""Make the broker apply a group's new plan now, and see when it is in force.

The broker runs a group's assignor only when the group epoch moves. The cheapest reliable way to
move it (measured in bench/broker_trigger.py; docs/operations/broker-applied-plans.md, "How a plan
is put in force"): a short-lived *trigger member* joins the group on the consumer protocol, asking
for the group's assignor, subscribed to a topic that does not exist, and leaves once the broker
lists it. Its join and its leave each bump the epoch; it is never given a partition, and no member
is removed, so only the partitions the plan moves pause (the broker revokes each from its old owner
before giving it to the new one). The alternative, removing a member through the Java Admin API,
pauses that member's every partition and re-delivers its uncommitted records, and for dynamic
(no ``group.instance.id``) members Kafka 4.3's Admin API can only remove them all.

After the trigger the group is described until every member the plan names that is still in the
group holds exactly its planned partitions; if the broker's target does not follow within a few
seconds (the plugin had not read the record yet), the trigger is repeated.
"""

from __future__ import annotations

import logging
import time
import uuid
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from rebalance_advisor.adapters import LIBRDKAFKA_LOG, assignment_topic
from rebalance_advisor.domain.apply_mode import BROKER_ASSIGNOR
from rebalance_advisor.domain.broker_plan_record import BrokerPlanRecord

log = logging.getLogger(__name__)

#: the trigger member's subscription: a topic nobody creates (its name says whose it is)
TRIGGER_TOPIC = "_rebalance_advisor_reassign_trigger"
#: the trigger member's ``client.id`` prefix (how operators recognise it in the group's listing)
TRIGGER_CLIENT_ID = "rebalance-advisor-reassign"
#: re-trigger when the broker's target assignment has not followed the plan after this long
RETRIGGER_AFTER_S = 5.0


class ReassignFailed(assignment_topic.KafkaUnavailable):
    """The group could not be made to re-assign (the broker refused the trigger member or is down)."""


@dataclass(frozen=True)
class Reassignment:
    """What :func:`apply_plan` saw: whether the plan is in force and how long each step took."""

    in_force: bool
    #: seconds from the first trigger until the broker's target assignment equals the plan
    target_s: float | None
    #: seconds until every named member present holds its planned partitions (reconciled)
    in_force_s: float | None
    triggers: int
    #: members the plan names that are not in the group (the assignor fills their share with uniform)
    absent: tuple[str, ...] = ()

    def describe(self) -> str:
        if self.in_force:
            text = f"in force after {self.in_force_s:.1f} s ({self.triggers} trigger(s))"
        elif self.target_s is not None:
            text = f"assigned by the broker after {self.target_s:.1f} s, members still reconciling"
        else:
            text = f"not applied by the broker after {self.triggers} trigger(s)"
        return text + (f"; absent members: {', '.join(self.absent)}" if self.absent else "")


def trigger_member_config(config: Mapping[str, Any], group_id: str, assignor: str) -> dict[str, Any]:
    """The trigger member's librdkafka config: the group's protocol and assignor, nothing committed."""
    return {
        **assignment_topic.connection_config(config),
        "group.id": group_id,
        "group.protocol": "consumer",
        "group.remote.assignor": assignor,
        "client.id": f"{TRIGGER_CLIENT_ID}-{uuid.uuid4().hex[:8]}",
        "enable.auto.commit": False,
        "auto.offset.reset": "latest",
    }


def trigger_reassignment(
    config: Mapping[str, Any], group_id: str, assignor: str = BROKER_ASSIGNOR, timeout: float = 15.0
) -> float:
    """Join ``group_id`` as a partition-less member and leave again (two epoch bumps); seconds it took.

    Raises ReassignFailed when the broker does not list the member within ``timeout``.
    """
    from confluent_kafka import Consumer, KafkaException

    settings = trigger_member_config(config, group_id, assignor)
    started = time.monotonic()
    admin, consumer = _admin(config), Consumer(settings, logger=LIBRDKAFKA_LOG)
    try:
        consumer.subscribe([TRIGGER_TOPIC])
        deadline = started + timeout
        while not any(
            m.client_id == settings["client.id"] for m in _describe(admin, group_id, timeout).members
        ):
            if time.monotonic() > deadline:
                raise ReassignFailed(
                    f"re-assigning group {group_id}: the broker did not list the trigger member within "
                    f"{timeout:.0f} s (is {config.get('bootstrap.servers', '?')} up, and the group on the "
                    "consumer protocol?)"
                )
            consumer.poll(0.1)
    except KafkaException as error:
        raise ReassignFailed(f"re-assigning group {group_id} failed: {error}") from error
    finally:
        consumer.close()  # the leave: the second epoch bump
    return time.monotonic() - started


def _admin(config: Mapping[str, Any]) -> Any:
    from confluent_kafka.admin import AdminClient

    return AdminClient(assignment_topic.connection_config(config), logger=LIBRDKAFKA_LOG)


def _describe(admin: Any, group_id: str, timeout: float) -> Any:
    from confluent_kafka import KafkaException

    try:
        return admin.describe_consumer_groups([group_id], request_timeout=timeout)[group_id].result(timeout)
    except (KafkaException, TimeoutError) as error:
        raise ReassignFailed(f"describing group {group_id} failed: {error or 'no answer'}") from error


def plan_state(description: Any, record: BrokerPlanRecord) -> tuple[bool, bool, tuple[str, ...]]:
    """(target follows the plan, assignment follows it, absent members) for a group description."""
    planned: dict[str, set[tuple[str, int]]] = {m.instance_id or m.member_id: set() for m in record.members}
    for (topic, partition), key in record.owners().items():
        planned[key].add((topic, partition))
    target_ok = current_ok = True
    present = set()
    for m in description.members:
        key = m.group_instance_id or m.member_id
        if key not in planned:
            continue
        present.add(key)
        target = m.target_assignment.topic_partitions if m.target_assignment else []
        current = m.assignment.topic_partitions if m.assignment else []
        target_ok &= {(tp.topic, tp.partition) for tp in target} == planned[key]
        current_ok &= {(tp.topic, tp.partition) for tp in current} == planned[key]
    absent = tuple(sorted(set(planned) - present))
    return target_ok and bool(present), current_ok and bool(present), absent


def apply_plan(
    config: Mapping[str, Any],
    record: BrokerPlanRecord,
    *,
    assignor: str = BROKER_ASSIGNOR,
    timeout: float = 30.0,
    poll_s: float = 0.25,
) -> Reassignment:
    """Trigger a re-assignment of the record's group and wait (up to ``timeout``) until the plan is in force."""
    started, admin = time.monotonic(), _admin(config)
    trigger_reassignment(config, record.group, assignor, timeout)
    triggers, last_trigger, target_s = 1, time.monotonic(), None
    while True:
        target_ok, current_ok, absent = plan_state(_describe(admin, record.group, timeout), record)
        now = time.monotonic()
        if target_ok and target_s is None:
            target_s = now - started
        if current_ok:
            return Reassignment(True, target_s, now - started, triggers, absent)
        if now - started > timeout:
            return Reassignment(False, target_s, None, triggers, absent)
        if not target_ok and now - last_trigger > RETRIGGER_AFTER_S:
            trigger_reassignment(config, record.group, assignor, timeout)
            triggers, last_trigger = triggers + 1, time.monotonic()
        time.sleep(poll_s)


def ensure_in_force(
    config: Mapping[str, Any],
    record: BrokerPlanRecord,
    *,
    assignor: str = BROKER_ASSIGNOR,
    timeout: float = 30.0,
) -> Reassignment:
    """The plan in force: nothing to do when the group already follows it, else :func:`apply_plan`."""
    _, current_ok, absent = plan_state(_describe(_admin(config), record.group, timeout), record)
    if current_ok:
        return Reassignment(True, 0.0, 0.0, 0, absent)
    if len(absent) == len(record.members):  # none of its members is left: the assignor ignores it
        return Reassignment(False, None, None, 0, absent)
    return apply_plan(config, record, assignor=assignor, timeout=timeout)
