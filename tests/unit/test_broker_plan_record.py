"""The broker plan record (docs/reference/broker-plan-record.md) and the apply-mode rule, on
hand-worked inputs: what bytes the publisher writes, how it numbers epochs, which groups get which."""

from __future__ import annotations

import json
import uuid

import pytest
from rebalance_advisor.adapters.broker_plans import BrokerPlans, java_topic_id
from rebalance_advisor.domain.apply_mode import ADVICE, BROKER, STATIC, apply_mode
from rebalance_advisor.domain.broker_plan_record import (
    BrokerPlanRecord,
    MalformedBrokerPlan,
    PlannedMember,
    decode_value,
    needs_refresh,
    next_epoch,
    planned_members,
)
from rebalance_advisor.errors import AdvisorError

ORDERS_ID = "VICvxfjTTO6LrCuyi4Qwug"
AUDIT_ID = "AAAAAAAAAAAAAAAAAAAAAQ"


def _members() -> tuple[PlannedMember, ...]:
    return planned_members(
        {"worker-1": [("orders", 2), ("orders", 0)], "mH3k+Qx/ZZ": [("audit", 0), ("orders", 1)]},
        {"worker-1": ("Yx9-member", "worker-1"), "mH3k+Qx/ZZ": ("mH3k+Qx/ZZ", None)},
        {"orders": ORDERS_ID, "audit": AUDIT_ID},
    )


def test_record_value_is_the_documented_json() -> None:
    record = BrokerPlanRecord("live-orders", "42", 7, 1795000000000, _members())
    assert record.key == b"live-orders"
    assert json.loads(record.encode_value()) == {
        "version": 1,
        "group": "live-orders",
        "plan_id": "42",
        "epoch": 7,
        "published_at_ms": 1795000000000,
        "members": [  # by plan member key; partitions by (topic, partition)
            {
                "member_id": "mH3k+Qx/ZZ",
                "instance_id": None,
                "partitions": [
                    {"topic": "audit", "topic_id": AUDIT_ID, "partition": 0},
                    {"topic": "orders", "topic_id": ORDERS_ID, "partition": 1},
                ],
            },
            {
                "member_id": "Yx9-member",
                "instance_id": "worker-1",
                "partitions": [
                    {"topic": "orders", "topic_id": ORDERS_ID, "partition": 0},
                    {"topic": "orders", "topic_id": ORDERS_ID, "partition": 2},
                ],
            },
        ],
    }
    assert decode_value(record.key, record.encode_value()) == record
    assert record.owners() == {
        ("audit", 0): "mH3k+Qx/ZZ",
        ("orders", 1): "mH3k+Qx/ZZ",
        ("orders", 0): "worker-1",
        ("orders", 2): "worker-1",
    }


def test_a_member_the_snapshot_does_not_know_is_written_by_its_key_as_member_id() -> None:
    (member,) = planned_members({"gone": [("orders", 0)]}, {}, {"orders": ORDERS_ID})
    assert (member.member_id, member.instance_id) == ("gone", None)


@pytest.mark.parametrize(
    ("assignments", "ids", "message"),
    [
        ({"a": [("orders", 0, 0, 100)]}, {"orders": ORDERS_ID}, "whole partitions only"),
        ({"a": [("orders", 0)], "b": [("orders", 0)]}, {"orders": ORDERS_ID}, "planned for both a and b"),
        ({"a": [("deleted", 0)]}, {"orders": ORDERS_ID}, "topic deleted of the plan no longer exists"),
    ],
)
def test_plans_the_broker_cannot_apply_are_refused(assignments, ids, message) -> None:
    with pytest.raises(AdvisorError, match=message):
        planned_members(assignments, {}, ids)


def test_epochs_follow_the_topic_and_the_plan_table() -> None:
    members = _members()
    standing = BrokerPlanRecord("g", "41", 3, 1, members)
    assert next_epoch(None, "42", members, after_epoch=0) == (1, True)
    assert next_epoch(None, "42", members, after_epoch=5) == (6, True)  # the topic was lost: still up
    assert next_epoch(standing, "42", members, after_epoch=2) == (4, True)
    assert next_epoch(standing, "41", members, after_epoch=9) == (3, False)  # written already: no-op
    with pytest.raises(AdvisorError, match="a changed plan needs a new plan id"):
        next_epoch(standing, "41", members[:1], after_epoch=0)


def test_tombstones_withdraw_and_malformed_records_are_kept_out() -> None:
    good = BrokerPlanRecord("g", "1", 1, 1, _members())
    state = BrokerPlans()
    state.add(b"g", good.encode_value(), "t-0@0")
    state.add(b"h", good.encode_value(), "t-0@1")  # keyed h, but the record says g
    state.add(b"g", b'{"version": 2}', "t-0@2")
    assert state.plans == {"g": good} and len(state.malformed) == 2
    state.add(b"g", None, "t-0@3")
    assert state.plans == {"g": None}
    with pytest.raises(MalformedBrokerPlan, match="version 2"):
        decode_value(b"g", b'{"version": 2}')
    with pytest.raises(MalformedBrokerPlan, match="not a broker plan record"):
        decode_value(b"g", b"[1, 2]")


class _Uuid:
    """confluent-kafka's Uuid surface: the two signed 64-bit halves."""

    def __init__(self, value: uuid.UUID) -> None:
        self.high, self.low = value.int >> 64, value.int & (2**64 - 1)

    def get_most_significant_bits(self) -> int:
        return self.high - 2**64 if self.high >= 2**63 else self.high

    def get_least_significant_bits(self) -> int:
        return self.low - 2**64 if self.low >= 2**63 else self.low


def test_topic_ids_are_printed_as_java_prints_them() -> None:
    # Kafka's Uuid.toString(): URL-safe base64 of the 16 bytes, no padding (worked by hand:
    # 0...01 -> "AAAAAAAAAAAAAAAAAAAAAQ"; fb ef be -> "----", ff -> "_w"; ORDERS_ID is the id of a topic the
    # local broker created, as librdkafka printed it (no + or / in that one))
    assert java_topic_id(_Uuid(uuid.UUID(int=1))) == AUDIT_ID
    assert java_topic_id(_Uuid(uuid.UUID(bytes=b"\xfb\xef\xbe" * 5 + b"\xff"))) == "----" * 5 + "_w"
    assert java_topic_id(_Uuid(uuid.UUID("5480afc5-f8d3-4cee-8bac-2bb28b8430ba"))) == ORDERS_ID


@pytest.mark.parametrize(
    ("manual", "kind", "assignor", "mode"),
    [
        (False, "consumer", "advised", BROKER),
        (False, "consumer", " advised ", BROKER),
        (False, "consumer", "uniform", ADVICE),  # KIP-848 on Kafka's own assignor
        (False, "classic", "advised", ADVICE),  # a classic group's protocol name is not the broker's
        (False, "classic", "range", ADVICE),
        (False, None, None, ADVICE),  # in no snapshot
        (True, None, None, STATIC),  # assign() consumers list no members
        (True, "consumer", "advised", STATIC),  # registered members are the operator's choice
        (False, "share", None, ADVICE),
    ],
)
def test_apply_mode_rule(manual: bool, kind: str | None, assignor: str | None, mode: str) -> None:
    assert apply_mode(manual, kind, assignor) == mode


def test_apply_mode_follows_a_renamed_broker_assignor() -> None:
    assert apply_mode(False, "consumer", "planned", broker_assignor="planned") == BROKER
    assert apply_mode(False, "consumer", "advised", broker_assignor="planned") == ADVICE


def test_only_the_published_plans_own_record_is_refreshed_and_only_once_due() -> None:
    """Hand-worked: a record published at t = 1,000,000 ms, refreshed after 1,200 s."""
    record = BrokerPlanRecord("g", "7", 3, 1_000_000, ())
    due = 1_000_000 + 1_200_000
    assert needs_refresh(record, "7", due, 1200)
    assert not needs_refresh(record, "7", due - 1, 1200)  # not yet 20 minutes old
    assert not needs_refresh(record, "8", due, 1200)  # the topic holds another plan: never ours to renew
    assert not needs_refresh(None, "7", due, 1200)  # withdrawn
